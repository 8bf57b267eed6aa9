"""Seeding: the interview that turns a brief into tasks and acceptance tests.

``run_interview`` drives the prep model; an ``InterviewFrontend`` puts its
questions to the user and a ``SeedSink`` stores the bundle all-or-nothing.
"""

from tilth.seed.frontend import InterviewFrontend, SeedSink
from tilth.seed.interview import InterviewAbort, InterviewResult, run_interview
from tilth.seed.sink import FileSeedSink, recover
from tilth.seed.terminal import AnswersExhausted, TerminalFrontend

__all__ = [
    "AnswersExhausted",
    "FileSeedSink",
    "InterviewAbort",
    "InterviewFrontend",
    "InterviewResult",
    "SeedSink",
    "TerminalFrontend",
    "recover",
    "run_interview",
]
