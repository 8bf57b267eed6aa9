"""The bundled interview frontend: a numbered menu or free text, on a terminal or from a file.

On a terminal the user types answers. Without one, answers come one per line from
stdin, or from ``--answers FILE``, in question order, so a prep can run in CI; a
menu answer is an option number, ``0`` followed by a line of free text, or the
text itself. Running out of answers is an error, never a silent empty answer.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol, TextIO

from tilth.errors import TilthError, UsageError
from tilth.model.base import Delta

OTHER_LABEL = "Other (type your own answer)"


class AnswersExhausted(TilthError):
    """Non-interactive input ran out before the interview finished."""


class BadAnswer(TilthError):
    """A non-interactive answer that cannot be used (an option number out of range)."""


def load_answers(path: Path) -> list[str]:
    """The lines of an answers file; raises ``UsageError`` when it cannot be read."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"cannot read answers file {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise UsageError(f"answers file {path} is not UTF-8 text") from None
    return text.splitlines()


class Terminal(Protocol):
    """What the interview needs of a terminal: the CLI's ``tilth.ui.io.IO`` (which neutralises
    every line it prints) is one; this package never imports it."""

    stdout: TextIO

    @property
    def interactive(self) -> bool: ...

    def say(self, text: str = "", style: str | None = None) -> None: ...

    def markup(self, text: str) -> None: ...

    def dim(self, text: str) -> None: ...

    def readline(self, prompt: str = "> ") -> str | None: ...


class TerminalFrontend:
    """Asks through a ``Terminal``; ``answers`` (lines of an answers file) replaces stdin
    when given."""

    def __init__(
        self, io: Terminal, answers: list[str] | None = None, source: str = "stdin"
    ) -> None:
        self.io = io
        self._answers = list(answers) if answers is not None else None
        self._source = source
        self._questions = 0
        self._prompt_total = 0
        self._completion_total = 0
        self._live = False

    @property
    def interactive(self) -> bool:
        """True when a person types the answers (a terminal and no answers file)."""
        return self._answers is None and self.io.interactive

    # ---- InterviewFrontend ---------------------------------------------------------------
    def ask_user(self, question: str, options: list[str] | None = None) -> str:
        """Show the token strip and the question; return the answer text."""
        self._questions += 1
        self._show_tokens()
        self.io.markup(f"[bold cyan]?[/] {_escape(question)}")
        if not options:
            return self._line("> ", question).strip()
        for number, option in enumerate(options, 1):
            self.io.say(f"  {number}) {option}")
        self.io.say(f"  0) {OTHER_LABEL}")
        return self._choose(question, options)

    def show_summary(self, tldr: str, open_questions: list[str], blockers: list[str]) -> None:
        """Print the seed's tl;dr, open questions and blockers."""
        self.io.say("── seed written ──", style="bold green")
        if tldr.strip():
            self.io.say(tldr.strip())
        for title, items in (("Open questions", open_questions), ("Blockers", blockers)):
            if items:
                self.io.say("")
                self.io.say(title, style="bold")
                for item in items:
                    self.io.say(f"  - {item}")

    def update_tokens(self, prompt_total: int, completion_total: int) -> None:
        """Remember the totals: shown before the next question on a terminal, at once
        elsewhere (a log then shows a line after every reply of a slow model)."""
        self.clear_live()
        self._prompt_total = prompt_total
        self._completion_total = completion_total
        if not _is_tty(self.io.stdout):
            self._strip()

    # ---- the live count ------------------------------------------------------------------------
    def on_delta(self, delta: Delta) -> None:
        """While the interviewer's reply streams in, count it on one line (terminals only)."""
        stream = self.io.stdout
        if not _is_tty(stream):
            return
        doing = "thinking" if delta.kind == "reasoning" else "receiving"
        stream.write(f"\r\x1b[2K[interview · {doing} {delta.completion_tokens:,} tokens]")
        stream.flush()
        self._live = True

    def clear_live(self) -> None:
        """Erase the live count line, if one is shown."""
        if self._live:
            self.io.stdout.write("\r\x1b[2K")
            self.io.stdout.flush()
            self._live = False

    # ---- helpers -----------------------------------------------------------------------------
    def _show_tokens(self) -> None:
        if _is_tty(self.io.stdout):
            self._strip()  # elsewhere it was shown as the reply came

    def _strip(self) -> None:
        total = self._prompt_total + self._completion_total
        if total:
            self.io.dim(
                f"[interview · prompt {self._prompt_total} · completion "
                f"{self._completion_total} · total {total} tokens]"
            )

    def _line(self, prompt: str, question: str) -> str:
        """The next answer line; raises ``AnswersExhausted`` at the end of input."""
        if self._answers is not None:
            if not self._answers:
                raise self._exhausted(question)
            line = self._answers.pop(0)
        else:
            read = self.io.readline(prompt)
            if read is None:
                raise self._exhausted(question)
            line = read
        if not self.interactive:
            self.io.dim(f"{prompt}{line}")
        return line

    def _exhausted(self, question: str) -> AnswersExhausted:
        where = f"answers file {self._source}" if self._answers is not None else "stdin"
        return AnswersExhausted(
            f"{where} ran out of answers at question {self._questions}: {question!r}",
            hint="add one answer per line for every question, in order "
            "(a menu answer is an option number, or 0 then the text on the next line)",
        )

    def _choose(self, question: str, options: list[str]) -> str:
        while True:
            answer = self._line("> ", question).strip()
            if not answer:
                if self.interactive:
                    continue
                return ""
            if answer == "0":
                return self._line("Other: ", question).strip()
            if answer.isdigit():
                if 1 <= int(answer) <= len(options):
                    return options[int(answer) - 1]
                message = f"pick 1-{len(options)}, 0 to type your own answer, or type it"
                if self.interactive:
                    self.io.say(message, style="yellow")
                    continue
                raise BadAnswer(
                    f"answer {answer!r} to question {self._questions} is not an option: {message}"
                )
            return answer


def _escape(text: str) -> str:
    from rich.markup import escape

    return escape(text)


def _is_tty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False
