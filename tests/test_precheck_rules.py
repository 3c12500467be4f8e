"""Every rule of the pre-check is right about Monty (issue 21): for each construct the check
refuses (each detector, and each entry of its tables: missing builtins, missing names of
supported modules, datetime gaps, modules), a script using it runs on Monty itself, with the
check off, and must NOT give CPython's result. If Monty ran it as CPython does, the rule would
refuse a script Monty runs: the rule is wrong and this test fails.

Scripts follow the probes' convention (``tools/probe_subset.py``): the last expression is
``True`` when the construct works, as it always does on CPython. The refused form of an
import is one after a statement with a call (an import at the start of a script is left to
Monty, ``_check.explain_failure``). Also: Monty's own test cases (shipped with the ``monty``
crate, read in place; skipped when absent), none of which Monty runs may be refused.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from codeact import Call, Complete, MontyRuntime, ResourceLimits, ResumeError
from codeact.agent._hints import precheck
from codeact.runtime import _check
from codeact.runtime._check import check_script
from codeact.runtime._subset import SUBSET
from test_subset_table import probe_subset

# ------------------------------------------------------------------ one script per rule

INTERACTIVE = {"input", "help", "breakpoint", "exit", "quit"}
"""Builtins CPython's probe harness cannot call (they read or close its stdin): only Monty's side is run."""

RULES: dict[str, tuple[str, str]] = {
    # rule -> (key, script)
    "bound method value assigned": ("bound_method", "d = {'a': 2}\nf = d.get\nf('a') == 2"),
    "bound method as key=": ("bound_method", "d = {'a': 2, 'b': 1}\nsorted(d, key=d.get) == ['b', 'a']"),
    "str method as map callable": ("bound_method", "list(map(str.upper, ['a'])) == ['A']"),
    "next on a generator expression": ("lazy_genexp", "next((x for x in [1, 2] if x > 1), None) == 2"),
    "tool call in a key= lambda": (
        "tool_in_callback",
        "sorted([1, 3, 2], key=lambda v: call_tool('double', {'x': -v})) == [3, 2, 1]",
    ),
    "tool call in a key= function": (
        "tool_in_callback",
        "def k(v):\n    return call_tool('double', {'x': -v})\nmax([1, 3, 2], key=k) == 1",
    ),
    "format_map of a name": ("format_map", "m = {'a': 1}\n'{a}'.format_map(m) == '1'"),
    "format_map of a display": ("format_map", "'{a}'.format_map({'a': 1}) == '1'"),
    "json.dumps default=": ("json_default", "import json\njson.dumps({'a': {1}}, default=sorted) == '{\"a\": [1]}'"),
    "json.dumps cls=": ("json_default", "import json\njson.dumps({}, cls=json.JSONEncoder) == '{}'"),
    "from json import dumps, default=": (
        "json_default",
        "from json import dumps\ndumps({'a': {1}}, default=sorted) == '{\"a\": [1]}'",
    ),
    "Path.write_text encoding=": (
        "path_encoding",
        "from pathlib import Path\nPath('p.txt').write_text('x', encoding='latin-1') == 1",
    ),
    "Path.read_text errors=": (
        "path_encoding",
        "from pathlib import Path\nPath('q.txt').write_text('x')\nPath('q.txt').read_text(errors='strict') == 'x'",
    ),
    "exception with two arguments": ("exception_args", "ValueError('bad', 2).args == ('bad', 2)"),
    "exception with a non-string argument": ("exception_args", "KeyError(1).args == (1,)"),
    "SystemExit with an exit code": ("exception_args", "SystemExit(3).code == 3"),
    "re.sub with a lambda": ("re_sub_callable", "import re\nre.sub('a', lambda m: 'b', 'a') == 'b'"),
    "re.sub with a function": (
        "re_sub_callable",
        "import re\ndef r(m):\n    return 'b'\nre.sub('a', r, 'a') == 'b'",
    ),
    "gather keywords": (
        "gather_kwargs",
        "import asyncio\nasync def ok():\n    return 1\n"
        "async def main():\n    return await asyncio.gather(ok(), return_exceptions=True)\n"
        "asyncio.run(main()) == [1]",
    ),
    "functools.wraps decorator": (
        "decorator",
        "import functools\ndef d(f):\n    @functools.wraps(f)\n    def w():\n        return f()\n    return w\n"
        "@d\ndef g():\n    return 1\ng() == 1",
    ),
    "dataclass order=True": (
        "stdlib_gap",
        "from dataclasses import dataclass\n@dataclass(order=True)\nclass P:\n    x: int\nP(1) < P(2)",
    ),
    "str.maketrans": ("stdlib_gap", "t = str.maketrans('a', 'b')\n'a'.translate(t) == 'b'"),
    "a third-party import after a call": ("third_party_import", "x = len('a')\nimport nosuchpackage_xyz\nTrue"),
    **{
        f"missing builtin {name}()": ("missing_builtin", script)
        for name, script in {
            "globals": "isinstance(globals(), dict)",
            "vars": "class A:\n    pass\na = A()\na.x = 1\nvars(a) == {'x': 1}",
            "input": "input",
            "__import__": "__import__('json').dumps(1) == '1'",
            "callable": "callable(len)",
            "dir": "x = 1\n'x' in dir()",
            "super": "class A:\n    def f(self):\n        return super().__init__() is None\nA().f()",
            "issubclass": "issubclass(bool, int)",
            "delattr": "class A:\n    pass\na = A()\na.x = 1\ndelattr(a, 'x')\nnot hasattr(a, 'x')",
            "ascii": "ascii('é') == \"'\\\\xe9'\"",
            "bytearray": "bytearray(b'ab')[0] == 97",
            "memoryview": "memoryview(b'ab')[0] == 97",
            "compile": "compile('1', 'x', 'eval') is not None",
            "breakpoint": "breakpoint",
            "help": "help",
            "exit": "try:\n    exit(0)\n    r = False\nexcept SystemExit:\n    r = True\nr",
            "quit": "try:\n    quit(0)\n    r = False\nexcept SystemExit:\n    r = True\nr",
            "staticmethod": "staticmethod(len) is not None",
            "classmethod": "classmethod(len) is not None",
            "aiter": "class A:\n    def __aiter__(self):\n        return self\n    def __anext__(self):\n"
            "        return 1\na = A()\naiter(a) is a",
            "anext": "class A:\n    def __anext__(self):\n        return 2\nanext(A()) == 2",
        }.items()
    },
    **{
        f"{module}.{name}": ("stdlib_gap", f"import {module}\nx = {module}.{name}\nTrue")
        for module, name in _check._STDLIB_GAPS
    },
    **{
        f"datetime.{name}()": ("utcnow", f"from datetime import datetime\nx = datetime.{name}(0)\nTrue")
        for name in ("utcfromtimestamp", "fromtimestamp")
    },
    **{
        f"import {module} after a call": ("stdlib_import", f"x = len('a')\nimport {module}\nTrue")
        for module in _check._STDLIB_ALTERNATIVES
    },
}
RULES["datetime.utcnow()"] = ("utcnow", "from datetime import datetime\nx = datetime.utcnow()\nTrue")
for _name in INTERACTIVE:  # the refused construct is the call; Monty lacks the name altogether
    RULES[f"missing builtin {_name}()"] = ("missing_builtin", f"x = {_name}\nTrue")


def _refuses(rule: str, key: str, script: str) -> bool:
    for name in INTERACTIVE:
        if rule == f"missing builtin {name}()":
            script = f"x = {name}()\nTrue"  # the call is what the check refuses
    return key in {f.key for f in check_script(script, rewrite=False).findings}


@pytest.fixture(scope="module")
def on_monty() -> dict[str, str]:
    names = list(RULES)
    return dict(zip(names, probe_subset.BACKENDS["codeact"]([RULES[n][1] for n in names]), strict=True))


@pytest.fixture(scope="module")
def on_cpython() -> dict[str, str]:
    names = [n for n in RULES if not any(n == f"missing builtin {i}()" for i in INTERACTIVE)]
    return dict(zip(names, probe_subset.run_cpython([RULES[n][1] for n in names]), strict=True))


@pytest.mark.parametrize("rule", RULES)
def test_the_check_refuses_each_rule(rule: str) -> None:
    key, script = RULES[rule]
    assert _refuses(rule, key, script), check_script(script, rewrite=False)


@pytest.mark.parametrize("rule", RULES)
def test_monty_does_not_run_what_a_rule_refuses(
    rule: str, on_monty: dict[str, str], on_cpython: dict[str, str]
) -> None:
    if rule in on_cpython and RULES[rule][0] != "third_party_import":
        assert on_cpython[rule] == "True", f"not CPython's result either: the script tests nothing ({on_cpython[rule]})"
    assert on_monty[rule] != "True", f"Monty runs it as CPython does: the rule {rule!r} is wrong"


def test_every_refusing_key_of_the_table_has_a_rule() -> None:
    refused = {e.key for e in SUBSET if not e.supported and e.check == "refuse"}
    assert refused <= {key for key, _ in RULES.values()}


def test_every_table_of_the_check_is_covered() -> None:
    names = set(RULES)
    assert all(f"missing builtin {n}()" in names for n in _check._MISSING_BUILTINS)
    assert all(f"{m}.{n}" in names for m, n in _check._STDLIB_GAPS)
    assert all(f"datetime.{n}()" in names for n in _check._DATETIME_GAPS)
    assert all(f"import {m} after a call" in names for m in _check._STDLIB_ALTERNATIVES)


# ------------------------------------------------------------------ the agent's pre-check (tools imported)


def test_importing_a_tool_is_refused_and_monty_does_not_run_it() -> None:
    script = "from tools import double\ndouble(x=1) == 2"
    assert precheck(script, tools=["double"], await_supported=True) is not None
    assert probe_subset.BACKENDS["codeact"]([script]) != ["True"]


def test_an_import_of_a_tool_under_type_checking_is_not_refused() -> None:
    script = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from tools import double\nTrue"
    assert check_script(script).findings == ()
    assert probe_subset.BACKENDS["codeact"]([script]) == ["True"]


# ------------------------------------------------------------------ what Monty runs is never refused

NOT_REFUSED = {
    "imports under if TYPE_CHECKING:": (
        "from typing import TYPE_CHECKING\nimport typing\nx = len('a')\n"
        "if TYPE_CHECKING:\n    import numpy\n    from statistics import mean\n"
        "if typing.TYPE_CHECKING:\n    import pandas\nTrue"
    ),
    "a method of the script's own class as a value": (
        "class Box:\n    def __init__(self):\n        self.v = 3\n    def get(self):\n        return self.v\n"
        "b = Box()\nf = b.get\nf() == 3"
    ),
    "a method of the script's own class as key=": (
        "class R:\n    def get(self, k):\n        return -k\nr = R()\nsorted([1, 2], key=r.get) == [2, 1]"
    ),
    "an import in a function never called": "x = len('a')\ndef f():\n    import numpy\n    return numpy\nTrue",
    "exception keywords (CPython refuses them too)": (
        "try:\n    ValueError(**1)\n    r = False\nexcept TypeError:\n    r = True\nr"
    ),
    "a starred exception argument": "ValueError(*['bad']).args == ('bad',)",
    "gather keywords caught": (
        "import asyncio\nasync def ok():\n    return 1\nasync def main():\n    try:\n"
        "        return await asyncio.gather(ok(), x=True)\n    except NotImplementedError:\n        return 'caught'\n"
        "asyncio.run(main()) == 'caught'"
    ),
    "operator methods defined, never used": "class A:\n    def __lt__(self, o):\n        return True\nA() is not None",
    "a dataclass field named as a str method (title, count)": (
        "from dataclasses import dataclass\n@dataclass\nclass Book:\n    title: str\n    count: int\n"
        "b = Book('Dune', 3)\nt = b.title\nn = b.count\n(t, n) == ('Dune', 3)"
    ),
    "an instance attribute named as a dict method (items, values)": (
        "class Inv:\n    def __init__(self):\n        self.items = [1, 2]\n        self.values = {'a': 1}\n"
        "    def total(self):\n        items = self.items\n        return sum(items)\n"
        "i = Inv()\nv = i.values\n(i.total(), v) == (3, {'a': 1})"
    ),
    "an attribute named as a method, as key=": (
        "class K:\n    pass\nk = K()\nk.index = lambda s: -len(s)\nsorted(['a', 'bb'], key=k.index) == ['bb', 'a']"
    ),
    "the script's own read_text(encoding=)": (
        "class F:\n    def read_text(self, encoding=None):\n        return encoding\n"
        "F().read_text(encoding='latin-1') == 'latin-1'"
    ),
    "the script's own format_map": (
        "class T:\n    def format_map(self, m):\n        return 'own'\nT().format_map({'a': 1}) == 'own'"
    ),
}


@pytest.mark.parametrize("name", NOT_REFUSED)
def test_a_script_monty_runs_is_not_refused(name: str) -> None:
    script = NOT_REFUSED[name]
    assert check_script(script, rewrite=False).findings == ()
    assert probe_subset.BACKENDS["codeact"]([script]) == ["True"]
    step = MontyRuntime().start(script)  # and the check's rewrites keep its meaning
    assert isinstance(step, Complete) and step.value is True, step


MONTY_CASES = Path(
    os.environ.get(
        "CODEACT_MONTY_TEST_CASES",
        str(Path.home() / ".cargo/registry/src/index.crates.io-1949cf8c6b5b557f/monty-1.4.0/test_cases"),
    )
)


@pytest.mark.skipif(not MONTY_CASES.is_dir(), reason=f"Monty's test cases are not at {MONTY_CASES}")
def test_no_test_case_that_monty_runs_is_refused() -> None:
    raw = MontyRuntime(ResourceLimits(max_duration=5), check_scripts=False, rewrite_scripts=False)
    wrong = []
    for path in sorted(MONTY_CASES.glob("*.py")):
        script = path.read_text()
        findings = check_script(script, rewrite=False).findings
        if not findings:
            continue
        step = raw.start(script, path.name)
        for _ in range(1000):
            if not isinstance(step, Call):
                break
            step = step.call.resume(ResumeError("no tools here", "RuntimeError"))
        if isinstance(step, Complete):
            wrong.append((path.name, [str(f) for f in findings]))
    assert wrong == []


def test_a_tool_import_refusal_names_every_unavailable_module_and_what_is_importable() -> None:
    from codeact.runtime._precheck import precheck
    from codeact.runtime._subset import STDLIB_MODULES

    script = "import numpy\nimport statistics\nfrom tools import search\nsearch('x')"
    message = precheck(script, tools=["search"], importable=STDLIB_MODULES)
    assert message is not None
    assert "`from tools import search`" in message
    assert "line 1: `numpy` cannot be imported here" in message and "line 2: `statistics`" in message
    assert "the importable modules are: " + ", ".join(sorted(STDLIB_MODULES)) in message
