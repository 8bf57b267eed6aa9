"""The stat scanner (the change feed where inotify is not available) against real files."""

from __future__ import annotations

import os
import time
from pathlib import Path

from tilth.timeline.record.change_feed import StatScanner


def test_a_file_written_just_before_a_scan_is_reported_again(tmp_path: Path) -> None:
    """Its stat cannot prove the next same-size rewrite happened (a filesystem clock coarser
    than the writes stamps both alike), so the next scan hands it over to be compared."""
    fresh = tmp_path / "shared"
    fresh.write_text("1\n")
    settled = tmp_path / "settled"
    settled.write_text("old\n")
    an_hour_ago = time.time_ns() - 3600 * 10**9
    os.utime(settled, ns=(an_hour_ago, an_hour_ago))
    scanner = StatScanner(tmp_path, set())
    assert scanner.changed() == {"shared"}  # nothing's stat changed; "shared" is too recent
    os.utime(fresh, ns=(an_hour_ago, an_hour_ago))
    assert scanner.changed() == {"shared"}  # its stat changed
    assert scanner.changed() == set()  # settled now: the stat is trusted


def test_creates_edits_and_deletes_are_reported(tmp_path: Path) -> None:
    (tmp_path / "gone").write_text("x")
    scanner = StatScanner(tmp_path, set())
    scanner.changed()  # past the racy window's first report
    (tmp_path / "gone").unlink()
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "new").write_text("n")
    assert {"gone", "sub/new"} <= scanner.changed()
