"""What the pinned Monty can and cannot run, as one table.

The language section of ``MontyRuntime.capabilities().prompt`` is rendered from this table,
the static check (``_check.py``) keys its detectors and rewrites to it, and every ``probe``
is run on the real interpreter and on CPython, by the tests (``tests/test_subset_table.py``)
and by ``tools/probe_subset.py``, which also writes the measured table into docs/subset.md.
So the prompt cannot drift from the interpreter when the Monty version changes.

The flags below are those measured on Monty 1.4.0 (``tools/probe_subset.py --backend
pydantic-monty``). This module imports nothing outside the standard library, so the probe
tool can load it in an environment that has only the official binding.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = (
    "MONTY_VERSION",
    "PROBE_TOOLS",
    "STDLIB_MODULES",
    "SUBSET",
    "SubsetEntry",
    "render_language_section",
)

MONTY_VERSION = "1.4.0"
"""The Monty release this table was measured on."""


@dataclass(frozen=True, slots=True)
class SubsetEntry:
    """One construct.

    Attributes:
        construct: what the model would write, in a few words.
        supported: whether the pinned Monty runs it.
        probe: a tiny script whose last expression is ``True`` when the construct works (on
            CPython it always is). A probe may call the tool ``call_tool("double", {"x": n})``
            (returns ``2 * n``; ``PROBE_TOOLS``).
        instead: for unsupported constructs, what to write instead.
        key: the id the static check (``codeact.runtime._check``) uses for its detector and
            rewriter of this construct; every unsupported entry has a detector.
        rewrite: for unsupported constructs that have a same-meaning rewrite, what the check
            rewrites automatically (empty when every use gets a corrective message).
        check: for unsupported constructs, what the static check does with a use left after the
            rewrites: ``"refuse"`` (nothing runs, the fix is fed back: Monty would fail only
            while running, after the tools before it ran, or in misleading words);
            ``"explain"`` (Monty reports it itself before anything of the script runs: its
            parser rejects it, or it is an import at the start of the script; the fix is
            added to Monty's error, ``_check.explain_failure``); ``"prompt"`` (only the prompt
            warns: whether Monty fails depends on what the script does with it, so a refusal
            could be wrong).
    """

    construct: str
    supported: bool
    probe: str
    instead: str = ""
    key: str = ""
    rewrite: str = ""
    check: Literal["refuse", "explain", "prompt"] = "refuse"


PROBE_TOOLS = {"double": "x"}
"""The tools a probe may call, by name, with their one argument: ``double`` returns ``2 * x``."""

SUBSET: tuple[SubsetEntry, ...] = (
    # ------------------------------------------------------------------ works
    SubsetEntry(
        "functions, closures, lambdas, default and keyword arguments, global/nonlocal",
        True,
        "def f(a, b=2, *, c=3):\n    return lambda x: a + b + c + x\nf(1)(4) == 10",
    ),
    SubsetEntry(
        "list, dict and set comprehensions, generator expressions, the walrus operator",
        True,
        "[i for i in range(3)] == [0, 1, 2] and {k: 1 for k in 'ab'} == {'a': 1, 'b': 1} "
        "and sum(x * x for x in range(4)) == 14 and [y for x in range(3) if (y := x * 2)] == [2, 4]",
    ),
    SubsetEntry(
        "a lambda that uses a comprehension variable ({m: max(rows, key=lambda r: r[m]) for m in ms})",
        True,
        "rows = [{'a': 1, 'b': 5}, {'a': 3, 'b': 2}]\n"
        "best = {m: max(rows, key=lambda r: r[m]) for m in ['a', 'b']}\n"
        "best == {'a': rows[1], 'b': rows[0]}",
    ),
    SubsetEntry("f-strings with format specs", True, "w = 5\nf'{3.14159:.2f}|{7:>3}|{2.5:{w}.1f}' == '3.14|  7|  2.5'"),
    SubsetEntry(
        "str.format() and %-formatting, also on a template held in a variable",
        True,
        "t = '{} and {x:.1f}'\np = '%s=%d'\nt.format(1, x=2.25) == '1 and 2.2' and p % ('a', 3) == 'a=3' "
        "and '%(k)s' % {'k': 1} == '1'",
    ),
    SubsetEntry(
        "try/except/else/finally, raise and raise ... from",
        True,
        "ok = False\ntry:\n    1 / 0\nexcept ZeroDivisionError:\n    ok = True\nfinally:\n    done = True\nok and done",
    ),
    SubsetEntry(
        "plain classes without a base class, with __init__, class attributes and the operator methods "
        "__eq__, __hash__, __getitem__, __setitem__, __iter__, __contains__, __add__ (and the other arithmetic "
        "ones), __call__, __enter__/__exit__, __repr__, __str__",
        True,
        "class P:\n    def __init__(self, x):\n        self.x = x\n"
        "    def __eq__(self, o):\n        return self.x == o.x\n"
        "    def __add__(self, o):\n        return P(self.x + o.x)\n"
        "    def __getitem__(self, k):\n        return k * 2\n"
        "(P(1) + P(2)) == P(3) and P(0)[4] == 8",
    ),
    SubsetEntry(
        "decorators that are functions (your own, @functools.lru_cache, @dataclass)",
        True,
        "def twice(f):\n    return lambda x: f(f(x))\n@twice\ndef inc(x):\n    return x + 1\ninc(1) == 3",
    ),
    SubsetEntry("match statements", True, "match {'a': 1}:\n    case {'a': x}:\n        r = x == 1\nr"),
    SubsetEntry("sorted/min/max with key=lambda", True, "sorted([3, 1, 2], key=lambda v: -v) == [3, 2, 1]"),
    SubsetEntry(
        "calling a tool inside a loop or comprehension",
        True,
        "[call_tool('double', {'x': v}) for v in [1, 2]] == [2, 4]",
    ),
    SubsetEntry(
        "the dict | merge operator, complex numbers, format(), print(..., file=...)",
        True,
        "({'a': 1} | {'b': 2}) == {'a': 1, 'b': 2} and (1j * 1j).real == -1.0 and format(1.5, '.1f') == '1.5'",
    ),
    SubsetEntry(
        "datetime.now(timezone.utc) for the current UTC time",
        True,
        "from datetime import datetime, timezone\ndatetime.now(timezone.utc).year > 2000",
    ),
    SubsetEntry(
        "json, re, math, datetime (date, datetime, timedelta, strptime/strftime, fromisoformat)",
        True,
        "import json, re, math\nfrom datetime import date, datetime, timedelta\n"
        "json.loads(json.dumps({'a': 1}, indent=2)) == {'a': 1} and math.sqrt(4) == 2.0 "
        "and re.findall(r'\\d+', 'a1b22') == ['1', '22'] "
        "and str(date(2024, 1, 31) + timedelta(days=1)) == '2024-02-01' "
        "and datetime.strptime('2024-01-02', '%Y-%m-%d').strftime('%d/%m') == '02/01'",
    ),
    SubsetEntry(
        "collections (Counter, defaultdict, deque, namedtuple)",
        True,
        "from collections import Counter, defaultdict, deque, namedtuple\nd = defaultdict(list)\nd['a'].append(1)\n"
        "P = namedtuple('P', 'x y')\nCounter('abca').most_common(1) == [('a', 2)] and d['a'] == [1] "
        "and list(deque([1, 2, 3], maxlen=2)) == [2, 3] and P(1, 2).y == 2",
    ),
    SubsetEntry(
        "itertools (combinations, permutations, product, chain, groupby, islice, count, accumulate)",
        True,
        "import itertools\nlist(itertools.combinations([1, 2, 3], 2)) == [(1, 2), (1, 3), (2, 3)] "
        "and [k for k, _ in itertools.groupby('aab')] == ['a', 'b'] "
        "and list(itertools.islice(itertools.count(), 3)) == [0, 1, 2]",
    ),
    SubsetEntry(
        "functools (reduce, partial, lru_cache)",
        True,
        "import functools\n@functools.lru_cache(maxsize=None)\n"
        "def fib(n):\n    return n if n < 2 else fib(n - 1) + fib(n - 2)\n"
        "functools.reduce(lambda a, b: a + b, [1, 2, 3]) == 6 and functools.partial(pow, 2)(3) == 8 "
        "and fib(30) == 832040",
    ),
    SubsetEntry(
        "csv (reader, DictReader over text lines; writer, DictWriter to open files)",
        True,
        "import csv\nrows = [dict(r) for r in csv.DictReader('a,b\\n1,2\\n'.splitlines())]\n"
        "rows == [{'a': '1', 'b': '2'}] and list(csv.reader(['x,\"y,z\"'])) == [['x', 'y,z']]",
    ),
    SubsetEntry(
        "dataclasses (@dataclass, field(default_factory=...), frozen=True)",
        True,
        "from dataclasses import dataclass, field\n@dataclass\n"
        "class P:\n    x: int\n    tags: list = field(default_factory=list)\n"
        "P(1) == P(1) and P(1).tags == [] and P(2, ['a']).tags == ['a']",
    ),
    SubsetEntry(
        "decimal, random, hashlib, bisect, copy, base64, typing, time, tomllib, unicodedata",
        True,
        "from decimal import Decimal\nimport random, hashlib, bisect, copy, base64\nfrom typing import Any, Optional\n"
        "random.seed(1)\na = [[1]]\nb = copy.deepcopy(a)\nb[0].append(2)\n"
        "str(Decimal('1.10') + Decimal('2.205')) == '3.305' and 1 <= random.randint(1, 3) <= 3 "
        "and hashlib.sha256(b'a').hexdigest()[:4] == 'ca97' and bisect.bisect_left([1, 3], 2) == 1 and a == [[1]] "
        "and base64.b64encode(b'hi') == b'aGk='",
    ),
    # ------------------------------------------------------------------ does not work
    SubsetEntry(
        "class inheritance (custom exception classes, super(), TypedDict or NamedTuple classes)",
        False,
        "class E(Exception):\n    pass\nTrue",
        "write a plain class without a base, or raise a builtin exception such as ValueError('...')",
        key="inheritance",
        check="explain",
        rewrite="`class A(object):` becomes `class A:`",
    ),
    SubsetEntry(
        "the operator methods __len__, __lt__/__le__/__gt__/__ge__, __ne__, __bool__, __reversed__, __format__, "
        "__getattr__ and the in-place ones (__iadd__, ...): never called by the interpreter",
        False,
        "class A:\n    def __len__(self):\n        return 3\nlen(A()) == 3",
        "ordinary methods called explicitly (a.size(), a.less_than(b)); sort with key=lambda",
        key="operator_methods",
        check="prompt",
    ),
    SubsetEntry(
        "the method decorators @property, @staticmethod, @classmethod, and functools.wraps",
        False,
        "class A:\n    @property\n    def v(self):\n        return 1\nA().v == 1",
        "an ordinary method called as a.v(); a module-level function instead of a static or class method",
        key="decorator",
        check="explain",
    ),
    SubsetEntry(
        "generators and yield",
        False,
        "def g():\n    yield 1\nlist(g()) == [1]",
        "build and return a list",
        key="yield",
        check="explain",
    ),
    SubsetEntry(
        "the del statement",
        False,
        "x = 1\ndel x\nTrue",
        "rebind the name (x = None), or use dict.pop(key)",
        key="del",
        check="explain",
        rewrite="`del d[k]` (one subscript target) becomes `d.pop(k)`",
    ),
    SubsetEntry(
        "bound method values (key=d.get, map(str.upper, ...), f = items.append)",
        False,
        "d = {'a': 2, 'b': 1}\nsorted(d, key=d.get) == ['b', 'a']",
        "a lambda that calls the method: key=lambda k: d.get(k)",
        key="bound_method",
        rewrite="`obj.method` passed as `key=` or to map/filter becomes `lambda *a: obj.method(*a)` "
        "(`str.upper` becomes `lambda x, *a: x.upper(*a)`)",
    ),
    SubsetEntry(
        "a generator expression whose elements call a tool (any(call_tool(...) for o in xs), "
        "next((o for o in xs if call_tool(...)), None), an unconsumed or stored generator): "
        "it runs every element at once, as a list",
        False,
        "seen = []\ndef f(x):\n    seen.append(x)\n    return call_tool('double', {'x': x}) > 2\n"
        "any(f(x) for x in [1, 2, 3])\nseen == [1, 2]",
        "a for loop that stops when it has what it needs: for o in xs: if call_tool(...): found = o; break",
        key="lazy_genexp",
        rewrite="consumed by sorted/list/tuple/set/frozenset/dict/str.join it becomes the comprehension; "
        "consumed by any/all/next/sum/min/max in a statement that runs it first, the loop that computes it "
        "(stopping where Python stops) goes before the statement",
    ),
    SubsetEntry(
        "a tool call inside a function that sorted/min/max/map/filter call back (key=lambda v: call_tool(...)): "
        "it raises NotImplementedError there, so it runs only inside a try that catches that",
        False,
        "sorted([1, 3, 2], key=lambda v: call_tool('double', {'x': -v})) == [3, 2, 1]",
        "call the tool for each item first, then sort on the results: "
        "keys = {v: call_tool(...) for v in xs}; sorted(xs, key=lambda v: keys[v])",
        key="tool_in_callback",
    ),
    SubsetEntry(
        "str.format_map()",
        False,
        "t = '{a}-{b}'\nt.format_map({'a': 1, 'b': 2}) == '1-2'",
        "t.format(**mapping)",
        key="format_map",
        rewrite="`t.format_map(<dict display>)` becomes `t.format(**<dict display>)`",
    ),
    SubsetEntry(
        "datetime.utcnow(), utcfromtimestamp(), fromtimestamp()",
        False,
        "import datetime\ndatetime.datetime.utcnow().year > 2000",
        "datetime.now(timezone.utc) (from datetime import timezone); for a timestamp ts: "
        "datetime(1970, 1, 1, tzinfo=timezone.utc) + timedelta(seconds=ts)",
        key="utcnow",
    ),
    SubsetEntry(
        "json.dumps(..., default=...) and cls=",
        False,
        "import json\njson.dumps({'a': 1}, default=str) == '{\"a\": 1}'",
        "convert the values yourself first (str(d), d.isoformat()), then json.dumps",
        key="json_default",
        rewrite="`json.dumps(obj, default=f)` converts the values json cannot encode with `f` first, "
        "as CPython's encoder does (`cls=` stays refused)",
    ),
    SubsetEntry(
        "Path.read_text / Path.write_text with encoding= or errors=",
        False,
        "from pathlib import Path\nPath('probe.txt').write_text('x', encoding='utf-8') == 1",
        "leave out encoding= (files are always UTF-8 here), or open(path, 'w', encoding='utf-8')",
        key="path_encoding",
        rewrite="`encoding='utf-8'` is dropped from `.read_text(...)` / `.write_text(...)`",
    ),
    SubsetEntry(
        "exceptions created with more than one argument or a non-string one (ValueError('bad', x), KeyError(1))",
        False,
        "try:\n    raise ValueError('bad', 2)\nexcept ValueError as e:\n    r = e.args\nr == ('bad', 2)",
        "one message string: ValueError(f'bad: {x}')",
        key="exception_args",
    ),
    SubsetEntry(
        "the builtins globals(), input(), __import__(), callable(), vars(), dir(), super(), issubclass(), "
        "delattr(), ascii(), bytearray(), exit()",
        False,
        "callable(len)",
        "write the code directly: check with isinstance, keep your own dict instead of vars()/globals()",
        key="missing_builtin",
    ),
    SubsetEntry(
        "re.sub with a function as the replacement",
        False,
        "import re\nre.sub('a', lambda m: 'b', 'a') == 'b'",
        "loop over re.finditer(...) and build the new string from the pieces",
        key="re_sub_callable",
    ),
    SubsetEntry(
        "keyword arguments of asyncio.gather (return_exceptions=True)",
        False,
        "import asyncio\nasync def ok():\n    return 1\nasync def bad():\n    raise ValueError('x')\n"
        "async def main():\n    return await asyncio.gather(ok(), bad(), return_exceptions=True)\n"
        "r = asyncio.run(main())\nr[0] == 1 and isinstance(r[1], ValueError)",
        "gather helper coroutines that catch the error themselves (async def safe(name, args): try: "
        "return await call_tool(name, args) except Exception as e: return e), then "
        "asyncio.gather(safe(...), safe(...)); or call the tools one after another, each inside try/except",
        key="gather_kwargs",
    ),
    SubsetEntry(
        "async with, async for, `from module import *`",
        False,
        "from json import *\nTrue",
        "plain with/for, and import the names you use",
        key="syntax",
        check="explain",
    ),
    SubsetEntry(
        "missing parts of supported modules: collections.OrderedDict/ChainMap, functools.wraps/cmp_to_key/"
        "total_ordering/cached_property, dataclasses.asdict/astuple/fields/replace, @dataclass(order=True), "
        "typing.TypedDict/NamedTuple/cast, re.subn, asyncio.create_task/Queue, sys.exit, str.maketrans",
        False,
        "from collections import OrderedDict\nTrue",
        "a plain dict (it keeps insertion order); key=lambda returning a tuple instead of cmp_to_key; "
        "build the dict by hand instead of asdict",
        key="stdlib_gap",
        check="explain",
    ),
    SubsetEntry(
        "other standard-library modules (statistics, string, operator, heapq, enum, io, textwrap, uuid, ...)",
        False,
        "import statistics\nTrue",
        "plain Python on lists and dicts (sum(xs) / len(xs) for a mean, sorted() for ordering)",
        key="stdlib_import",
        check="explain",
    ),
    SubsetEntry(
        "third-party packages (pandas, numpy, requests, ...)",
        False,
        "import numpy\nTrue",
        "plain Python on lists and dicts; tools for anything outside the sandbox",
        key="third_party_import",
        check="explain",
    ),
)
"""The constructs of the pinned Monty (1.4.0) that models reach for, probed by the tests."""

STDLIB_MODULES: tuple[str, ...] = (
    "asyncio", "base64", "binascii", "bisect", "collections", "copy", "csv", "dataclasses", "datetime",
    "decimal", "functools", "hashlib", "itertools", "json", "math", "os", "pathlib", "random", "re", "sys",
    "time", "tomllib", "typing", "unicodedata",
)  # fmt: skip
"""The standard-library modules a script may import."""


def render_language_section() -> str:
    """The language part of the Monty prompt, rendered from ``SUBSET`` and ``STDLIB_MODULES``.

    ``MontyRuntime._build_prompt`` puts it first in ``capabilities().prompt``.
    """
    works = [e.construct for e in SUBSET if e.supported]
    lines = [
        "Scripts run on Monty, a fast, sandboxed Python interpreter written in Rust. It runs a SUBSET of Python 3:",
        "- Works: " + "; ".join(works) + ".",
        "- Importable standard library: " + ", ".join(STDLIB_MODULES) + ". No other module can be imported.",
        "- Not available (write the alternative instead):",
    ]
    lines += [f"  - {e.construct}. Instead: {e.instead}." for e in SUBSET if not e.supported]
    return "\n".join(lines)
