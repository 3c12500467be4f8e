"""The subset check's detectors: the constructs the pinned Monty cannot run, each reported
with its position and what to write instead (``Finding``)."""

from __future__ import annotations

import ast
import sys

from ._check_facts import (
    _BUILTIN_TYPES,
    _CALLBACK_HANDLERS,
    _DATETIME_GAPS,
    _ENTRIES,
    _EXCEPTION_NAMES,
    _METHOD_NAMES,
    _MISSING_BUILTINS,
    _STDLIB_ALTERNATIVES,
    _STDLIB_GAPS,
    _TOOL_CALLERS,
    Finding,
    _callable_slots,
    _callback_guarded,
    _calls_tool,
    _defined_names,
    _facts,
    _finding,
    _first_call_statement,
    _from_imports,
    _guarded_by,
    _guarded_by_import_handler,
    _imported_names,
    _module_aliases,
    _nodes,
    _parents,
    _path_encoding,
    _runs_after_a_call,
    _Source,
    _tool_functions,
    _under_type_checking,
)
from ._subset import STDLIB_MODULES

_DETECTED = frozenset(
    {
        ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef, ast.Yield, ast.YieldFrom, ast.Delete, ast.Call,
        ast.AsyncWith, ast.AsyncFor, ast.Assign, ast.Attribute, ast.Import, ast.ImportFrom,
    }
)  # fmt: skip
"""The node types ``_detect`` looks at (every other node is skipped at once)."""


def _detect(tree: ast.Module, src: _Source, functions_style: bool, everything: bool = False) -> list[Finding]:
    """The findings of ``tree``. Without ``everything``, only those Monty would not report
    first itself: constructs its parser rejects (``LEFT_TO_MONTY``: nothing runs, and
    ``explain_failure`` adds the fix to its message) and imports that run before anything else
    could (or may not run at all) are left out."""
    findings: list[Finding] = []
    parents = _parents(tree)
    modules = _imported_names(tree)
    user_names = _defined_names(tree)
    aliases = _module_aliases(tree)
    from_names = _from_imports(tree)
    tool_callers = _tool_functions(tree, functions_style, user_names)
    facts = _facts(tree)
    allowed = set(STDLIB_MODULES)
    first_call = _first_call_statement(tree)
    for node in _nodes(tree):
        if type(node) not in _DETECTED:
            continue
        if isinstance(node, ast.ClassDef) and everything:
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
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.decorator_list:
            for deco in node.decorator_list:
                name = ast.unparse(deco)
                target = deco.func if isinstance(deco, ast.Call) else deco
                tname = ast.unparse(target)
                if tname in ("staticmethod", "classmethod"):
                    if not everything:
                        continue
                    advice = "define a module-level function instead of the method"
                elif tname == "property" or tname.endswith((".setter", ".getter", ".deleter")):
                    if not everything:
                        continue
                    advice = f"write an ordinary method and call it: obj.{node.name}()"
                elif tname in ("functools.wraps", "wraps") and (tname == "functools.wraps" or "wraps" in from_names):
                    advice = "leave @wraps(...) out: the wrapper works without it"
                elif (
                    tname in ("dataclass", "dataclasses.dataclass")
                    and isinstance(deco, ast.Call)
                    and any(k.arg == "order" for k in deco.keywords)
                ):
                    findings.append(
                        _finding(
                            src,
                            deco,
                            "stdlib_gap",
                            "@dataclass(order=True) is not available; drop order=True and sort with "
                            "key=lambda p: (p.a, p.b)",
                        )
                    )
                    continue
                else:
                    continue  # a decorator that is a function works
                findings.append(_finding(src, deco, "decorator", f"the decorator @{name} is not available; {advice}"))
        elif isinstance(node, (ast.Yield, ast.YieldFrom)):
            if not everything:
                continue
            findings.append(
                _finding(src, node, "yield", "generators (yield) are not available; build a list and return it")
            )
        elif isinstance(node, ast.Delete):
            if not everything:
                continue
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
            findings += _detect_call(
                node, src, tree, parents, modules, user_names, aliases, tool_callers, functions_style
            )
            if (
                node.keywords
                and _is_gather(node, aliases, from_names)
                and not _guarded_by(node, parents, _CALLBACK_HANDLERS)  # the script catches Monty's error
            ):
                findings.append(_gather_keywords(src, node))
        elif isinstance(node, (ast.AsyncWith, ast.AsyncFor)):
            if not everything:
                continue
            kind = "async with" if isinstance(node, ast.AsyncWith) else "async for"
            findings.append(_finding(src, node, "syntax", f"`{kind}` is not available; use a plain with/for"))
        elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Attribute):
            value = node.value
            if (
                isinstance(value.value, ast.Name)
                and value.value.id not in modules
                and value.attr in _METHOD_NAMES
                # perhaps a method, field or attribute of the script's own class: Monty has those
                and value.attr not in facts.methods | facts.attributes
            ):
                findings.append(_bound(src, value))
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            module = aliases.get(node.value.id)
            gap = _STDLIB_GAPS.get((module or "", node.attr))
            if module and gap and node.value.id not in user_names - modules:
                findings.append(_gap(src, node, f"{module}.{node.attr}", gap))
            elif node.value.id == "str" and node.attr == "maketrans":
                findings.append(_gap(src, node, "str.maketrans", "a dict and ''.join(table.get(c, c) for c in s)"))
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            if isinstance(node, ast.ImportFrom) and any(a.name == "*" for a in node.names) and everything:
                findings.append(
                    _finding(src, node, "syntax", f"`from {node.module} import *` is not available; import the names")
                )
            if isinstance(node, ast.ImportFrom) and node.level:
                continue
            mods = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            guarded = _guarded_by_import_handler(node, parents) or _under_type_checking(node, facts)
            if not everything and not _runs_after_a_call(node, tree, first_call):
                continue  # Monty's ModuleNotFoundError comes first, before anything ran (or it never runs)
            for mod in mods:
                root = mod.split(".")[0]
                if root == "__future__" or guarded:
                    continue
                if root in allowed:
                    if isinstance(node, ast.ImportFrom):
                        for a in node.names:
                            gap = _STDLIB_GAPS.get((root, a.name))
                            if gap:
                                findings.append(_gap(src, node, f"{root}.{a.name}", gap))
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
                        f"ModuleNotFoundError: No module named {root!r}: no third-party packages and "
                        f"nothing can be installed (importable: {', '.join(STDLIB_MODULES)}); "
                        "instead: " + _ENTRIES["third_party_import"].instead
                    )
                    findings.append(_finding(src, node, "third_party_import", msg))
    findings.sort(key=lambda f: (f.line, f.column))
    return findings


def _detect_call(
    node: ast.Call,
    src: _Source,
    tree: ast.Module,
    parents: dict[ast.AST, ast.AST],
    modules: set[str],
    user_names: set[str],
    aliases: dict[str, str],
    tool_callers: set[str],
    functions_style: bool,
) -> list[Finding]:
    found: list[Finding] = []
    func = node.func
    if isinstance(func, ast.Name) and func.id in _MISSING_BUILTINS and func.id not in user_names:
        if not functions_style:
            alt = _MISSING_BUILTINS[func.id]
            found.append(_finding(src, node, "missing_builtin", f"{func.id}() is not available; instead: {alt}"))
    if isinstance(func, ast.Name) and func.id in _EXCEPTION_NAMES and func.id not in user_names:
        # Two arguments, or a constant that is not a string (CPython refuses keywords too, and a
        # starred argument may well be one string: Monty runs those as CPython does).
        odd: list[ast.expr] = [] if any(isinstance(a, ast.Starred) for a in node.args) else node.args[1:]
        odd += [a for a in node.args[:1] if isinstance(a, ast.Constant) and not isinstance(a.value, str)]
        if odd:
            if func.id == "SystemExit" and not node.args[1:] and not node.keywords:
                text = (
                    "SystemExit takes no exit code here, only a message string; instead: end the script "
                    "normally (put the rest under an if), or SystemExit('message')"
                )
            elif len(node.args) == 1 and isinstance(node.args[0], ast.Constant) and not node.keywords:
                text = (
                    f"{func.id}(...) takes a string message here, not {type(node.args[0].value).__name__}; "
                    f"instead: {func.id}(f'...{{value}}...')"
                )
            else:
                text = (
                    f"{func.id}(...) takes at most one argument here, a string; instead: "
                    f"{func.id}(f'...{{value}}...') with everything in one message"
                )
            found.append(_finding(src, node, "exception_args", text))
    own = _facts(tree).methods  # a method of the script's own class runs as written
    if isinstance(func, ast.Attribute):
        if func.attr == "format_map" and "format_map" not in own:
            found.append(
                _finding(src, node, "format_map", "str.format_map() is not available; use template.format(**mapping)")
            )
        elif func.attr in _DATETIME_GAPS:
            found.append(
                _finding(
                    src,
                    node,
                    "utcnow",
                    f"datetime.{func.attr}() is not available; instead: {_DATETIME_GAPS[func.attr]}",
                )
            )
        elif (
            func.attr in ("dumps", "dump")
            and isinstance(func.value, ast.Name)
            and aliases.get(func.value.id) == "json"
            and any(k.arg in ("default", "cls") for k in node.keywords)
        ):
            found.append(_finding(src, node, "json_default", _json_default_message()))
        elif _path_encoding(node) and func.attr not in own:
            found.append(
                _finding(
                    src,
                    node,
                    "path_encoding",
                    f".{func.attr}() takes no encoding= or errors= here (files are UTF-8); leave them out, "
                    "or use open(path, mode, encoding=...)",
                )
            )
        elif func.attr == "sub" and isinstance(func.value, ast.Name) and aliases.get(func.value.id) == "re":
            if len(node.args) >= 2:
                repl = node.args[1]
                if isinstance(repl, ast.Lambda) or (
                    isinstance(repl, ast.Name)
                    and any(isinstance(d, ast.FunctionDef) and d.name == repl.id for d in _nodes(tree))
                ):
                    found.append(_finding(src, node, "re_sub_callable"))
    elif isinstance(func, ast.Name) and func.id in ("dumps", "dump") and func.id not in user_names - modules:
        if any(k.arg in ("default", "cls") for k in node.keywords) and func.id in modules:
            found.append(_finding(src, node, "json_default", _json_default_message()))
    for caller, slot in _callable_slots(node):
        if (
            isinstance(slot, ast.Attribute)
            and isinstance(slot.value, ast.Name)
            and slot.value.id not in modules
            and slot.attr not in _facts(tree).methods | _facts(tree).attributes  # perhaps the script's own
        ):
            found.append(_bound(src, slot))
        calls_tool = (
            isinstance(slot, ast.Lambda) and _calls_tool(slot.body, tool_callers, functions_style, user_names)
        ) or (isinstance(slot, ast.Name) and slot.id in tool_callers)
        # The call raises NotImplementedError there, which the script may catch: then it runs.
        if calls_tool and not _callback_guarded(node, slot, tree, parents, tool_callers, functions_style, user_names):
            what = _TOOL_CALLERS.get(caller, f"{caller}()")
            found.append(
                _finding(
                    src,
                    slot,
                    "tool_in_callback",
                    f"{what} calls this function back, and a tool call cannot run inside it (it raises "
                    "NotImplementedError there); instead: "
                    "call the tool for each item first, then use the results: "
                    "keys = {v: call_tool(...) for v in xs}; sorted(xs, key=lambda v: keys[v])",
                )
            )
    return found


def _is_gather(node: ast.Call, aliases: dict[str, str], from_names: dict[str, tuple[str, str]]) -> bool:
    """``asyncio.gather(...)``, under any name the script imports it as."""
    func = node.func
    if isinstance(func, ast.Attribute):
        return func.attr == "gather" and isinstance(func.value, ast.Name) and aliases.get(func.value.id) == "asyncio"
    return isinstance(func, ast.Name) and from_names.get(func.id) == ("asyncio", "gather")


def _gather_keywords(src: _Source, node: ast.Call) -> Finding:
    """Monty's gather takes only the awaitables: ``return_exceptions=`` (or any keyword) fails
    when the script reaches it, after the calls before it ran."""
    names = ", ".join(f"{k.arg}=" if k.arg else "**" for k in node.keywords)
    return _finding(
        src,
        node,
        "gather_kwargs",
        f"asyncio.gather() takes no keyword arguments here ({names}); return_exceptions=True is not "
        "available. Instead: gather helper coroutines that catch the error themselves, e.g. "
        "`async def safe(name, args):` with the body `try: return await call_tool(name, args)` / "
        "`except Exception as e: return e`, then `await asyncio.gather(safe('a', {...}), safe('b', {...}))`; "
        "or call the tools one after another, each inside try/except",
    )


def _json_default_message() -> str:
    return (
        "json.dumps(..., default=...) / cls= is not available; convert the values yourself first "
        "(str(d), d.isoformat(), a dict of plain values), then json.dumps"
    )


def _gap(src: _Source, node: ast.AST, name: str, alternative: str) -> Finding:
    return _finding(src, node, "stdlib_gap", f"{name} is not available here; instead: {alternative}")


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
