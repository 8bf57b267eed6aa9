"""Run this project's tests with nothing but the standard library.

    python3 run_tests.py [tests/test_x.py ...]     (default: every tests/test_*.py)

Each ``test_*`` function of each file is called; a failing ``assert`` or any other
exception fails it. The last line is ``N passed, N failed``; the exit code is 1 when
anything failed or no test ran. textutils has no dependencies, so it needs no pytest.
"""

from __future__ import annotations

import importlib.util
import sys
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parent


def load(path: Path) -> object:
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main(argv: list[str]) -> int:
    sys.path.insert(0, str(ROOT))
    files = [Path(a) for a in argv] or sorted((ROOT / "tests").glob("test_*.py"))
    passed = failed = 0
    for path in files:
        try:
            module = load(path if path.is_absolute() else Path.cwd() / path)
        except Exception:
            failed += 1
            print(f"FAILED {path} (could not import it)")
            traceback.print_exc(limit=-1)
            continue
        for name in sorted(vars(module)):
            test = getattr(module, name)
            if not name.startswith("test_") or not callable(test):
                continue
            try:
                test()
            except Exception:
                failed += 1
                print(f"FAILED {path}::{name}")
                traceback.print_exc(limit=-1)
            else:
                passed += 1
    print(f"{passed} passed, {failed} failed")
    return 1 if failed or not passed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
