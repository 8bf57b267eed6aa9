from textutils import normalize_space


def test_normalize_space_collapses_runs() -> None:
    assert normalize_space("  a \t b\n c ") == "a b c"
