"""The demo's feature: what the scripted interviewer seeds and how the scripted worker builds it.

Two tasks on the bundled ``textutils`` project. The first is rejected once by the
code review (its function lacks the docstring the project's AGENTS.md asks for)
and reworked; the second goes through cleanly.
"""

from __future__ import annotations

import shlex

from tilth.demo.script import Interview, Recipe, Team

BRIEF = "Add word counting and URL slugs to textutils."

WORD_COUNT_DOC = "Count whitespace-separated words; a blank string has none."

WORD_COUNT_FIRST = """def word_count(text: str) -> int:
    return len(text.split())
"""

WORD_COUNT_FIXED = f'''def word_count(text: str) -> int:
    """{WORD_COUNT_DOC}"""
    return len(text.split())
'''

SLUGIFY = '''import re


def slugify(text: str) -> str:
    """Lower-case ``text`` and join its words with hyphens, dropping punctuation."""
    return "-".join(re.findall(r"[a-z0-9]+", text.lower()))
'''

TESTS = {
    "test_t001_word_count.py": """from textutils.count import word_count


def test_counts_words() -> None:
    assert word_count("a b  c") == 3


def test_blank_text_has_no_words() -> None:
    assert word_count("") == 0
    assert word_count("   ") == 0
""",
    "test_t002_slugify.py": """from textutils.slug import slugify


def test_slugify_joins_words_with_hyphens() -> None:
    assert slugify("Hello, World!") == "hello-world"


def test_slugify_trims() -> None:
    assert slugify("  Tilth  demo ") == "tilth-demo"
""",
}

TASKS = [
    {
        "id": "T-001",
        "title": "Count words",
        "description": "Add textutils.count.word_count(text) -> int.",
        "acceptance_criteria": [
            "word_count counts whitespace-separated words",
            "a blank string has 0 words",
            "the function has a docstring (AGENTS.md)",
        ],
    },
    {
        "id": "T-002",
        "title": "Slugify",
        "description": "Add textutils.slug.slugify(text) -> str for URL slugs.",
        "acceptance_criteria": [
            "slugify lower-cases and joins words with '-'",
            "punctuation and surrounding spaces are dropped",
        ],
    },
]


def test_command(python: str = "python3") -> str:
    """How the demo project's tests run: its stdlib runner, no pytest needed (``{files}``)."""
    return f"{shlex.quote(python)} run_tests.py {{files}}"


def demo_team(python: str = "python3") -> Team:
    """The scripted interviewer, worker and evaluator of the demo.

    The worker checks its work with the project's own runner, with ``python``.
    """
    run = f"{shlex.quote(python)} run_tests.py"
    return Team(
        recipes={
            "T-001": Recipe(
                files={"textutils/count.py": WORD_COUNT_FIRST},
                fixed={"textutils/count.py": WORD_COUNT_FIXED},
                accept_when=WORD_COUNT_DOC,
                concern="word_count has no docstring; AGENTS.md asks for one on every public "
                "function, and the acceptance criteria repeat it",
                next_step="add a one-line docstring saying what counts as a word",
                test_command=f"{run} tests/test_t001_word_count.py",
            ),
            "T-002": Recipe(
                files={"textutils/slug.py": SLUGIFY},
                test_command=f"{run} tests/test_t002_slugify.py",
            ),
        },
        interview=Interview(
            question="Should slugify keep digits (e.g. 'Top 10' -> 'top-10')?",
            options=["yes, keep digits", "no, letters only"],
            prd_entries=TASKS,
            test_files=TESTS,
            tldr="- word_count and slugify for textutils (scripted demo seed)",
        ),
    )


ANSWERS = "1\n"
"""What the demo types at the interview's one question (the first option)."""
