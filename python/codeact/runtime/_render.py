"""How tools are listed for the model: the ``call_tool`` style, the functions style and the
language-neutral catalog (SPEC §3 "Tool rendering").

Every listing carries, per tool: the description, each argument with its type, whether it
is optional (and its default), its description, and the return type when the tool declares
one (``Tool.returns``, set by ``FunctionTool`` from the return annotation). Types are read
from the JSON schemas and written as Python annotations (``list[str]``, ``str | None``,
``Literal['a', 'b']``), so the functions style shows ``-> str`` for a ``-> str`` function and
``= 'n/a'`` for a default of ``'n/a'``.
"""

from __future__ import annotations

import json
import keyword
import re
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

__all__ = (
    "Tool",
    "ordered_params",
    "python_type",
    "render_call_tool",
    "render_catalog",
    "render_functions",
)


class Tool(Protocol):
    """What a listing reads of a tool (``codeact.tools.Tool`` has it; an optional ``returns``
    JSON schema is read with ``getattr``). Defined here so the runtime, which renders the tools
    it serves, does not import the tools package above it."""

    @property
    def name(self) -> str:
        """The name scripts call the tool by."""

    @property
    def description(self) -> str:
        """What the tool does, as the model is shown it."""

    @property
    def parameters(self) -> dict[str, Any] | None:
        """The arguments' JSON schema, or None for a tool without declared parameters."""

    @property
    def is_long_running(self) -> bool:
        """The result arrives later (the run suspends after starting it)."""


_SCALARS = {"string": "str", "integer": "int", "number": "float", "boolean": "bool", "null": "None"}
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_MAX_DEPTH = 8


def python_type(schema: Any, depth: int = 0) -> str:
    """A JSON schema written as a Python annotation: ``{"type": "string"}`` is ``str``,
    ``{"type": "array", "items": {"type": "integer"}}`` is ``list[int]``, ``anyOf`` a union,
    ``enum`` a ``Literal``, a ``$ref`` the referenced model's name. Anything it cannot read is
    ``Any``."""
    if not isinstance(schema, Mapping) or depth > _MAX_DEPTH:
        return "Any"
    if "$ref" in schema and isinstance(schema["$ref"], str):
        return schema["$ref"].rsplit("/", 1)[-1] or "Any"
    if "const" in schema:
        return f"Literal[{schema['const']!r}]"
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return "Literal[" + ", ".join(repr(v) for v in schema["enum"]) + "]"
    for key in ("anyOf", "oneOf"):
        options = schema.get(key)
        if isinstance(options, list) and options:
            return _union([python_type(o, depth + 1) for o in options])
    kind = schema.get("type")
    if isinstance(kind, list):
        return _union([python_type({**schema, "type": k}, depth + 1) for k in kind])
    if kind in _SCALARS:
        return _SCALARS[kind]
    if kind == "array":
        prefix = schema.get("prefixItems")
        if isinstance(prefix, list) and prefix:
            return "tuple[" + ", ".join(python_type(p, depth + 1) for p in prefix) + "]"
        items = schema.get("items")
        return f"list[{python_type(items, depth + 1)}]" if isinstance(items, Mapping) and items else "list"
    if kind == "object":
        extra = schema.get("additionalProperties")
        if isinstance(extra, Mapping) and extra and not schema.get("properties"):
            return f"dict[str, {python_type(extra, depth + 1)}]"
        title = schema.get("title")
        return title if isinstance(title, str) and _is_identifier(title) else "dict"
    return "Any"


def _union(parts: list[str]) -> str:
    seen: list[str] = []
    for p in parts:
        if p not in seen:
            seen.append(p)
    if "Any" in seen:
        return "Any"
    if "None" in seen:  # None last, as people write it
        seen = [p for p in seen if p != "None"] + ["None"]
    return " | ".join(seen)


def ordered_params(schema: Mapping[str, Any] | None) -> list[tuple[str, Any, bool]]:
    """``(name, property schema, required)`` for each parameter: required ones first, in the
    schema's ``required`` order, then the others in ``properties`` order."""
    if not schema:
        return []
    props = schema.get("properties", {}) or {}
    required = [n for n in schema.get("required", ()) if isinstance(n, str)]
    out = [(n, props.get(n, {}), True) for n in required]
    out += [(n, p, False) for n, p in props.items() if n not in required]
    return out


def _description(prop: Any) -> str:
    text = prop.get("description") if isinstance(prop, Mapping) else None
    return " ".join(str(text).split()) if text else ""


def _has_default(prop: Any) -> bool:
    return isinstance(prop, Mapping) and "default" in prop


def _returns(tool: Tool) -> str | None:
    schema = getattr(tool, "returns", None)
    return python_type(schema) if isinstance(schema, Mapping) and schema else None


def _is_identifier(name: str) -> bool:
    return bool(_IDENTIFIER.match(name)) and not keyword.iskeyword(name)


def _argument_lines(params: list[tuple[str, Any, bool]]) -> list[str]:
    """``name (type, optional, default 10): description`` for each parameter."""
    lines = []
    for n, p, req in params:
        facts = [python_type(p)]
        if not req:
            facts.append("optional")
        if _has_default(p):
            facts.append(f"default {p['default']!r}")
        desc = _description(p)
        lines.append(f"{n} ({', '.join(facts)})" + (f": {desc}" if desc else ""))
    return lines


def _call_form(tool: Tool, params: list[tuple[str, Any, bool]]) -> str:
    name = json.dumps(tool.name, ensure_ascii=False)
    if not params:
        return f"call_tool({name})"
    fields = ", ".join(
        f"{json.dumps(n, ensure_ascii=False)}: <{python_type(p)}{'' if req else ', optional'}>" for n, p, req in params
    )
    return f"call_tool({name}, {{{fields}}})"


def _call_tool_block(t: Tool) -> str:
    desc = " ".join((t.description or "").split())
    head = [f"# {desc}" if desc else f"# Tool {t.name}."]
    if t.is_long_running:
        head[0] += " (long-running: the run may pause until its result arrives)"
    params = ordered_params(t.parameters)
    if any(_description(p) or _has_default(p) for _n, p, _r in params):
        head += [f"#   {line}" for line in _argument_lines(params)]
    returns = _returns(t)
    if returns is not None:
        head.append(f"# Returns {returns}.")
    return "\n".join(head) + "\n" + _call_form(t, params)


def render_call_tool(tools: Sequence[Tool]) -> str:
    """Each tool as the exact ``call_tool`` call the script writes, under comment lines: the
    description (collapsed to one line), one line per argument (type, optional, default,
    description) when any argument has a description or a default, and the return type."""
    return "\n\n".join(_call_tool_block(t) for t in tools)


def _signature_param(name: str, prop: Any, required: bool) -> str:
    annotation = python_type(prop)
    if required:
        return f"{name}: {annotation}"
    if _has_default(prop):
        return f"{name}: {annotation} = {prop['default']!r}"
    if annotation != "Any" and "None" not in annotation.split(" | "):
        annotation += " | None"
    return f"{name}: {annotation} = None"


def render_functions(tools: Sequence[Tool]) -> str:
    """Each tool as a Python signature (real defaults, ``-> T`` from the declared return type,
    else ``-> Any``) with its description and argument descriptions as the docstring.

    Tools whose name is not a Python identifier (``fetch-cart``, ``class``) cannot be
    called bare: they are listed apart, reachable through ``call_tool("name", {...})``, which
    works in this style too. Parameter names that are not identifiers are omitted from the
    signature and named in the docstring (pass them with ``call_tool``).
    """
    blocks = []
    others = []
    for t in tools:
        if not _is_identifier(t.name):
            others.append(t)
            continue
        params = ordered_params(t.parameters)
        plain = [(n, p, req) for n, p, req in params if _is_identifier(n)]
        odd = [n for n, _p, _req in params if not _is_identifier(n)]
        required = [_signature_param(n, p, True) for n, p, req in plain if req]
        optional = [_signature_param(n, p, False) for n, p, req in plain if not req]
        sig = ", ".join(required + optional)
        desc = (t.description or "").strip() or f"Tool {t.name}."
        lines = desc.splitlines()
        for n, p, _req in plain:
            pdesc = _description(p)
            if pdesc:
                lines.append(f"{n}: {pdesc}")
        if odd:
            lines.append(
                "Also takes " + ", ".join(json.dumps(n) for n in odd) + ": pass those with "
                f'call_tool("{t.name}", {{...}})'
            )
        if t.is_long_running:
            lines.append("(long-running: the run may pause until its result arrives)")
        doc = "\n".join(("    " + line) if line.strip() else "" for line in lines)
        blocks.append(f'def {t.name}({sig}) -> {_returns(t) or "Any"}:\n    """\n{doc}\n    """')
    text = "\n\n".join(blocks)
    if others:
        text += ("\n\n" if text else "") + (
            "# These tools have names that are not Python identifiers; call them with call_tool:\n"
            + "\n\n".join(_call_tool_block(t) for t in others)
        )
    return text


def render_catalog(tools: Sequence[Tool]) -> str:
    """A language-neutral listing for runtimes without a better rendering.

    Returns:
        ``""`` when there is nothing to list, else ``"Available tools:"`` followed by one
        entry per tool: name, description, ``[long-running]`` marker, one line per argument
        (type, optional, default, description), the return type, and the parameters' JSON
        schema.
    """
    listed = [t for t in tools if not getattr(t, "is_builtin", False)]
    if not listed:
        return ""
    lines = ["Available tools:"]
    for t in listed:
        marker = " [long-running]" if t.is_long_running else ""
        desc = " ".join((t.description or "").split())
        lines.append(f"- {t.name}{marker}: {desc}" if desc else f"- {t.name}{marker}")
        params = ordered_params(t.parameters)
        if params:
            lines.append("  arguments:")
            lines += [f"    - {line}" for line in _argument_lines(params)]
        returns = _returns(t)
        if returns is not None:
            lines.append(f"  returns: {returns}")
        if t.parameters:
            lines.append(f"  parameters: {json.dumps(t.parameters, ensure_ascii=False, separators=(',', ':'))}")
    return "\n".join(lines)
