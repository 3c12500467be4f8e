"""List the public definitions in ``python/codeact`` that have no docstring (issue 18, item 5).

The rule, kept simple on purpose:

* A *definition* is a ``def``, ``async def`` or ``class`` at module level, or directly in the body
  of a class that is itself a definition (methods, nested classes).  Functions nested in functions
  are not definitions.
* It is *public* when its name and the name of every enclosing class do not start with ``_`` and
  either the module's path under ``python/codeact`` has no component starting with ``_`` (so
  ``runtime/monty.py`` counts, ``runtime/_seam.py`` does not; ``__init__.py`` counts), or the
  top-level name (the outermost class, or the function itself) is listed in the ``__all__`` of a
  package ``__init__.py`` whose own path has no component starting with ``_`` and is imported there
  from that module (a re-export).
* Skipped: functions decorated ``@overload``; methods of a class that subclasses ``Protocol`` when
  the class has a docstring (it documents its stubs); and the module docstrings themselves (not
  checked).  ``__init__`` and other dunder methods already start with ``_`` and are never public.

Usage::

    python tools/check_docstrings.py           # prints ``path:line: qualified.name``, exits 1 if any
    python tools/check_docstrings.py --count   # prints the number of missing docstrings, exits 0
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent / "python" / "codeact"


def _is_private_path(rel: Path) -> bool:
    """Whether a module path (relative to the package root) has a component starting with ``_``."""
    parts = list(rel.parts)
    if parts and parts[-1] == "__init__.py":
        parts = parts[:-1]
    return any(part.startswith("_") for part in parts)


def _module_name(rel: Path) -> str:
    """The dotted module name of ``rel`` below ``codeact`` (``runtime/_seam.py`` -> ``runtime._seam``)."""
    parts = list(rel.with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _all_names(tree: ast.Module) -> set[str]:
    """The string entries of a module-level ``__all__`` tuple or list (empty when there is none)."""
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            if isinstance(node.value, (ast.Tuple, ast.List)):
                names.update(
                    e.value for e in node.value.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)
                )
    return names


def _reexports(root: Path) -> dict[str, set[str]]:
    """Map a module name to the names a public package ``__init__`` re-exports from it via ``__all__``."""
    out: dict[str, set[str]] = {}
    for init in root.rglob("__init__.py"):
        rel = init.relative_to(root)
        if _is_private_path(rel):
            continue
        tree = ast.parse(init.read_text(encoding="utf-8"))
        exported = _all_names(tree)
        package = _module_name(rel).split(".") if _module_name(rel) else []
        for node in tree.body:
            if not isinstance(node, ast.ImportFrom) or node.level == 0:
                continue
            base = package[: len(package) - (node.level - 1)] if node.level > 1 else package
            target = ".".join([*base, *(node.module.split(".") if node.module else [])])
            for alias in node.names:
                if (alias.asname or alias.name) in exported:
                    out.setdefault(target, set()).add(alias.name)
    return out


def _is_overload(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """Whether ``node`` is decorated ``@overload`` / ``@typing.overload``."""
    for dec in node.decorator_list:
        if (isinstance(dec, ast.Name) and dec.id == "overload") or (
            isinstance(dec, ast.Attribute) and dec.attr == "overload"
        ):
            return True
    return False


def _is_documented_protocol(node: ast.ClassDef) -> bool:
    """Whether ``node`` subclasses ``Protocol`` and has a docstring (which then covers its stubs)."""
    for base in node.bases:
        target = base.value if isinstance(base, ast.Subscript) else base
        name = target.id if isinstance(target, ast.Name) else getattr(target, "attr", "")
        if name == "Protocol":
            return ast.get_docstring(node) is not None
    return False


def _visit(body: list[ast.stmt], rel: Path, prefix: str, in_protocol: bool, top: set[str] | None) -> list[str]:
    """The undocumented definitions in ``body`` (``top``: the names allowed at module level, ``None``: all)."""
    found: list[str] = []
    for node in body:
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) or node.name.startswith("_"):
            continue
        if top is not None and node.name not in top:
            continue
        qualname = f"{prefix}{node.name}"
        if isinstance(node, ast.ClassDef):
            if ast.get_docstring(node) is None:
                found.append(f"{rel}:{node.lineno}: {qualname}")
            found += _visit(node.body, rel, f"{qualname}.", _is_documented_protocol(node), None)
        elif not (_is_overload(node) or in_protocol) and ast.get_docstring(node) is None:
            found.append(f"{rel}:{node.lineno}: {qualname}")
    return found


def missing(root: Path = ROOT) -> list[str]:
    """Every public definition below ``root`` without a docstring, as ``path:line: qualified.name``
    lines, sorted by path."""
    reexports = _reexports(root)
    found: list[str] = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root)
        top = reexports.get(_module_name(rel), set()) if _is_private_path(rel) else None
        found += _visit(ast.parse(path.read_text(encoding="utf-8")).body, rel, "", False, top)
    return found


def main(argv: list[str] | None = None) -> int:
    """Print the missing docstrings (exit 1 when any), or only their number with ``--count``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", action="store_true", help="print only the number of missing docstrings")
    args = parser.parse_args(argv)
    items = missing()
    if args.count:
        print(len(items))
        return 0
    for item in items:
        print(item)
    return 1 if items else 0


if __name__ == "__main__":
    sys.exit(main())
