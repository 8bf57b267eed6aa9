"""A full-screen list to choose from: arrows, PgUp/PgDn, Home/End, type to filter, Esc.

Rows are shown oldest first, the newest at the bottom next to where the prompt was, and
the newest is chosen to start with. Typing filters the rows (by their words); typing a
number jumps to the row with that number. An optional ``detail`` pane under the list
shows more about the highlighted row (the rewind picker shows a plan there). Enter picks,
Esc or Ctrl-C cancels (``None``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from tilth.ui.io import neutralise


@dataclass(frozen=True)
class Row:
    """One choice: what ``pick`` returns, its number (typed to jump), its text."""

    key: Any
    number: int | None
    text: str


class ListPicker:
    """The state of one pick: the rows shown, the query typed, the highlighted row."""

    def __init__(self, rows: Sequence[Row], *, start: int | None = None) -> None:
        self.rows = list(rows)
        self.query = ""
        self.shown = self.rows
        self.index = len(self.rows) - 1 if start is None else start
        self.top = 0
        """The first row in view (the list scrolls to keep the highlighted row shown)."""

    def in_view(self, height: int) -> range:
        """The indexes of ``shown`` to draw in ``height`` rows, scrolled to the highlight."""
        height = max(height, 1)
        if self.index < self.top:
            self.top = self.index
        elif self.index >= self.top + height:
            self.top = self.index - height + 1
        self.top = max(min(self.top, len(self.shown) - height), 0)
        return range(self.top, min(self.top + height, len(self.shown)))

    @property
    def current(self) -> Row | None:
        return self.shown[self.index] if self.shown and 0 <= self.index < len(self.shown) else None

    def move(self, step: int) -> None:
        if self.shown:
            self.index = min(max(self.index + step, 0), len(self.shown) - 1)

    def home(self) -> None:
        self.index = 0

    def end(self) -> None:
        self.index = len(self.shown) - 1

    def type(self, text: str) -> None:
        self._filter(self.query + text)

    def erase(self) -> None:
        self._filter(self.query[:-1])

    def _filter(self, query: str) -> None:
        self.query = query
        wanted = query.strip()
        if wanted.isdigit():
            # a number jumps to its row; every row stays in view
            self.shown = self.rows
            hit = [i for i, row in enumerate(self.rows) if row.number == int(wanted)]
            if hit:
                self.index = hit[0]
            return
        words = wanted.lower().split()
        if not words and self.shown is self.rows:
            return  # a number typed and erased: stay where it jumped to
        self.shown = [r for r in self.rows if all(w in r.text.lower() for w in words)]
        self.index = len(self.shown) - 1


def pick(
    rows: Sequence[Row],
    *,
    title: str,
    detail: Callable[[Row], str] | None = None,
    detail_rows: int = 12,
    start: int | None = None,
    terminal: tuple[Any, Any] | None = None,
) -> Any:
    """The key of the row chosen, or None when cancelled (Esc, Ctrl-C, nothing to pick)."""
    from prompt_toolkit.application import Application
    from prompt_toolkit.filters import Condition
    from prompt_toolkit.formatted_text import StyleAndTextTuples
    from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent
    from prompt_toolkit.layout import ConditionalContainer, HSplit, Layout, Window
    from prompt_toolkit.layout.controls import FormattedTextControl
    from prompt_toolkit.styles import Style

    state = ListPicker(rows, start=start)
    chosen: dict[str, Any] = {}

    def list_height() -> int:
        info = list_window.render_info
        if info is not None:
            return info.window_height
        size = app.output.get_size() if app is not None else None
        reserved = 3 + (detail_rows + 1 if detail is not None else 0)
        return max((size.rows if size else 24) - reserved, 3)

    def listing() -> StyleAndTextTuples:
        # Only the rows in view are drawn: a list of thousands costs what a screenful does.
        out: StyleAndTextTuples = []
        height = list_height()
        shown = state.in_view(height)
        # Rows sit at the bottom, the newest last, next to where the prompt was.
        out.append(("", "\n" * max(height - max(len(shown), 1), 0)))
        for i in shown:
            row = state.shown[i]
            current = i == state.index
            out.append(("class:current" if current else "", f"{'❯ ' if current else '  '}"))
            end = "" if i == shown[-1] else "\n"
            out.append(("class:current" if current else "", f"{neutralise(row.text)}{end}"))
        if not state.shown:
            out.append(("class:dim", "  (nothing matches; Backspace to widen)\n"))
        return out

    def footer() -> StyleAndTextTuples:
        typed = f"filter: {state.query}" if state.query else "type to filter · a number jumps"
        return [
            ("class:dim", f" {typed}\n"),
            ("class:dim", " ↑↓ PgUp PgDn Home End · Enter choose · Esc cancel"),
        ]

    def shown_detail() -> StyleAndTextTuples:
        row = state.current
        if detail is None or row is None:
            return []
        return [("", neutralise(detail(row)))]

    app: Application[None] | None = None
    list_window = Window(
        FormattedTextControl(listing, focusable=True),
        wrap_lines=False,
        always_hide_cursor=True,
    )
    parts: list[Any] = [
        Window(FormattedTextControl([("class:title", f" {title}")]), height=1),
        list_window,
    ]
    if detail is not None:
        parts += [
            Window(height=1, char="─", style="class:dim"),
            ConditionalContainer(
                Window(
                    FormattedTextControl(shown_detail),
                    height=detail_rows,  # fixed: the list above keeps its size
                    wrap_lines=True,
                ),
                filter=Condition(lambda: state.current is not None),
            ),
        ]
    parts.append(Window(FormattedTextControl(footer), height=2))

    keys = KeyBindings()

    def page() -> int:
        info = list_window.render_info
        return max((info.window_height if info else 10) - 1, 1)

    @keys.add("up")
    def _up(event: KeyPressEvent) -> None:
        state.move(-1)

    @keys.add("down")
    def _down(event: KeyPressEvent) -> None:
        state.move(1)

    @keys.add("pageup")
    def _page_up(event: KeyPressEvent) -> None:
        state.move(-page())

    @keys.add("pagedown")
    def _page_down(event: KeyPressEvent) -> None:
        state.move(page())

    @keys.add("home")
    def _home(event: KeyPressEvent) -> None:
        state.home()

    @keys.add("end")
    def _end(event: KeyPressEvent) -> None:
        state.end()

    @keys.add("enter")
    @keys.add("c-j")
    def _choose(event: KeyPressEvent) -> None:
        if state.current is not None:
            chosen["key"] = state.current.key
            event.app.exit()

    @keys.add("escape", eager=True)
    @keys.add("c-c")
    @keys.add("c-d")
    def _cancel(event: KeyPressEvent) -> None:
        event.app.exit()

    @keys.add("backspace")
    def _erase(event: KeyPressEvent) -> None:
        state.erase()

    @keys.add("<any>")
    def _type(event: KeyPressEvent) -> None:
        text = event.data
        if text and text.isprintable():
            state.type(text)

    pt_input, pt_output = terminal or (None, None)
    app = Application(
        layout=Layout(HSplit(parts), focused_element=list_window),
        key_bindings=keys,
        full_screen=True,
        style=Style.from_dict(
            {"current": "reverse", "title": "bold", "dim": "#888888"},
        ),
        input=pt_input,
        output=pt_output,
        mouse_support=False,
    )
    app.run()
    return chosen.get("key")
