"""The static subset check: what the pinned Monty cannot run, found before running.

Every detector and rewriter here is keyed to an entry of ``SUBSET`` (``_subset.py``), the one
table that also renders the language section of the prompt and that the tests probe against
the real interpreter. ``check_script`` parses a script with CPython's ``ast``, applies the
same-meaning rewrites (when asked), and returns one ``Finding`` per remaining construct, each
with its 1-based line and column and what to write instead.

A script CPython cannot parse is returned unchanged with no findings: Monty reports the
syntax error itself (and Monty's parser accepts a few things older CPythons do not).
"""

from __future__ import annotations

import _string  # type: ignore[import-not-found]
import ast
import functools
import queue
import re
import string
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field

from .._monty import remaining_stack
from ._subset import STDLIB_MODULES, SUBSET, SubsetEntry

__all__ = ("CheckResult", "Finding", "Rewrite", "check_script", "check_script_safely", "format_findings")

_ENTRIES: dict[str, SubsetEntry] = {e.key: e for e in SUBSET if e.key}


@dataclass(frozen=True, slots=True)
class Finding:
    """One construct the pinned Monty cannot run.

    Attributes:
        line: 1-based line of the construct.
        column: 1-based column (in characters) of the construct.
        key: the ``SubsetEntry.key`` it belongs to.
        message: what is wrong and what to write instead.
    """

    line: int
    column: int
    key: str
    message: str

    def __str__(self) -> str:
        return f"line {self.line}, column {self.column}: {self.message}"


@dataclass(frozen=True, slots=True)
class Rewrite:
    """One same-meaning rewrite applied to the script (1-based line and column in the text the
    rewriting pass read: the original script for the first pass)."""

    line: int
    column: int
    key: str
    before: str
    after: str


@dataclass(frozen=True, slots=True)
class CheckResult:
    """The outcome of ``check_script``.

    Attributes:
        script: the script to run (rewritten when rewrites were applied).
        rewrites: the rewrites applied, in source order.
        findings: the constructs left that Monty cannot run; empty means the check passed.
    """

    script: str
    rewrites: tuple[Rewrite, ...] = ()
    findings: tuple[Finding, ...] = field(default_factory=tuple)


def format_findings(findings: tuple[Finding, ...] | list[Finding]) -> str:
    """The corrective text fed back for ``findings`` (one line per finding)."""
    head = (
        "SubsetError: the script uses Python that this sandbox cannot run; nothing was executed. "
        "Fix each of these and send the whole script again:"
    )
    return "\n".join([head, *(f"- {f}" for f in findings)])


# ------------------------------------------------------------------ positions and text


class _Source:
    def __init__(self, text: str) -> None:
        self.text = text
        self.lines = text.splitlines(keepends=True)
        self.starts = [0]
        for line in self.lines:
            self.starts.append(self.starts[-1] + len(line))

    def col(self, lineno: int, byte_col: int) -> int:
        """0-based character column from ast's UTF-8 byte column."""
        if lineno - 1 >= len(self.lines):
            return byte_col
        return len(self.lines[lineno - 1].encode("utf-8")[:byte_col].decode("utf-8", "replace"))

    def offset(self, lineno: int, byte_col: int) -> int:
        return self.starts[lineno - 1] + self.col(lineno, byte_col)

    def span(self, node: ast.AST) -> tuple[int, int]:
        return (
            self.offset(node.lineno, node.col_offset),  # type: ignore[attr-defined]
            self.offset(node.end_lineno, node.end_col_offset),  # type: ignore[attr-defined]
        )


def _finding(src: _Source, node: ast.AST, key: str, message: str | None = None) -> Finding:
    entry = _ENTRIES[key]
    text = message or f"{entry.construct} cannot run here; instead: {entry.instead}"
    lineno = getattr(node, "lineno", 1)
    return Finding(lineno, src.col(lineno, getattr(node, "col_offset", 0)) + 1, key, text)


# ------------------------------------------------------------------ helpers

_BUILTIN_TYPES = {"str", "dict", "list", "int", "float", "set", "tuple", "bytes", "frozenset"}
_CALLABLE_TAKERS = {"sorted", "min", "max", "map", "filter"}
_METHOD_NAMES = {
    "get", "append", "extend", "items", "keys", "values", "pop", "update", "add", "upper", "lower", "strip",
    "lstrip", "rstrip", "split", "join", "startswith", "endswith", "replace", "count", "index", "find",
    "title", "capitalize", "isdigit", "isalpha", "format", "setdefault", "insert", "remove", "discard",
    "copy", "sort", "casefold", "splitlines", "encode", "decode", "zfill",
}  # fmt: skip
_OPERATOR_METHODS = {
    "__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__", "__len__", "__getitem__", "__setitem__",
    "__delitem__", "__iter__", "__next__", "__contains__", "__add__", "__sub__", "__mul__", "__truediv__",
    "__floordiv__", "__mod__", "__pow__", "__radd__", "__rsub__", "__rmul__", "__call__", "__hash__",
    "__bool__", "__neg__", "__abs__", "__and__", "__or__", "__iadd__", "__format__", "__getattr__",
}  # fmt: skip
_MISSING_BUILTINS = {"eval": "missing_builtin", "exec": "missing_builtin", "globals": "missing_builtin"}
_MISSING_BUILTINS |= {"input": "missing_builtin", "__import__": "missing_builtin", "locals": "missing_builtin"}
_MISSING_BUILTINS |= {"format": "missing_builtin_2", "callable": "missing_builtin_2"}
_MISSING_BUILTINS |= {"vars": "missing_builtin_2", "super": "missing_builtin_2"}
_STDLIB_ALTERNATIVES = {
    "collections": "plain dicts and lists: counts[k] = counts.get(k, 0) + 1; d.setdefault(k, []).append(v)",
    "itertools": "nested loops or comprehensions (zip, enumerate and range are builtins)",
    "functools": "a plain loop instead of reduce; call functions directly instead of partial",
    "dataclasses": "a plain class with __init__, or a dict",
    "time": "datetime for dates; there is no sleep",
    "random": "a fixed choice or a value passed in by a tool; there is no random source",
    "statistics": "sum(xs) / len(xs) for the mean; sorted(xs) for the median",
    "string": "string literals such as 'abcdefghijklmnopqrstuvwxyz'",
    "operator": "a lambda: key=lambda x: x[1]",
    "copy": "list(x) / dict(x) for a shallow copy, or json.loads(json.dumps(x)) for a deep one",
    "subprocess": "nothing: there is no shell or subprocess here; use a tool",
    "socket": "nothing: there is no network here; use a tool",
    "urllib": "nothing: there is no network here; use a tool",
    "http": "nothing: there is no network here; use a tool",
}
_NO_RAISE_HANDLERS = {"ImportError", "ModuleNotFoundError", "Exception", "BaseException"}


def _is_pure(node: ast.AST) -> bool:
    """An expression whose evaluation has no effects and gives the same value each time."""
    for sub in ast.walk(node):
        if isinstance(sub, (ast.Call, ast.NamedExpr, ast.Await, ast.Yield, ast.YieldFrom, ast.Lambda)):
            return False
        if isinstance(sub, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            return False
    return True


_walked: tuple[ast.AST, list[ast.AST], dict[ast.AST, ast.AST]] | None = None
_walk_lock = threading.Lock()


def _walk_once(tree: ast.AST) -> tuple[list[ast.AST], dict[ast.AST, ast.AST]]:
    """Every node of ``tree`` (``ast.walk`` order) and each node's parent, computed once per
    tree: the detectors and rewriters all scan the same tree."""
    global _walked
    with _walk_lock:
        cached = _walked
        if cached is not None and cached[0] is tree:
            return cached[1], cached[2]
    nodes: list[ast.AST] = []
    parents: dict[ast.AST, ast.AST] = {}
    todo = [tree]
    i = 0
    while i < len(todo):
        node = todo[i]
        i += 1
        nodes.append(node)
        for child in ast.iter_child_nodes(node):
            parents[child] = node
            todo.append(child)
    with _walk_lock:
        _walked = (tree, nodes, parents)
    return nodes, parents


def _nodes(tree: ast.AST) -> list[ast.AST]:
    return _walk_once(tree)[0]


def _imported_names(tree: ast.AST) -> set[str]:
    names: set[str] = set()
    for node in _nodes(tree):
        if isinstance(node, ast.Import):
            names |= {(a.asname or a.name.split(".")[0]) for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            names |= {(a.asname or a.name) for a in node.names}
    return names


def _defined_names(tree: ast.AST) -> set[str]:
    names: set[str] = set()
    for node in _nodes(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
    return names | _imported_names(tree)


def _parents(tree: ast.AST) -> dict[ast.AST, ast.AST]:
    return _walk_once(tree)[1]


# ------------------------------------------------------------------ rewriters


def _unparse_fstring(parts: list[ast.expr]) -> str | None:
    node = ast.JoinedStr(values=parts)
    try:
        text = ast.unparse(node)
        ast.parse(text, mode="eval")
    except (ValueError, SyntaxError):  # pragma: no cover - quote clash the unparser cannot solve
        return None
    return text


def _field_expr(field_name: str, args: list[ast.expr], kwargs: dict[str, ast.expr], auto: list[int]) -> ast.expr:
    first, rest = _string.formatter_field_name_split(field_name)
    if first == "":
        if auto[0] < 0:
            raise ValueError("mixed numbering")
        index: int | str = auto[0]
        auto[0] += 1
        auto[1] = 1
    else:
        index = first
        if isinstance(index, int):
            if auto[1]:
                raise ValueError("mixed numbering")
            auto[0] = -1
    expr = args[index] if isinstance(index, int) else kwargs[index]
    expr = ast.parse(ast.unparse(expr), mode="eval").body  # a fresh copy
    for is_attr, key in rest:
        if is_attr:
            expr = ast.Attribute(value=expr, attr=key, ctx=ast.Load())
        else:
            expr = ast.Subscript(value=expr, slice=ast.Constant(key), ctx=ast.Load())
    return expr


def _format_parts(
    template: str, args: list[ast.expr], kwargs: dict[str, ast.expr], auto: list[int], used: list[ast.expr]
) -> list[ast.expr]:
    parts: list[ast.expr] = []
    for literal, field_name, spec, conversion in string.Formatter().parse(template):
        if literal:
            parts.append(ast.Constant(literal))
        if field_name is None:
            continue
        expr = _field_expr(field_name, args, kwargs, auto)
        used.append(expr)
        spec_node = None
        if spec:
            spec_parts = _format_parts(spec, args, kwargs, auto, used)
            spec_node = ast.JoinedStr(values=spec_parts)
        conv = {None: -1, "s": ord("s"), "r": ord("r"), "a": ord("a")}[conversion]
        parts.append(ast.FormattedValue(value=expr, conversion=conv, format_spec=spec_node))
    return parts


def _args_safe(args: list[ast.expr], kwargs: dict[str, ast.expr], used_sources: list[str]) -> bool:
    """Inlining the arguments keeps the meaning: each impure one is used exactly once, in order."""
    given = [*args, *kwargs.values()]
    impure = [ast.unparse(a) for a in given if not _is_pure(a)]
    if not impure:
        return True
    order = [s for s in used_sources if s in impure]
    return order == impure and len(set(impure)) == len(impure)


def _rewrite_str_format(node: ast.Call) -> str | None:
    func = node.func
    if not (isinstance(func, ast.Attribute) and func.attr == "format"):
        return None
    if not (isinstance(func.value, ast.Constant) and isinstance(func.value.value, str)):
        return None
    if any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords):
        return None
    args = list(node.args)
    kwargs = {k.arg: k.value for k in node.keywords if k.arg is not None}
    used: list[ast.expr] = []
    try:
        parts = _format_parts(func.value.value, args, kwargs, [0, 0], used)
    except (ValueError, KeyError, IndexError, TypeError):
        return None
    if not _args_safe(args, kwargs, [ast.unparse(u) for u in used]):
        return None
    return _unparse_fstring(parts)


_PERCENT = re.compile(r"%(?:\((?P<key>[^)]*)\))?(?P<flags>[#0\- +]*)(?P<width>\d+)?(?:\.(?P<prec>\d+))?(?P<type>.)")
_SCALAR_BUILTINS = {"str", "int", "float", "len", "repr", "round", "abs", "sum", "bool"}
_NOT_TUPLE = (ast.JoinedStr, ast.Constant, ast.List, ast.Dict, ast.ListComp, ast.DictComp, ast.Set, ast.Compare)


def _rewrite_percent(node: ast.BinOp) -> str | None:
    if not (isinstance(node.op, ast.Mod) and isinstance(node.left, ast.Constant)):
        return None
    template = node.left.value
    if not isinstance(template, str):
        return None
    specs = list(_PERCENT.finditer(template))
    real = [m for m in specs if m.group("type") != "%"]
    right = node.right
    keyed = [m for m in real if m.group("key") is not None]
    values: list[ast.expr]
    by_key: dict[str, ast.expr] = {}
    if keyed:
        if len(keyed) != len(real) or not isinstance(right, ast.Dict) or None in right.keys:
            return None
        for k, v in zip(right.keys, right.values, strict=True):
            if not (isinstance(k, ast.Constant) and isinstance(k.value, str)):
                return None
            by_key[k.value] = v
        if not all(_is_pure(v) for v in right.values):
            return None
        values = []
    elif isinstance(right, ast.Tuple):
        if any(isinstance(e, ast.Starred) for e in right.elts):
            return None
        values = list(right.elts)
    elif (
        isinstance(right, _NOT_TUPLE) and not (isinstance(right, ast.Constant) and isinstance(right.value, tuple))
    ) or (isinstance(right, ast.Call) and isinstance(right.func, ast.Name) and right.func.id in _SCALAR_BUILTINS):
        values = [right]
    else:
        return None
    if not keyed and len(values) != len(real):
        return None
    parts: list[ast.expr] = []
    pos = 0
    index = 0
    for m in specs:
        if m.start() > pos:
            parts.append(ast.Constant(template[pos : m.start()]))
        pos = m.end()
        kind = m.group("type")
        if kind == "%":
            if m.group(0) != "%%":
                return None
            parts.append(ast.Constant("%"))
            continue
        if m.group("key") is not None:
            if m.group("key") not in by_key:
                return None
            expr = ast.parse(ast.unparse(by_key[m.group("key")]), mode="eval").body
        else:
            expr = values[index]
            index += 1
        formatted = _percent_field(expr, m.group("flags"), m.group("width"), m.group("prec"), kind)
        if formatted is None:
            return None
        parts.append(formatted)
    if pos < len(template):
        parts.append(ast.Constant(template[pos:]))
    return _unparse_fstring(parts)


def _percent_field(expr: ast.expr, flags: str, width: str | None, prec: str | None, kind: str) -> ast.expr | None:
    align = "<" if "-" in flags else ""
    sign = "+" if "+" in flags else (" " if " " in flags else "")
    zero = "0" if ("0" in flags and "-" not in flags) else ""
    alt = "#" if "#" in flags else ""
    width = width or ""
    if kind in "sra":
        if zero or sign or alt:
            return None
        spec = (align or (">" if width else "")) + width + (f".{prec}" if prec else "")
        conv = ord(kind)
    elif kind in "diu":
        if prec is not None or alt:
            return None
        if not (isinstance(expr, ast.Constant) and type(expr.value) is int):
            expr = ast.Call(func=ast.Name("int", ast.Load()), args=[expr], keywords=[])
        spec = align + sign + zero + width + "d"
        conv = -1
    elif kind in "fFeEgG":
        spec = align + sign + alt + zero + width + (f".{prec}" if prec is not None else "") + kind
        conv = -1
    elif kind in "xXo":
        if prec is not None:
            return None
        spec = align + sign + alt + zero + width + kind
        conv = -1
    else:
        return None
    if spec in ("", "d") and conv == -1 and kind in "diu":
        spec = ""
    spec_node = ast.JoinedStr(values=[ast.Constant(spec)]) if spec else None
    return ast.FormattedValue(value=expr, conversion=conv, format_spec=spec_node)


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


def _callable_slots(node: ast.Call) -> Iterator[ast.expr]:
    func = node.func
    name = func.id if isinstance(func, ast.Name) else (func.attr if isinstance(func, ast.Attribute) else "")
    if name in ("sorted", "min", "max", "sort"):
        for k in node.keywords:
            if k.arg == "key":
                yield k.value
    if isinstance(func, ast.Name) and name in ("map", "filter") and node.args:
        yield node.args[0]


# ------------------------------------------------------------------ the pass


def _rewrites(
    tree: ast.Module, src: _Source, modules: set[str], user_names: set[str]
) -> list[tuple[ast.AST, str, str]]:
    """(node, key, replacement) for every same-meaning rewrite, outermost first."""
    out: list[tuple[ast.AST, str, str]] = []
    for node in _nodes(tree):
        if isinstance(node, ast.Call):
            text = _rewrite_str_format(node)
            if text is not None:
                out.append((node, "str_format", text))
                continue
            if (
                isinstance(node.func, ast.Name)
                and node.func.id == "format"
                and "format" not in user_names
                and len(node.args) == 2
                and not node.keywords
                and isinstance(node.args[1], ast.Constant)
                and isinstance(node.args[1].value, str)
                and "{" not in node.args[1].value
                and "}" not in node.args[1].value
            ):
                spec = ast.JoinedStr(values=[ast.Constant(node.args[1].value)]) if node.args[1].value else None
                text = _unparse_fstring([ast.FormattedValue(value=node.args[0], conversion=-1, format_spec=spec)])
                if text is not None:
                    out.append((node, "missing_builtin_2", text))
                    continue
            for slot in _callable_slots(node):
                text = _rewrite_callable_value(slot, modules)
                if text is not None:
                    out.append((slot, "bound_method", text))
        elif isinstance(node, ast.BinOp):
            if isinstance(node.op, ast.Mod):
                text = _rewrite_percent(node)
                if text is not None:
                    out.append((node, "percent_format", text))
            elif (
                isinstance(node.op, ast.BitOr)
                and isinstance(node.left, (ast.Dict, ast.DictComp))
                and isinstance(node.right, (ast.Dict, ast.DictComp))
            ):
                out.append((node, "dict_merge", f"{{**{ast.unparse(node.left)}, **{ast.unparse(node.right)}}}"))
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


def _guarded_by_import_handler(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    child, parent = node, parents.get(node)
    while parent is not None:
        if isinstance(parent, ast.Try) and child in parent.body:
            for h in parent.handlers:
                names = [h.type] if not isinstance(h.type, ast.Tuple) else list(h.type.elts)
                if h.type is None or any(isinstance(n, ast.Name) and n.id in _NO_RAISE_HANDLERS for n in names):
                    return True
        child, parent = parent, parents.get(parent)
    return False


def _detect(tree: ast.Module, src: _Source, functions_style: bool) -> list[Finding]:
    findings: list[Finding] = []
    parents = _parents(tree)
    modules = _imported_names(tree)
    user_names = _defined_names(tree)
    allowed = set(STDLIB_MODULES)
    for node in _nodes(tree):
        if isinstance(node, ast.ClassDef):
            if node.bases or node.keywords:
                base = ", ".join(ast.unparse(b) for b in [*node.bases, *node.keywords])
                extra = (
                    "; for an error, raise ValueError('...') or RuntimeError('...')"
                    if any(isinstance(b, ast.Name) and b.id.endswith(("Error", "Exception")) for b in node.bases)
                    else ""
                )
                findings.append(
                    _finding(
                        src,
                        node,
                        "inheritance",
                        f"class {node.name}({base}): class inheritance is not available; "
                        f"write `class {node.name}:` without a base{extra}",
                    )
                )
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and item.name in _OPERATOR_METHODS:
                    findings.append(
                        _finding(
                            src,
                            item,
                            "operator_methods",
                            f"{node.name}.{item.name} is never called by the interpreter (operator methods are not "
                            "supported); write an ordinary method and call it explicitly",
                        )
                    )
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.decorator_list:
            for deco in node.decorator_list:
                name = ast.unparse(deco)
                if name in ("staticmethod", "classmethod"):
                    advice = "define a module-level function instead of the method"
                elif name == "property":
                    advice = f"write an ordinary method and call it: obj.{node.name}()"
                else:
                    advice = (
                        f"define {node.name} without it, then wrap it explicitly: {node.name} = {name}({node.name})"
                    )
                findings.append(_finding(src, deco, "decorator", f"the decorator @{name} is not available; {advice}"))
        elif isinstance(node, ast.Match):
            findings.append(_finding(src, node, "match", "match statements are not available; use an if/elif chain"))
        elif isinstance(node, (ast.Yield, ast.YieldFrom)):
            findings.append(
                _finding(src, node, "yield", "generators (yield) are not available; build a list and return it")
            )
        elif isinstance(node, ast.Delete):
            targets = ", ".join(ast.unparse(t) for t in node.targets)
            findings.append(
                _finding(
                    src,
                    node,
                    "del",
                    f"`del {targets}` is not available; for a dict or list item use .pop(key), "
                    "for a name rebind it (name = None)",
                )
            )
        elif isinstance(node, ast.Call):
            func = node.func
            if (
                isinstance(func, ast.Attribute)
                and func.attr == "format"
                and (
                    isinstance(func.value, ast.Constant)
                    or (isinstance(func.value, ast.Name) and func.value.id not in modules)
                )
            ):
                findings.append(
                    _finding(
                        src,
                        node,
                        "str_format",
                        "str.format() is not available; use an f-string: f'text {value:.2f}'",
                    )
                )
            elif isinstance(func, ast.Name) and func.id in _MISSING_BUILTINS and func.id not in user_names:
                if not functions_style:
                    key = _MISSING_BUILTINS[func.id]
                    alt = {
                        "format": "an f-string: f'{value:.2f}'",
                        "callable": "call it inside try/except TypeError, or check isinstance",
                        "super": "a plain class without a base (no super())",
                        "vars": "a dict you keep yourself",
                        "input": "there is no user input here; use the values you were given or a tool",
                    }.get(func.id, "write the code directly")
                    findings.append(_finding(src, node, key, f"{func.id}() is not available; instead: {alt}"))
            elif isinstance(func, ast.Name) and func.id == "print":
                if any(k.arg == "file" for k in node.keywords):
                    findings.append(
                        _finding(src, node, "print_file", "print(..., file=...) is not available; drop file=")
                    )
            elif isinstance(func, ast.Attribute) and func.attr == "sub" and isinstance(func.value, ast.Name):
                if func.value.id == "re" and len(node.args) >= 2:
                    repl = node.args[1]
                    if isinstance(repl, ast.Lambda) or (
                        isinstance(repl, ast.Name)
                        and any(isinstance(d, ast.FunctionDef) and d.name == repl.id for d in _nodes(tree))
                    ):
                        findings.append(_finding(src, node, "re_sub_callable"))
            for slot in _callable_slots(node):
                if isinstance(slot, ast.Attribute) and isinstance(slot.value, ast.Name):
                    if slot.value.id not in modules:
                        findings.append(_bound(src, slot))
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
            if isinstance(node.left, (ast.Constant, ast.JoinedStr)) and (
                isinstance(node.left, ast.JoinedStr) or isinstance(node.left.value, str)
            ):
                findings.append(
                    _finding(
                        src,
                        node,
                        "percent_format",
                        "%-formatting of strings is not available; use an f-string: f'{count:d} items, {ratio:.1f}'",
                    )
                )
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
            if isinstance(node.left, (ast.Dict, ast.DictComp)) or isinstance(node.right, (ast.Dict, ast.DictComp)):
                findings.append(
                    _finding(src, node, "dict_merge", "the dict | operator is not available; use {**a, **b}")
                )
        elif isinstance(node, (ast.AsyncWith, ast.AsyncFor)):
            kind = "async with" if isinstance(node, ast.AsyncWith) else "async for"
            findings.append(_finding(src, node, "syntax", f"`{kind}` is not available; use a plain with/for"))
        elif isinstance(node, ast.Constant) and isinstance(node.value, complex):
            findings.append(_finding(src, node, "syntax", "complex literals are not available; use floats"))
        elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Attribute):
            value = node.value
            if isinstance(value.value, ast.Name) and value.value.id not in modules and value.attr in _METHOD_NAMES:
                findings.append(_bound(src, value))
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            if isinstance(node, ast.ImportFrom) and any(a.name == "*" for a in node.names):
                findings.append(
                    _finding(src, node, "syntax", f"`from {node.module} import *` is not available; import the names")
                )
            if isinstance(node, ast.ImportFrom) and node.level:
                continue
            mods = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            for mod in mods:
                root = mod.split(".")[0]
                if root in allowed or root == "__future__" or _guarded_by_import_handler(node, parents):
                    continue
                if root in sys.stdlib_module_names:
                    alt = _STDLIB_ALTERNATIVES.get(root, _ENTRIES["stdlib_import"].instead)
                    msg = (
                        f"ModuleNotFoundError: module {root!r} is not available here "
                        f"(importable: {', '.join(STDLIB_MODULES)}); instead: {alt}"
                    )
                    findings.append(_finding(src, node, "stdlib_import", msg))
                else:
                    msg = (
                        f"ModuleNotFoundError: package {root!r} is not available here: no third-party packages and "
                        "nothing can be installed; "
                        "instead: " + _ENTRIES["third_party_import"].instead
                    )
                    findings.append(_finding(src, node, "third_party_import", msg))
    findings.sort(key=lambda f: (f.line, f.column))
    return findings


def _bound(src: _Source, node: ast.Attribute) -> Finding:
    owner = ast.unparse(node.value)
    if owner in _BUILTIN_TYPES:
        alt = f"lambda x: x.{node.attr}()"
    else:
        alt = f"lambda *args: {owner}.{node.attr}(*args)"
    return _finding(
        src,
        node,
        "bound_method",
        f"the method value {owner}.{node.attr} (not called) is not available; wrap it in a lambda: {alt}",
    )


def check_script(script: str, *, rewrite: bool = True, functions_style: bool = False) -> CheckResult:
    """Finds the constructs of ``SUBSET`` the pinned Monty cannot run, rewriting those that
    have a same-meaning rewrite first.

    Args:
        script: the script as the model wrote it.
        rewrite: apply the same-meaning rewrites (``SubsetEntry.rewrite``).
        functions_style: tools are bare functions, so calls of names Monty lacks (``input``,
            ``format``) may be tool calls and are not reported.

    Returns:
        The script to run, the rewrites applied and the findings left (empty when the script
        passes). A script CPython cannot parse comes back unchanged with no findings.
    """
    try:
        return _check(script, rewrite, functions_style)
    except (RecursionError, MemoryError):  # absurd nesting: Monty reports it itself
        return CheckResult(script)


def _check(script: str, rewrite: bool, functions_style: bool) -> CheckResult:
    try:
        tree = ast.parse(script)
    except (SyntaxError, ValueError):
        return CheckResult(script)
    applied: list[Rewrite] = []
    if rewrite:
        for _ in range(4):
            src = _Source(script)
            edits = _rewrites(tree, src, _imported_names(tree), _defined_names(tree))
            if not edits:
                break
            new_script, done = _apply(src, edits)
            try:
                new_tree = ast.parse(new_script)
            except SyntaxError:  # pragma: no cover - a rewrite must never break the parse
                break
            applied += done
            script, tree = new_script, new_tree
    findings = _detect(tree, _Source(script), functions_style)
    return CheckResult(script, tuple(applied), tuple(findings))


# ------------------------------------------------------------------ a stack the parser cannot overflow

_STACK_BYTES = 64 * 1024 * 1024
_jobs: queue.SimpleQueue[tuple[str, bool, bool, queue.SimpleQueue[CheckResult | BaseException]]] = queue.SimpleQueue()
_worker_lock = threading.Lock()
_worker: threading.Thread | None = None


def _serve() -> None:
    while True:
        script, rewrite, functions_style, reply = _jobs.get()
        try:
            reply.put(_cached_check(script, rewrite, functions_style))
        except BaseException as exc:
            reply.put(exc)


_INLINE_STACK = 6 * 1024 * 1024
"""Native stack (bytes) the calling thread must have left for the check to run on it: CPython's
parser stops deep nesting at its own limits (about 6,000 levels) well within this."""


@functools.lru_cache(maxsize=512)
def _cached_check(script: str, rewrite: bool, functions_style: bool) -> CheckResult:
    return check_script(script, rewrite=rewrite, functions_style=functions_style)


def check_script_safely(script: str, *, rewrite: bool = True, functions_style: bool = False) -> CheckResult:
    """``check_script`` without risk to the host's stack, memoized by script text.

    CPython's parser and AST builder recurse in C: on a small thread stack (a host may run
    the runtime on a 256 KiB thread) a deeply nested script would crash the process before
    CPython's own limits answer. On a thread with at least ``_INLINE_STACK`` bytes of stack
    left (a default 8 MiB thread) the check runs in place; on a smaller one it runs on a
    dedicated thread with a 64 MiB stack, where CPython's limits answer first (SyntaxError,
    RecursionError) and the script then goes to Monty unchanged, which reports it. Results
    are cached (512 scripts), so a script started again costs a dictionary lookup.
    """
    if (remaining_stack() or 0) >= _INLINE_STACK:
        return _cached_check(script, rewrite, functions_style)
    global _worker
    if _worker is None:
        with _worker_lock:
            if _worker is None:
                old = threading.stack_size()
                threading.stack_size(_STACK_BYTES)
                try:
                    worker = threading.Thread(target=_serve, name="codeact-subset-check", daemon=True)
                    worker.start()
                finally:
                    threading.stack_size(old)
                _worker = worker
    reply: queue.SimpleQueue[CheckResult | BaseException] = queue.SimpleQueue()
    _jobs.put((script, rewrite, functions_style, reply))  # the worker memoizes too
    result = reply.get()
    if isinstance(result, BaseException):
        raise result
    return result
