"""What the pinned Monty can and cannot run, as one table.

The language section of ``MontyRuntime.capabilities().prompt`` is rendered from this table,
and a test runs every ``probe`` on the real interpreter, so the prompt cannot drift from
the interpreter when the Monty version changes.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ("SUBSET", "STDLIB_MODULES", "SubsetEntry", "render_language_section")


@dataclass(frozen=True, slots=True)
class SubsetEntry:
    """One construct.

    Attributes:
        construct: what the model would write, in a few words.
        supported: whether the pinned Monty runs it.
        probe: a tiny script whose last expression is ``True`` when the construct works.
        instead: for unsupported constructs, what to write instead.
        key: the id the static check (``codeact.runtime._check``) uses for its detector and
            rewriter of this construct; every unsupported entry has a detector.
        rewrite: for unsupported constructs that have a same-meaning rewrite, what the check
            rewrites automatically (empty when every use gets a corrective message).
    """

    construct: str
    supported: bool
    probe: str
    instead: str = ""
    key: str = ""
    rewrite: str = ""


SUBSET: tuple[SubsetEntry, ...] = (
    SubsetEntry(
        "functions, closures, lambdas, default and keyword arguments",
        True,
        "def f(a, b=2, *, c=3):\n    return lambda x: a + b + c + x\nf(1)(4) == 10",
    ),
    SubsetEntry(
        "list, dict and set comprehensions",
        True,
        "[i for i in range(3)] == [0, 1, 2] and {k: 1 for k in 'ab'} == {'a': 1, 'b': 1}",
    ),
    SubsetEntry("f-strings with format specs", True, "f'{3.14159:.2f}|{7:>3}' == '3.14|  7'"),
    SubsetEntry(
        "try/except/else/finally and raise",
        True,
        "ok = False\ntry:\n    1 / 0\nexcept ZeroDivisionError:\n    ok = True\nok",
    ),
    SubsetEntry(
        "plain classes without a base class",
        True,
        "class P:\n    def __init__(self, x):\n        self.x = x\nP(2).x == 2",
    ),
    SubsetEntry("sorted/min/max with key=lambda", True, "sorted([3, 1, 2], key=lambda v: -v) == [3, 2, 1]"),
    SubsetEntry(
        "json, re, math, datetime modules",
        True,
        "import json, re, math\njson.loads(json.dumps({'a': 1})) == {'a': 1} and math.sqrt(4) == 2.0",
    ),
    SubsetEntry(
        "class inheritance (including custom exception classes)",
        False,
        "class E(Exception):\n    pass\nTrue",
        "write a plain class without a base, or raise a builtin exception such as ValueError('...')",
        key="inheritance",
        rewrite="`class A(object):` becomes `class A:`",
    ),
    SubsetEntry(
        "operator methods on classes (__eq__, __lt__, __len__, __getitem__, __iter__, __add__, __call__, ...)",
        False,
        "class A:\n    def __len__(self):\n        return 3\nlen(A()) == 3",
        "ordinary methods called explicitly (a.size(), a.less_than(b)); sort with key=lambda",
        key="operator_methods",
    ),
    SubsetEntry(
        "decorators (@property, @staticmethod, your own)",
        False,
        "def d(f):\n    return f\n@d\ndef g():\n    return 1\ng() == 1",
        "call the wrapper explicitly: g = d(g)",
        key="decorator",
    ),
    SubsetEntry(
        "match statements", False, "match 1:\n    case 1:\n        r = True\nr", "use if/elif chains", key="match"
    ),
    SubsetEntry(
        "generators and yield",
        False,
        "def g():\n    yield 1\nlist(g()) == [1]",
        "build and return a list",
        key="yield",
    ),
    SubsetEntry(
        "the del statement",
        False,
        "x = 1\ndel x\nTrue",
        "rebind the name (x = None), or use dict.pop(key)",
        key="del",
        rewrite="`del d[k]` (one subscript target) becomes `d.pop(k)`",
    ),
    SubsetEntry(
        "str.format()",
        False,
        "'{}'.format(1) == '1'",
        "use an f-string: f'{value}'",
        key="str_format",
        rewrite="`'...{}...'.format(a)` on a literal template becomes the f-string `f'...{a}...'`",
    ),
    SubsetEntry(
        "%-formatting of strings",
        False,
        "'%d' % 1 == '1'",
        "use an f-string: f'{value:d}'",
        key="percent_format",
        rewrite="`'...%s...' % (a,)` on a literal template with a tuple, dict or non-tuple literal operand "
        "becomes an f-string",
    ),
    SubsetEntry(
        "bound method values (key=d.get, map(str.upper, ...))",
        False,
        "d = {'a': 2, 'b': 1}\nsorted(d, key=d.get) == ['b', 'a']",
        "a lambda that calls the method: key=lambda k: d.get(k)",
        key="bound_method",
        rewrite="`obj.method` passed as `key=` or to map/filter becomes `lambda *a: obj.method(*a)` "
        "(`str.upper` becomes `lambda x, *a: x.upper(*a)`)",
    ),
    SubsetEntry(
        "the dict | merge operator",
        False,
        "({'a': 1} | {'b': 2}) == {'a': 1, 'b': 2}",
        "{**a, **b}",
        key="dict_merge",
        rewrite="`{...} | {...}` of two dict displays becomes `{**{...}, **{...}}`",
    ),
    SubsetEntry(
        "eval, exec, globals, input, __import__",
        False,
        "eval('1') == 1",
        "write the code directly",
        key="missing_builtin",
    ),
    SubsetEntry(
        "the builtins format(), callable(), vars(), super()",
        False,
        "format(1.5, '.1f') == '1.5'",
        "an f-string for format(x, '.1f'): f'{x:.1f}'; call the object directly instead of checking callable()",
        key="missing_builtin_2",
        rewrite="`format(x, '<literal spec>')` becomes `f'{x:<spec>}'`",
    ),
    SubsetEntry(
        "print(..., file=...)",
        False,
        "import sys\nprint('x', file=sys.stderr)\nTrue",
        "print(...) without file=",
        key="print_file",
    ),
    SubsetEntry(
        "re.sub with a function as the replacement",
        False,
        "import re\nre.sub('a', lambda m: 'b', 'a') == 'b'",
        "loop over re.finditer(...) and build the new string from the pieces",
        key="re_sub_callable",
    ),
    SubsetEntry(
        "async with, async for, `from module import *`, complex literals (1j)",
        False,
        "from json import *\nTrue",
        "plain with/for, import the names you use, and floats instead of complex numbers",
        key="syntax",
    ),
    SubsetEntry(
        "import of collections, itertools, functools, dataclasses, time, random, csv, ...",
        False,
        "import collections\nTrue",
        "plain dicts and lists (dict.get(k, 0) + 1 for counting; sorted() for ordering)",
        key="stdlib_import",
    ),
    SubsetEntry(
        "third-party packages (pandas, numpy, requests, ...)",
        False,
        "import numpy\nTrue",
        "plain Python on lists and dicts; tools for anything outside the sandbox",
        key="third_party_import",
    ),
)
"""The constructs of the pinned Monty (0.0.19) that models reach for, probed by the tests."""

STDLIB_MODULES: tuple[str, ...] = ("sys", "os", "typing", "asyncio", "re", "datetime", "json", "math", "pathlib")
"""The standard-library modules a script may import."""


def render_language_section() -> str:
    """The language part of the Monty prompt, rendered from ``SUBSET``."""
    works = [e.construct for e in SUBSET if e.supported]
    lines = [
        "Scripts run on Monty, a fast, sandboxed Python interpreter written in Rust. It runs a SUBSET of Python 3:",
        "- Works: " + "; ".join(works) + ".",
        "- Importable standard library: " + ", ".join(STDLIB_MODULES) + ". No other module can be imported.",
        "- Not available (write the alternative instead):",
    ]
    lines += [f"  - {e.construct}. Instead: {e.instead}." for e in SUBSET if not e.supported]
    return "\n".join(lines)
