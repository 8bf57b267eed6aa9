"""The interview's two seams: who answers questions, and where the seed goes.

The engine knows nothing about terminals or file layouts. A frontend asks the
user and shows progress; a sink validates and stores the bundle. Swap either
(a web page, a test stub, a remote store) without touching the engine.
"""

from __future__ import annotations

from typing import Any, Protocol


class InterviewFrontend(Protocol):
    """Puts the model's questions to a person and shows them how the interview goes."""

    def ask_user(self, question: str, options: list[str] | None = None) -> str:
        """The user's answer to ``question`` (an option's text, or free text)."""
        ...

    def show_summary(self, tldr: str, open_questions: list[str], blockers: list[str]) -> None:
        """Show what was written once the seed is stored and committed (never before)."""
        ...

    def update_tokens(self, prompt_total: int, completion_total: int) -> None:
        """The interview's running token totals, after every model call."""
        ...


class SeedSink(Protocol):
    """Stores a seed bundle all-or-nothing.

    ``write_seed`` validates everything first and raises
    ``tilth.session.seed_rules.SeedRuleError`` (message written for the model, which
    fixes the bundle and calls again) without writing anything. Once it returns, the
    whole bundle is in place; a crash part-way leaves the previous state.
    """

    def write_seed(self, prd_entries: Any, test_files: Any, meta: dict[str, Any]) -> list[str]:
        """Validate and write the bundle; returns the test files' paths in the worktree."""
        ...


class CannedAnswers:
    """An ``InterviewFrontend`` with its answers given up front (library users, tests).

    An answer that is a number picks that option (1-based); running out of answers is an
    error, never a hang.
    """

    def __init__(self, answers: list[str]) -> None:
        self.answers = list(answers)
        self.asked: list[str] = []

    def ask_user(self, question: str, options: list[str] | None = None) -> str:
        from tilth.errors import UsageError

        self.asked.append(question)
        if not self.answers:
            raise UsageError(f"the interview asked more than the answers given: {question}")
        answer = self.answers.pop(0)
        if options and answer.strip().isdigit() and 1 <= int(answer) <= len(options):
            return options[int(answer) - 1]
        return answer

    def show_summary(self, tldr: str, open_questions: list[str], blockers: list[str]) -> None:
        """Nothing to show."""

    def update_tokens(self, prompt_total: int, completion_total: int) -> None:
        """Nothing to show."""
