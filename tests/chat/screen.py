"""A small VT100 screen with scrollback: what a person would find in their terminal.

Fed the bytes a program wrote to its pseudo-terminal, it keeps the visible rows and the
lines that scrolled off the top, as a terminal does. It knows the sequences rich and
prompt_toolkit use (cursor moves, erasing, carriage return, autowrap); colours, modes
and titles are read and dropped. Enough to tell whether a line was printed once or
left behind several times.
"""

from __future__ import annotations

import re

_CSI = re.compile(r"\x1b\[([?>=]?)([0-9;]*)([ -/]*)([@-~])")
_OSC = re.compile(r"\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)")


class Screen:
    """``rows`` x ``cols`` cells plus everything that scrolled off the top.

    Feed it the output as the terminal got it (``\r\n`` kept: read with ``newline=""``).
    """

    def __init__(self, rows: int, cols: int) -> None:
        self.rows, self.cols = rows, cols
        self.grid = [[" "] * cols for _ in range(rows)]
        self.history: list[str] = []
        self.row = self.col = 0
        self._wrap_next = False
        self._autowrap = True
        self._saved = (0, 0)

    # ---- reading -------------------------------------------------------------------------
    def lines(self) -> list[str]:
        """The scrollback, then the screen, trailing blanks trimmed."""
        shown = ["".join(row).rstrip() for row in self.grid]
        return [*self.history, *shown]

    def count(self, text: str) -> int:
        """How many lines (scrollback and screen) contain ``text``."""
        return sum(1 for line in self.lines() if text in line)

    # ---- writing -------------------------------------------------------------------------
    def feed(self, data: str) -> None:
        i = 0
        while i < len(data):
            char = data[i]
            if char == "\x1b":
                i = self._escape(data, i)
                continue
            if char == "\r":
                self.col, self._wrap_next = 0, False
            elif char == "\n":
                self._line_feed()
            elif char == "\b":
                self.col, self._wrap_next = max(0, self.col - 1), False
            elif char == "\t":
                self.col = min(self.cols - 1, (self.col // 8 + 1) * 8)
            elif char >= " ":
                self._put(char)
            i += 1

    def _put(self, char: str) -> None:
        if self._wrap_next:
            self.col, self._wrap_next = 0, False
            self._line_feed()
        self.grid[self.row][self.col] = char
        if self.col == self.cols - 1:
            self._wrap_next = self._autowrap
        else:
            self.col += 1

    def _line_feed(self) -> None:
        self._wrap_next = False
        if self.row == self.rows - 1:
            self.history.append("".join(self.grid.pop(0)).rstrip())
            self.grid.append([" "] * self.cols)
        else:
            self.row += 1

    def _escape(self, data: str, i: int) -> int:
        if (osc := _OSC.match(data, i)) is not None:
            return osc.end()
        if (csi := _CSI.match(data, i)) is not None:
            private, params, _, final = csi.groups()
            if private == "?" and params == "7" and final in "hl":
                self._autowrap = final == "h"  # DECAWM, which prompt_toolkit switches
            elif not private and final != "m":
                numbers = [int(p) if p else 0 for p in params.split(";")] if params else []
                self._control(final, numbers)
            return csi.end()
        follower = data[i + 1 : i + 2]
        if follower == "7":
            self._saved = (self.row, self.col)
        elif follower == "8":
            self.row, self.col = self._saved
        elif follower in ("(", ")"):
            return i + 3  # a character set choice: ESC ( B
        return i + 2

    def _control(self, final: str, numbers: list[int]) -> None:
        first = numbers[0] if numbers else 0
        step = first or 1
        self._wrap_next = False
        if final == "A":
            self.row = max(0, self.row - step)
        elif final == "B":
            self.row = min(self.rows - 1, self.row + step)
        elif final == "C":
            self.col = min(self.cols - 1, self.col + step)
        elif final == "D":
            self.col = max(0, self.col - step)
        elif final == "G":
            self.col = min(self.cols - 1, step - 1)
        elif final in ("H", "f"):
            row = numbers[0] if numbers else 1
            col = numbers[1] if len(numbers) > 1 else 1
            self.row = min(self.rows - 1, max(row, 1) - 1)
            self.col = min(self.cols - 1, max(col, 1) - 1)
        elif final == "K":
            start, end = {0: (self.col, self.cols), 1: (0, self.col + 1)}.get(first, (0, self.cols))
            for col in range(start, end):
                self.grid[self.row][col] = " "
        elif final == "J":
            if first == 0:
                self._control("K", [0])
                rows = range(self.row + 1, self.rows)
            elif first == 1:
                self._control("K", [1])
                rows = range(0, self.row)
            else:
                rows = range(self.rows)
            for row in rows:
                self.grid[row] = [" "] * self.cols
