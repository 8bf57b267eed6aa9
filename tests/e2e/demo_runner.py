"""``tilth demo`` started early in a child process with no network (checked by the last test)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

DEMO_TEST = "test_z_demo_e2e.py"
DEMO: dict[str, Any] = {}

# a dead proxy: if anything tried to reach the network despite the namespace, it would fail
_NO_PROXY_ENV = {
    "HTTP_PROXY": "http://127.0.0.1:9",
    "HTTPS_PROXY": "http://127.0.0.1:9",
    "ALL_PROXY": "http://127.0.0.1:9",
    "NO_PROXY": "127.0.0.1,localhost",
}


def _isolating_prefix() -> list[str]:
    """``unshare -n`` (own network namespace, loopback only) when we may use it."""
    unshare, ip = shutil.which("unshare"), shutil.which("ip")
    if unshare is None or ip is None or os.geteuid() != 0:
        return []
    probe = subprocess.run([unshare, "-n", ip, "link", "set", "lo", "up"], capture_output=True)
    if probe.returncode != 0:
        return []
    return [unshare, "-n", "sh", "-c", f'{ip} link set lo up && exec "$@"', "sh"]


def start_demo(workdir: Path) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TILTH_")}
    env.update(_NO_PROXY_ENV)
    env["TMPDIR"] = str(workdir)
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    command = [sys.executable, "-m", "tilth", "demo", "--home", str(workdir / "home")]
    DEMO["home"] = workdir / "home"
    DEMO["isolated"] = bool(_isolating_prefix())
    return subprocess.Popen(
        [*_isolating_prefix(), *command],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=workdir,
    )
