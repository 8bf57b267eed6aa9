"""The wheel ships the web UI's templates and static files (a pip install has no repo)."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.web.support import ROOT

WEB = ROOT / "tilth" / "web"


@pytest.mark.timeout(300)
def test_the_wheel_holds_every_template_and_static_file(tmp_path: Path) -> None:
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp_path), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=280,
    )
    assert built.returncode == 0, built.stderr[-2000:]
    (wheel,) = tmp_path.glob("tilth-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    shipped = [p for p in (*WEB.glob("templates/*"), *WEB.glob("static/*")) if p.is_file()]
    assert len(shipped) >= 9
    for path in shipped:
        assert path.relative_to(ROOT).as_posix() in names
