"""A real scripted run through the CLI, then ``tilth visualize``: no event falls through."""

from __future__ import annotations

import re
from pathlib import Path

from agent.support import API_KEY, TASKS, model_env, recipes, seed_session, team_server, tilth

from tilth.demo.script import Recipe, Team

DOCSTRING = '"""Count the words in text."""'
XSS = "<script>alert(1)</script>"


def test_visualized_run_has_a_specific_card_for_every_event(repo: Path, sessions_dir: Path) -> None:
    seeded = seed_session(sessions_dir, repo, TASKS[:1])
    body = "def count_words(text):\n    return len(text.split())\n"
    recipe = Recipe(
        files={"textkit/words.py": f"# {XSS}\n{body}"},
        fixed={"textkit/words.py": f"{DOCSTRING}\n\n\n{body}"},
        accept_when=DOCSTRING,
        concern=f"the module has no docstring {XSS}",
        next_step="add a module docstring",
        probes=[{"name": "bash", "arguments": {"command": "git push --force"}}],
        test_command="true",  # the harness's own gate still runs the seed tests
    )
    with team_server(Team(recipes(T_001=recipe))) as server:
        env = model_env(server.base_url)
        ran = tilth("run", str(repo), env=env)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    shown = tilth("visualize", seeded.session.id, env=env)
    assert shown.returncode == 0, shown.stderr
    page = (seeded.session.dir / "chat.html").read_text()

    types = set(seeded.types())
    assert {"model_call", "tool_call", "tool_result", "evaluator_verdict", "stop"} <= types
    for type_ in types:
        assert f'data-type="{type_}"' in page
    fallbacks = re.findall(r'class="card unknown"[^>]*data-type="([^"]+)"', page)
    assert fallbacks == [], f"event types without their own card: {sorted(set(fallbacks))}"

    assert XSS not in page
    assert "evaluator rejects" in page and "evaluator accepts" in page
    assert 'model: <span class="badge scripted">scripted</span>' in page
    assert API_KEY not in page
