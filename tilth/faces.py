"""Package faces that load lazily, their names written once.

A face (``tilth/__init__.py``, a package's ``__init__.py``) lists what it offers as imports
under ``if TYPE_CHECKING:`` — ``from tilth.session.store import Session as Session`` — so
type checkers see every name with its real type, and nothing is imported when the face is.
``lazy_face`` reads that block (once, on the first name asked for) and gives the face its
module ``__getattr__`` and ``__dir__``: a name is imported from where the block says on first
use. ``__all__`` is those names plus the face's own public definitions.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable

_HOOKS = frozenset({"__all__", "__getattr__", "__dir__"})


def lazy_face(module_name: str, file: str) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for the face ``module_name`` whose source is ``file``."""
    table: dict[str, tuple[str, str]] = {}
    exported: list[str] = []

    def load() -> None:
        if not exported:
            with open(file, encoding="utf-8") as source:  # no pathlib: ``tilth --help`` is fast
                found, own = _read(source.read())
            table.update(found)
            exported.extend(sorted({*found, *own}))

    def get(name: str) -> Any:
        face = import_module(module_name)
        if name == "__all__":
            load()
            setattr(face, "__all__", list(exported))  # noqa: B010 (a face declares none)
            return list(exported)
        if name.startswith("__") and name != "__version__":
            raise AttributeError(f"module {module_name!r} has no attribute {name!r}")
        load()
        where = table.get(name)
        if where is None:
            raise AttributeError(f"module {module_name!r} has no attribute {name!r}")
        module, attribute = where
        try:
            value = getattr(import_module(module), attribute)
        except AttributeError:  # ``from tilth.x import y as y`` names the module ``tilth.x.y``
            value = import_module(f"{module}.{attribute}")
        setattr(face, name, value)
        return value

    def names() -> list[str]:
        load()
        return list(exported)

    return get, names


def _read(source: str) -> tuple[dict[str, tuple[str, str]], list[str]]:
    """The ``TYPE_CHECKING`` imports (name → (module, attribute)) and the public names a
    face defines itself."""
    import ast

    found: dict[str, tuple[str, str]] = {}
    own: list[str] = []
    for node in ast.parse(source).body:
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            for item in node.body:
                if isinstance(item, ast.ImportFrom) and item.module and not item.level:
                    for alias in item.names:
                        found[alias.asname or alias.name] = (item.module, alias.name)
        elif isinstance(node, ast.FunctionDef | ast.ClassDef):
            own.append(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            own += [t.id for t in targets if isinstance(t, ast.Name)]
    return found, [name for name in own if _public(name)]


def _public(name: str) -> bool:
    if name in _HOOKS:
        return False
    return not name.startswith("_") or (name.startswith("__") and name.endswith("__"))
