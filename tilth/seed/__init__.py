"""Seeding: the interview that turns a brief into tasks and acceptance tests.

``run_interview`` drives the prep model; an ``InterviewFrontend`` puts its
questions to the user and a ``SeedSink`` stores the bundle all-or-nothing.
The names below load on first use (``tilth.faces``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tilth.faces import lazy_face

if TYPE_CHECKING:
    from tilth.seed.frontend import InterviewFrontend as InterviewFrontend
    from tilth.seed.frontend import SeedSink as SeedSink
    from tilth.seed.interview import InterviewAbort as InterviewAbort
    from tilth.seed.interview import InterviewResult as InterviewResult
    from tilth.seed.interview import run_interview as run_interview
    from tilth.seed.sink import FileSeedSink as FileSeedSink
    from tilth.seed.sink import recover as recover
    from tilth.seed.terminal import AnswersExhausted as AnswersExhausted
    from tilth.seed.terminal import TerminalFrontend as TerminalFrontend
    from tilth.seed.terminal import load_answers as load_answers

__getattr__, __dir__ = lazy_face(__name__, __file__)
