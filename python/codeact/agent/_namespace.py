"""A namespace that persists from one turn's script to the next (``persist_namespace=True``).

Each script runs as a fresh program, so persistence is carried as data, by source
transformation, which works on any runtime (Monty and CPython alike) and survives suspension
because the carried state lives in the checkpoint:

* **functions, classes and imports** defined at module level are kept as source and run
  again, before the next script, as its *prelude*;
* **variables** holding plain data (None, bool, int, float, str, bytes, list, tuple, dict
  with any plain keys, set, frozenset, at most ``MAX_VALUE_DEPTH`` deep) are kept as values
  and assigned in the prelude; other values (objects) are dropped. The turn record keeps
  them in the tagged JSON form (``encode_value``), so a tuple stays a tuple;
* an *epilogue* appended to the script captures the module-level variables when the script
  completes, next to its result. A script that fails keeps the namespace it started with.

Line numbers in tracebacks are shifted back, so the model sees its own script's lines.
"""

from __future__ import annotations

import ast
import math
import re
from dataclasses import dataclass, field
from typing import Any

from .._values import decode_value, encode_value, in_script_check

__all__ = ("Namespace", "Prepared", "prepare_script", "shift_traceback", "unwrap_result")

_MARK = "__codeact_namespace__"
# Plain data by the boundary's rules, at most MAX_VALUE_DEPTH deep.
_PLAIN_CHECK = in_script_check(f"{_MARK}_plain")


@dataclass
class Namespace:
    """What carries over between scripts: definitions as source, variables as values."""

    definitions: list[str] = field(default_factory=list)
    variables: dict[str, Any] = field(default_factory=dict)

    def to_state(self) -> dict[str, Any]:
        """The JSON form kept in the turn record: the variables in their tagged form
        (``"values"``); a variable whose form nests too deep for the record is dropped."""
        values: dict[str, Any] = {}
        for name, value in self.variables.items():
            try:
                values[name] = encode_value(value)
            except ValueError:
                continue
        return {"definitions": list(self.definitions), "values": values}

    @classmethod
    def from_state(cls, data: Any) -> Namespace:
        """``to_state``'s inverse; a record from before the tagged form (``"variables"``,
        plain JSON) is read as it was written."""
        if not isinstance(data, dict):
            return cls()
        if isinstance(data.get("values"), dict):
            variables = {name: decode_value(v) for name, v in data["values"].items()}
        else:
            variables = dict(data.get("variables", {}))
        return cls(list(data.get("definitions", [])), variables)


def _literal(value: Any) -> str:
    """Python source that evaluates to the plain value ``value``."""
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value) if value.bit_length() < 4000 else hex(value)  # str() stops at 4300 digits
    if isinstance(value, (set, frozenset)):
        inner = ", ".join(_literal(v) for v in value)
        if isinstance(value, frozenset):
            return f"frozenset({{{inner}}})" if value else "frozenset()"
        return f"{{{inner}}}" if value else "set()"
    if isinstance(value, float):
        if math.isnan(value):
            return "float('nan')"
        if math.isinf(value):
            return "float('inf')" if value > 0 else "-float('inf')"
        return repr(value)
    if isinstance(value, (list, tuple)):
        inner = ", ".join(_literal(v) for v in value)
        return f"[{inner}]" if isinstance(value, list) else f"({inner}{',' if len(value) == 1 else ''})"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_literal(k)}: {_literal(v)}" for k, v in value.items()) + "}"
    return repr(value)


def _assigned_names(tree: ast.Module) -> list[str]:
    names: list[str] = []

    def add_target(target: ast.AST) -> None:
        for node in ast.walk(target):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store) and node.id not in names:
                names.append(node.id)

    for stmt in tree.body:
        if isinstance(stmt, ast.Assign):
            for t in stmt.targets:
                add_target(t)
        elif isinstance(stmt, (ast.AugAssign, ast.AnnAssign)):
            add_target(stmt.target)
        elif isinstance(stmt, (ast.For, ast.AsyncFor)):
            add_target(stmt.target)
            for inner in ast.walk(stmt):
                if isinstance(inner, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
                    for t in inner.targets if isinstance(inner, ast.Assign) else [inner.target]:
                        add_target(t)
        elif isinstance(stmt, (ast.If, ast.While, ast.Try, ast.With)):
            for inner in ast.walk(stmt):
                if isinstance(inner, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
                    for t in inner.targets if isinstance(inner, ast.Assign) else [inner.target]:
                        add_target(t)
                elif isinstance(inner, (ast.For, ast.AsyncFor)):
                    add_target(inner.target)
        elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.NamedExpr):
            add_target(stmt.value.target)
    return [n for n in names if not n.startswith("__codeact")]


def _defined_name(source: str) -> str | None:
    match = re.match(r"(?:async\s+)?(?:def|class)\s+([A-Za-z_][A-Za-z0-9_]*)", source)
    return match.group(1) if match else None


@dataclass
class Prepared:
    """A script ready to run with the namespace, and how to read its outcome."""

    script: str
    prelude_lines: int
    definitions: list[str]

    def to_state(self) -> dict[str, Any]:
        return {"prelude_lines": self.prelude_lines, "definitions": list(self.definitions)}

    @classmethod
    def from_state(cls, data: Any) -> Prepared | None:
        if not isinstance(data, dict):
            return None
        return cls("", int(data.get("prelude_lines", 0)), list(data.get("definitions", [])))


def prepare_script(script: str, namespace: Namespace) -> Prepared:
    """The script wrapped with the carried namespace: prelude (definitions, then variables),
    the script with its last expression captured, then the epilogue that returns
    ``{"__codeact_namespace__": True, "result": ..., "variables": {...}}``.

    A script that does not parse is returned unchanged (the runtime reports its syntax error).
    """
    try:
        tree = ast.parse(script)
    except SyntaxError:
        return Prepared(script, 0, list(namespace.definitions))
    definitions = list(namespace.definitions)
    for stmt in tree.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Import, ast.ImportFrom)):
            source = ast.get_source_segment(script, stmt)
            if source is None:
                continue
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                # A later definition of the same name replaces the earlier one.
                definitions = [d for d in definitions if _defined_name(d) != stmt.name]
            elif source in definitions:
                continue
            definitions.append(source)
    prelude = [*namespace.definitions]
    prelude += [f"{name} = {_literal(value)}" for name, value in namespace.variables.items()]
    prelude_text = "\n".join(prelude)
    prelude_lines = prelude_text.count("\n") + 1 if prelude_text else 0

    body = script.rstrip()
    result_expr = "None"
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = tree.body[-1]
        lines = body.splitlines()
        head = "\n".join(lines[: last.lineno - 1])
        first = lines[last.lineno - 1]
        tail = first[: last.col_offset]
        expr_src = ast.get_source_segment(script, last) or "None"
        rest = "\n".join(lines[last.end_lineno :])
        body = "\n".join(part for part in (head, f"{tail}{_MARK}_result = ({expr_src})", rest) if part is not None)
        result_expr = f"{_MARK}_result"
    names = list(dict.fromkeys([*namespace.variables, *_assigned_names(tree)]))
    capture = [f"{_MARK} = {{}}"]
    for name in names:
        capture += [
            "try:",
            f"    if {_MARK}_plain({name}):",
            f"        {_MARK}[{name!r}] = {name}",
            "except NameError:",
            "    pass",
        ]
    epilogue = (
        _PLAIN_CHECK + "\n".join(capture) + f'\n{{"{_MARK}": True, "result": {result_expr}, "variables": {_MARK}}}\n'
    )
    parts = [p for p in (prelude_text, body, epilogue) if p]
    return Prepared("\n".join(parts), prelude_lines, definitions)


def unwrap_result(value: Any, prepared: Prepared, namespace: Namespace) -> Any:
    """The script's own result; updates ``namespace`` from the epilogue's capture."""
    if isinstance(value, dict) and value.get(_MARK) is True:
        namespace.definitions = prepared.definitions
        namespace.variables = dict(value.get("variables") or {})
        return value.get("result")
    return value


_LINE = re.compile(r'(File "[^"]*", line )(\d+)')


def _unwrap_result_line(message: str) -> str:
    """Shows the model its own last line: drops the capture around it (and moves the
    ``~~~`` markers under it back by as much)."""
    prefix = f"{_MARK}_result = ("
    lines = message.split("\n")
    for i, line in enumerate(lines):
        at = line.find(prefix)
        if at < 0:
            continue
        rest = line[at + len(prefix) :]
        lines[i] = line[:at] + (rest[:-1] if rest.endswith(")") else rest)
        if i + 1 < len(lines) and lines[i + 1][: at + len(prefix)].strip() == "":
            lines[i + 1] = lines[i + 1][:at] + lines[i + 1][at + len(prefix) :]
    return "\n".join(lines)


def shift_traceback(message: str, prepared: Prepared) -> str:
    """Line numbers of a traceback, made relative to the model's own script."""
    message = _unwrap_result_line(message)
    if not prepared.prelude_lines:
        return message

    def fix(m: re.Match[str]) -> str:
        line = int(m.group(2)) - prepared.prelude_lines
        return f"{m.group(1)}{line}" if line > 0 else f"{m.group(1)}{m.group(2)} (in code carried from an earlier turn)"

    return _LINE.sub(fix, message)
