"""Whitespace handling."""


def normalize_space(text: str) -> str:
    """Collapse every run of whitespace in ``text`` to one space and trim the ends."""
    return " ".join(text.split())
