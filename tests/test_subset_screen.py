"""The native screen in front of the subset check (rust/src/screen.rs, issue 21).

The screen decides whether the Python check runs at all, so it must never pass a script the
check would change or refuse: on every script the check's own tests, the interpreter-gap
tests, Monty's test cases and the shared corpus use, a script the screen passes has no
finding and no rewrite under the full check, in both tool styles. And it must pass what no
rule looks at, or it would save nothing.
"""

from __future__ import annotations

import ast
import json
import os
import threading
from pathlib import Path

import pytest

from codeact.runtime import _check
from codeact.runtime._check import check_script

TESTS = Path(__file__).parent
# The test files whose string literals are scripts aimed at the check's rules.
RULE_FILES = (
    "test_subset_check.py",
    "test_precheck_rules.py",
    "test_precheck_parse.py",
    "test_interpreter_gaps.py",
    "test_runtime_gaps.py",
    "test_fidelity.py",
    "test_hints.py",
    "test_name_hint.py",
)
MONTY_CASES = Path(
    os.environ.get(
        "CODEACT_MONTY_TEST_CASES",
        str(Path.home() / ".cargo/registry/src/index.crates.io-1949cf8c6b5b557f/monty-1.4.0/test_cases"),
    )
)


def _shared() -> Path | None:
    for candidate in (Path(__file__).parents[2] / "shared", Path("/work/shared")):
        if (candidate / "corpus" / "scripts.jsonl").exists():
            return candidate
    return None


def _parses(text: str) -> bool:
    try:
        ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    return True


def _literal_scripts() -> list[str]:
    """Every string literal of the rule test files that parses as Python and is more than a
    bare name (the rule examples, the scripts Monty runs, the rewrite cases)."""
    found: set[str] = set()
    for name in RULE_FILES:
        path = TESTS / name
        if not path.exists():
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                text = node.value
                if len(text) > 3 and not text.isidentifier() and _parses(text):
                    found.add(text)
    return sorted(found)


def _full(script: str, functions_style: bool) -> _check.CheckResult:
    """The check itself, without the screen in front."""
    return _check._check(script, True, functions_style, True)


GATES = {
    "screen": lambda script: _check._SCREEN.needs_check(script),
    "tokens": lambda script: _check._SCREEN.tokens_may_need_check(script),
    "tree": lambda script: _check._SCREEN.tree_needs_check(script),
}
"""The screen, and each of its two gates alone (a lexer pass, then a parse): each must be
sound by itself."""


def _unsound(scripts: list[str], gate: str = "screen") -> list[tuple[str, bool, list[str]]]:
    wrong = []
    for script in scripts:
        if GATES[gate](script):
            continue
        for functions_style in (False, True):
            try:
                result = _full(script, functions_style)
            except (RecursionError, MemoryError):
                continue
            if result.findings or result.rewrites or result.script != script:
                wrong.append((script[:200], functions_style, [str(f) for f in result.findings]))
    return wrong


LITERALS = _literal_scripts()


def test_the_rule_tests_give_the_screen_enough_scripts() -> None:
    assert len(LITERALS) > 300
    flagged = [s for s in LITERALS if _full(s, False).findings or _full(s, False).rewrites]
    assert len(flagged) > 100  # the rule examples are among them


@pytest.mark.parametrize("gate", sorted(GATES))
def test_no_script_of_the_rule_tests_the_check_acts_on_passes_the_screen(gate: str) -> None:
    assert _unsound(LITERALS, gate) == []


@pytest.mark.skipif(not MONTY_CASES.is_dir(), reason=f"Monty's test cases are not at {MONTY_CASES}")
@pytest.mark.parametrize("gate", sorted(GATES))
def test_no_test_case_of_monty_the_check_acts_on_passes_the_screen(gate: str) -> None:
    scripts = [p.read_text() for p in sorted(MONTY_CASES.glob("*.py"))]
    assert len(scripts) > 100
    assert _unsound(scripts, gate) == []


@pytest.mark.skipif(_shared() is None, reason="../shared (the shared corpus) is not present")
@pytest.mark.parametrize("gate", sorted(GATES))
def test_no_corpus_script_the_check_acts_on_passes_the_screen(gate: str) -> None:
    shared = _shared()
    assert shared is not None
    rows = [json.loads(line) for line in (shared / "corpus" / "scripts.jsonl").read_text().splitlines() if line]
    scripts = [r["code"] for r in rows if isinstance(r.get("code"), str)]
    assert len(scripts) > 50
    assert _unsound(scripts, gate) == []


@pytest.mark.parametrize(
    "script",
    [
        "x = d.get",
        "import subprocess",
        "from collections import OrderedDict",
        "from json import dumps as d\nd({}, default=str)",
        "sorted(xs, key=lambda v: call_tool('score', {'v': v}))",
        "def f(v):\n    return call_tool('score', {'v': v})\nsorted(xs, key=f)",
        "sorted(xs, key=d.get)",
        "list(map(str.upper, xs))",
        "raise ValueError('bad', 1)",
        "next(x for x in xs)",
        "del d['k']",
        "class A(object):\n    pass",
        "@wraps(f)\ndef g():\n    pass",
        "print(vars())",
        "'{a}'.format_map({'a': 1})",
        "datetime.utcnow()",
        "p.read_text(encoding='utf-8')",
        "re.sub('a', lambda m: 'b', s)",
        "asyncio.gather(a, b, return_exceptions=True)",
        "import collections\nx = collections.ChainMap",
        "import dataclasses as dc\np2 = dc.replace(p, x=1)",
        "import re\n(re).subn('a', 'b', s)",
        "(ValueError)('a', 1)",
        "from . import helpers",
        "from typing import cast",
        "async def main():\n    return await call_tool('a', {})",
        "def f(:",  # a parse error: the screen cannot tell, CPython decides
    ],
)
def test_what_a_rule_looks_at_goes_to_the_check(script: str) -> None:
    assert _check._SCREEN.tokens_may_need_check(script)
    assert _check._SCREEN.tree_needs_check(script)
    assert _check._SCREEN.needs_check(script)


@pytest.mark.parametrize(
    "script",
    [
        "1 + 1",
        "import json\nimport math\nx = json.dumps({'a': math.sqrt(2)})",
        "rows = call_tool('search', {'q': 'x'})\nbest = sorted(rows, key=lambda r: -r['score'])[:3]\nbest",
        "def total(rows):\n    return sum(r['n'] for r in rows)\ntotal([{'n': 1}])",
        "class P:\n    def __init__(self, x):\n        self.x = x\nP(1).x",
        "try:\n    v = int('x')\nexcept ValueError as e:\n    v = str(e)\nv",
        "d = {}\nd.setdefault('a', []).append(1)\nd",
        "errors = []\ntext = 'a-b'.replace('-', ' ')\nerrors.append(text)",
        "from datetime import datetime, timedelta\nimport math, json as j",
        "raise ValueError(f'bad value {1}')",
    ],
)
def test_what_no_rule_looks_at_passes_and_is_not_parsed_by_cpython(script: str, monkeypatch) -> None:
    assert not _check._SCREEN.needs_check(script)
    monkeypatch.setattr(_check, "parsed", lambda text: pytest.fail("CPython's parser ran"))
    result = check_script(script)
    assert result.script == script and result.findings == () and result.rewrites == ()


def test_deeply_nested_sources_do_not_crash_the_screen() -> None:
    """The parse and the walk grow their stack; dropping a deep tree does not, so a long
    source on a thread with little stack goes through Monty's nesting pre-scan first."""
    sources = [
        "x = " + "-" * 40_000 + "1",
        "x = " + "[" * 30_000 + "]" * 30_000,
        "x = " + "not " * 10_000 + "1",
        "x = " + "lambda: " * 5_000 + "1",
        "f" + "(" * 100_000 + ")" * 100_000,
    ]
    in_place = [_check._SCREEN.needs_check(s) for s in sources]
    small: list[bool] = []
    old = threading.stack_size(256 * 1024)
    try:
        worker = threading.Thread(target=lambda: small.extend(_check._SCREEN.needs_check(s) for s in sources))
        worker.start()
        worker.join()
    finally:
        threading.stack_size(old)
    assert len(small) == len(sources)
    # Past Monty's nesting bound the screen cannot tell (True) or finds nothing to check
    # (False); either way Monty refuses the source itself. Both threads came back.
    assert all(isinstance(v, bool) for v in in_place + small)
