"""A stop that lands while ``write_file`` or ``edit_file`` rewrites a file leaves it whole.

The cut turn's ``edit_file`` is answered "may have partly happened" on resume (it is not run
twice); the model then looks at the file. A stop between the truncation and the write used to
leave it empty or half written: about one stop in two, in the loop below, tore the file.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

CHILD = """
import signal
import sys
from pathlib import Path
from tilth.tools.base import ToolContext
from tilth.tools.files import edit_file, write_file
from tilth.tools.paths import Workspace

root = Path(sys.argv[1])
A, B = "a" * 190_000, "b\\u00e9" * 95_000
(root / "f.txt").write_text(A)
ctx = ToolContext(workspace=Workspace(root), bash_timeout=10, secrets=())
print("ready", flush=True)
torn = stops = rounds = 0
old, new = A, B
armed = True


def stop(*_):
    # Disarmed until the last stop was looked at: a stop lands in the tool, not in this test.
    global armed
    if armed:
        armed = False
        raise KeyboardInterrupt


signal.signal(signal.SIGINT, stop)
while not (root / "stop").exists():
    try:
        rounds += 1
        armed = True
        if rounds % 2:
            edit_file(ctx, {"path": "f.txt", "old_string": old, "new_string": new})
        else:
            write_file(ctx, {"path": "f.txt", "content": new})
        armed = False
        old, new = new, old
    except KeyboardInterrupt:
        stops += 1
        now = (root / "f.txt").read_text()
        if now not in (A, B):
            torn += 1
            (root / "f.txt").write_text(old)
        elif now == new:
            old, new = new, old
print(f"stops {stops} torn {torn}", flush=True)
"""


def test_a_stop_never_tears_a_file_being_written(tmp_path: Path) -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(tmp_path)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
        for _ in range(40):
            time.sleep(0.01)
            child.send_signal(signal.SIGINT)
        (tmp_path / "stop").touch()
        out, _ = child.communicate(timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
    stops, torn = (int(word) for word in out.split()[1::2])
    assert stops >= 10 and torn == 0, out
