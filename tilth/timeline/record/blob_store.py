"""The content-addressed blob store that turn checkpoints keep file contents in.

One store per user, shared by every session: ``$TILTH_HOME/snapshots/objects/ab/cdef…``,
named by the blake2b-256 of the content and zlib-compressed, so a file that stays the
same across turns or sessions is stored once. Blobs are written atomically and never
rewritten; a reader checks the hash, so a torn blob is reported, never restored.

An *entry* is how an overlay names one file's state: the blob id, plus ``:x`` for an
executable file or ``:l`` for a symbolic link (the blob then holds the link target).
``None`` means "the file does not exist".
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
import threading
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tilth.errors import TilthError
from tilth.session.files import append_line, atomic_write_text, fsync_dir
from tilth.session.store import Session

DEFAULT_MAX_FILE_BYTES = 32 << 20
MAX_FILE_ENV = "TILTH_CHECKPOINT_MAX_FILE_BYTES"
_ZLIB_LEVEL = 1  # fast: capture latency matters more than the last few percent of disk

Entry = str
"""``<blob id>``, ``<blob id>:x`` (executable) or ``<blob id>:l`` (symlink)."""


class SnapshotError(TilthError):
    """A stored file content is missing or damaged."""


def max_file_bytes(environ: dict[str, str] | None = None) -> int:
    """The per-file size cap (``TILTH_CHECKPOINT_MAX_FILE_BYTES``, default 32 MiB)."""
    from tilth.config import int_setting

    env = environ if environ is not None else os.environ
    return int_setting(env, MAX_FILE_ENV, DEFAULT_MAX_FILE_BYTES)


def blob_id(data: bytes) -> str:
    """The store's name for ``data``: blake2b-256, hex."""
    return hashlib.blake2b(data, digest_size=32).hexdigest()


def git_blob_sha(data: bytes) -> str:
    """The id git gives ``data`` as a blob (to compare with ``git ls-tree`` without a call)."""
    digest = hashlib.sha1(b"blob %d\x00" % len(data))
    digest.update(data)
    return digest.hexdigest()


def split_entry(entry: Entry) -> tuple[str, str]:
    """``(blob id, kind)`` where kind is ``f`` (file), ``x`` (executable) or ``l`` (link)."""
    blob, _, kind = entry.partition(":")
    return blob, kind or "f"


def make_entry(blob: str, kind: str) -> Entry:
    """The entry string for a blob of ``kind`` (``f``, ``x`` or ``l``)."""
    return blob if kind == "f" else f"{blob}:{kind}"


@dataclass(frozen=True)
class FileState:
    """What is at one path right now: its bytes and kind, read once."""

    data: bytes
    kind: str
    """``f`` regular, ``x`` executable, ``l`` symbolic link (data = link target)."""
    size: int | None = None
    """The file's size when only its start was read (it is over the reader's limit);
    None when ``data`` is all of it."""

    @property
    def git_mode(self) -> str:
        return {"f": "100644", "x": "100755", "l": "120000"}[self.kind]


def read_state(path: Path, limit: int | None = None) -> FileState | None:
    """The state of ``path``: None when absent (or a directory), else its bytes and kind.

    With ``limit``, a bigger file is read only that far plus a byte (``whole`` False):
    a capture that will not store it must not hold all of a huge (sparse) file in memory.
    """
    try:
        st = os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    import stat as stat_mod

    if stat_mod.S_ISLNK(st.st_mode):
        return FileState(os.fsencode(os.readlink(path)), "l")
    if not stat_mod.S_ISREG(st.st_mode):
        return None
    try:
        # Non-blocking: swapped for a FIFO since the lstat, the open must not wait.
        # No link followed: swapped for one since the lstat, the open fails.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return None
        raise
    with os.fdopen(fd, "rb") as handle:
        found = os.fstat(fd)
        if not stat_mod.S_ISREG(found.st_mode):
            return None
        data = handle.read() if limit is None else handle.read(limit + 1)
    size = found.st_size if limit is not None and len(data) > limit else None
    return FileState(data, "x" if st.st_mode & 0o111 else "f", size)


def read_state_in(
    root: Path, rel: str, dirs: dict[str, bool], limit: int | None = None
) -> FileState | None:
    """``read_state(root / rel)``, but None when a parent below ``root`` is not a directory
    (a link to one elsewhere): what lies behind it is not the worktree's. ``dirs`` caches
    each parent's answer, so the cost is one lstat per directory, not per file."""
    parts = rel.split("/")[:-1]
    for depth in range(1, len(parts) + 1):
        parent = "/".join(parts[:depth])
        if parent not in dirs:
            found = _lstat(root / parent)
            dirs[parent] = found is not None and stat.S_ISDIR(found.st_mode)
        if not dirs[parent]:
            return None
    return read_state(root / rel, limit)


class BlobStore:
    """``<root>/objects/ab/cdef…``: zlib-compressed blobs named by their blake2b."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.objects = root / "objects"
        self.durable = os.environ.get("TILTH_CHECKPOINT_FSYNC", "").strip() == "1"
        """Wait for every flush in ``sync`` (``TILTH_CHECKPOINT_FSYNC=1``)."""
        self._pending: list[Path] = []
        self._flushers: list[threading.Thread] = []

    @classmethod
    def for_home(cls, home: Path) -> BlobStore:
        """The store shared by every session under ``$TILTH_HOME``."""
        return cls(home / "snapshots")

    def path(self, blob: str) -> Path:
        """Where blob ``blob`` lives (whether or not it exists)."""
        blob = split_entry(blob)[0]
        if len(blob) != 64 or any(c not in "0123456789abcdef" for c in blob):
            raise SnapshotError(f"{blob!r} is not a snapshot blob id")
        return self.objects / blob[:2] / blob[2:]

    def has(self, blob: str) -> bool:
        return self.path(blob).is_file()

    def put(self, data: bytes) -> str:
        """Store ``data`` (once) and return its blob id; ``sync`` makes it durable."""
        blob = blob_id(data)
        target = self.path(blob)
        try:
            if target.stat().st_size > 0:
                # Freshen it: the sweep spares recent blobs, so one that a turn is about to
                # reference again cannot be collected in between.
                os.utime(target)
                return blob
        except FileNotFoundError:
            pass
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.parent / f".{target.name}.{os.getpid()}.{threading.get_ident()}.tmp"
        with open(tmp, "wb") as handle:
            handle.write(zlib.compress(data, _ZLIB_LEVEL))
        # The rename makes the blob whole-or-absent for any reader, even if this process
        # is killed; the fsync that protects it from a power cut happens in ``sync``.
        os.replace(tmp, target)
        self._pending.append(target)
        return blob

    def sync(self, *, wait: bool = False) -> None:
        """Flush blobs written since the last call to disk.

        By default in a background thread, so a turn does not wait on the disk (an fsync
        can take milliseconds on a busy filesystem); ``wait`` blocks until every flush is
        done. A blob lost to a power cut before its flush is reported as missing or
        damaged by ``get``, never restored wrong.
        """
        pending, self._pending = self._pending, []
        if pending:
            flusher = threading.Thread(
                target=_flush, args=(pending, self.objects), name="tilth-blob-flush"
            )
            flusher.start()
            self._flushers.append(flusher)
        if wait or self.durable:
            for flusher in self._flushers:
                flusher.join()
            self._flushers.clear()
        else:
            self._flushers = [f for f in self._flushers if f.is_alive()]

    def get(self, blob: str) -> bytes:
        """The content of ``blob``; raises ``SnapshotError`` when missing or damaged."""
        blob = split_entry(blob)[0]
        try:
            raw = self.path(blob).read_bytes()
        except FileNotFoundError:
            raise SnapshotError(
                f"snapshot blob {blob[:12]} is missing from {self.objects}",
                hint="it was removed outside Tilth; this checkpoint's files cannot be restored",
            ) from None
        try:
            data = zlib.decompress(raw)
        except zlib.error:
            data = b""
            raw = b""
        if not raw or blob_id(data) != blob:
            raise SnapshotError(f"snapshot blob {blob[:12]} is damaged (hash mismatch)")
        return data

    def size_on_disk(self, blob: str) -> int:
        """Compressed bytes of ``blob`` (0 when absent)."""
        try:
            return self.path(blob).stat().st_size
        except FileNotFoundError:
            return 0

    def iter_blobs(self) -> Iterator[tuple[str, Path]]:
        """Every stored ``(blob id, path)``; stray temp files are skipped."""
        if not self.objects.is_dir():
            return
        for fan in sorted(self.objects.iterdir()):
            if len(fan.name) != 2 or not fan.is_dir():
                continue
            for item in sorted(fan.iterdir()):
                if item.name.startswith("."):
                    continue
                yield fan.name + item.name, item

    def delete(self, blob: str) -> int:
        """Remove ``blob``; returns the bytes freed."""
        target = self.path(blob)
        try:
            size = target.stat().st_size
            target.unlink()
        except FileNotFoundError:
            return 0
        return size

    def total_bytes(self) -> int:
        """Compressed size of every stored blob."""
        return sum(p.stat().st_size for _, p in self.iter_blobs())


@dataclass(frozen=True)
class Stored:
    """The outcome of storing one path: its entry, or a gap saying why it was not stored."""

    entry: Entry | None
    gap: str | None = None
    size: int = 0


def store_state(store: BlobStore, rel: str, state: FileState, cap: int) -> Stored:
    """Put ``state`` in the store, or report it as a gap when it is over ``cap``."""
    if state.size is not None:
        return Stored(None, f"file over size cap: {rel} ({state.size} bytes)")
    if state.kind != "l" and len(state.data) > cap:
        return Stored(None, f"file over size cap: {rel} ({len(state.data)} bytes)")
    blob = store.put(state.data)
    return Stored(make_entry(blob, state.kind), size=len(state.data))


def write_entry(store: BlobStore, root: Path, rel: str, entry: Entry | None) -> None:
    """Make ``root/rel`` hold ``entry`` (None deletes it); parents are created as needed."""
    if entry is None:
        remove_path(root, rel)
        return
    blob, kind = split_entry(entry)
    write_data(root, rel, store.get(blob), kind)


def write_data(root: Path, rel: str, data: bytes, kind: str) -> None:
    """Make ``root/rel`` a file (``f``), executable (``x``) or link (``l``) holding ``data``."""
    path = root / rel
    _clear_parents(root, path)  # never write through a link that stands for a directory
    found = _lstat(path)
    if found is not None and stat.S_ISDIR(found.st_mode):
        import shutil

        shutil.rmtree(path)
    elif found is not None:
        # Unlinked first: a rename over an existing file makes ext4 flush it (auto_da_alloc),
        # three times slower for small files.
        path.unlink()
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
    if kind == "l":
        os.symlink(os.fsdecode(data), path)
        return
    tmp = path.parent / f".{path.name}.tilth-restore.tmp"
    with open(tmp, "wb") as handle:
        handle.write(data)
    os.chmod(tmp, 0o755 if kind == "x" else 0o644)
    os.replace(tmp, path)


def _lstat(path: Path) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except FileNotFoundError:
        return None


def remove_path(root: Path, rel: str) -> None:
    """Delete ``root/rel`` and any directories below ``root`` it leaves empty.

    Under a parent that is not a directory (a link to one elsewhere) there is no such file
    in the worktree: nothing is deleted, never what the link points at."""
    path = root / rel
    for parent in list(Path(rel).parents)[:-1]:
        found = _lstat(root / parent)
        if found is not None and not stat.S_ISDIR(found.st_mode):
            return
    try:
        if path.is_symlink() or path.is_file():
            path.unlink()
    except FileNotFoundError:
        return
    parent = path.parent
    while parent != root and parent.is_relative_to(root):
        try:
            parent.rmdir()
        except OSError:
            return
        parent = parent.parent


def _flush(paths: list[Path], objects: Path) -> None:
    """fsync each file, then each directory holding one, then the objects directory."""
    directories = set()
    for path in paths:
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError:
            continue
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        directories.add(path.parent)
    for directory in directories:
        fsync_dir(directory)
    fsync_dir(objects)


def _clear_parents(root: Path, path: Path) -> None:
    """Remove a file or link standing where one of ``path``'s parent directories must go."""
    for parent in reversed(list(path.relative_to(root).parents)[:-1]):
        full = root / parent
        found = _lstat(full)
        if found is None:
            return  # nothing below a missing directory either
        if not stat.S_ISDIR(found.st_mode):
            full.unlink()
            return


# ---- which store a session uses ------------------------------------------------------------
STORE_FILE = "snapshot-store"


def session_store(session: Session | None = None) -> BlobStore:
    """The blob store ``session`` captured into, else the one under ``$TILTH_HOME``.

    Remembering it per session keeps old checkpoints restorable when ``TILTH_HOME`` changes.
    """
    if session is not None:
        try:
            recorded = (session.dir / "timeline" / STORE_FILE).read_text("utf-8").strip()
        except OSError:
            recorded = ""
        if recorded:
            return BlobStore(Path(recorded))
    from tilth.config import load_settings

    return BlobStore.for_home(load_settings().home)


def remember_store(session: Session, store: BlobStore) -> None:
    """Record which store ``session``'s checkpoints use (once)."""
    path = session.dir / "timeline" / STORE_FILE
    text = str(store.root.resolve())
    try:
        if path.read_text("utf-8").strip() == text:
            return
    except OSError:
        pass
    atomic_write_text(path, text + "\n")


def register_root(store: BlobStore, sessions_dir: Path) -> None:
    """Remember that sessions under ``sessions_dir`` store into ``store`` (once)."""
    roots = store.root / "roots"
    line = str(sessions_dir.resolve())
    try:
        if line in roots.read_text("utf-8").splitlines():
            return
    except FileNotFoundError:
        pass
    store.root.mkdir(parents=True, exist_ok=True)
    append_line(roots, line)
