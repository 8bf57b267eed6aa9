"""Small text helpers."""

from textutils.core import normalize_space

__all__ = ["normalize_space"]
