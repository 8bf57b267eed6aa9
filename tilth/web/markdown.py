"""A model's Markdown as safe HTML for the web chat (markdown-it-py, installed with rich).

Raw HTML in the text is shown as text (``html=False`` escapes it), links keep only safe
schemes (markdown-it's own check refuses ``javascript:`` and the like), and images are
not made: the page loads nothing from outside the machine.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any


@lru_cache(maxsize=1)
def _parser() -> Any:
    from markdown_it import MarkdownIt

    parser = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
    parser.enable("table").enable("strikethrough")
    parser.disable("image")
    return parser


def to_html(text: str) -> str:
    """``text`` (Markdown) as HTML in which nothing the model wrote is markup of its own."""
    return str(_parser().render(text))
