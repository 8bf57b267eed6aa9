"""The pre-tool guard: a pure check of a shell command before ``bash`` runs it.

It reads the command the way a shell would split it (quotes, ``;``, ``&&``,
``|``, ``sh -c``/``eval`` strings) and refuses what could damage the session's
history, the user's repository or the machine. It is a seatbelt, not a
sandbox: a determined program can still do harm, so the worker's environment
carries no secrets either.
"""

from __future__ import annotations

import re
import shlex

SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh", "fish"})
INTERPRETERS = SHELLS | {"python", "python2", "python3", "perl", "ruby", "node", "php"}
DOWNLOADERS = frozenset({"curl", "wget", "fetch"})
# Commands that run their arguments as another command.
WRAPPERS = frozenset(
    {"env", "nohup", "time", "command", "exec", "nice", "timeout", "xargs", "builtin", "stdbuf"}
)
SEPARATORS = frozenset({";", ";;", "&", "&&", "||", "|", "|&", "(", ")", "()", "{", "}"})

# Each rule runs in time linear in the command: a name starts where no name character
# precedes it, so a long run of them is tried once, not from each of its characters.
RAW_RULES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("fork bomb", re.compile(r"(?<![\w:.])([\w:.]+)\s*\(\)\s*\{\s*\1\s*\|\s*\1\s*&")),
    (
        "piping a download into a shell",
        re.compile(r"(?:\bsource|\.|\b(?:ba|z|da|k)?sh)\s+<\(\s*(?:curl|wget)\b"),
    ),
    ("writing onto a disk device", re.compile(r">\s*/dev/(?:sd|hd|nvme|xvd|vd|mmcblk|disk)\w*")),
)
_SHELL_WORD = re.compile(r"\b(?:ba|z|da|k)?sh\b")
_DOWNLOAD_SUBST = re.compile(r"\$\(\s*(?:curl|wget)\b")


MAX_COMMAND = 100_000
"""Characters in one command; the kernel refuses a longer ``bash -c`` argument anyway."""


def check_command(command: object) -> str | None:
    """Why ``command`` must not run, or None when it may."""
    if not isinstance(command, str):
        return None
    if len(command) > MAX_COMMAND:
        return (
            f"a command of {len(command)} characters, over {MAX_COMMAND}: write the script "
            "to a file with write_file and run that"
        )
    for reason, pattern in RAW_RULES:
        if pattern.search(command):
            return reason
    if _shell_runs_a_download(command):
        return "piping a download into a shell"
    return _check_text(command, depth=0)


def _shell_runs_a_download(command: str) -> bool:
    """``sh ... $(curl ...)`` within one simple command (a scan per segment, not per word)."""
    for segment in re.split(r"[;&|]", command):
        shell = _SHELL_WORD.search(segment)
        if shell and _DOWNLOAD_SUBST.search(segment, shell.end()):
            return True
    return False


def _check_text(text: str, depth: int) -> str | None:
    if depth > 3:  # sh -c "sh -c '...'" nesting deeper than this is itself suspicious
        return "deeply nested shell commands"
    pipeline: list[list[str]] = []
    for argv, separator in _segments(text):
        reason = _check_argv(argv, depth)
        if reason:
            return reason
        pipeline.append(argv)
        if separator not in ("|", "|&"):
            reason = _check_pipeline(pipeline)
            if reason:
                return reason
            pipeline = []
    return _check_pipeline(pipeline)


def _tokens(text: str) -> list[str]:
    # Newlines and backticks end a command too; inside quotes the added ';' stays literal.
    prepared = text.replace("\n", " ; ").replace("`", " ; ")
    lexer = shlex.shlex(prepared, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    try:
        return list(lexer)
    except ValueError:  # unbalanced quotes: the shell will refuse it; split roughly
        return re.findall(r"[;&|()]+|[^\s;&|()]+", prepared)


def _segments(text: str) -> list[tuple[list[str], str]]:
    """Simple commands as ``(argv, separator that ended it)``, redirections removed."""
    out: list[tuple[list[str], str]] = []
    argv: list[str] = []
    skip_next = False
    for token in _tokens(text):
        if skip_next:
            skip_next = False
            continue
        if token in SEPARATORS or (set(token) <= set(";&|()") and token):
            if argv:
                out.append((argv, token))
            argv = []
        elif set(token) <= set("<>&|") and ("<" in token or ">" in token):
            skip_next = True  # the redirection target is not an argument
        else:
            argv.append(token)
    if argv:
        out.append((argv, ""))
    return out


def _program(argv: list[str]) -> tuple[str, list[str]]:
    """The program actually run and its arguments (assignments and wrappers peeled off)."""
    i = 0
    while i < len(argv):
        word = argv[i]
        name = word.lstrip("\\").rsplit("/", 1)[-1]
        if re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", word):
            i += 1
        elif name in WRAPPERS:
            i += 1
            while i < len(argv) and (
                argv[i].startswith("-")
                or "=" in argv[i]
                or (name == "timeout" and argv[i][:1].isdigit())
            ):
                i += 1
        else:
            return name, argv[i + 1 :]
    return "", []


def _check_argv(argv: list[str], depth: int) -> str | None:
    program, args = _program(argv)
    if program in ("sudo", "doas", "su", "pkexec"):
        return "sudo (commands run as root)"
    if program == "git":
        return _check_git(args)
    if program == "rm":
        return _check_recursive_target(args, "rm -rf")
    if program in ("chmod", "chown", "chgrp"):
        return _check_recursive_target(args, f"recursive {program}")
    if program.startswith("mkfs"):
        return "mkfs (formatting a filesystem)"
    if program == "dd" and any(a.startswith("of=/dev/") for a in args):
        return "dd onto a device"
    if program in ("shutdown", "reboot", "halt", "poweroff"):
        return "shutting the machine down"
    if program == "eval":
        return _check_text(" ".join(args), depth + 1)
    if program in SHELLS:
        for index, arg in enumerate(args):
            if arg.startswith("-") and not arg.startswith("--") and "c" in arg:
                if index + 1 < len(args):
                    return _check_text(args[index + 1], depth + 1)
    return None


def _check_pipeline(pipeline: list[list[str]]) -> str | None:
    programs = [_program(argv) for argv in pipeline]
    for index, (program, _) in enumerate(programs):
        if program in DOWNLOADERS and any(_runs_stdin(p, a) for p, a in programs[index + 1 :]):
            return "piping a download into a shell"
    return None


def _runs_stdin(program: str, args: list[str]) -> bool:
    """True when ``program args`` executes what arrives on stdin (``sh``, ``python -``)."""
    if program not in INTERPRETERS and not program.startswith("python"):
        return False
    if "-" in args:
        return True
    # A script, module or -c/-e program means stdin is only data.
    return not any(a in ("-c", "-m", "-e") or not a.startswith("-") for a in args)


def _short_flags(args: list[str]) -> str:
    """Letters of every ``-xyz`` cluster (not ``--long`` options)."""
    return "".join(a[1:] for a in args if a.startswith("-") and not a.startswith("--"))


def _check_git(args: list[str]) -> str | None:
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "-C" or (arg.startswith("-C") and len(arg) > 2):
            target = args[i + 1] if arg == "-C" and i + 1 < len(args) else arg[2:]
            if target not in (".", "./"):
                return "git -C pointing at another directory"
            i += 2 if arg == "-C" else 1
        elif arg in ("-c", "--exec-path", "--namespace"):
            i += 2
        elif arg.startswith(("--git-dir", "--work-tree")):
            return "git pointed at another repository"
        elif arg.startswith("-"):
            i += 1
        else:
            break
    if i >= len(args):
        return None
    sub, rest = args[i], args[i + 1 :]
    flags = _short_flags(rest)
    if sub == "push":
        forced = (
            "f" in flags
            or any(a.startswith(("--force", "+")) or ":+" in a for a in rest)
            or any(not a.startswith("-") and a.startswith("+") for a in rest)
        )
        return "force push" if forced else "git push (publishing is left to the user)"
    if sub == "reset" and "--hard" in rest:
        return "git reset --hard"
    if sub == "clean" and ("f" in flags or "--force" in rest):
        return "git clean -f"
    if sub == "switch":
        return "git switch to another branch"
    if sub == "checkout":
        return _check_checkout(rest)
    if sub == "branch":
        if "D" in flags or ("--delete" in rest and ("--force" in rest or "f" in flags)):
            return "git branch -D"
        if "m" in flags or "M" in flags or "--move" in rest or "f" in flags or "--force" in rest:
            return "moving or renaming a branch"
    if sub in ("rebase", "filter-branch", "filter-repo", "replace"):
        return f"history rewrite (git {sub})"
    if sub == "commit" and "--amend" in rest:
        return "history rewrite (git commit --amend)"
    if sub == "update-ref":
        return "moving refs directly (git update-ref)"
    if sub == "reflog" and any(a in ("expire", "delete") for a in rest):
        return "history rewrite (git reflog expire/delete)"
    return None


def _check_checkout(rest: list[str]) -> str | None:
    if any(a in ("-b", "-B", "--orphan", "--detach") for a in rest) or "b" in _short_flags(rest):
        return "git checkout of another branch"
    if "--" in rest:
        return None  # restoring paths, not moving HEAD
    targets = [a for a in rest if not a.startswith("-")]
    if all(t in (".", "./") for t in targets):
        return None
    return "git checkout of another branch (restore files with `git restore <path>`)"


def _check_recursive_target(args: list[str], label: str) -> str | None:
    if "--no-preserve-root" in args:
        return f"{label} --no-preserve-root"
    options = [a for a in args if a.startswith("-") and a != "-"]
    recursive = (
        "r" in _short_flags(options) or "R" in _short_flags(options) or "--recursive" in args
    )
    if not recursive:
        return None
    end = args.index("--") if "--" in args else len(args)
    targets = [a for a in args[:end] if not a.startswith("-")] + args[end + 1 :]
    for target in targets:
        reason = _dangerous_target(target)
        if reason:
            return f"{label} of {reason}"
    return None


def _dangerous_target(target: str) -> str | None:
    t = target.strip()
    if t in ("~", "~/", "~/*") or t.startswith(("~/", "$HOME", "${HOME}")):
        return "the home directory"
    if t == ".." or t.startswith("../") or "/../" in t or t.endswith("/.."):
        return "a path outside the workspace (..)"
    if t in (".", "./", "*", "./*", ".*"):
        return "the whole workspace"
    if t.startswith("/"):
        depth = len([p for p in t.split("/") if p and p != "*"])
        if depth <= 1:
            return f"{t} (a system directory)" if depth else "/ (the root filesystem)"
    return None
