"""``tilth doctor`` against a reachable fake endpoint, a closed port, a 401, and a project
without an environment."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
from pathlib import Path

from agent.support import tilth

from tilth.model import FakeServer, Script

KEY = "sk-doctor-secret-81c4f0"


def endpoint_env(base_url: str, key: str = KEY) -> dict[str, str]:
    return {
        "TILTH_BASE_URL": base_url,
        "TILTH_API_KEY": key,
        "TILTH_WORKER_MODEL": "worker-m",
        "TILTH_EVALUATOR_MODEL": "judge-m",
    }


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def rows(result_stdout: str) -> dict[str, dict[str, object]]:
    data = json.loads(result_stdout)
    return {str(check["name"]): check for check in data["checks"]}


def test_a_reachable_endpoint_and_a_project_with_an_environment_are_ready(
    repo: Path, tilth_home: Path
) -> None:
    (tilth_home / ".env").write_text("TILTH_MAX_TOKENS=5000\n")
    script = Script({"worker-m": [], "judge-m": []})
    with FakeServer(script, api_key=KEY) as server:
        table = tilth("doctor", str(repo), env=endpoint_env(server.base_url))
        as_json = tilth("doctor", str(repo), "--json", env=endpoint_env(server.base_url))
        paths = [r["path"] for r in server.probes if r["path"].endswith("/models")]
    assert table.returncode == 0, table.stdout + table.stderr
    assert KEY not in table.stdout + table.stderr + as_json.stdout
    assert "ready: a real run could start" in table.stdout
    assert paths == ["/v1/models", "/v1/models"], "one request per endpoint, not per role"
    checks = rows(as_json.stdout)
    assert as_json.returncode == 0 and json.loads(as_json.stdout)["ok"] is True
    assert "worker-m listed" in str(checks["worker model"]["detail"])
    assert "judge-m listed" in str(checks["evaluator model"]["detail"])
    assert checks["TILTH_API_KEY"]["detail"] == "(set, not shown)  [from the environment]"
    assert checks["TILTH_MAX_TOKENS"]["detail"] == f"5000  [from {tilth_home / '.env'}]"
    assert checks["repository"]["detail"] == str(repo)
    assert checks["git identity"]["ok"] is True
    assert checks["test environment"]["ok"] is True
    assert "python3 on PATH" in str(checks["test environment"]["detail"])
    assert checks["sessions disk"]["ok"] is True
    assert "file watching" in checks


def test_an_unreachable_endpoint_fails_with_what_to_do(repo: Path, tilth_home: Path) -> None:
    base = f"http://127.0.0.1:{closed_port()}/v1"
    result = tilth("doctor", str(repo), env=endpoint_env(base))
    assert result.returncode == 1
    assert f"cannot reach {base}/models: Connection refused" in result.stdout
    assert "→ check TILTH_BASE_URL; is the server up?" in result.stdout
    assert "not ready: 3 check(s) failed" in result.stdout


def test_a_refused_key_is_named_and_never_shown(repo: Path, tilth_home: Path) -> None:
    with FakeServer(Script([]), api_key="the-right-key") as server:
        result = tilth("doctor", str(repo), "--json", env=endpoint_env(server.base_url))
    assert result.returncode == 1
    assert KEY not in result.stdout + result.stderr
    worker = rows(result.stdout)["worker model"]
    assert worker["ok"] is False
    assert worker["detail"] == f"{server.base_url}/models refused the key (HTTP 401)"
    assert worker["fix"] == "check TILTH_API_KEY"


def test_a_project_without_an_environment_is_not_ready(
    repo: Path, tilth_home: Path, tmp_path: Path
) -> None:
    bin_dir = tmp_path / "git-only"
    bin_dir.mkdir()
    (bin_dir / "git").symlink_to(shutil.which("git") or "/usr/bin/git")
    with FakeServer(Script([])) as server:
        env = {**endpoint_env(server.base_url), "PATH": str(bin_dir)}
        result = tilth("doctor", str(repo), "--json", env=env)
        missing = tilth("doctor", str(repo), env={"PATH": str(bin_dir)})
    assert result.returncode == 1
    check = rows(result.stdout)["test environment"]
    assert check["ok"] is False and check["required"] is True
    assert str(check["detail"]).startswith("no Python environment to run the project's tests")
    assert "TILTH_TEST_COMMAND" in str(check["fix"])
    # Without model settings every role says which variables are missing.
    assert missing.returncode == 1
    assert "missing required setting(s) for worker model calls" in missing.stdout


def test_not_a_repository_is_a_failed_check(tmp_path: Path, tilth_home: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    result = tilth("doctor", str(plain), "--json", env={"GIT_CEILING_DIRECTORIES": str(tmp_path)})
    assert result.returncode == 1
    repo_row = rows(result.stdout)["repository"]
    assert repo_row["ok"] is False and "not a git repository" in str(repo_row["detail"])
    environment = rows(result.stdout)["test environment"]
    assert environment["ok"] is False and environment["required"] is False
    assert str(environment["detail"]).startswith(f"cannot tell: {plain} is not a repository")


def test_a_repository_without_commits_still_names_its_test_environment(
    tmp_path: Path, tilth_home: Path
) -> None:
    """A first run is often on a young repository: doctor says what it can before the commit."""
    young = tmp_path / "young"
    young.mkdir()
    subprocess.run(["git", "init", "-q", "-b", "main", str(young)], check=True)
    with FakeServer(Script({"worker-m": [], "judge-m": []}), api_key=KEY) as server:
        result = tilth("doctor", str(young), "--json", env=endpoint_env(server.base_url))
    assert result.returncode == 1, "no commit yet: not ready"
    checks = rows(result.stdout)
    assert checks["repository"]["ok"] is False
    assert "has no commits yet" in str(checks["repository"]["detail"])
    assert checks["test environment"]["ok"] is True
    assert "python3 on PATH" in str(checks["test environment"]["detail"])
    assert checks["git identity"]["ok"] is True
    # The sandbox row depends on the machine (bubblewrap installed or not), not on the repository.
    failed = [name for name, c in checks.items() if not c["ok"] and name != "sandbox"]
    assert failed == ["repository"]


def test_a_setup_command_is_shown_and_its_venv_must_be_gitignored(
    repo: Path, tilth_home: Path, tmp_path: Path
) -> None:
    bin_dir = tmp_path / "git-only"
    bin_dir.mkdir()
    (bin_dir / "git").symlink_to(shutil.which("git") or "/usr/bin/git")
    with FakeServer(Script({"worker-m": [], "judge-m": []})) as server:
        env = {
            **endpoint_env(server.base_url),
            "PATH": str(bin_dir),
            "TILTH_SETUP_COMMAND": "python3 -m venv .venv",
        }
        result = tilth("doctor", str(repo), "--json", env=env)
    checks = rows(result.stdout)
    assert checks["test environment"]["ok"] is True, "decided after the set-up runs"
    assert "after TILTH_SETUP_COMMAND" in str(checks["test environment"]["detail"])
    ignored = checks["worktree .venv"]
    assert ignored["ok"] is False and ignored["required"] is False
    assert ignored["fix"] == "add `.venv/` to the repository's .gitignore"
    assert result.returncode == 0, "a warning does not stop a run"


def test_an_unknown_session_id_is_named_as_a_session(tmp_path: Path, tilth_home: Path) -> None:
    """A session-shaped argument that is no session is not checked as a repository path."""
    result = tilth("doctor", "20990101-000000-abcdef", env={"TILTH_BASE_URL": ""})
    assert result.returncode == 2, result.stdout
    assert "error: no session 20990101-000000-abcdef" in result.stderr
    assert "tilth sessions" in result.stderr and "repository" not in result.stdout


def test_an_env_line_that_cannot_be_read_is_a_warning_row(repo: Path, tilth_home: Path) -> None:
    """The doctor checks settings: a ``.env`` line it had to ignore (its setting not in
    effect) is shown there, with what to do; a run could still start."""
    (tilth_home / ".env").write_text('TILTH_SANDBOX="off\n')
    with FakeServer(Script({"worker-m": [], "judge-m": []}), api_key=KEY) as server:
        result = tilth("doctor", str(repo), "--json", env=endpoint_env(server.base_url))
    data = json.loads(result.stdout)
    (row,) = [c for c in data["checks"] if c["name"] == "settings"]
    assert row["ok"] is False and row["required"] is False
    assert row["detail"] == f"{tilth_home / '.env'}: cannot parse line 1; it is ignored"
    assert row["fix"] == "fix or remove that line"
    assert result.returncode == 0 and data["ok"] is True


def test_a_tilth_home_that_is_a_file_is_not_ready(repo: Path, tmp_path: Path) -> None:
    """Sessions could not be made under it: the sessions row says so, not 'free space'."""
    home = tmp_path / "afile"
    home.write_text("not a directory\n")
    with FakeServer(Script({"worker-m": [], "judge-m": []}), api_key=KEY) as server:
        env = {**endpoint_env(server.base_url), "TILTH_HOME": str(home)}
        result = tilth("doctor", str(repo), "--json", env=env)
    row = rows(result.stdout)["sessions disk"]
    assert row["ok"] is False
    assert row["detail"] == f"{home} is a file, not a directory (sessions go to {home}/sessions)"
    assert result.returncode == 1 and json.loads(result.stdout)["ok"] is False
