"""One exception hierarchy. Every message is something a user can act on.

The CLI catches ``TilthError`` at its boundary, prints ``error: <message>``
(plus ``hint`` when set) and exits with ``exit_code`` — never a traceback.
"""

from __future__ import annotations

import errno


class TilthError(Exception):
    """Base class: a failure with a user-facing message and an exit code."""

    exit_code = 1

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message


class UsageError(TilthError):
    """The command line asked for something that cannot be done as stated."""

    exit_code = 2


class ConfigError(TilthError):
    """A setting is missing or malformed."""

    exit_code = 2


class SessionNotFound(UsageError):
    """No session with the given id (or no sessions at all)."""


class SessionCorrupt(TilthError):
    """A session's state file exists but cannot be read."""


class SessionLocked(UsageError):
    """Another process holds the session's lock."""


class WorkspaceError(UsageError):
    """The workspace is not something Tilth can work in (not a repo, no commits...)."""


class StorageError(TilthError):
    """A file Tilth needs could not be written or read: a full disk, no permission."""

    ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EACCES, errno.EPERM, errno.EROFS})
    """Full disks and missing permissions: what the machine, not Tilth, got wrong."""

    @classmethod
    def wrap(cls, action: str, path: object, exc: OSError) -> OSError | StorageError:
        """The ``StorageError`` for ``exc`` when it is about space or permission, else ``exc``."""
        return cls(action, path, exc) if exc.errno in cls.ERRNOS else exc

    def __init__(self, action: str, path: object, exc: OSError) -> None:
        reason = exc.strerror or type(exc).__name__
        hints = {
            errno.ENOSPC: "free space on that disk (or point TILTH_HOME elsewhere), then retry",
            errno.EDQUOT: "free space within your disk quota, then retry",
            errno.EACCES: "check the permissions of that path and its directory",
            errno.EPERM: "check the permissions of that path and its directory",
            errno.EROFS: "that file system is read-only; point TILTH_HOME at a writable one",
        }
        super().__init__(f"cannot {action} {path}: {reason}", hint=hints.get(exc.errno or 0))
        self.path = path
        self.errno = exc.errno


class GitError(TilthError):
    """A git command failed; carries the command, exit code and stderr."""

    def __init__(self, cmd: list[str], returncode: int, stderr: str) -> None:
        self.cmd = cmd
        self.returncode = returncode
        self.stderr = stderr.strip()
        shown = " ".join(cmd)
        super().__init__(f"`{shown}` failed (exit {returncode}): {_git_detail(self.stderr)}")


def _git_detail(stderr: str) -> str:
    """The line of git's stderr that says what went wrong: its last line, led by the
    ``fatal:``/``error:`` line when that comes earlier (it names the file; the advice
    after it, such as "remove the file manually", does not)."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    if not lines:
        return "no error output"
    cause = next((line for line in lines if line.startswith(("fatal:", "error:"))), None)
    if cause is None or cause == lines[-1]:
        return lines[-1]
    return f"{cause} … {lines[-1]}"


class ModelError(TilthError):
    """The model endpoint could not give an answer (after retries)."""


class ContextOverflow(ModelError):
    """The endpoint refused a request as longer than the model's context window.

    ``prompt_tokens`` and ``window`` are what the server said (None when it did not say).
    """

    def __init__(
        self,
        message: str,
        *,
        hint: str | None = None,
        prompt_tokens: int | None = None,
        window: int | None = None,
    ) -> None:
        super().__init__(message, hint=hint)
        self.prompt_tokens = prompt_tokens
        self.window = window


class ContextTooSmall(ContextOverflow):
    """The model's context window cannot hold the conversation even summarized.

    What is never summarized leaves so little room that a summary would be due every step
    or two, so Tilth stops and says so once instead.
    """

    def __init__(self, window: int, floor: int) -> None:
        super().__init__(
            f"the model's context window ({window:,} tokens) is too small for this "
            f"conversation: the instructions, tool descriptions and first message, which are "
            f"never summarized, take about {floor:,} tokens of it, which leaves too little "
            "room to go on",
            hint="serve the model with a larger context window (llama.cpp: --ctx-size 8192 "
            "or more; docs/models.md says how for each server)",
            window=window,
        )
        self.floor = floor


class Aborted(TilthError):
    """The user declined a confirmation."""

    exit_code = 1


class Interrupted(TilthError):
    """Ctrl-C: the command stopped at the user's request."""

    exit_code = 130


class ToolError(TilthError):
    """A worker tool could not do what the model asked; the message goes back to the model."""


class ProjectEnvError(UsageError):
    """The project's Python environment cannot be found or does not start (SPEC §5.4)."""


class SetupFailed(UsageError):
    """``TILTH_SETUP_COMMAND`` failed in a new worktree; ``output`` is what it printed."""

    def __init__(self, message: str, *, output: str = "", hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.output = output
