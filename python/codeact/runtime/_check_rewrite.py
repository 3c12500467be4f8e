"""The subset check's same-meaning rewrites: each turns a construct the pinned Monty cannot
run into one it runs with the same meaning (``SubsetEntry.rewrite``), in place."""

from __future__ import annotations

import ast
import re

from ._check_facts import (
    _BUILTIN_TYPES,
    Rewrite,
    _callable_slots,
    _facts,
    _from_imports,
    _module_aliases,
    _nodes,
    _path_encoding,
    _Source,
    _utf8_only,
)

_JsonNames = tuple[frozenset[str], frozenset[str]]
"""(names of the json module, names ``dumps`` / ``dump`` are imported as)."""


def _rewrite_callable_value(node: ast.expr, modules: set[str]) -> str | None:
    """``obj.method`` passed where a callable is expected becomes a lambda calling it."""
    if not (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)):
        return None
    owner = node.value.id
    if owner in modules:
        return None  # module functions are values in Monty (math.sqrt, json.dumps)
    if owner in _BUILTIN_TYPES:
        return f"lambda _x, *_a: _x.{node.attr}(*_a)"
    return f"lambda *_a: {owner}.{node.attr}(*_a)"


"""(names of the json module, names ``dumps`` / ``dump`` are imported as)."""


def _json_dumps_names(tree: ast.AST) -> _JsonNames:
    modules = frozenset(name for name, module in _module_aliases(tree).items() if module == "json")
    functions = frozenset(
        name
        for name, (module, original) in _from_imports(tree).items()
        if module == "json" and original in ("dumps", "dump")
    )
    return modules, functions


# What json.dumps(obj, default=f) encodes, as one expression of ``obj`` and ``f`` (Monty's
# json takes no ``default=``): dicts (keys as they are: the encoder checks them), lists and
# tuples are walked, JSON scalars kept, and any other value is replaced by ``f(value)``, itself
# walked, as CPython's encoder does. A lambda passed itself, so no helper name enters the
# script's namespace; ``obj`` and ``f`` are evaluated once, in that order, where they stand.
_JSON_DEFAULT_WALK = (
    "(lambda _f, _o, _d: _f(_f, _o, _d))("
    "lambda _f, _v, _d: {_k: _f(_f, _x, _d) for _k, _x in _v.items()} if isinstance(_v, dict) "
    "else [_f(_f, _x, _d) for _x in _v] if isinstance(_v, (list, tuple)) "
    "else _v if _v is None or isinstance(_v, (str, int, float)) "
    "else _f(_f, _d(_v), _d), OBJ, DEFAULT)"
)


def _rewrite_json_default(node: ast.Call, names: _JsonNames) -> str | None:
    """``json.dumps(obj, default=f, ...)`` (or ``json.dump(obj, fp, ...)``) with the values
    ``f`` stands for converted before the call; ``default=None`` is dropped. None for any
    other call, and for one with ``cls=`` or ``**kwargs`` (refused by the check)."""
    func = node.func
    modules, functions = names
    if isinstance(func, ast.Attribute):
        if not (func.attr in ("dumps", "dump") and isinstance(func.value, ast.Name) and func.value.id in modules):
            return None
    elif not (isinstance(func, ast.Name) and func.id in functions):
        return None
    default = [k for k in node.keywords if k.arg == "default"]
    if len(default) != 1 or not node.args or isinstance(node.args[0], ast.Starred):
        return None
    if any(k.arg in (None, "cls") for k in node.keywords):
        return None
    keywords = [k for k in node.keywords if k.arg != "default"]
    value = default[0].value
    if isinstance(value, ast.Constant) and value.value is None:
        obj = node.args[0]
    else:
        walk = ast.parse(_JSON_DEFAULT_WALK, mode="eval").body
        assert isinstance(walk, ast.Call)
        walk.args[1:] = [node.args[0], value]
        obj = walk
    return ast.unparse(ast.Call(func=func, args=[obj, *node.args[1:]], keywords=keywords))


# ------------------------------------------------------------------ the pass


_REWRITTEN = frozenset({ast.Call, ast.Delete, ast.ClassDef})


def _rewrites(
    tree: ast.Module, src: _Source, modules: set[str], user_names: set[str], json_names: _JsonNames
) -> list[tuple[ast.AST, str, str]]:
    """(node, key, replacement) for every same-meaning rewrite, outermost first."""
    out: list[tuple[ast.AST, str, str]] = []
    for node in _nodes(tree):
        if type(node) not in _REWRITTEN:
            continue
        if isinstance(node, ast.Call):
            json_default = _rewrite_json_default(node, json_names)
            if json_default is not None:
                out.append((node, "json_default", json_default))
                continue
            func = node.func
            own = isinstance(func, ast.Attribute) and func.attr in _facts(tree).methods  # runs as written
            if (
                isinstance(func, ast.Attribute)
                and func.attr == "format_map"
                and not own
                and len(node.args) == 1
                and not node.keywords
                and isinstance(node.args[0], ast.Dict)
            ):
                call = ast.Call(
                    func=ast.Attribute(value=func.value, attr="format", ctx=ast.Load()),
                    args=[],
                    keywords=[ast.keyword(arg=None, value=node.args[0])],
                )
                out.append((node, "format_map", ast.unparse(call)))
                continue
            enc = _path_encoding(node)
            if enc and _utf8_only(enc) and not own:
                call = ast.Call(func=func, args=node.args, keywords=[k for k in node.keywords if k not in enc])
                out.append((node, "path_encoding", ast.unparse(call)))
                continue
            for _caller, slot in _callable_slots(node):
                text = _rewrite_callable_value(slot, modules)
                if text is not None:
                    out.append((slot, "bound_method", text))
        elif isinstance(node, ast.Delete):
            if len(node.targets) == 1 and isinstance(node.targets[0], ast.Subscript):
                target = node.targets[0]
                if not isinstance(target.slice, ast.Slice):
                    out.append((node, "del", f"{ast.unparse(target.value)}.pop({ast.unparse(target.slice)})"))
        elif isinstance(node, ast.ClassDef):
            if (
                len(node.bases) == 1
                and isinstance(node.bases[0], ast.Name)
                and node.bases[0].id == "object"
                and not node.keywords
            ):
                out.append((node, "inheritance", ""))  # header-only edit, done in _apply
    return out


def _apply(src: _Source, edits: list[tuple[ast.AST, str, str]]) -> tuple[str, list[Rewrite]]:
    spans: list[tuple[int, int, str, ast.AST, str]] = []
    for node, key, text in edits:
        if isinstance(node, ast.ClassDef):
            line_start = src.starts[node.lineno - 1]
            header = re.compile(rf"class\s+{re.escape(node.name)}\s*\(\s*object\s*\)")
            m = header.search(src.text, line_start)
            if m is None:
                continue
            spans.append((m.start(), m.end(), f"class {node.name}", node, key))
        else:
            start, end = src.span(node)
            spans.append((start, end, text, node, key))
    spans.sort(key=lambda s: (s[0], -s[1]))
    kept: list[tuple[int, int, str, ast.AST, str]] = []
    for span in spans:
        if kept and span[0] < kept[-1][1]:
            continue  # nested inside an earlier (outer) rewrite: a later pass handles it
        kept.append(span)
    text = src.text
    for start, end, replacement, _node, _key in reversed(kept):
        text = text[:start] + replacement + text[end:]
    rewrites = [
        Rewrite(
            node.lineno,  # type: ignore[attr-defined]
            src.col(node.lineno, node.col_offset) + 1,  # type: ignore[attr-defined]
            key,
            src.text[start:end],
            replacement,
        )
        for start, end, replacement, node, key in kept
    ]
    return text, rewrites
