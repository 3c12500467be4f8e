"""Which tool calls a script awaits, found statically from the exact source Monty runs.

Monty 1.4 stops at every ``call_tool(...)`` the same way, whether the script uses the
result at once (``x = call_tool(...)``) or awaits it (``await call_tool(...)``,
``await asyncio.gather(call_tool(...), ...)``). The native engine answers the first kind
with the tool's value and starts the second kind as a future, so that several awaited
calls run concurrently (one ``Gather`` step). This module tells them apart: it returns the
UTF-8 byte offsets where the awaited call expressions start (Monty's ``position.start``).

A call expression is awaited ("deferred") when it stands where an awaitable is expected:

- directly under ``await`` (``await call_tool(...)``);
- as an argument of ``gather(...)`` / ``asyncio.gather(...)`` / ``asyncio.create_task(...)``
  / ``asyncio.ensure_future(...)`` (also under another name: ``from asyncio import gather as
  g``, ``g = asyncio.gather``), also inside a starred list, tuple, comprehension or
  conditional expression there (never inside a nested ``lambda`` or ``def``, and never as
  an argument of another call);
- assigned to a name (``t = call_tool(...)``, ``tasks.append(call_tool(...))``,
  ``tasks = [call_tool(...) for ...]``, ``tasks[k] = ...``, ``tasks += [...]``) that the
  script elsewhere awaits or passes to ``gather`` (also through ``for t in tasks: await t``
  and ``tasks.values()``).

Any call expression in such a place counts, whatever it calls: only calls that reach the
host as tool calls are affected, so the functions style (``await search(q)``) needs nothing
more. Every other call stays synchronous.
"""

from __future__ import annotations

import ast
import re

__all__ = ("deferred_offsets",)

_AWAIT = re.compile(r"\bawait\b")
_SPAWNERS = frozenset({"gather", "create_task", "ensure_future"})
_PASS_THROUGH = frozenset({"list", "tuple", "reversed", "sorted", "iter"})
_CONTAINER_VIEWS = frozenset({"values", "copy"})


def _line_starts(script: str) -> list[int]:
    """Byte offset of each line's start, lines split as CPython's tokenizer splits them
    (``\\r\\n``, ``\\r``, ``\\n``)."""
    data = script.encode("utf-8", "surrogatepass")
    starts = [0, 0]  # 1-based: starts[1] is line 1
    i, n = 0, len(data)
    while i < n:
        c = data[i]
        if c == 0x0D:  # \r or \r\n
            i += 2 if i + 1 < n and data[i + 1] == 0x0A else 1
            starts.append(i)
        elif c == 0x0A:
            i += 1
            starts.append(i)
        else:
            i += 1
    return starts


def _spawner(node: ast.Call, aliases: frozenset[str] | set[str] = frozenset()) -> bool:
    func = node.func
    if isinstance(func, ast.Name):
        return func.id in _SPAWNERS or func.id in aliases
    return isinstance(func, ast.Attribute) and func.attr in _SPAWNERS


def _spawner_aliases(tree: ast.AST) -> set[str]:
    """Other names the script gives ``gather`` / ``create_task`` / ``ensure_future``:
    ``from asyncio import gather as g``, ``g = asyncio.gather``."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            names.update(a.asname for a in node.names if a.name in _SPAWNERS and a.asname)
        elif isinstance(node, ast.Assign) and isinstance(node.value, (ast.Name, ast.Attribute)):
            value = node.value
            if (value.id if isinstance(value, ast.Name) else value.attr) in _SPAWNERS:
                names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return names


class _Finder:
    def __init__(self) -> None:
        self.calls: set[ast.Call] = set()
        self.names: set[str] = set()  # names whose value (or items) the script awaits

    def awaitable(self, node: ast.expr | None) -> None:
        """``node`` stands where an awaitable (or a collection of them) is expected."""
        if node is None:
            return
        if isinstance(node, ast.Call):
            self.calls.add(node)
            func = node.func
            if isinstance(func, ast.Name) and func.id in _PASS_THROUGH:
                for arg in node.args:
                    self.awaitable(arg)
            elif isinstance(func, ast.Attribute) and func.attr in _CONTAINER_VIEWS:
                self.awaitable(func.value)
        elif isinstance(node, ast.Name):
            self.names.add(node.id)
        elif isinstance(node, ast.Starred):
            self.awaitable(node.value)
        elif isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            for elt in node.elts:
                self.awaitable(elt)
        elif isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp)):
            self.awaitable(node.elt)
        elif isinstance(node, ast.DictComp):
            self.awaitable(node.value)
        elif isinstance(node, ast.Dict):
            for value in node.values:
                self.awaitable(value)
        elif isinstance(node, ast.IfExp):
            self.awaitable(node.body)
            self.awaitable(node.orelse)
        elif isinstance(node, ast.NamedExpr):
            self.names.add(node.target.id)
            self.awaitable(node.value)
        elif isinstance(node, ast.Subscript):
            self.awaitable(node.value)
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):  # tasks_a + tasks_b
            self.awaitable(node.left)
            self.awaitable(node.right)


def _target_names(target: ast.expr) -> list[str]:
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, ast.Subscript):  # tasks[k] = ...
        return _target_names(target.value)
    if isinstance(target, ast.Starred):
        return _target_names(target.value)
    return []


def _assign(finder: _Finder, target: ast.expr, value: ast.expr | None) -> bool:
    """Marks ``value`` awaitable where ``target`` names an awaited name; True when it did."""
    if value is None:
        return False
    if isinstance(target, (ast.Tuple, ast.List)):
        if isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(target.elts):
            return any([_assign(finder, t, v) for t, v in zip(target.elts, value.elts, strict=True)])
        return False
    if any(n in finder.names for n in _target_names(target)):
        before = len(finder.calls), len(finder.names)
        finder.awaitable(value)
        return (len(finder.calls), len(finder.names)) != before
    return False


def deferred_offsets(script: str, tree: ast.Module | None = None) -> tuple[int, ...]:
    """The sorted UTF-8 byte offsets of the call expressions ``script`` awaits (see the
    module docstring); ``()`` for a script without ``await`` or one CPython cannot parse.

    Args:
        script: the exact source the interpreter runs.
        tree: ``ast.parse(script)`` when the caller has it already.
    """
    if "await" not in script or not _AWAIT.search(script):
        return ()
    if tree is None:
        try:
            tree = ast.parse(script)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return ()
    finder = _Finder()
    aliases = _spawner_aliases(tree)
    assigns: list[tuple[ast.expr, ast.expr | None]] = []
    loops: list[tuple[ast.expr, ast.expr]] = []
    appends: list[tuple[str, ast.expr]] = []  # tasks.append(value) / tasks.extend(values)
    for node in ast.walk(tree):
        if isinstance(node, ast.Await):
            finder.awaitable(node.value)
        elif isinstance(node, ast.Call):
            if _spawner(node, aliases):
                for arg in node.args:
                    finder.awaitable(arg)
            func = node.func
            if (
                isinstance(func, ast.Attribute)
                and isinstance(func.value, ast.Name)
                and func.attr in ("append", "extend", "insert", "add")
                and node.args
            ):
                appends.append((func.value.id, node.args[-1]))
        elif isinstance(node, ast.Assign):
            assigns.extend((t, node.value) for t in node.targets)
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
            assigns.append((node.target, node.value))
        elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
            loops.append((node.target, node.iter))
    changed = True
    while changed:
        changed = False
        for target, value in assigns:
            changed |= _assign(finder, target, value)
        for target, iterable in loops:  # for t in tasks: await t
            if any(n in finder.names for n in _target_names(target)):
                before = len(finder.names), len(finder.calls)
                finder.awaitable(iterable)
                changed |= (len(finder.names), len(finder.calls)) != before
        for name, value in appends:
            if name in finder.names:
                before = len(finder.calls), len(finder.names)
                finder.awaitable(value)
                changed |= (len(finder.calls), len(finder.names)) != before
    if not finder.calls:
        return ()
    starts = _line_starts(script)
    offsets = {starts[c.lineno] + c.col_offset for c in finder.calls if c.lineno < len(starts)}
    return tuple(sorted(offsets))
