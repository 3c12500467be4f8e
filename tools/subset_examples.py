"""The examples of docs/subset.md, one or two per construct of ``codeact.runtime._subset.SUBSET``.

``tools/gen_docs.py`` renders them into the page as fenced blocks titled by what they show, and
``tests/test_subset_docs.py`` runs every block of the page, so a page that claims a construct the
pinned Monty refuses (or the reverse) fails the tests:

- ``works``: runs on the pinned Monty as it is (no check, no rewrites), with the check on, and
  under CPython;
- ``refused``: runs under CPython, fails on the pinned Monty as it is and with the check on;
- ``rewritten``: runs under CPython, fails on the pinned Monty as it is, runs once the check has
  rewritten it.

An example passes when it ends without an exception: each states what it shows with ``assert``.
It may call the tool ``call_tool("double", {"x": n})`` (returns ``2 * n``) and read or write files
under ``/tmp`` (the test mounts a temporary folder there). Each is written the way a model would
write the construct, short enough to read.
"""

from __future__ import annotations

WORKS: dict[str, str] = {
    "functions, closures": """\
count = 0
def add(a, b=2, *, scale=1):
    global count
    count += 1
    return (a + b) * scale
def counter():
    n = 0
    def step():
        nonlocal n
        n += 1
        return n
    return step
step = counter()
step()
assert add(1) == 3 and add(1, scale=10) == 30 and count == 2
assert step() == 2 and (lambda x: x * 2)(4) == 8""",
    "list, dict and set comprehensions": """\
assert [i * i for i in range(4)] == [0, 1, 4, 9]
assert {k: len(k) for k in ["a", "bb"]} == {"a": 1, "bb": 2}
assert {i % 2 for i in range(5)} == {0, 1}
assert sum(x * x for x in range(4)) == 14
assert [y for x in range(3) if (y := x * 2)] == [2, 4]""",
    "a lambda that uses a comprehension variable": """\
rows = [{"a": 1, "b": 5}, {"a": 3, "b": 2}]
best = {m: max(rows, key=lambda r: r[m]) for m in ["a", "b"]}
assert best == {"a": rows[1], "b": rows[0]}""",
    "f-strings with format specs": """\
width = 5
assert f"{3.14159:.2f}|{7:>3}|{2.5:{width}.1f}" == "3.14|  7|  2.5\"""",
    "str.format() and %-formatting": """\
template = "{} and {x:.1f}"
pattern = "%s=%d"
assert template.format(1, x=2.25) == "1 and 2.2"
assert pattern % ("a", 3) == "a=3" and "%(k)s" % {"k": 1} == "1\"""",
    "try/except/else/finally": """\
log = []
try:
    1 / 0
except ZeroDivisionError:
    log.append("caught")
else:
    log.append("no error")
finally:
    log.append("finally")
try:
    try:
        {}["k"]
    except KeyError as e:
        raise ValueError("no k") from e
except ValueError as e:
    log.append(str(e))
assert log == ["caught", "finally", "no k"]""",
    "plain classes without a base class": """\
class Vec:
    kind = "vec"
    def __init__(self, *xs):
        self.xs = list(xs)
    def __eq__(self, other):
        return self.xs == other.xs
    def __hash__(self):
        return hash(tuple(self.xs))
    def __add__(self, other):
        return Vec(*[a + b for a, b in zip(self.xs, other.xs)])
    def __mul__(self, k):
        return Vec(*[a * k for a in self.xs])
    def __getitem__(self, i):
        return self.xs[i]
    def __setitem__(self, i, value):
        self.xs[i] = value
    def __iter__(self):
        return iter(self.xs)
    def __contains__(self, value):
        return value in self.xs
    def __call__(self):
        return sum(self.xs)
    def __enter__(self):
        return self
    def __exit__(self, *exc):
        return False
    def __repr__(self):
        return f"Vec{tuple(self.xs)}"
    def __str__(self):
        return "a vector"
v = Vec(1, 2) + Vec(3, 4)
v[0] = 5
with Vec(1) as w:
    assert w() == 1
assert v == Vec(5, 6) and v * 2 == Vec(10, 12) and {v: "x"}[Vec(5, 6)] == "x"
assert list(v) == [5, 6] and 6 in v and v() == 11 and v[1] == 6
assert repr(v) == "Vec(5, 6)" and str(v) == "a vector" and Vec.kind == "vec\"""",
    "decorators that are functions": """\
import functools
from dataclasses import dataclass
def twice(f):
    return lambda x: f(f(x))
@twice
def inc(x):
    return x + 1
@functools.lru_cache(maxsize=None)
def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)
@dataclass
class Point:
    x: int
    y: int
assert inc(1) == 3 and fib(30) == 832040 and Point(1, 2) == Point(1, 2)""",
    "match statements": """\
def describe(event):
    match event:
        case {"type": "click", "x": x}:
            return f"click at {x}"
        case [first, *rest]:
            return f"{first} and {len(rest)} more"
        case _:
            return "other"
assert describe({"type": "click", "x": 3}) == "click at 3"
assert describe([1, 2, 3]) == "1 and 2 more" and describe(None) == "other\"""",
    "sorted/min/max with key=lambda": """\
people = [{"name": "b", "age": 30}, {"name": "a", "age": 25}]
assert [p["name"] for p in sorted(people, key=lambda p: p["age"])] == ["a", "b"]
assert min(people, key=lambda p: p["age"])["name"] == "a"
assert max(people, key=lambda p: p["name"])["name"] == "b\"""",
    "calling a tool inside a loop or comprehension": """\
doubled = []
for v in [1, 2]:
    doubled.append(call_tool("double", {"x": v}))
assert doubled == [2, 4]
assert [call_tool("double", {"x": v}) for v in [3, 4]] == [6, 8]""",
    "the dict | merge operator": """\
import sys
assert ({"a": 1} | {"b": 2}) == {"a": 1, "b": 2}
assert (1j * 1j).real == -1.0 and abs(3 + 4j) == 5.0
assert format(1.5, ".1f") == "1.5"
print("a warning", file=sys.stderr)""",
    "datetime.now(timezone.utc)": """\
from datetime import datetime, timezone
now = datetime.now(timezone.utc)
assert now.year > 2000 and now.utcoffset().total_seconds() == 0""",
    "json, re, math, datetime": """\
import json, math, re
from datetime import date, datetime, timedelta
assert json.loads(json.dumps({"a": [1, 2]}, indent=2)) == {"a": [1, 2]}
assert re.findall(r"\\d+", "a1b22") == ["1", "22"] and math.sqrt(16) == 4.0
assert str(date(2024, 1, 31) + timedelta(days=1)) == "2024-02-01"
assert datetime.strptime("2024-01-02", "%Y-%m-%d").strftime("%d/%m") == "02/01"
assert datetime.fromisoformat("2024-01-02T03:04:05").hour == 3""",
    "collections (Counter": """\
from collections import Counter, defaultdict, deque, namedtuple
groups = defaultdict(list)
groups["a"].append(1)
Point = namedtuple("Point", "x y")
assert Counter("abca").most_common(1) == [("a", 2)] and groups["a"] == [1]
assert list(deque([1, 2, 3], maxlen=2)) == [2, 3] and Point(1, 2).y == 2""",
    "itertools (combinations": """\
import itertools
assert list(itertools.combinations([1, 2, 3], 2)) == [(1, 2), (1, 3), (2, 3)]
assert list(itertools.permutations([1, 2])) == [(1, 2), (2, 1)]
assert list(itertools.product("ab", [0])) == [("a", 0), ("b", 0)]
assert list(itertools.chain([1], [2])) == [1, 2]
assert [k for k, _ in itertools.groupby("aab")] == ["a", "b"]
assert list(itertools.islice(itertools.count(10), 2)) == [10, 11]
assert list(itertools.accumulate([1, 2, 3])) == [1, 3, 6]""",
    "functools (reduce": """\
import functools
@functools.lru_cache(maxsize=None)
def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)
assert functools.reduce(lambda a, b: a + b, [1, 2, 3]) == 6
assert functools.partial(pow, 2)(3) == 8 and fib(30) == 832040""",
    "csv (reader": """\
import csv
rows = list(csv.DictReader("a,b\\n1,2\\n".splitlines()))
assert rows[0]["b"] == "2" and list(csv.reader(['x,"y,z"'])) == [["x", "y,z"]]
with open("/tmp/out.csv", "w", newline="") as f:
    writer = csv.DictWriter(f, fieldnames=["a", "b"])
    writer.writeheader()
    writer.writerow({"a": 1, "b": 2})
    csv.writer(f).writerow([3, 4])
with open("/tmp/out.csv") as f:
    assert f.read().splitlines() == ["a,b", "1,2", "3,4"]""",
    "dataclasses (@dataclass": """\
from dataclasses import dataclass, field
@dataclass
class Order:
    id: int
    tags: list = field(default_factory=list)
@dataclass(frozen=True)
class Key:
    name: str
assert Order(1) == Order(1) and Order(1).tags == [] and Order(2, ["a"]).tags == ["a"]
try:
    Key("a").name = "b"
    changed = True
except Exception:
    changed = False
assert not changed""",
    "decimal, random, hashlib": """\
import base64, bisect, copy, hashlib, random, time, tomllib, unicodedata
from decimal import Decimal
from typing import Any, Optional
def first(xs: list) -> Optional[Any]:
    return xs[0] if xs else None
random.seed(1)
nested = [[1]]
clone = copy.deepcopy(nested)
clone[0].append(2)
assert str(Decimal("1.10") + Decimal("2.205")) == "3.305" and 1 <= random.randint(1, 3) <= 3
assert hashlib.sha256(b"a").hexdigest()[:4] == "ca97" and bisect.bisect_left([1, 3], 2) == 1
assert nested == [[1]] and base64.b64encode(b"hi") == b"aGk=" and first([]) is None
assert time.time() > 0 and tomllib.loads("a = 1") == {"a": 1}
assert unicodedata.normalize("NFC", "e\\u0301") == "\\u00e9\"""",
}
"""Supported constructs (keyed by the start of ``SubsetEntry.construct``) -> an example."""

REFUSED: dict[str, str] = {
    "inheritance": """\
class NotFound(Exception):
    pass
try:
    raise NotFound("order 7")
except NotFound as e:
    assert str(e) == "order 7\"""",
    "operator_methods": """\
class Basket:
    def __init__(self):
        self.items = ["tea", "milk"]
    def __len__(self):
        return len(self.items)
assert len(Basket()) == 2""",
    "decorator": """\
class Order:
    def __init__(self, lines):
        self.lines = lines
    @property
    def total(self):
        return sum(self.lines)
assert Order([1, 2]).total == 3""",
    "yield": """\
def evens(n):
    for i in range(n):
        if i % 2 == 0:
            yield i
assert list(evens(5)) == [0, 2, 4]""",
    "del": """\
total = 1
del total
total = 2
assert total == 2""",
    "bound_method": """\
items = []
add = items.append
add(1)
assert items == [1]""",
    "lazy_genexp": """\
priced = []
def price(o):
    priced.append(o)
    return call_tool("double", {"x": o})
prices = (price(o) for o in [1, 2, 3])
first = next(prices)
assert first == 2 and priced == [1]""",
    "tool_in_callback": """\
ranked = sorted([1, 3, 2], key=lambda v: call_tool("double", {"x": -v}))
assert ranked == [3, 2, 1]""",
    "format_map": """\
values = {"a": 1, "b": 2}
assert "{a}-{b}".format_map(values) == "1-2\"""",
    "utcnow": """\
from datetime import datetime
assert datetime.utcnow().year > 2000""",
    "json_default": """\
import json
assert json.dumps({"a": 1}, cls=json.JSONEncoder) == '{"a": 1}'""",
    "path_encoding": """\
from pathlib import Path
Path("/tmp/notes.txt").write_text("tea", errors="strict")
assert Path("/tmp/notes.txt").read_text() == "tea\"""",
    "exception_args": """\
try:
    raise ValueError("bad total", 7)
except ValueError as e:
    assert e.args == ("bad total", 7)""",
    "missing_builtin": """\
assert callable(len)""",
    "re_sub_callable": """\
import re
assert re.sub(r"\\d+", lambda m: str(int(m.group()) * 2), "a1b22") == "a2b44\"""",
    "gather_kwargs": """\
import asyncio
async def ok():
    return 1
async def bad():
    raise ValueError("x")
async def main():
    return await asyncio.gather(ok(), bad(), return_exceptions=True)
results = asyncio.run(main())
assert results[0] == 1 and isinstance(results[1], ValueError)""",
    "syntax": """\
from json import *
assert loads("[1]") == [1]""",
    "stdlib_gap": """\
from collections import OrderedDict
assert list(OrderedDict(b=1, a=2)) == ["b", "a"]""",
    "stdlib_import": """\
import statistics
assert statistics.mean([1, 2, 3]) == 2""",
    "third_party_import": """\
import numpy
assert numpy.mean([1, 2, 3]) == 2""",
}
"""Unsupported constructs (by ``SubsetEntry.key``) -> an example the check leaves refused."""

REWRITTEN: dict[str, str] = {
    "inheritance": """\
class Cart(object):
    def __init__(self):
        self.items = []
assert Cart().items == []""",
    "del": """\
stock = {"tea": 1, "milk": 2}
del stock["tea"]
assert stock == {"milk": 2}""",
    "bound_method": """\
stock = {"tea": 3, "milk": 1}
assert sorted(stock, key=stock.get) == ["milk", "tea"]
assert list(map(str.upper, ["a", "b"])) == ["A", "B"]""",
    "lazy_genexp": """\
checked = []
def is_big(o):
    checked.append(o)
    return call_tool("double", {"x": o}) > 2
found = any(is_big(o) for o in [1, 2, 3])
assert found and checked == [1, 2]""",
    "format_map": """\
assert "{a}-{b}".format_map({"a": 1, "b": 2}) == "1-2\"""",
    "json_default": """\
import json
from datetime import date
assert json.dumps({"day": date(2024, 1, 2)}, default=str) == '{"day": "2024-01-02"}'""",
    "path_encoding": """\
from pathlib import Path
Path("/tmp/notes.txt").write_text("tea", encoding="utf-8")
assert Path("/tmp/notes.txt").read_text(encoding="utf-8") == "tea\"""",
}
"""Unsupported constructs with a rewrite (by ``SubsetEntry.key``) -> an example the check rewrites."""

NOT_ON_CPYTHON = frozenset({"third_party_import"})
"""Keys whose examples CPython need not run either: a third-party package is absent there too."""
