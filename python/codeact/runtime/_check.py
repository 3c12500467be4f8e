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

import ast
import builtins
import queue
import re
import sys
import threading
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import cast

from .._monty import SubsetScreen, remaining_stack
from ._awaits import deferred_offsets
from ._precheck import parse_script, parsed
from ._subset import STDLIB_MODULES, SUBSET, SubsetEntry

_TRY_NODES: tuple[type, ...] = (ast.Try, *((ast.TryStar,) if hasattr(ast, "TryStar") else ()))  # TryStar: 3.11+

__all__ = (
    "CheckResult",
    "Finding",
    "Rewrite",
    "check_script",
    "check_script_safely",
    "explain_failure",
    "format_findings",
)

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
        deferred: UTF-8 byte offsets of the call expressions ``script`` awaits
            (``_awaits.deferred_offsets``), for the engine.
    """

    script: str
    rewrites: tuple[Rewrite, ...] = ()
    findings: tuple[Finding, ...] = field(default_factory=tuple)
    deferred: tuple[int, ...] = ()


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
_METHOD_NAMES = {
    "get", "append", "extend", "items", "keys", "values", "pop", "update", "add", "upper", "lower", "strip",
    "lstrip", "rstrip", "split", "join", "startswith", "endswith", "replace", "count", "index", "find",
    "title", "capitalize", "isdigit", "isalpha", "format", "setdefault", "insert", "remove", "discard",
    "copy", "sort", "casefold", "splitlines", "encode", "decode", "zfill",
}  # fmt: skip
_MISSING_BUILTINS = {
    "globals": "a dict you keep yourself",
    "vars": "a dict you keep yourself, or the object's attributes by name",
    "input": "there is no user input here; use the values you were given or a tool",
    "__import__": "a plain import statement",
    "callable": "call it inside try/except TypeError, or check isinstance",
    "dir": "the names you know, or hasattr(obj, 'name')",
    "super": "a plain class without a base (no super())",
    "issubclass": "isinstance on an instance, or compare the classes with ==",
    "delattr": "setattr(obj, name, None), or keep the values in a dict and .pop() them",
    "ascii": "repr(x)",
    "bytearray": "bytes, or a list of ints",
    "memoryview": "bytes slicing",
    "compile": "write the code directly",
    "breakpoint": "print() what you need to see",
    "help": "print() what you need to see",
    "exit": "end the script normally (put the rest under an if)",
    "quit": "end the script normally (put the rest under an if)",
    "staticmethod": "a module-level function",
    "classmethod": "a module-level function",
    "aiter": "a plain for loop",
    "anext": "a plain for loop",
}
_TOOL_CALLERS = {"sorted": "sorted()", "min": "min()", "max": "max()", "sort": "list.sort()"}
_STDLIB_ALTERNATIVES = {
    "statistics": "sum(xs) / len(xs) for the mean; sorted(xs)[len(xs) // 2] for the median",
    "string": "string literals such as 'abcdefghijklmnopqrstuvwxyz'",
    "operator": "a lambda: key=lambda x: x[1]",
    "heapq": "sorted(xs)[:n] or min()/max(); bisect.insort keeps a list sorted",
    "enum": "module-level constants, or a dict of names to values",
    "io": "a list of strings joined with ''.join(parts); csv.reader takes text.splitlines()",
    "textwrap": "split the text into words and join lines yourself",
    "uuid": "random.getrandbits(128) formatted with f'{n:032x}', or an id from a tool",
    "fractions": "decimal.Decimal or integer arithmetic",
    "pprint": "print(json.dumps(x, indent=2))",
    "contextlib": "try/finally",
    "abc": "a plain class (no base classes here)",
    "types": "a dict, or a plain class",
    "logging": "print()",
    "zoneinfo": "datetime.timezone(timedelta(hours=...)) for a fixed offset",
    "calendar": "datetime.date arithmetic",
    "struct": "int.to_bytes / int.from_bytes",
    "secrets": "random (not for security), or a token from a tool",
    "subprocess": "nothing: there is no shell or subprocess here; use a tool",
    "socket": "nothing: there is no network here; use a tool",
    "urllib": "nothing: there is no network here; use a tool",
    "http": "nothing: there is no network here; use a tool",
}
_STDLIB_GAPS = {
    ("collections", "OrderedDict"): "a plain dict (it keeps insertion order)",
    ("collections", "ChainMap"): "{**defaults, **overrides}",
    ("collections", "UserDict"): "a plain dict",
    ("functools", "wraps"): "leave out @functools.wraps(f): the wrapper works without it",
    ("functools", "cmp_to_key"): "key=lambda x: (...) returning a tuple to sort on",
    ("functools", "total_ordering"): "sort with key=lambda",
    ("functools", "cached_property"): "compute the value in __init__ or in an ordinary method",
    ("functools", "singledispatch"): "if/elif on isinstance",
    ("dataclasses", "asdict"): "build the dict by hand: {'x': p.x, 'y': p.y}",
    ("dataclasses", "astuple"): "build the tuple by hand: (p.x, p.y)",
    ("dataclasses", "fields"): "list the field names yourself",
    ("dataclasses", "replace"): "construct a new instance: P(x=p.x, y=new_y)",
    ("typing", "TypedDict"): "a plain dict (annotate it as dict[str, Any])",
    ("typing", "NamedTuple"): "collections.namedtuple('P', 'x y') or a @dataclass",
    ("typing", "cast"): "leave the cast out: cast(T, x) is just x",
    ("re", "subn"): "re.sub, and count with len(re.findall(...))",
    ("re", "VERBOSE"): "a pattern without comments or insignificant whitespace",
    ("csv", "Sniffer"): "pass the delimiter you see in the data",
    ("pathlib", "PurePath"): "Path",
    ("sys", "exit"): "end the script normally (put the rest under an if)",
    ("asyncio", "create_task"): "asyncio.gather(...) of the coroutines",
    ("asyncio", "wait_for"): "await the coroutine directly",
    ("asyncio", "Semaphore"): "asyncio.gather over smaller batches",
    ("asyncio", "Queue"): "a list",
}
"""Names missing from modules Monty 1.4 has (probed with ``from module import name``)."""
_DATETIME_GAPS = {
    "utcnow": "datetime.now(timezone.utc) (from datetime import timezone)",
    "utcfromtimestamp": "datetime(1970, 1, 1, tzinfo=timezone.utc) + timedelta(seconds=ts)",
    "fromtimestamp": "datetime(1970, 1, 1, tzinfo=timezone.utc) + timedelta(seconds=ts)",
}
_UTF8 = {"utf-8", "utf8", "utf_8"}
_NO_RAISE_HANDLERS = {"ImportError", "ModuleNotFoundError", "Exception", "BaseException"}
_EXCEPTION_NAMES = {
    name for name, value in vars(builtins).items() if isinstance(value, type) and issubclass(value, BaseException)
}


@dataclass(slots=True)
class _Facts:
    """What every detector and rewriter reads about one tree, gathered in one walk."""

    nodes: list[ast.AST]  # ast.walk order (breadth first)
    parents: dict[ast.AST, ast.AST]
    imported: set[str]  # names bound by import statements
    defined: set[str]  # names the script binds (imports included)
    aliases: dict[str, str]  # local name -> module, for ``import m [as x]``
    from_names: dict[str, tuple[str, str]]  # local name -> (module, name), for ``from m import name``
    defs: dict[str, ast.FunctionDef | ast.AsyncFunctionDef]  # the last def of each name, ast.walk order
    calls_in: dict[ast.AST, set[str]]  # each def -> the plain names called anywhere inside it
    methods: set[str]  # names of the methods the script's classes define
    attributes: set[str]  # attribute names the script sets (``obj.x = ...``) or declares in a class body
    type_checking: set[ast.AST]  # the ``if TYPE_CHECKING:`` statements


_facts_cache: tuple[ast.AST, _Facts] | None = None
_facts_lock = threading.Lock()


def _facts(tree: ast.AST) -> _Facts:
    """The ``_Facts`` of ``tree``, computed once per tree (the last tree is kept)."""
    global _facts_cache
    with _facts_lock:
        cached = _facts_cache
    if cached is not None and cached[0] is tree:
        return cached[1]
    nodes: list[ast.AST] = []
    parents: dict[ast.AST, ast.AST] = {}
    enclosing: dict[ast.AST, ast.AST] = {}  # node -> innermost def around it
    f = _Facts(nodes, parents, set(), set(), {}, {}, {}, {}, set(), set(), set())
    todo = [tree]
    i = 0
    while i < len(todo):
        node = todo[i]
        i += 1
        nodes.append(node)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            f.defined.add(node.name)
            f.defs[node.name] = node
            f.calls_in[node] = set()
            if isinstance(parents.get(node), ast.ClassDef):
                f.methods.add(node.name)
        elif isinstance(node, ast.ClassDef):
            f.defined.add(node.name)
        elif isinstance(node, ast.Name):
            if isinstance(node.ctx, ast.Store):
                f.defined.add(node.id)
                statement = parents.get(node)
                if statement is not None and isinstance(parents.get(statement), ast.ClassDef):
                    f.attributes.add(node.id)  # a class-body name (a field)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            f.attributes.add(node.attr)
        elif isinstance(node, ast.arg):
            f.defined.add(node.arg)
        elif isinstance(node, ast.Call):
            if isinstance(node.func, ast.Name):
                d = enclosing.get(node)
                while d is not None:
                    f.calls_in[d].add(node.func.id)
                    d = enclosing.get(d)
        elif isinstance(node, ast.Import):
            for a in node.names:
                f.imported.add(a.asname or a.name.split(".")[0])
                if a.asname:
                    f.aliases[a.asname] = a.name
                else:
                    root = a.name.split(".")[0]
                    f.aliases[root] = root
        elif isinstance(node, ast.ImportFrom):
            for a in node.names:
                f.imported.add(a.asname or a.name)
                if node.module and not node.level:
                    f.from_names[a.asname or a.name] = (node.module, a.name)
        elif isinstance(node, ast.If) and _is_type_checking(node.test):
            f.type_checking.add(node)
        inner = node if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) else enclosing.get(node)
        for child in ast.iter_child_nodes(node):
            if type(child) in _CONTEXTS:  # Load / Store / Del: no detector reads them
                continue
            parents[child] = node
            if inner is not None:
                enclosing[child] = inner
            todo.append(child)
    f.defined |= f.imported
    with _facts_lock:
        _facts_cache = (tree, f)
    return f


_CONTEXTS = frozenset({ast.Load, ast.Store, ast.Del})


def _is_type_checking(test: ast.expr) -> bool:
    """``TYPE_CHECKING`` or ``typing.TYPE_CHECKING`` (False at run time, in Monty too)."""
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _nodes(tree: ast.AST) -> list[ast.AST]:
    return _facts(tree).nodes


def _imported_names(tree: ast.AST) -> set[str]:
    return _facts(tree).imported


def _defined_names(tree: ast.AST) -> set[str]:
    return _facts(tree).defined


def _parents(tree: ast.AST) -> dict[ast.AST, ast.AST]:
    return _facts(tree).parents


def _tool_functions(tree: ast.AST, functions_style: bool, user_names: set[str]) -> set[str]:
    """The user functions that call a tool, directly or through another such function. A tool
    is ``call_tool``; in the functions style also any called name the script neither defines
    nor imports and that is not a builtin."""
    f = _facts(tree)

    def direct(called: set[str]) -> bool:
        return "call_tool" in called or (
            functions_style and any(n not in user_names and n not in _BUILTIN_NAMES for n in called)
        )

    callers = {name for name, d in f.defs.items() if direct(f.calls_in[d])}
    changed = True
    while changed:
        changed = False
        for name, d in f.defs.items():
            if name not in callers and not f.calls_in[d].isdisjoint(callers):
                callers.add(name)
                changed = True
    return callers


_BUILTIN_NAMES = set(dir(builtins))


def _calls_tool(node: ast.AST, callers: set[str], functions_style: bool, user_names: set[str]) -> bool:
    return any(_is_tool_call(sub, callers, functions_style, user_names) for sub in ast.walk(node))


def _is_tool_call(node: ast.AST, callers: set[str], functions_style: bool, user_names: set[str]) -> bool:
    """A call of ``call_tool``, of a function that calls a tool, or (functions style) of a
    name the script neither defines nor imports and that is not a builtin."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
        return False
    name = node.func.id
    if name == "call_tool" or name in callers:
        return True
    return functions_style and name not in user_names and name not in _BUILTIN_NAMES


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


def _callable_slots(node: ast.Call) -> Iterator[tuple[str, ast.expr]]:
    """(the caller's name, the callable argument) for each argument Monty calls back."""
    func = node.func
    name = func.id if isinstance(func, ast.Name) else (func.attr if isinstance(func, ast.Attribute) else "")
    if name in ("sorted", "min", "max", "sort"):
        for k in node.keywords:
            if k.arg == "key":
                yield name, k.value
    if isinstance(func, ast.Name) and name in ("map", "filter") and node.args:
        yield name, node.args[0]


def _is_next_of_genexp(node: ast.Call, user_names: set[str]) -> bool:
    return (
        isinstance(node.func, ast.Name)
        and node.func.id == "next"
        and "next" not in user_names
        and 1 <= len(node.args) <= 2
        and not node.keywords
        and isinstance(node.args[0], ast.GeneratorExp)
    )


_JsonNames = tuple[frozenset[str], frozenset[str]]
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


def _rewrite_next(node: ast.Call) -> str:
    wrapped = ast.Call(func=ast.Name("iter", ast.Load()), args=[node.args[0]], keywords=[])
    return ast.unparse(ast.Call(func=node.func, args=[wrapped, *node.args[1:]], keywords=[]))


def _path_encoding(node: ast.Call) -> list[ast.keyword]:
    """The ``encoding=`` / ``errors=`` keywords of a ``.read_text()`` / ``.write_text()`` call."""
    if isinstance(node.func, ast.Attribute) and node.func.attr in ("read_text", "write_text"):
        return [k for k in node.keywords if k.arg in ("encoding", "errors")]
    return []


def _utf8_only(keywords: list[ast.keyword]) -> bool:
    return all(
        k.arg == "encoding"
        and isinstance(k.value, ast.Constant)
        and isinstance(k.value.value, str)
        and k.value.value.lower() in _UTF8
        for k in keywords
    )


def _module_aliases(tree: ast.AST) -> dict[str, str]:
    """Local name -> module, for ``import m`` / ``import m as x``."""
    return _facts(tree).aliases


def _from_imports(tree: ast.AST) -> dict[str, tuple[str, str]]:
    """Local name -> (module, name), for ``from m import name [as x]``."""
    return _facts(tree).from_names


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
            if _is_next_of_genexp(node, user_names):
                out.append((node, "next_genexp", _rewrite_next(node)))
                continue
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


def _guarded_by_import_handler(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    return _guarded_by(node, parents, _NO_RAISE_HANDLERS)


def _guarded_by(
    node: ast.AST, parents: dict[ast.AST, ast.AST], catching: set[str], *, within: ast.AST | None = None
) -> bool:
    """Whether ``node`` sits in the body of a ``try`` with a bare ``except`` or one naming a
    class in ``catching`` (inside ``within`` when given)."""
    child, parent = node, parents.get(node)
    while parent is not None and child is not within:
        if isinstance(parent, _TRY_NODES) and child in cast(ast.Try, parent).body:
            for h in cast(ast.Try, parent).handlers:  # TryStar has the same fields
                names = [h.type] if not isinstance(h.type, ast.Tuple) else list(h.type.elts)
                if h.type is None or any(isinstance(n, ast.Name) and n.id in catching for n in names):
                    return True
        child, parent = parent, parents.get(parent)
    return False


def _under_type_checking(node: ast.AST, facts: _Facts) -> bool:
    """Whether ``node`` sits in the body of an ``if TYPE_CHECKING:`` (never run)."""
    child, parent = node, facts.parents.get(node)
    while parent is not None:
        if parent in facts.type_checking and child in cast(ast.If, parent).body:
            return True
        child, parent = parent, facts.parents.get(parent)
    return False


def _first_call_statement(tree: ast.Module) -> int:
    """The index of the first top-level statement with a call in it (it could call a tool),
    ``len(tree.body)`` when there is none."""
    for i, stmt in enumerate(tree.body):
        if any(isinstance(n, ast.Call) for n in ast.walk(stmt)):
            return i
    return len(tree.body)


def _runs_after_a_call(node: ast.AST, tree: ast.Module, first_call: int) -> bool:
    """Whether ``node`` is a top-level statement (it surely runs) after one with a call: only
    then could a failure of Monty's at ``node`` come after a tool ran."""
    for i, stmt in enumerate(tree.body):
        if stmt is node:
            return i > first_call
    return False


_CALLBACK_HANDLERS = {"NotImplementedError", "RuntimeError", "Exception", "BaseException"}
"""The handlers that catch the ``NotImplementedError`` a tool call inside a callback raises."""


def _callback_guarded(
    call: ast.Call,
    slot: ast.expr,
    tree: ast.Module,
    parents: dict[ast.AST, ast.AST],
    tool_callers: set[str],
    functions_style: bool,
    user_names: set[str],
) -> bool:
    """Whether the script catches the error of a tool called inside a callback: around the
    builtin's call, or (a function passed by name) around every tool call in its body."""
    if _guarded_by(call, parents, _CALLBACK_HANDLERS):
        return True
    if not isinstance(slot, ast.Name):
        return False
    defs = [d for d in _nodes(tree) if isinstance(d, ast.FunctionDef) and d.name == slot.id]
    if len(defs) != 1:
        return False
    calls = [sub for sub in ast.walk(defs[0]) if _is_tool_call(sub, tool_callers, functions_style, user_names)]
    return bool(calls) and all(_guarded_by(c, parents, _CALLBACK_HANDLERS, within=defs[0]) for c in calls)


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
    if _is_next_of_genexp(node, user_names):
        found.append(
            _finding(
                src,
                node,
                "next_genexp",
                "next() on a generator expression is not available (it is a list here); "
                "wrap it in iter(): next(iter(x for x in xs if ...), None)",
            )
        )
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


_MONTY_REFUSED = re.compile(r"does not yet support|Wildcard imports|No module named|cannot import name")
"""The errors with which Monty itself refuses what the check leaves to it (``_detect``)."""


def explain_failure(script: str, message: str, *, functions_style: bool = False) -> str | None:
    """What to write instead, for a script Monty refused itself.

    The check leaves to Monty what it reports before anything of the script could run (a
    construct its parser rejects: class inheritance, ``yield``, ``del``, method decorators,
    ``async with``, ``from m import *``; an import at the start of the script, or one that may
    never run): its own error comes first, and this adds the fix to it.

    Args:
        script: the script as the model wrote it.
        message: Monty's error for it.
        functions_style: as ``check_script``.

    Returns:
        One line per construct of those kinds, with its line, column and alternative, under a
        heading; None when ``message`` is not such an error or the script has none of them.
    """
    if not _MONTY_REFUSED.search(message):
        return None
    tree = parse_script(script)
    if tree is None:
        return None
    try:
        src = _Source(script)
        lean = set(_detect(tree, src, functions_style))
        extra = [f for f in _detect(tree, src, functions_style, everything=True) if f not in lean]
    except (RecursionError, MemoryError):  # pragma: no cover - the parse itself stops far earlier
        return None
    if not extra:
        return None
    return "To fix it (nothing else has run):\n" + "\n".join(f"- {f}" for f in extra)


def check_script(
    script: str, *, rewrite: bool = True, functions_style: bool = False, detect: bool = True
) -> CheckResult:
    """Finds the constructs of ``SUBSET`` the pinned Monty cannot run, rewriting those that
    have a same-meaning rewrite first.

    Args:
        script: the script as the model wrote it.
        rewrite: apply the same-meaning rewrites (``SubsetEntry.rewrite``).
        functions_style: tools are bare functions, so calls of names Monty lacks (``input``,
            ``format``) may be tool calls and are not reported.
        detect: look for the constructs to report (``MontyRuntime(check_scripts=False)``
            passes False: only the rewrites, if asked, and the awaited-call offsets are done).

    Returns:
        The script to run, the rewrites applied and the findings left (empty when the script
        passes). A script CPython cannot parse comes back unchanged with no findings.
    """
    if not _SCREEN.needs_check(script):
        return CheckResult(script)  # no rule could apply and nothing is awaited (the native screen)
    try:
        return _check(script, rewrite, functions_style, detect)
    except (RecursionError, MemoryError):  # absurd nesting: Monty reports it itself
        return CheckResult(script)


def _check(script: str, rewrite: bool, functions_style: bool, detect: bool) -> CheckResult:
    tree = parsed(script)  # the one parse, shared with the agent's pre-check (``_precheck``)
    if tree is None:
        return CheckResult(script)
    applied: list[Rewrite] = []
    if rewrite:
        for _ in range(4):
            src = _Source(script)
            edits = _rewrites(tree, src, _imported_names(tree), _defined_names(tree), _json_dumps_names(tree))
            if not edits:
                break
            new_script, done = _apply(src, edits)
            new_tree = parsed(new_script)
            if new_tree is None:  # pragma: no cover - a rewrite must never break the parse
                break
            applied += done
            script, tree = new_script, new_tree
    findings = _detect(tree, _Source(script), functions_style) if detect else []
    return CheckResult(script, tuple(applied), tuple(findings), deferred_offsets(script, tree))


_SCREEN = SubsetScreen(
    sorted(_MISSING_BUILTINS),
    sorted(_EXCEPTION_NAMES),
    sorted(_METHOD_NAMES),
    sorted({name for _module, name in _STDLIB_GAPS} | {"maketrans"}),
    sorted({"format_map", *_DATETIME_GAPS}),
    sorted(STDLIB_MODULES),
    sorted(_STDLIB_GAPS),
)
"""Whether a script needs the check at all: a pass of the lexer Monty's parser uses (ruff's),
then, for a script its tokens do not clear, one parse, in Rust (rust/src/screen.rs); true when
any rule here could apply (each rule's trigger in a weaker form) or a call is awaited.
tests/test_subset_screen.py holds it to that. A script it passes has no finding, no rewrite
and no awaited call, and is not parsed by CPython."""


# ------------------------------------------------------------------ a stack the parser cannot overflow

_STACK_BYTES = 64 * 1024 * 1024
_jobs: queue.SimpleQueue[tuple[str, bool, bool, bool, queue.SimpleQueue[CheckResult | BaseException]]] = (
    queue.SimpleQueue()
)
_worker_lock = threading.Lock()
_worker: threading.Thread | None = None


def _serve() -> None:
    while True:
        script, rewrite, functions_style, detect, reply = _jobs.get()
        try:
            reply.put(_cached_check(script, rewrite, functions_style, detect))
        except BaseException as exc:
            reply.put(exc)


_INLINE_STACK = 6 * 1024 * 1024
"""Native stack (bytes) the calling thread must have left for the check to run on it: CPython's
parser stops deep nesting at its own limits (about 6,000 levels) well within this."""


_CACHE_SIZE = 512
"""Check results kept (least recently used first out)."""

_CheckKey = tuple[str, bool, bool, bool]
_results: OrderedDict[_CheckKey, CheckResult] = OrderedDict()
_results_lock = threading.Lock()


def cached_check_result(key: _CheckKey) -> CheckResult | None:
    """The stored result for ``(script, rewrite, functions_style, detect)``, or None."""
    hit = _results.get(key)
    if hit is not None:
        try:
            _results.move_to_end(key)
        except KeyError:  # evicted by another thread in between: still a valid result
            pass
    return hit


def _cached_check(script: str, rewrite: bool, functions_style: bool, detect: bool) -> CheckResult:
    key = (script, rewrite, functions_style, detect)
    result = cached_check_result(key)
    if result is None:
        result = check_script(script, rewrite=rewrite, functions_style=functions_style, detect=detect)
        with _results_lock:
            _results[key] = result
            while len(_results) > _CACHE_SIZE:
                _results.popitem(last=False)
    return result


def clear_check_cache() -> None:
    """Forgets every stored check result (tests that count parses start from nothing)."""
    with _results_lock:
        _results.clear()


def check_script_safely(
    script: str, *, rewrite: bool = True, functions_style: bool = False, detect: bool = True
) -> CheckResult:
    """``check_script`` without risk to the host's stack, memoized by script text.

    CPython's parser and AST builder recurse in C: on a small thread stack (a host may run
    the runtime on a 256 KiB thread) a deeply nested script would crash the process before
    CPython's own limits answer. On a thread with at least ``_INLINE_STACK`` bytes of stack
    left (a default 8 MiB thread) the check runs in place; on a smaller one it runs on a
    dedicated thread with a 64 MiB stack, where CPython's limits answer first (SyntaxError,
    RecursionError) and the script then goes to Monty unchanged, which reports it. Results
    are cached (512 scripts), so a script started again costs a dictionary lookup.
    """
    hit = cached_check_result((script, rewrite, functions_style, detect))
    if hit is not None:  # the common restart: no stack probe, no parse
        return hit
    if (remaining_stack() or 0) >= _INLINE_STACK:
        return _cached_check(script, rewrite, functions_style, detect)
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
    _jobs.put((script, rewrite, functions_style, detect, reply))  # the worker memoizes too
    result = reply.get()
    if isinstance(result, BaseException):
        raise result
    return result
