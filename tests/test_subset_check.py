"""The static subset check (``codeact.runtime._check``): rewrites with the same meaning, and one
corrective message per construct the pinned Monty cannot run (docs/subset.md).

What runs scripts on Monty uses the backends of ``tests/test_subset_table.py`` (codeact's own
runtime once it embeds Monty 1.4, and the official pydantic-monty 1.4 binding); the check itself
and the CPython side always run.
"""

from __future__ import annotations

import ast

import pytest

from codeact import Complete, MontyRuntime, Raised
from codeact.runtime._check import check_script, explain_failure, format_findings
from codeact.runtime._subset import SUBSET
from test_subset_table import BACKENDS, probe_subset


def on_monty(backend: str, *scripts: str) -> list[str]:
    """Each script's probe outcome on ``backend`` (``"True"`` or the reason it is not)."""
    return probe_subset.BACKENDS[backend](list(scripts))


def on_cpython(*scripts: str) -> list[str]:
    return probe_subset.run_cpython(list(scripts))


CHECKED = MontyRuntime()


# ------------------------------------------------------------------ one table


@pytest.mark.parametrize("entry", [e for e in SUBSET if not e.supported and e.check == "refuse"], ids=lambda e: e.key)
def test_every_refused_entry_is_detected_on_its_own_probe(entry) -> None:
    result = check_script(entry.probe, rewrite=False)
    assert entry.key in {f.key for f in result.findings}, result


@pytest.mark.parametrize("entry", [e for e in SUBSET if not e.supported and e.check == "explain"], ids=lambda e: e.key)
def test_every_explained_entry_is_left_to_monty_and_its_fix_added_to_monty_error(entry) -> None:
    """Monty refuses these itself before anything runs: the check passes the script, and the
    fix is added to Monty's own error."""
    assert check_script(entry.probe, rewrite=False).findings == ()
    step = MontyRuntime(rewrite_scripts=False).start(entry.probe)
    assert isinstance(step, Raised) and not step.message.startswith("SubsetError"), step
    fix = explain_failure(entry.probe, step.message)
    assert fix is not None and fix.startswith("To fix it") and "\n- line " in fix, (step.message, fix)


def test_a_construct_only_the_prompt_warns_about_is_not_refused() -> None:
    (entry,) = [e for e in SUBSET if e.check == "prompt"]
    assert check_script(entry.probe, rewrite=False).findings == ()
    # A class that merely defines such a method runs on Monty (the operator is never used).
    script = (
        "class A:\n    def __lt__(self, o):\n        return True\n"
        "    def __len__(self):\n        return 3\nA() is not None"
    )
    assert check_script(script, rewrite=False).findings == ()
    step = CHECKED.start(script)
    assert isinstance(step, Complete) and step.value is True


@pytest.mark.parametrize("entry", [e for e in SUBSET if e.supported], ids=lambda e: e.construct[:60])
def test_supported_probes_pass_the_check_untouched(entry) -> None:
    result = check_script(entry.probe)
    assert result.findings == () and result.rewrites == (), result


def test_the_probe_of_every_entry_with_a_rewrite_is_rewritten_without_findings() -> None:
    for entry in SUBSET:
        if entry.rewrite and entry.key not in ("inheritance", "del"):  # probes outside what the rewrite covers
            result = check_script(entry.probe)
            assert result.findings == (), (entry.key, result)
            assert entry.key in {r.key for r in result.rewrites}


# A script per rewrite of the table, in the probes' convention (the last expression is True).
REWRITE_EXAMPLES = {
    "inheritance": "class A(object):\n    pass\nisinstance(A(), A)",
    "del": "d = {'a': 1}\ndel d['a']\nd == {}",
    "bound_method": "d = {'a': 2, 'b': 1}\nsorted(d, key=d.get) == ['b', 'a']",
    "lazy_genexp": "xs = [1, 2, 3]\nnext((x for x in xs if x > 1), None) == 2",
    "format_map": "'{a}-{b}'.format_map({'a': 1, 'b': 2}) == '1-2'",
    "path_encoding": (
        "from pathlib import Path\nok = False\ntry:\n    Path('/no-such-dir/x.txt').read_text(encoding='utf-8')\n"
        "except OSError:\n    ok = True\nok"
    ),
    "json_default": "import json\nfrom datetime import date\njson.dumps({'d': date(2024, 1, 2)}, default=str) == "
    '\'{"d": "2024-01-02"}\'',
}


def test_every_rewrite_of_the_table_has_an_example() -> None:
    assert {e.key for e in SUBSET if e.rewrite} == set(REWRITE_EXAMPLES)


@pytest.mark.parametrize("key", REWRITE_EXAMPLES)
def test_every_rewrite_example_is_rewritten_and_keeps_its_meaning_on_cpython(key: str) -> None:
    example = REWRITE_EXAMPLES[key]
    result = check_script(example)
    assert result.findings == (), result
    assert key in {r.key for r in result.rewrites}
    assert on_cpython(example, result.script) == ["True", "True"]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("key", REWRITE_EXAMPLES)
def test_every_rewrite_makes_its_example_run_on_monty(backend: str, key: str) -> None:
    example = REWRITE_EXAMPLES[key]
    raw, rewritten = on_monty(backend, example, check_script(example).script)
    assert raw != "True"
    assert rewritten == "True"


# ------------------------------------------------------------------ rewrites keep the meaning

REWRITES = {
    "next with a default": "xs = [{'id': 1}, {'id': 2}]\nnext((r for r in xs if r['id'] == 2), None) == {'id': 2}",
    "next without a default": "next(c for c in 'abc' if c > 'a') == 'b'",
    "next falls back to the default": "next((x for x in range(3) if x > 5), -1) == -1",
    "next over a call in the filter": (
        "def big(v):\n    return v > 1\nnext((v * 10 for v in [1, 2, 3] if big(v)), None) == 20"
    ),
    "format_map on a dict display": "n = 3\n'{n} items'.format_map({'n': n}) == '3 items'",
    "sorted key=d.get": "d = {'a': 3, 'b': 1, 'c': 2}\nsorted(d, key=d.get) == ['b', 'c', 'a']",
    "max key=d.get": "d = {'a': 3, 'b': 1}\n(max(d, key=d.get), min(d, key=d.get)) == ('a', 'b')",
    "map str.upper": "list(map(str.upper, ['a', 'b'])) == ['A', 'B']",
    "map bound method": "s = 'a-b'\nlist(map(s.count, ['a', '-'])) == [1, 1]",
    "list.sort key": "d = {'x': 2, 'y': 1}\nks = ['x', 'y']\nks.sort(key=d.get)\nks == ['y', 'x']",
    "del item": "d = {'a': 1, 'b': 2}\ndel d['a']\nl = [1, 2, 3]\ndel l[-1]\n(d, l) == ({'b': 2}, [1, 2])",
    "class object base": "class P(object):\n    def __init__(self, x):\n        self.x = x\nP(2).x == 2",
    "read_text encoding": (
        "from pathlib import Path\ntry:\n    Path('/no/such.txt').read_text(encoding='UTF-8')\n    r = False\n"
        "except FileNotFoundError:\n    r = True\nexcept OSError:\n    r = True\nr"
    ),
    "json.dumps default=str, nested": (
        "import json\nfrom datetime import date, datetime, timedelta\n"
        "v = {'d': date(2024, 1, 2), 'xs': [1, (2.5, None, True), {'t': timedelta(hours=1)}], 's': 'é'}\n"
        "json.dumps(v, default=str, sort_keys=True) == "
        '\'{"d": "2024-01-02", "s": "\\\\u00e9", "xs": [1, [2.5, null, true], {"t": "1:00:00"}]}\''
    ),
    "json.dumps default=lambda, indent": (
        "import json\nfrom datetime import date\n"
        "json.dumps([date(2024, 1, 2)], default=lambda o: o.isoformat(), indent=2) == '[\\n  \"2024-01-02\"\\n]'"
    ),
    "json.dumps default returning a dict": (
        "import json\nfrom datetime import date\ndef enc(o):\n    return {'date': o.isoformat()}\n"
        'json.dumps({\'when\': date(2024, 1, 2)}, default=enc) == \'{"when": {"date": "2024-01-02"}}\''
    ),
    "json.dumps default=sorted on a set, from-import": (
        "from json import dumps as d\nd({'k': {3, 1, 2}}, default=sorted) == '{\"k\": [1, 2, 3]}'"
    ),
    "json.dumps default=None": "import json\njson.dumps({'a': 1}, default=None) == '{\"a\": 1}'",
    "json.dumps default on a bad key still raises": (
        "import json\nfrom datetime import date\ntry:\n    json.dumps({date(2024, 1, 2): 1}, default=str)\n"
        "    r = False\nexcept TypeError:\n    r = True\nr"
    ),
}


@pytest.mark.parametrize("script", REWRITES.values(), ids=REWRITES.keys())
def test_rewrites_give_the_same_result_under_cpython(script: str) -> None:
    result = check_script(script)
    assert result.findings == (), result.findings
    assert result.rewrites, "expected a rewrite"
    assert result.script != script
    assert on_cpython(script, result.script) == ["True", "True"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_rewritten_scripts_run_on_monty(backend: str) -> None:
    rewritten = [check_script(script).script for script in REWRITES.values()]
    assert dict(zip(REWRITES, on_monty(backend, *rewritten), strict=True)) == dict.fromkeys(REWRITES, "True")


NOT_REWRITTEN = {
    "format_map of a name (it could be a defaultdict)": "m = {'a': 1}\ny = '{a}'.format_map(m)",
    "a non-UTF-8 encoding": "from pathlib import Path\nt = Path('a').read_text(encoding='latin-1')",
    "errors=": "from pathlib import Path\nt = Path('a').read_text(encoding='utf-8', errors='ignore')",
    "next of a user's own next": "def next(a, b):\n    return b\nnext((x for x in []), 1)",
    "json.dumps with cls=": "import json\ns = json.dumps({}, default=str, cls=None)",
    "json.dumps with **options": "import json\no = {'indent': 1}\ns = json.dumps({}, default=str, **o)",
}


@pytest.mark.parametrize("script", NOT_REWRITTEN.values(), ids=NOT_REWRITTEN.keys())
def test_unsafe_cases_are_not_rewritten(script: str) -> None:
    result = check_script(script)
    assert result.rewrites == ()
    if "def next" not in script:
        assert result.findings


def test_rewrites_can_be_turned_off() -> None:
    script = "xs = [1]\ny = next((x for x in xs), None)"
    assert check_script(script, rewrite=False).script == script
    step = MontyRuntime(rewrite_scripts=False).start(script)
    assert isinstance(step, Raised) and "line 2, column 5: next() on a generator expression" in step.message


# ------------------------------------------------------------------ corrective messages, line and column

MESSAGES = [
    (
        "import functools\ndef d(f):\n    @functools.wraps(f)\n    def w():\n        return f()\n    return w",
        3,
        6,
        "wraps",
    ),
    ("f = items.append", 1, 5, "the method value items.append (not called) is not available; wrap it in a lambda"),
    ("xs = [3, 1]\ny = sorted(xs, key=lambda v: call_tool('score', {'v': v}))", 2, 20, "sorted() calls this function"),
    (
        "def score(v):\n    return call_tool('score', {'v': v})\nbest = max([1, 2], key=score)",
        3,
        24,
        "max() calls this function back, and a tool call cannot run inside it",
    ),
    (
        "m = {'a': 1}\ny = '{a}'.format_map(m)",
        2,
        5,
        "str.format_map() is not available; use template.format(**mapping)",
    ),
    ("import datetime\nt = datetime.datetime.utcnow()", 2, 5, "datetime.utcnow() is not available"),
    ("from datetime import datetime\nt = datetime.utcfromtimestamp(0)", 2, 5, "datetime.utcfromtimestamp()"),
    ("import json\ns = json.dumps({}, default=str)", 2, 5, "json.dumps(..., default=...) / cls= is not available"),
    ("from pathlib import Path\nPath('a').write_text('x', encoding='latin-1')", 2, 1, ".write_text() takes no"),
    ("raise ValueError('bad', 3)", 1, 7, "ValueError(...) takes at most one argument here, a string"),
    ("raise KeyError(3)", 1, 7, "KeyError(...) takes a string message here, not int"),
    ("raise SystemExit(3)", 1, 7, "SystemExit takes no exit code here, only a message string"),
    ("ok = callable(len)", 1, 6, "callable() is not available"),
    ("names = dir()", 1, 9, "dir() is not available"),
    ("import re\ns = re.sub('a', lambda m: 'b', 'a')", 2, 5, "re.sub with a function as the replacement"),
    ("import dataclasses\nd = dataclasses.asdict(p)", 2, 5, "dataclasses.asdict is not available here"),
    ("from dataclasses import dataclass\n@dataclass(order=True)\nclass P:\n    x: int", 2, 2, "order=True"),
    ("t = str.maketrans('a', 'b')", 1, 5, "str.maketrans is not available here"),
    ("x = len('a')\nimport statistics", 2, 1, "module 'statistics' is not available here"),
    ("x = call_tool('f', {})\nimport numpy as np", 2, 1, "No module named 'numpy': no third-party packages"),
    ("x = max(1, 2)\nfrom collections import OrderedDict", 2, 1, "collections.OrderedDict is not available here"),
    ("s = 'é'; t = next(c for c in s)", 1, 14, "next() on a generator expression"),  # columns count characters
]
"""Refused before anything runs: Monty would fail only while running (after what came before)."""

EXPLAINED = [
    ("class E(Exception):\n    pass", 1, 1, "class E(Exception): class inheritance is not available; write `class E:`"),
    (
        "class A:\n    @property\n    def v(self):\n        return 1",
        2,
        6,
        "write an ordinary method and call it: obj.v()",
    ),
    ("class A:\n    @staticmethod\n    def v():\n        return 1", 2, 6, "define a module-level function"),
    ("def g():\n    yield 1", 2, 5, "generators (yield) are not available; build a list and return it"),
    ("x = 1\ndel x", 2, 1, "`del x` is not available"),
    ("from json import *", 1, 1, "`from json import *` is not available; import the names"),
    ("from collections import OrderedDict", 1, 1, "collections.OrderedDict is not available here; instead: a plain"),
    ("import statistics", 1, 1, "module 'statistics' is not available here"),
    ("x = 1\nimport numpy as np", 2, 1, "No module named 'numpy': no third-party packages"),
    ("async def f():\n    async for a in b:\n        pass", 2, 5, "`async for` is not available"),
]
"""Left to Monty, which refuses them before anything of the script runs; the fix is added to its error."""


@pytest.mark.parametrize(("script", "line", "column", "needle"), MESSAGES, ids=[m[3][:40] for m in MESSAGES])
def test_each_corrective_message_with_line_and_column(script: str, line: int, column: int, needle: str) -> None:
    findings = check_script(script, rewrite=False).findings
    assert findings, script
    first = findings[0]
    assert (first.line, first.column) == (line, column), findings
    assert needle in first.message
    step = MontyRuntime(rewrite_scripts=False).start(script)
    assert isinstance(step, Raised)
    assert f"line {line}, column {column}: " in step.message and needle in step.message
    assert step.message.startswith("SubsetError:")


@pytest.mark.parametrize(("script", "line", "column", "needle"), EXPLAINED, ids=[m[3][:40] for m in EXPLAINED])
def test_what_monty_refuses_itself_gets_its_fix_added_to_monty_error(
    script: str, line: int, column: int, needle: str
) -> None:
    assert check_script(script, rewrite=False).findings == ()
    step = MontyRuntime(rewrite_scripts=False).start(script)
    assert isinstance(step, Raised) and not step.message.startswith("SubsetError:"), step
    fix = explain_failure(script, step.message)
    assert fix is not None and f"line {line}, column {column}: " in fix and needle in fix, (step.message, fix)


def test_one_message_per_finding() -> None:
    script = "x = f()\nimport statistics\ny = t.format_map(m)\nz = callable(x)"
    findings = check_script(script).findings
    text = format_findings(findings)
    assert len(text.splitlines()) == 1 + len(findings) == 4


def test_guarded_imports_are_not_reported() -> None:
    script = "try:\n    import numpy\nexcept ImportError:\n    numpy = None\nnumpy is None"
    assert check_script(script).findings == ()
    step = CHECKED.start(script)
    assert isinstance(step, Complete) and step.value is True


def test_names_monty_lacks_may_be_tools_in_the_functions_style() -> None:
    assert check_script("input('x')", functions_style=True).findings == ()
    assert check_script("input('x')").findings


def test_a_tool_in_a_key_is_found_in_the_functions_style_too() -> None:
    script = "xs = [1, 2]\nys = sorted(xs, key=lambda v: rank(v))"
    assert [f.key for f in check_script(script, functions_style=True).findings] == ["tool_in_callback"]
    assert check_script("ys = sorted([1], key=lambda v: abs(v))", functions_style=True).findings == ()


def test_a_tool_called_in_a_comprehension_is_not_reported() -> None:
    script = "xs = [1, 2]\nkeys = {v: call_tool('rank', {'v': v}) for v in xs}\nys = sorted(xs, key=lambda v: keys[v])"
    assert check_script(script).findings == ()


PASSING = [
    "total = 0\nfor i in range(4):\n    total += i\nprint(f'{total:>3}')\ntotal == 6",
    "import json, re, math\nd = json.loads('{\"a\": [1, 2]}')\nsorted(d['a'], key=lambda v: -v) == [2, 1]",
    "class P:\n    def __init__(self, x):\n        self.x = x\n"
    "    def __str__(self):\n        return 'P'\nstr(P(1)) == 'P'",
    "def f(*a, **k):\n    return len(a) + len(k)\nf(1, 2, z=3) == 3",
    "from datetime import timedelta\ntimedelta(days=2).days == 2",
    "import math\nlist(map(math.sqrt, [4.0, 9.0])) == [2.0, 3.0]",
    "from collections import Counter\nimport itertools, csv\nCounter('aab')['a'] == 2",
    "'{} and {}'.format(1, 2) == '1 and 2' and '%d%%' % 5 == '5%' and format(2.5, '.1f') == '2.5'",
    "t = '%s=%s'\n{'a': 1} | {'b': 2} == {'a': 1, 'b': 2} and t % ('k', 'v') == 'k=v'",
    "def deco(f):\n    return f\n@deco\ndef g():\n    return 1\nmatch g():\n    case 1:\n        r = True\nr",
    "rows = [{'a': 1}, {'a': 3}]\n{m: max(rows, key=lambda r: r[m]) for m in ['a']} == {'a': {'a': 3}}",
]


@pytest.mark.parametrize("script", PASSING)
def test_scripts_that_use_what_1_4_added_pass_the_check(script: str) -> None:
    assert check_script(script).findings == ()
    assert check_script(script).rewrites == ()
    assert on_cpython(script) == ["True"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_script_the_check_passes_also_runs_on_monty(backend: str) -> None:
    assert on_monty(backend, *PASSING) == ["True"] * len(PASSING)


def test_syntax_errors_are_left_to_monty() -> None:
    step = CHECKED.start("x = (")
    assert isinstance(step, Raised) and "SyntaxError" in step.message
    assert not step.message.startswith("SubsetError")


def test_deep_nesting_does_not_crash_the_check() -> None:
    deep = "[" * 100_000 + "]" * 100_000
    assert check_script(deep).findings == ()
    step = CHECKED.start(deep)
    assert isinstance(step, Raised)


def test_rewritten_text_parses() -> None:
    for script in [*REWRITES.values(), *REWRITE_EXAMPLES.values()]:
        ast.parse(check_script(script).script)


def test_changing_the_check_settings_forgets_what_the_runtime_remembered() -> None:
    # A runtime remembers the check's answer per script text; a setting changed later must
    # not be answered from that memory.
    script = "d = {'a': 2, 'b': 1}\nsorted(d, key=d.get)"
    rt = MontyRuntime()
    first = rt.start(script)
    assert isinstance(first, Complete) and first.value == ["b", "a"], first
    rt.rewrite_scripts = False
    rt.check_scripts = False
    unchecked = rt.start(script)  # Monty's own answer to the bound method value
    assert isinstance(unchecked, Raised) and "has no attribute 'get'" in unchecked.message, unchecked
    rt.rewrite_scripts = True
    again = rt.start(script)
    assert isinstance(again, Complete) and again.value == ["b", "a"], again


def test_the_remembered_check_answers_stay_bounded() -> None:
    rt = MontyRuntime()
    for i in range(600):
        step = rt.start(f"{i} + 1")
        assert isinstance(step, Complete) and step.value == i + 1
    assert 0 < len(rt._check_memo) <= 256
