"""The static subset check's shared parts: findings, positions, name tables and the facts
every rule reads about one syntax tree (gathered in one walk, ``_facts``).

The rules themselves live beside it, one module per family: ``_check_rewrite`` (the
same-meaning rewrites), ``_check_detect`` (the constructs reported), ``_check_lazy``
(generator expressions that could reach a tool); ``_check`` runs them.
"""

from __future__ import annotations

import ast
import builtins
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import cast

from ._subset import SUBSET, SubsetEntry

_TRY_NODES: tuple[type, ...] = (ast.Try, *((ast.TryStar,) if hasattr(ast, "TryStar") else ()))  # TryStar: 3.11+

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
