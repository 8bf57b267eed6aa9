"""A model's Markdown as a tree of safe elements for the web chat (markdown-it-py).

The page builds the reply from this tree with ``textContent`` and known tag names only:
no HTML string ever reaches the page. Raw HTML in the text stays text (``html=False``),
tags are limited to ``TAGS``, a link keeps its ``href`` only for ``http``, ``https`` or
``mailto``, and images are not made: the page loads nothing from outside the machine.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

TAGS = frozenset(
    "p h1 h2 h3 h4 h5 h6 strong em s code pre ul ol li blockquote "
    "table thead tbody tr th td hr br a".split()
)
_SAFE_LINKS = ("http://", "https://", "mailto:")

Tree = list[Any]
"""Strings (text) and ``{"t": tag, "c": children, "href"?: url}`` elements."""


@lru_cache(maxsize=1)
def _parser() -> Any:
    from markdown_it import MarkdownIt

    parser = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
    parser.enable("table").enable("strikethrough")
    parser.disable("image")
    return parser


def to_tree(text: str) -> Tree:
    """``text`` (Markdown) as a tree of elements whose text is the model's, never markup."""
    from markdown_it.tree import SyntaxTreeNode

    return _children(SyntaxTreeNode(_parser().parse(text)))


def _children(node: Any) -> Tree:
    out: Tree = []
    for child in node.children:
        made = _element(child)
        if isinstance(made, list):
            out.extend(made)
        elif made is not None:
            out.append(made)
    return out


def _element(node: Any) -> Any:
    kind = node.type
    if kind in ("text", "html_inline", "html_block"):
        return node.content
    if kind == "softbreak":
        return "\n"
    if kind == "hardbreak":
        return {"t": "br", "c": []}
    if kind == "code_inline":
        return {"t": "code", "c": [node.content]}
    if kind in ("fence", "code_block"):
        return {"t": "pre", "c": [{"t": "code", "c": [node.content.rstrip("\n")]}]}
    if kind == "inline":
        return _children(node)
    if kind == "link":
        href = str(node.attrs.get("href") or "")
        made = {"t": "a", "c": _children(node)}
        if href.lower().startswith(_SAFE_LINKS):
            made["href"] = href
        return made
    tag = node.tag if node.tag in TAGS else None
    children = _children(node)
    return {"t": tag, "c": children} if tag else children
