"""Ctrl-C in ``tilth demo --live`` (found in the llama.cpp user trial): it printed a bare
``interrupted`` twice and nothing about where the demo's files are or what to do next."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tilth.model import FakeServer, Script, reply
from tilth.model.script import stall


def test_ctrl_c_in_the_live_demo_says_where_its_files_are(tmp_path: Path, tilth_home: Path) -> None:
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    slow = stall(60, reply("Let me look at the project first."), after=1)
    with FakeServer(Script({"*": [slow]})) as server:
        env = {k: v for k, v in os.environ.items() if not k.startswith("TILTH_")}
        env.update(
            TILTH_HOME=str(tilth_home),
            TILTH_BASE_URL=server.base_url,
            TILTH_API_KEY="k",
            TILTH_WORKER_MODEL="worker",
            TMPDIR=str(scratch),
            NO_COLOR="1",
        )
        child = subprocess.Popen(
            [sys.executable, "-m", "tilth", "demo", "--live"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            text=True,
            start_new_session=True,  # its own process group, as a terminal's job
        )
        try:
            deadline = time.monotonic() + 60
            while not server.requests and time.monotonic() < deadline:
                time.sleep(0.1)
            assert server.requests, "the interview never reached the server"
            os.killpg(child.pid, signal.SIGINT)  # Ctrl-C reaches the whole group
            out, err = child.communicate(timeout=60)
        finally:
            if child.poll() is None:
                os.killpg(child.pid, signal.SIGKILL)
                child.wait()
    assert child.returncode == 130, out + err
    assert "Traceback" not in err
    assert "the demo was interrupted at step 1 (`tilth prep-feature`)" in err, err
    roots = list(scratch.iterdir())
    assert len(roots) == 1 and f"its files are kept in {roots[0]}" in err, err
