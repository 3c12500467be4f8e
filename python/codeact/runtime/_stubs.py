"""Type stubs of the tools a script can see, for the type check before it runs (``_typecheck``).

``tool_stubs`` writes one ``.pyi`` text: ``call_tool`` as one overload per tool, keyed by the
tool's name as a ``Literal``, its arguments a ``TypedDict`` (required keys plain, optional ones
``NotRequired``; class syntax, which ty 0.0.14 reads, where the functional form is unknown to
it, so a tool with an argument name that is not an identifier takes any mapping); in the
``functions`` style also each tool whose name is an identifier as a typed function (required
parameters first, then the optional ones with a default, as ``bind_call_args`` binds them);
and the names an earlier script left (``persist_namespace``) typed ``Any``.

The translation is deliberately wide: a type is written only where a value of another type
cannot succeed. A schema it cannot express exactly (``oneOf``, ``$ref``, ``enum``/``const``
with values of several types, an object with ``additionalProperties``, nesting past a few
levels) becomes ``Any``, and so does a tool's whole argument dict when its schema allows
extra properties: such an argument is never refused. Returns are ``Any`` (what a tool hands
back is checked by no one here). Integers are accepted where a number is expected, and arrays
are ``Sequence`` (so ``list[int]`` passes for an array of numbers).
"""

from __future__ import annotations

import json
import keyword
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._render import Tool

__all__ = (
    "ANY_TOOL",
    "FINAL_ANSWER",
    "ToolSignature",
    "call_tool_alias",
    "schema_type",
    "tool_signatures",
    "tool_stubs",
)

ANY_TOOL = "_any_tool"
"""The stub name a ``call_tool`` call whose tool name or argument dict is not a literal is
checked against (``_typecheck`` swaps the names, same length, so positions hold): it takes any
string and any mapping, so such a call is never refused."""
assert len(ANY_TOOL) == len("call_tool")
FINAL_ANSWER = "final_answer"
"""Ends a script in the ``functions`` style (``runtime.monty.FINAL_ANSWER``); never a tool."""

_MAX_DEPTH = 4
_SCALARS = {"string": "str", "integer": "int", "number": "float", "boolean": "bool", "null": "None"}


def _is_identifier(name: str) -> bool:
    return name.isidentifier() and not keyword.iskeyword(name)


def schema_type(schema: Any, depth: int = 0) -> str:
    """The Python annotation a value of ``schema`` is checked against; ``Any`` where the
    schema cannot be expressed exactly (see the module docstring)."""
    if not isinstance(schema, Mapping) or depth > _MAX_DEPTH or not schema:
        return "Any"
    if any(k in schema for k in ("$ref", "oneOf", "allOf", "not", "if", "$dynamicRef")):
        return "Any"
    if "const" in schema:
        return _value_type([schema["const"]])
    if "enum" in schema:
        values = schema["enum"]
        return _value_type(values) if isinstance(values, list) and values else "Any"
    options = schema.get("anyOf")
    if options is not None:
        if not isinstance(options, list) or not options:
            return "Any"
        return _union([schema_type(o, depth + 1) for o in options])
    kind = schema.get("type")
    if isinstance(kind, list):
        if not kind:
            return "Any"
        return _union([schema_type({**schema, "type": k}, depth + 1) for k in kind])
    if kind in _SCALARS:
        return _SCALARS[kind]
    if kind == "array":
        if "prefixItems" in schema:
            return "Sequence[Any]"
        items = schema.get("items")
        return f"Sequence[{schema_type(items, depth + 1)}]" if isinstance(items, Mapping) else "Sequence[Any]"
    if kind == "object":
        return "Mapping[str, Any]"
    return "Any"


def _value_type(values: Iterable[Any]) -> str:
    """The one type ``enum``/``const`` values share (``str`` for ``["a", "b"]``), else ``Any``:
    a value outside the list is left to the tool, which says which ones it takes."""
    kinds = {type(v) for v in values}
    if len(kinds) != 1:
        return "Any"
    kind = kinds.pop()
    return {str: "str", bool: "bool", int: "int", float: "float", type(None): "None"}.get(kind, "Any")


def _union(parts: list[str]) -> str:
    if "Any" in parts:
        return "Any"
    seen: list[str] = []
    for p in parts:
        if p not in seen:
            seen.append(p)
    return " | ".join(seen)


class ToolSignature:
    """One tool's arguments as the stubs type them.

    Attributes:
        name: the tool's name.
        params: ``(name, annotation, required)`` per argument, required ones first.
        open: the tool takes arguments its schema does not list (no ``properties``, or
            ``additionalProperties`` not false): its argument dict is ``Mapping[str, Any]``.
    """

    __slots__ = ("name", "open", "params")

    def __init__(self, name: str, params: list[tuple[str, str, bool]], open_: bool) -> None:
        self.name = name
        self.params = params
        self.open = open_

    def call_tool_form(self) -> str:
        """The call to write, e.g. ``call_tool("get_order", {"order_id": str, "verbose"?: bool})``."""
        if self.open:
            return f"call_tool({json.dumps(self.name)}, {{...}})  # any arguments"
        if not self.params:
            return f"call_tool({json.dumps(self.name)})"
        fields = ", ".join(f"{json.dumps(n)}{'' if req else '?'}: {t}" for n, t, req in self.params)
        return f"call_tool({json.dumps(self.name)}, {{{fields}}})"

    def function_form(self) -> str:
        """The signature to call, e.g. ``get_order(order_id: str, verbose: bool = ...)``."""
        if self.open or not all(_is_identifier(n) for n, _t, _r in self.params):
            return f"{self.name}(**arguments)"
        return f"{self.name}({', '.join(f'{n}: {t}' + ('' if req else ' = ...') for n, t, req in self.params)})"


def tool_signatures(tools: Sequence[Tool]) -> dict[str, ToolSignature]:
    """Each tool's ``ToolSignature``, by name (a later tool of the same name wins)."""
    out: dict[str, ToolSignature] = {}
    for tool in tools:
        schema = tool.parameters
        if not isinstance(schema, Mapping):
            out[tool.name] = ToolSignature(tool.name, [], True)
            continue
        props = schema.get("properties")
        if not isinstance(props, Mapping):
            # No declared parameters: any argument dict (positionals bind as arg0, arg1, ...).
            out[tool.name] = ToolSignature(tool.name, [], True)
            continue
        required = [n for n in schema.get("required", ()) if isinstance(n, str) and n in props]
        params = [(n, schema_type(props[n]), True) for n in required]
        params += [(n, schema_type(p), False) for n, p in props.items() if n not in required and isinstance(n, str)]
        # A schema that says nothing of extra properties is read as listing every argument
        # (a function tool's does); ``additionalProperties`` true or a schema opens it.
        closed = schema.get("additionalProperties", False) is False
        out[tool.name] = ToolSignature(tool.name, params, not closed)
    return out


def call_tool_alias(index: int) -> str:
    """The stub name the ``index``-th tool's literal ``call_tool`` calls are checked against:
    as long as ``call_tool`` (``_t3______``), so swapping the names keeps every position."""
    name = f"_t{index}"
    if len(name) > len("call_tool"):
        raise ValueError(f"too many tools to alias: {index}")
    return name.ljust(len("call_tool"), "_")


def _typed(sig: ToolSignature) -> bool:
    """Whether the tool's arguments can be a class-syntax ``TypedDict`` (ty 0.0.14 reads the
    functional form as unknown): a closed schema whose names are all identifiers."""
    return not sig.open and all(_is_identifier(n) for n, _t, _r in sig.params)


def tool_stubs(signatures: Mapping[str, ToolSignature], *, functions_style: bool, namespace: Iterable[str] = ()) -> str:
    """The ``.pyi`` text the script is checked against (see the module docstring).

    ``call_tool`` is one overload per tool keyed by its ``Literal`` name. A call with a
    literal name and a literal argument dict is checked against the tool's own alias
    (``call_tool_alias``: the same parameters, one signature), whose diagnostics name the key
    and the value that are wrong (an overload set only says that none matched).

    Args:
        signatures: ``tool_signatures`` of the tools the script can see.
        functions_style: tools are also bare functions.
        namespace: names an earlier script left (``persist_namespace``), typed ``Any``.
    """
    lines = ["from typing import Any, Literal, Mapping, NotRequired, Sequence, TypedDict, overload", ""]
    exported = ["call_tool", ANY_TOOL]
    overloads: list[str] = []
    aliases: list[str] = []
    for i, sig in enumerate(signatures.values()):
        literal = f"Literal[{json.dumps(sig.name)}]"
        alias = call_tool_alias(i)
        exported.append(alias)
        if not _typed(sig):
            arguments = "Mapping[str, Any] = ..."
        else:
            lines.append(f"class _Args{i}(TypedDict):")
            body = [f"    {n}: {t if req else f'NotRequired[{t}]'}" for n, t, req in sig.params]
            lines += body or ["    pass"]
            arguments = f"_Args{i}" + ("" if any(req for _n, _t, req in sig.params) else " = ...")
        overloads.append(f"@overload\ndef call_tool(name: {literal}, arguments: {arguments}, /) -> Any: ...")
        aliases.append(f"def {alias}(name: {literal}, arguments: {arguments}, /) -> Any: ...")
    if len(overloads) == 1:  # a single overload is not allowed: a plain function
        overloads[0] = overloads[0].removeprefix("@overload\n")
    if not overloads:
        overloads = ["def call_tool(name: str, arguments: Mapping[str, Any] = ..., /) -> Any: ..."]
    lines += ["", *overloads, *aliases, f"def {ANY_TOOL}(name: str, arguments: Mapping[str, Any] = ..., /) -> Any: ..."]
    defined = set(exported)
    if functions_style:
        for sig in signatures.values():
            if not _is_identifier(sig.name) or sig.name in defined:
                continue
            defined.add(sig.name)
            exported.append(sig.name)
            if not _typed(sig):
                lines.append(f"def {sig.name}(*args: Any, **kwargs: Any) -> Any: ...")
                continue
            params = [f"{n}: {t}" + ("" if req else " = ...") for n, t, req in sig.params]
            lines.append(f"def {sig.name}({', '.join(params)}) -> Any: ...")
        if FINAL_ANSWER not in defined:
            defined.add(FINAL_ANSWER)
            exported.append(FINAL_ANSWER)
            lines.append(f"def {FINAL_ANSWER}(*args: Any, **kwargs: Any) -> Any: ...")
    for name in namespace:
        if _is_identifier(name) and name not in defined:
            defined.add(name)
            exported.append(name)
            lines.append(f"{name}: Any")
    # The star import skips names with a leading underscore unless __all__ lists them.
    lines.insert(1, f"__all__ = {exported!r}")
    return "\n".join(lines) + "\n"
