"""SPEC §3 from outside: role routing, malformed numbers, API keys kept out of reach."""

from __future__ import annotations

import json

import pytest

from tests.e2e.lab import KEYS, Lab, Live, iter_files, tool_names


def test_calls_are_routed_by_role_not_by_model_name(lab: Lab) -> None:
    # every role uses the same model name; only the role's base URL tells them apart
    requests = lab.notes["requests"]
    assert requests["prep"] and requests["worker"] and requests["evaluator"]
    for body in requests["prep"]:
        assert "write_seed" in tool_names(body)
    for body in requests["evaluator"]:
        assert tool_names(body) == {"submit_verdict"}
    for body in requests["worker"]:
        assert not tool_names(body) & {"write_seed", "submit_verdict"}
    for role, server in (
        ("worker", lab.servers.worker),
        ("evaluator", lab.servers.evaluator),
        ("prep", lab.servers.prep),
    ):
        auth = {r["headers"].get("authorization") for r in server.requests if r["body"]}
        # each endpoint only ever saw its own role's key
        assert auth == {f"Bearer {KEYS[role]}"}, (role, auth)


# the .env tests below name the other numeric settings
NUMBERS = ["TILTH_MAX_ITERATIONS_PER_TASK", "TILTH_MAX_EVALUATOR_CALLS_PER_TASK"]


@pytest.mark.parametrize("variable", NUMBERS)
def test_malformed_number_is_a_one_line_error_naming_the_variable(
    prepared: Live, variable: str
) -> None:
    before = prepared.types()
    done = prepared.cli("run", str(prepared.proj), settings={variable: "twelve"})
    assert done.returncode not in (0, 3)
    assert "Traceback" not in done.stdout + done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) >= 1
    error_lines = [line for line in lines if variable in line]
    assert error_lines, done.stderr
    assert error_lines[0].startswith("error:"), done.stderr
    # nothing ran
    assert prepared.types() == before


def test_blank_number_counts_as_unset(prepared: Live) -> None:
    done = prepared.cli(
        "run",
        str(prepared.proj),
        TILTH_MAX_ITERATIONS_PER_TASK="",
        TILTH_MAX_TOKENS="  ",
        TILTH_MAX_WALL_CLOCK_MINUTES="0.0000001",
    )
    assert done.returncode == 3, done.stdout + done.stderr
    assert prepared.of_type("stop")[-1]["payload"]["reason"] == "wall_clock"


def test_api_keys_are_in_no_session_file(done: Live) -> None:
    leaks = [
        (str(path), role)
        for path in iter_files(done.home)
        for role, key in KEYS.items()
        if key.encode() in path.read_bytes()
    ]
    assert leaks == []
    html = (done.sdir() / "chat.html").read_text()
    assert not any(key in html for key in KEYS.values())


def test_api_keys_are_not_printed(lab: Lab) -> None:
    for name in ("prep", "run", "failed_run"):
        done = lab.notes[name]
        assert not any(key in done.stdout + done.stderr for key in KEYS.values()), name


def test_api_keys_are_not_visible_to_the_workers_bash(lab: Lab) -> None:
    # the story's T-001 ran `env` and read its parent's environ; what bash printed
    # went back to the model as the tool result
    outputs = []
    for body in lab.notes["requests"]["worker"]:
        calls = {
            call["id"]: call["function"]
            for message in body["messages"]
            for call in message.get("tool_calls") or []
        }
        for message in body["messages"]:
            call = calls.get(message.get("tool_call_id"))
            if message.get("role") == "tool" and call and call["name"] == "bash":
                if "environ" in json.loads(call["arguments"])["command"]:
                    outputs.append(message["content"])
    assert outputs, "the env probe never ran"
    assert "PATH=" in outputs[0]  # the probe really printed an environment
    for output in outputs:
        for key in KEYS.values():
            assert key not in output


def _malformed_from(prepared: Live, process: bool = False, **extra: str) -> str:
    done = prepared.cli("run", str(prepared.proj), settings=extra, process=process)
    assert done.returncode not in (0, 3), done.stdout + done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    return done.stderr


def test_env_files_are_read_from_the_directory_tilth_home_and_tilth_env_file(
    prepared: Live,
) -> None:
    # one copy of the prepared story for the three places (a malformed value stops every
    # run before anything happens); each place found first names its own variable
    # the current directory: a real process, whose working directory is the live root
    (prepared.live / ".env").write_text("TILTH_MAX_WALL_CLOCK_MINUTES=soon\n")
    assert "TILTH_MAX_WALL_CLOCK_MINUTES" in _malformed_from(prepared, process=True)
    # $TILTH_HOME/.env (the in-process CLI's own directory holds no .env)
    (prepared.home / ".env").write_text("TILTH_MAX_TOKENS=many\n")
    assert "TILTH_MAX_TOKENS" in _malformed_from(prepared)
    # the file TILTH_ENV_FILE names
    env_file = prepared.live / "custom.env"
    env_file.write_text("TILTH_MAX_ITERATIONS_PER_TASK=lots\n")
    stderr = _malformed_from(prepared, TILTH_ENV_FILE=str(env_file))
    assert "TILTH_MAX_ITERATIONS_PER_TASK" in stderr


def test_context_files_reach_the_prompts(lab: Lab) -> None:
    # the demo project's AGENTS.md (a default TILTH_CONTEXT_FILES name)
    line = "each public function has a docstring"
    for role in ("worker", "evaluator"):
        assert any(line in json.dumps(b["messages"]) for b in lab.notes["requests"][role]), role


def test_default_tier_applies_to_tasks_that_name_none(prepared: Live) -> None:
    done = prepared.cli(
        "run", str(prepared.proj), TILTH_DEFAULT_TIER="L2", TILTH_MAX_ITERATIONS_PER_TASK="1"
    )
    assert done.returncode == 3, done.stdout + done.stderr
    first = prepared.of_type("stage_started")[0]["payload"]
    assert (first["task_id"], first["stage"]) == ("T-001", "brainstorming")


def test_keys_from_a_dot_env_file_stay_out_of_bash_and_files(prepared: Live, lab: Lab) -> None:
    names = ("TILTH_API_KEY", "TILTH_EVALUATOR_API_KEY", "TILTH_PREP_API_KEY")
    values = [KEYS["worker"], KEYS["evaluator"], KEYS["prep"]]
    (prepared.home / ".env").write_text(
        "".join(f"{name}={value}\n" for name, value in zip(names, values, strict=True))
    )
    seen = len(lab.servers.worker.requests)
    done = prepared.cli("run", str(prepared.proj), unset=names, TILTH_MAX_ITERATIONS_PER_TASK="3")
    assert done.returncode == 3, done.stdout + done.stderr
    later = lab.servers.worker.requests[seen:]
    assert {r["headers"].get("authorization") for r in later} == {f"Bearer {KEYS['worker']}"}
    env_dumps = [
        str(m["content"])
        for r in later
        for m in r["body"]["messages"]
        if m.get("role") == "tool" and "PATH=" in str(m.get("content"))
    ]
    assert env_dumps, "the env probe never ran"
    for dump in env_dumps:
        assert not any(key in dump for key in KEYS.values())
    leaks = [
        str(path)
        for path in iter_files(prepared.sdir())
        if any(key.encode() in path.read_bytes() for key in KEYS.values())
    ]
    assert leaks == []
