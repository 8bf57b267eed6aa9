"""Landlock's rules and promises as planned, before any kernel sees them."""

from __future__ import annotations

from pathlib import Path

from tilth.tools import landlock
from tilth.tools.sandbox_landlock import carve, describe, ruleset


def test_what_each_abi_cannot_hold_is_named() -> None:
    held, missing = landlock.promises(3, network=False)
    assert "network not cut (ABI < 4)" in missing
    assert "signals and abstract unix sockets not scoped (ABI < 6)" in missing
    held, missing = landlock.promises(7, network=False)
    assert "TCP" in held and "signals and abstract sockets scoped" in held
    assert not [m for m in missing if "ABI" in m]
    assert "UDP and other protocols stay open" in missing
    assert describe(1, True).startswith("Landlock ABI 1 ")
    assert "truncate not controlled (ABI < 3)" in describe(2, True)


def test_the_ruleset_takes_charge_of_what_the_abi_knows() -> None:
    assert landlock.Ruleset((), 1).handled() == ((1 << 13) - 1, 0, 0)
    fs, net, scoped = landlock.Ruleset((), 7, network=False).handled()
    assert fs & landlock.IOCTL_DEV and fs & landlock.REFER and fs & landlock.TRUNCATE
    assert net == landlock.NET_BIND_TCP | landlock.NET_CONNECT_TCP
    assert scoped == landlock.SCOPE_SIGNAL | landlock.SCOPE_ABSTRACT_UNIX
    assert landlock.Ruleset((), 3, network=False).handled()[1] == 0  # cannot: said above


def test_a_hidden_place_inside_a_granted_one_is_carved_out(tmp_path: Path) -> None:
    (tmp_path / "repo" / "src").mkdir(parents=True)
    (tmp_path / "repo" / "README.md").write_text("x")
    (tmp_path / "repo" / ".tilth" / "sessions").mkdir(parents=True)
    (tmp_path / "repo" / "link").symlink_to("/")
    repo = tmp_path / "repo"
    grants = {g.path: g for g in carve(repo, landlock.READ, [(repo / ".tilth", 0)])}
    assert str(repo / ".tilth") not in grants  # hidden: no rule at all
    assert str(repo) not in grants  # the directory itself would expose it: no rule either
    assert grants[str(repo / "src")].rights == landlock.READ
    assert grants[str(repo / "README.md")].rights == landlock.READ
    assert str(repo / "link") not in grants  # never a rule through a link
    assert all(not g.follow for g in grants.values())


def test_a_read_only_place_inside_the_writable_one_keeps_only_reading(tmp_path: Path) -> None:
    work = tmp_path / "work"
    (work / ".git").mkdir(parents=True)
    (work / "pkg").mkdir()
    every = landlock.fs_rights(7)
    rules = ruleset(
        writable=work,
        readable=[],
        hidden=[],
        protected=[work / ".git"],
        scratch=[],
        network=True,
        abi=7,
    )
    grants = {g.path: g.rights for g in rules.grants}
    assert grants[str(work)] == landlock.READ
    assert grants[str(work / ".git")] == landlock.READ
    assert grants[str(work / "pkg")] == every
    assert grants["/dev/null"] == landlock.DEVICE
    assert "/tmp" not in grants and str(Path.home()) not in grants
