"""What ``edit_file`` says when its ``old_string`` is missing only because of whitespace.

A model that copies a file's lines with other indentation, spaces for tabs, without the
trailing spaces or with ``\\n`` for ``\\r\\n`` sees "not found", and often sends the very
same call again. When the text does occur with other whitespace, the error says what
differs and shows the file's own lines for that span (bounded), so the next call can copy
them exactly.
"""

from __future__ import annotations

import re

SHOWN_LINES = 20
SHOWN_CHARS = 2_000


def whitespace_hint(text: str, old: str) -> str:
    """How ``old`` occurs in ``text`` when whitespace is ignored ("" when it does not)."""
    words = old.split()
    if not words:
        return ""
    pattern = re.compile(r"\s+".join(re.escape(word) for word in words))
    found = [match.span() for match in pattern.finditer(text)]
    if not found:
        return ""
    start, end = found[0]
    start = text.rfind("\n", 0, start) + 1
    line_end = text.find("\n", end)
    end = len(text) if line_end < 0 else line_end + 1
    span = text[start:end]
    first = text.count("\n", 0, start) + 1
    last = first + span.rstrip("\n").count("\n")
    where = f"line {first}" if last == first else f"lines {first}-{last}"
    places = f" (and {len(found) - 1} more place(s))" if len(found) > 1 else ""
    return (
        f"; it does occur at {where}{places} with other whitespace ({_differences(span, old)}). "
        f"The file's text there, exactly:\n{_bounded(span)}\nCopy old_string from it exactly."
    )


def _differences(span: str, old: str) -> str:
    """What tells ``span`` (the file's) from ``old`` (the model's), in a few words."""
    said = []
    if ("\r\n" in span) != ("\r\n" in old):
        said.append("line endings: the file's are " + ("\\r\\n" if "\r\n" in span else "\\n"))
    file_indents, old_indents = _indents(span), _indents(old)
    if not old[:1].isspace():  # old_string began mid-line: its first line has no indent
        file_indents, old_indents = file_indents[1:], old_indents[1:]
    if any("\t" in i for i in file_indents) != any("\t" in i for i in old_indents):
        said.append("tabs vs spaces")
    elif file_indents != old_indents:
        said.append("indentation")
    if _trailing(span) != _trailing(old):
        said.append("trailing spaces")
    return ", ".join(said) or "spacing"


def _indents(text: str) -> list[str]:
    return [line[: len(line) - len(line.lstrip(" \t"))] for line in text.splitlines()]


def _trailing(text: str) -> bool:
    return any(line != line.rstrip(" \t") for line in text.splitlines())


def _bounded(span: str) -> str:
    """``span`` cut to ``SHOWN_LINES`` lines and ``SHOWN_CHARS`` characters."""
    lines = span.splitlines(keepends=True)
    shown = "".join(lines[:SHOWN_LINES])[:SHOWN_CHARS]
    if len(shown) < len(span):
        shown = shown.rstrip("\n") + f"\n… [{len(span) - len(shown)} more chars]\n"
    return shown.rstrip("\n")
