"""The static subset check (``codeact.runtime._check``): rewrites with the same meaning, and one
corrective message per construct the pinned Monty cannot run (docs/subset.md)."""

from __future__ import annotations

import contextlib
import io

import pytest

from codeact import Complete, MontyRuntime, Raised
from codeact.runtime._check import check_script, format_findings
from codeact.runtime._subset import SUBSET


def cpython(script: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(script, "main.py", "exec"), {"__name__": "__main__"})
    return out.getvalue()


RAW = MontyRuntime(rewrite_scripts=False, check_scripts=False)
CHECKED = MontyRuntime()


# ------------------------------------------------------------------ one table


@pytest.mark.parametrize("entry", [e for e in SUBSET if not e.supported], ids=lambda e: e.key)
def test_every_unsupported_entry_is_detected_on_its_own_probe(entry) -> None:
    result = check_script(entry.probe, rewrite=False)
    assert entry.key in {f.key for f in result.findings}, result


@pytest.mark.parametrize("entry", [e for e in SUBSET if e.supported], ids=lambda e: e.construct)
def test_supported_probes_pass_the_check(entry) -> None:
    assert check_script(entry.probe).findings == ()


# A script per rewrite of the table, in the probes' convention (the last expression is True).
REWRITE_EXAMPLES = {
    "inheritance": "class A(object):\n    pass\nisinstance(A(), A)",
    "del": "d = {'a': 1}\ndel d['a']\nd == {}",
    "str_format": "'{}'.format(1) == '1'",
    "percent_format": "'%d' % 1 == '1'",
    "bound_method": "d = {'a': 2, 'b': 1}\nsorted(d, key=d.get) == ['b', 'a']",
    "dict_merge": "({'a': 1} | {'b': 2}) == {'a': 1, 'b': 2}",
    "missing_builtin_2": "format(1.5, '.1f') == '1.5'",
}


def test_every_rewrite_of_the_table_has_an_example() -> None:
    assert {e.key for e in SUBSET if e.rewrite} == set(REWRITE_EXAMPLES)


@pytest.mark.parametrize("entry", [e for e in SUBSET if e.rewrite], ids=lambda e: e.key)
def test_every_rewrite_of_the_table_makes_its_example_run_on_monty(entry) -> None:
    example = REWRITE_EXAMPLES[entry.key]
    assert not isinstance(RAW.start(example), Complete) or RAW.start(example).value is not True
    result = check_script(example)
    assert result.findings == (), result
    assert entry.key in {r.key for r in result.rewrites}
    step = RAW.start(result.script)
    assert isinstance(step, Complete) and step.value is True, (result.script, step)


# ------------------------------------------------------------------ rewrites keep the meaning

REWRITES = {
    "str.format auto": "x, y = 3, 'a'\nprint('{} and {}!'.format(x, y))",
    "str.format names and specs": "v = 3.14159\nprint('{v:.2f}|{w:>5}|{0!r}'.format('q', v=v, w='ab'))",
    "str.format nested spec": "w = 6\nprint('[{:>{w}}]'.format(42, w=w))",
    "str.format index and attr": "d = {'k': [1, 2]}\nprint('{0[k]} {0}'.format(d))",
    "str.format braces": "print('{{literal}} {}'.format(1))",
    "str.format calls used once in order": (
        "def f():\n    print('f')\n    return 1\nprint('{}-{}'.format(f(), f() + 1))"
    ),
    "percent tuple": "name, n, r = 'x', 3, 0.256\nprint('%s has %d items (%.1f%%)' % (name, n, r))",
    "percent widths": "print('[%5s][%-5s][%05d][%+.2e][%x][%#o]' % ('a', 'b', 42, 1234.5, 255, 8))",
    "percent d truncates": "print('%d' % (3.9,))",
    "percent single literal": "print('value: %r' % 'a')",
    "percent str call": "x = [1]\nprint('got %s' % str(x))",
    "percent mapping": "print('%(a)s=%(b).1f' % {'a': 'k', 'b': 2.25})",
    "sorted key=d.get": "d = {'a': 3, 'b': 1, 'c': 2}\nprint(sorted(d, key=d.get))",
    "max key=d.get": "d = {'a': 3, 'b': 1}\nprint(max(d, key=d.get), min(d, key=d.get))",
    "map str.upper": "print(list(map(str.upper, ['a', 'b'])))",
    "map bound method": "s = 'a-b'\nprint(list(map(s.count, ['a', '-'])))",
    "list.sort key": "d = {'x': 2, 'y': 1}\nks = ['x', 'y']\nks.sort(key=d.get)\nprint(ks)",
    "del item": "d = {'a': 1, 'b': 2}\ndel d['a']\nl = [1, 2, 3]\ndel l[-1]\nprint(d, l)",
    "class object base": "class P(object):\n    def __init__(self, x):\n        self.x = x\nprint(P(2).x)",
    "dict merge displays": "print({'a': 1} | {'b': 2})",
    "format builtin": "print(format(3.14159, '.3f'), format(7, '>4'))",
    "nested format": "x = 2\nprint('a: {}'.format('{}'.format(x)))",
}


@pytest.mark.parametrize("script", REWRITES.values(), ids=REWRITES.keys())
def test_rewrites_give_the_same_output_under_cpython_and_run_on_monty(script: str) -> None:
    result = check_script(script)
    assert result.findings == (), result.findings
    assert result.rewrites, "expected a rewrite"
    assert result.script != script
    expected = cpython(script)
    assert cpython(result.script) == expected
    step = RAW.start(result.script)
    assert isinstance(step, Complete), (result.script, step)
    assert step.stdout == expected
    # and the runtime applies the same rewrites on its own
    via_runtime = CHECKED.start(script)
    assert isinstance(via_runtime, Complete) and via_runtime.stdout == expected


NOT_REWRITTEN = {
    "percent with a name (it could hold a tuple)": "x = (1,)\nprint('%s' % x)",
    "format with a repeated call": "def f():\n    return 1\nprint('{0}{0}'.format(f()))",
    "format with *args": "a = [1]\nprint('{}'.format(*a))",
    "format of a variable template": "t = '{}'\nprint(t.format(1))",
    "mixed numbering": "print('{} {0}'.format(1))",
}


@pytest.mark.parametrize("script", NOT_REWRITTEN.values(), ids=NOT_REWRITTEN.keys())
def test_unsafe_cases_are_reported_not_rewritten(script: str) -> None:
    result = check_script(script)
    assert result.rewrites == ()
    assert result.findings


def test_rewrites_can_be_turned_off() -> None:
    script = "print('{}'.format(1))"
    assert check_script(script, rewrite=False).script == script
    step = MontyRuntime(rewrite_scripts=False).start(script)
    assert isinstance(step, Raised) and "line 1, column 7: str.format()" in step.message


# ------------------------------------------------------------------ corrective messages, line and column

MESSAGES = [
    ("class E(Exception):\n    pass", 1, 1, "class E(Exception): class inheritance is not available; write `class E:`"),
    ("x = 1\n@d\ndef g():\n    pass", 2, 2, "the decorator @d is not available; define g without it, then wrap"),
    (
        "class A:\n    @property\n    def v(self):\n        return 1",
        2,
        6,
        "write an ordinary method and call it: obj.v()",
    ),
    ("class A:\n    def __lt__(self, o):\n        return True", 2, 5, "A.__lt__ is never called by the interpreter"),
    ("match x:\n    case 1:\n        pass", 1, 1, "match statements are not available; use an if/elif chain"),
    ("def g():\n    yield 1", 2, 5, "generators (yield) are not available; build a list and return it"),
    ("x = 1\ndel x", 2, 1, "`del x` is not available"),
    ("t = 'a'\ny = t.format(1)", 2, 5, "str.format() is not available; use an f-string"),
    ("x = (1,)\ny = 'v=%s' % x", 2, 5, "%-formatting of strings is not available; use an f-string"),
    ("f = items.append", 1, 5, "the method value items.append (not called) is not available; wrap it in a lambda"),
    ("a = {}\nb = a | {'x': 1}", 2, 5, "the dict | operator is not available; use {**a, **b}"),
    ("r = eval('1')", 1, 5, "eval() is not available"),
    ("ok = callable(len)", 1, 6, "callable() is not available"),
    ("import sys\nprint('x', file=sys.stderr)", 2, 1, "print(..., file=...) is not available; drop file="),
    ("import re\ns = re.sub('a', lambda m: 'b', 'a')", 2, 5, "re.sub with a function as the replacement"),
    ("from json import *", 1, 1, "`from json import *` is not available; import the names"),
    ("z = 1j", 1, 5, "complex literals are not available; use floats"),
    ("import collections", 1, 1, "module 'collections' is not available here"),
    ("x = 1\nimport numpy as np", 2, 1, "package 'numpy' is not available here"),
    ("s = 'é'; t = s.format(1)", 1, 14, "str.format() is not available"),  # columns count characters
]


@pytest.mark.parametrize(("script", "line", "column", "needle"), MESSAGES, ids=[m[3][:40] for m in MESSAGES])
def test_each_corrective_message_with_line_and_column(script: str, line: int, column: int, needle: str) -> None:
    findings = check_script(script).findings
    assert findings, script
    first = findings[0]
    assert (first.line, first.column) == (line, column), findings
    assert needle in first.message
    step = CHECKED.start(script)
    assert isinstance(step, Raised)
    assert f"line {line}, column {column}: " in step.message and needle in step.message
    assert step.message.startswith("SubsetError:")


def test_one_message_per_finding() -> None:
    script = "import itertools\nx = t.format(1)\nclass A(B):\n    pass\ndel y"
    findings = check_script(script).findings
    text = format_findings(findings)
    assert len(text.splitlines()) == 1 + len(findings) == 5


def test_guarded_imports_are_not_reported() -> None:
    script = "try:\n    import numpy\nexcept ImportError:\n    numpy = None\nnumpy is None"
    assert check_script(script).findings == ()
    step = CHECKED.start(script)
    assert isinstance(step, Complete) and step.value is True


def test_names_monty_lacks_may_be_tools_in_the_functions_style() -> None:
    assert check_script("input('x')", functions_style=True).findings == ()
    assert check_script("input('x')").findings


PASSING = [
    "total = 0\nfor i in range(4):\n    total += i\nprint(f'{total:>3}')\ntotal",
    "import json, re, math\nd = json.loads('{\"a\": [1, 2]}')\nsorted(d['a'], key=lambda v: -v)",
    "class P:\n    def __init__(self, x):\n        self.x = x\n    def __str__(self):\n        return 'P'\nstr(P(1))",
    "def f(*a, **k):\n    return len(a) + len(k)\nf(1, 2, z=3)",
    "from datetime import timedelta\ntimedelta(days=2).days",
    "import math\nlist(map(math.sqrt, [4.0, 9.0]))",
]


@pytest.mark.parametrize("script", PASSING)
def test_a_script_the_check_passes_also_runs_in_monty(script: str) -> None:
    assert check_script(script).findings == ()
    step = CHECKED.start(script)
    assert isinstance(step, Complete), step


def test_syntax_errors_are_left_to_monty() -> None:
    step = CHECKED.start("x = (")
    assert isinstance(step, Raised) and "SyntaxError" in step.message
    assert not step.message.startswith("SubsetError")


def test_deep_nesting_does_not_crash_the_check() -> None:
    deep = "[" * 100_000 + "]" * 100_000
    assert check_script(deep).findings == ()
    step = CHECKED.start(deep)
    assert isinstance(step, Raised)
