"""Generator expressions that could reach a tool: rewritten into loops, or refused.

The pinned Monty evaluates a generator expression eagerly, as a list: in
``any(call_tool("check", {"id": o}) for o in orders)`` every ``check`` runs, where CPython
stops at the first true one. A tool call CPython would not make is the worst thing a CodeAct
runtime can do, so every generator expression whose lazily evaluated part (its element, its
conditions, the iterables after the first) could reach a tool, directly, through one of the
script's functions, through a lambda or a name that holds one, or (functions style) through
a bare tool name, is handled here before anything runs:

- consumed whole by ``sorted``, ``list``, ``tuple``, ``set``, ``frozenset``, ``dict`` or
  ``str.join``, which CPython also runs element after element before anything else happens:
  it becomes the comprehension of the same elements, in place;
- consumed by ``any``, ``all``, ``next``, ``sum``, ``min`` or ``max`` in a statement that
  evaluates it first: the statement is preceded by the explicit loop (with CPython's
  short-circuit: the first true, the first false, the first element) and reads its result;
- anything else (an unconsumed or stored generator, ``zip``, a ``for`` over it, unpacking,
  one of those consumers where something else of the statement runs before it): a finding
  that shows the loop to write.

No generator expression that could reach a tool is left, so the same script makes CPython's
calls on a Monty whose generators are lazy too (and cannot pause inside ``sum`` or ``any``).
"""

from __future__ import annotations

import ast
import builtins
import copy
from dataclasses import dataclass
from typing import cast

from ._check_facts import Finding, Rewrite, _facts, _finding, _Source

__all__ = ("lazy_findings", "rewrite_lazy")

_BUILTIN_NAMES = frozenset(dir(builtins))
_IN_PLACE = {"sorted": "list", "list": "list", "tuple": "list", "set": "set", "frozenset": "set", "dict": "dict"}
"""Consumers that take every element before doing anything else -> the comprehension kind."""
_LOOPED = frozenset({"any", "all", "next", "sum", "min", "max"})
"""Consumers that stop early or fail part-way: an explicit loop before the statement."""
_WHY = {
    "any": "stops at the first true element",
    "all": "stops at the first false element",
    "next": "takes only the first element",
    "min": "compares each element as it comes",
    "max": "compares each element as it comes",
    "sum": "adds each element as it comes",
}


class _Reach:
    """Which calls of one script could reach a tool."""

    def __init__(self, tree: ast.Module, functions_style: bool) -> None:
        f = _facts(tree)
        self.functions_style = functions_style
        self.defined = f.defined
        self.imported = f.imported
        self.methods = f.methods
        self.attributes = f.attributes
        self.defs = f.defs
        self.has_tools = any(self._tool_name(n) for n in f.nodes if isinstance(n, ast.Name))
        self.reaching: set[str] = set()
        if not self.has_tools:
            return
        changed = True
        while changed:  # the script's functions that reach a tool, to a fixed point
            changed = False
            for name, d in f.defs.items():
                if name not in self.reaching and any(self.call(c) for c in ast.walk(d) if isinstance(c, ast.Call)):
                    self.reaching.add(name)
                    changed = True

    def _tool_name(self, node: ast.Name) -> bool:
        if node.id == "call_tool":
            return True
        return self.functions_style and node.id not in self.defined and node.id not in _BUILTIN_NAMES

    def call(self, node: ast.Call) -> bool:
        """Whether ``node`` could reach a tool (when unsure: whether the script has any)."""
        if not self.has_tools:
            return False
        func = node.func
        if isinstance(func, ast.Name):
            if self._tool_name(func):
                return True
            if func.id in self.defs:
                return func.id in self.reaching
            if func.id in self.imported:
                return False
            return func.id in self.defined  # a lambda, a parameter, a name holding a function
        if isinstance(func, ast.Attribute):
            if isinstance(func.value, ast.Name) and func.value.id in self.imported:
                return False  # a module's function
            return func.attr in self.methods or func.attr in self.attributes
        return True

    def lazy_part(self, gen: ast.GeneratorExp) -> bool:
        """Whether what a generator evaluates element by element could reach a tool."""
        parts: list[ast.AST] = [gen.elt]
        for k, comp in enumerate(gen.generators):
            parts += comp.ifs
            if k:
                parts.append(comp.iter)
        return any(self.call(c) for p in parts for c in ast.walk(p) if isinstance(c, ast.Call))


def _consumer(gen: ast.GeneratorExp, parents: dict[ast.AST, ast.AST], defined: set[str]) -> tuple[str, ast.Call] | None:
    """(the consumer's name, its call) when ``gen`` is the first argument of a consumer this
    module knows, with the arguments the consumer takes (``"".join`` is ``"join"``)."""
    call = parents.get(gen)
    if not isinstance(call, ast.Call) or not call.args or call.args[0] is not gen:
        return None
    func = call.func
    if isinstance(func, ast.Attribute) and func.attr == "join" and len(call.args) == 1 and not call.keywords:
        return ("join", call) if isinstance(func.value, (ast.Constant, ast.Name)) else None
    if not isinstance(func, ast.Name) or func.id in defined:
        return None
    name, extra, words = func.id, len(call.args) - 1, {k.arg for k in call.keywords}
    allowed = {
        "any": (0, set()),
        "all": (0, set()),
        "next": (1, set()),
        "sum": (1, {"start"}),
        "min": (0, {"default", "key"}),
        "max": (0, {"default", "key"}),
        "sorted": (0, {"key", "reverse"}),
        "list": (0, set()),
        "tuple": (0, set()),
        "set": (0, set()),
        "frozenset": (0, set()),
        "dict": (0, set()),
    }.get(name)
    if allowed is None or extra > allowed[0] or not words <= allowed[1]:
        return None
    if name == "sum" and extra and words:
        return None
    return name, call


def _inert(node: ast.AST) -> bool:
    """An expression whose evaluation calls nothing (a constant, a name, a display of those)."""
    if isinstance(node, (ast.Constant, ast.Name)):
        return True
    if isinstance(node, ast.UnaryOp):  # a signed literal (`-1`); an operator on a name may call a method
        return isinstance(node.operand, ast.Constant)
    if isinstance(node, ast.Attribute):
        return _inert(node.value)
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        return all(_inert(e) for e in node.elts)
    if isinstance(node, ast.Dict):
        return all(k is None or _inert(k) for k in node.keys) and all(_inert(v) for v in node.values)
    return False


def _in_order(node: ast.AST) -> list[ast.AST] | None:
    """The sub-expressions of ``node`` that always run, in CPython's order; None when the
    first one alone always runs (a condition, ``and``/``or``) or the node opens a scope."""
    if isinstance(node, ast.Dict):
        return [x for k, v in zip(node.keys, node.values, strict=True) for x in (k, v) if x is not None]
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        return list(node.elts)
    if isinstance(node, ast.Call):
        return [node.func, *node.args, *(k.value for k in node.keywords)]
    if isinstance(node, ast.BinOp):
        return [node.left, node.right]
    if isinstance(node, ast.Compare):
        return [node.left, *node.comparators]
    if isinstance(node, (ast.UnaryOp, ast.Starred, ast.Attribute, ast.FormattedValue, ast.Await)):
        return [node.operand if isinstance(node, ast.UnaryOp) else node.value]
    if isinstance(node, ast.Subscript):
        return [node.value, node.slice]
    if isinstance(node, ast.BoolOp):
        return [node.values[0]]
    if isinstance(node, ast.IfExp):
        return [node.test]
    return None


def _runs_first(root: ast.AST, target: ast.AST) -> bool:
    """Whether ``target`` (inside ``root``) always runs, and nothing that calls runs before it."""
    node = root
    while node is not target:
        children = _in_order(node)
        if children is None:
            return False
        for child in children:
            if child is target or any(n is target for n in ast.walk(child)):
                node = child
                break
            if not _inert(child):
                return False
        else:
            return False
    return True


def _hoist_root(stmt: ast.stmt, src: _Source) -> ast.AST | None:
    """The expression of ``stmt`` evaluated first, when a loop may go before ``stmt``."""
    line = src.lines[stmt.lineno - 1] if stmt.lineno - 1 < len(src.lines) else ""
    column = src.col(stmt.lineno, stmt.col_offset)
    if line[:column].strip():
        return None  # after a `;` or on the line of a compound statement's header
    if isinstance(stmt, ast.If):
        return None if line[column:].startswith("elif") else stmt.test
    if isinstance(stmt, (ast.Expr, ast.Return)):
        return stmt.value
    if isinstance(stmt, ast.Assign):
        return stmt.value
    if isinstance(stmt, ast.AnnAssign) and stmt.simple:
        return stmt.value
    return None


class _Rename(ast.NodeTransformer):
    def __init__(self, names: dict[str, str]) -> None:
        self.names = names

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if node.id in self.names:
            return ast.copy_location(ast.Name(self.names[node.id], node.ctx), node)
        return node


def _targets(gen: ast.GeneratorExp) -> set[str]:
    return {n.id for c in gen.generators for n in ast.walk(c.target) if isinstance(n, ast.Name)}


def _rebinds(gen: ast.GeneratorExp, names: set[str]) -> bool:
    """Whether a scope inside ``gen`` binds one of ``names`` again (the rename would be wrong)."""
    for node in ast.walk(gen):
        if node is gen:
            continue
        if isinstance(node, ast.Lambda) and names & {a.arg for a in ast.walk(node.args) if isinstance(a, ast.arg)}:
            return True
        if isinstance(node, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)) and names & _targets(
            node  # type: ignore[arg-type]
        ):
            return True
    return False


@dataclass(frozen=True, slots=True)
class _Names:
    """The names a loop binds: its result, its flag, the element, its key, the key function,
    and the loop variables' new names (none: they keep theirs)."""

    result: str
    found: str
    item: str
    key: str
    key_fn: str
    loop: dict[str, str]


def _loop(kind: str, gen: ast.GeneratorExp, call: ast.Call, names: _Names) -> list[ast.stmt]:
    """The statements that compute ``call`` (consumer ``kind`` over ``gen``) into
    ``names.result``, element by element, as CPython's consumer does."""
    first_iter = ast.unparse(gen.generators[0].iter)  # evaluated in the enclosing scope: not renamed
    gen = cast(ast.GeneratorExp, _Rename(names.loop).visit(copy.deepcopy(gen)))
    elt = ast.unparse(gen.elt)
    r, f, x, k = names.result, names.found, names.item, names.key
    nested = len(gen.generators) > 1
    post: list[str] = []
    if kind in ("any", "all"):
        value, test = ("True", elt) if kind == "any" else ("False", f"not ({elt})")
        pre = [f"{r} = {'False' if kind == 'any' else 'True'}"] + ([f"{f} = False"] if nested else [])
        body = [f"if {test}:", f"    {r} = {value}"] + ([f"    {f} = True"] if nested else []) + ["    break"]
    elif kind == "next":
        default = call.args[1:]
        pre = [f"{f} = False"] + ([f"{r} = {ast.unparse(default[0])}"] if default else [])
        body = [f"{r} = {elt}", f"{f} = True", "break"]
        if not default:
            post = [f"if not {f}:", "    raise StopIteration"]
    elif kind == "sum":
        start = call.args[1:] or [kw.value for kw in call.keywords]
        pre, body = [f"{r} = {ast.unparse(start[0]) if start else 0}"], [f"{r} = {r} + ({elt})"]
        nested = False
    else:  # min / max: the first element, then each one that compares lower / higher
        op = "<" if kind == "min" else ">"
        key_fn = next((kw.value for kw in call.keywords if kw.arg == "key"), None)
        fallback = next((kw.value for kw in call.keywords if kw.arg == "default"), None)
        pre = [f"{f} = False"]
        if key_fn is None:
            body = [f"{x} = {elt}", f"if not {f} or {x} {op} {r}:", f"    {r} = {x}", f"    {f} = True"]
        else:
            pre.append(f"{names.key_fn} = {ast.unparse(key_fn)}")
            body = [
                f"{x} = {elt}",
                f"{k}_new = {names.key_fn}({x})",
                f"if not {f} or {k}_new {op} {k}:",
                f"    {r}, {k} = {x}, {k}_new",
                f"    {f} = True",
            ]
        empty = ast.unparse(fallback) if fallback is not None else f"{kind}(())"
        post = [f"if not {f}:", f"    {r} = {empty}"]
        nested = False
    lines: list[str] = []
    depth = 0
    for i, comp in enumerate(gen.generators):
        iterable = first_iter if i == 0 else ast.unparse(comp.iter)
        lines.append("    " * depth + f"for {ast.unparse(comp.target)} in {iterable}:")
        depth += 1
        for cond in comp.ifs:
            lines.append("    " * depth + f"if {ast.unparse(cond)}:")
            depth += 1
    lines += ["    " * depth + line for line in body]
    if nested:  # a short-circuit leaves every enclosing loop too
        for i in range(len(gen.generators) - 1, 0, -1):
            indent = "    " * sum(1 + len(c.ifs) for c in gen.generators[:i])
            lines += [f"{indent}if {f}:", f"{indent}    break"]
    return ast.parse("\n".join(pre + lines + post)).body


@dataclass(frozen=True, slots=True)
class _Site:
    gen: ast.GeneratorExp
    consumer: tuple[str, ast.Call] | None
    stmt: ast.stmt | None
    reaches: bool  # False: a ``next()`` of a generator that reaches no tool (a list here: it fails)


def _sites(tree: ast.Module, functions_style: bool) -> list[_Site]:
    """Every generator expression whose lazy part could reach a tool, outermost first."""
    f = _facts(tree)
    gens = [n for n in f.nodes if isinstance(n, ast.GeneratorExp)]
    if not gens:
        return []
    reach = _Reach(tree, functions_style)
    out = []
    for gen in gens:
        consumer = _consumer(gen, f.parents, f.defined)
        reaches = reach.lazy_part(gen)
        if not reaches and (consumer is None or consumer[0] != "next"):
            continue
        stmt: ast.AST | None = f.parents.get(gen)
        while stmt is not None and not isinstance(stmt, ast.stmt):
            stmt = f.parents.get(stmt)
        out.append(_Site(gen, consumer, stmt if isinstance(stmt, ast.stmt) else None, reaches))
    return out


def rewrite_lazy(
    tree: ast.Module, src: _Source, functions_style: bool, serial: int
) -> tuple[str, list[Rewrite]] | None:
    """One pass of the rewrites (None when there is none to make). ``serial`` numbers the
    names the loops bind, so that passes do not reuse them."""
    f = _facts(tree)
    edits: list[tuple[int, int, str, ast.AST]] = []  # (start, end, replacement, node)
    hoisted: set[ast.AST] = set()
    for site in _sites(tree, functions_style):
        if site.consumer is None or site.stmt is None:
            continue
        kind, call = site.consumer
        gen = site.gen
        if any(isinstance(n, (ast.Await, ast.Yield, ast.YieldFrom)) for n in ast.walk(gen)) or any(
            c.is_async for c in gen.generators
        ):
            continue
        if kind in _IN_PLACE or kind == "join":
            comp = _IN_PLACE.get(kind, "list")
            new: ast.expr
            if comp == "dict":
                if not (isinstance(gen.elt, ast.Tuple) and len(gen.elt.elts) == 2):
                    continue
                new = ast.DictComp(gen.elt.elts[0], gen.elt.elts[1], gen.generators)
                replacement = ast.unparse(new)
                start, end = src.span(call)
                edits.append((start, end, replacement, call))
                continue
            new = (ast.SetComp if comp == "set" else ast.ListComp)(gen.elt, gen.generators)
            replacement = ast.unparse(new)
            if kind == "frozenset":
                replacement = f"frozenset({replacement})"
            elif kind == "set":
                pass
            else:
                replacement = ast.unparse(ast.Call(call.func, [new], call.keywords))
            start, end = src.span(call)
            edits.append((start, end, replacement, call))
            continue
        root = _hoist_root(site.stmt, src)
        extra = [*call.args[1:], *(kw.value for kw in call.keywords)]
        names = _targets(gen)
        if (
            root is None
            or site.stmt in hoisted
            or isinstance(f.parents.get(site.stmt), ast.ClassDef)
            or not _runs_first(root, call)
            or not all(_inert(a) or isinstance(a, ast.Lambda) for a in extra)
            or _rebinds(gen, names)
        ):
            if not site.reaches:  # no tool: the iterator of the list gives the same element
                wrapped = ast.Call(ast.Name("iter", ast.Load()), [gen], [])
                start, end = src.span(call)
                edits.append((start, end, ast.unparse(ast.Call(call.func, [wrapped, *call.args[1:]], [])), call))
            continue
        serial += 1
        tag = f"{kind}{serial}"
        loop = {n: f"_{n}_{serial}" for n in names}
        loop_names = _Names(f"_{tag}", f"_{tag}_found", f"_{tag}_item", f"_{tag}_key", f"_{tag}_key_fn", loop)
        stmts = _loop(kind, gen, call, loop_names)
        line_start = src.starts[site.stmt.lineno - 1]
        indent = src.lines[site.stmt.lineno - 1][: src.col(site.stmt.lineno, site.stmt.col_offset)]
        text = "".join(indent + line + "\n" for s in stmts for line in ast.unparse(s).splitlines())
        start, end = src.span(call)
        hoisted.add(site.stmt)
        edits.append((line_start, line_start, text, site.stmt))
        edits.append((start, end, loop_names.result, call))
    if not edits:
        return None
    edits.sort(key=lambda e: (e[0], e[0] != e[1], -e[1]))  # an insertion before what starts there
    kept: list[tuple[int, int, str, ast.AST]] = []
    for e in edits:
        if kept and e[0] < kept[-1][1]:
            continue  # inside an earlier edit: a later pass
        kept.append(e)
    text = src.text
    for start, end, replacement, _node in reversed(kept):
        text = text[:start] + replacement + text[end:]
    rewrites = [
        Rewrite(
            getattr(node, "lineno", 1),
            src.col(getattr(node, "lineno", 1), getattr(node, "col_offset", 0)) + 1,
            "lazy_genexp",
            src.text[start:end],
            replacement,
        )
        for start, end, replacement, node in kept
    ]
    return text, rewrites


def lazy_findings(tree: ast.Module, src: _Source, functions_style: bool) -> list[Finding]:
    """One finding per generator expression left that could reach a tool, with the loop to
    write instead."""
    out = []
    for site in _sites(tree, functions_style):
        kind = site.consumer[0] if site.consumer else ""
        gen = site.gen
        if kind in _LOOPED:
            assert site.consumer is not None
            why = _WHY[kind]
            names = _Names("result", "found", "item", "best_key", "key_fn", {})
            loop = _loop(kind, gen, site.consumer[1], names)
            then = "then use `result`"
        else:
            why = "runs none of them until it is consumed, and then one at a time"
            loop = ast.parse(_collect(gen)).body
            then = "then use `results`"
        text = "\n".join("      " + line for s in loop for line in ast.unparse(s).splitlines())
        if not site.reaches:  # only next(): it fails on the list Monty makes
            message = f"next() on a generator expression is not available here (it is a list); write the loop:\n{text}"
            out.append(_finding(src, site.consumer[1] if site.consumer else gen, "lazy_genexp", message))
            continue
        message = (
            "a generator expression that calls a tool: here it would make every call at once (generator "
            f"expressions are lists in this interpreter), where Python {why}; nothing was executed. "
            f"Write the loop instead, {then}:\n{text}"
        )
        out.append(_finding(src, site.consumer[1] if site.consumer else gen, "lazy_genexp", message))
    return out


def _collect(gen: ast.GeneratorExp) -> str:
    lines = ["results = []"]
    depth = 0
    for comp in gen.generators:
        lines.append("    " * depth + f"for {ast.unparse(comp.target)} in {ast.unparse(comp.iter)}:")
        depth += 1
        for cond in comp.ifs:
            lines.append("    " * depth + f"if {ast.unparse(cond)}:")
            depth += 1
    lines.append("    " * depth + f"results.append({ast.unparse(gen.elt)})")
    return "\n".join(lines)
