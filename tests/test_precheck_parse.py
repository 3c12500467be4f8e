"""The pre-check parses a script once (issue 21): the agent's script hints and the runtime's
subset check share one ``ast.parse`` per script text, and ``check_scripts=False`` skips the
check (and the hints) for real. On the real interpreter and the real agent loop."""

from __future__ import annotations

import ast
from typing import Any

import pytest

from agent_helpers import fence, run
from codeact import CodeActAgent, Complete, MontyRuntime, Raised, ScriptedModel
from codeact.runtime import _check, _precheck

pytestmark = pytest.mark.anyio


@pytest.fixture
def parses(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The texts ``ast.parse`` is asked to parse as a whole module (caches emptied first)."""
    seen: list[str] = []
    real = ast.parse

    def counting(source: Any, *args: Any, **kwargs: Any) -> Any:
        if kwargs.get("mode", "exec") == "exec" and not args:
            seen.append(source)
        return real(source, *args, **kwargs)

    _precheck.parsed.cache_clear()
    _check.clear_check_cache()
    monkeypatch.setattr(ast, "parse", counting)
    return seen


# A script that every pass reads: an import (the agent's pre-check), a rewrite (bound method)
# and a construct the check looks at (sorted with key=).
SCRIPT = (
    "import json\n"
    "d = {'a': 2, 'b': 1}\n"
    "order = sorted(d, key=d.get)\n"
    '{"type": "final_result", "value": json.dumps(order)}'
)


async def test_one_agent_turn_parses_its_script_once(parses: list[str]) -> None:
    agent = CodeActAgent(name="coder", model=ScriptedModel([fence(SCRIPT)]), runtime=MontyRuntime())
    events, _session, _ = await run(agent)
    assert events[-1].content.text == '["b", "a"]'
    assert parses.count(SCRIPT) == 1, parses


async def test_check_scripts_off_runs_no_check_and_no_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    looked: list[str] = []
    real_detect, real_precheck = _check._detect, _precheck.precheck
    monkeypatch.setattr(_check, "_detect", lambda tree, *a, **k: looked.append("check") or real_detect(tree, *a, **k))
    monkeypatch.setattr(_precheck, "precheck", lambda script, **k: looked.append("hint") or real_precheck(script, **k))
    _check.clear_check_cache()
    runtime = MontyRuntime(check_scripts=False, rewrite_scripts=False)
    first = "import statistics\n{'type': 'final_result', 'value': 1}"
    second = "d = {'a': 2, 'b': 1}\nsorted(d, key=d.get)\n{'type': 'final_result', 'value': 2}"
    replies = [fence(first), fence(second), fence("{'type': 'final_result', 'value': 3}")]
    model = ScriptedModel(replies)
    agent = CodeActAgent(name="coder", model=model, runtime=runtime)
    events, _session, _ = await run(agent)
    assert looked == []  # neither the subset check nor the agent's hints looked at a script
    assert events[-1].content.text == "3"
    # Monty's own errors reached the model, and the bound method value was not rewritten.
    fed_back = "\n".join(c.text for c in model.requests[-1].contents)
    assert "No module named 'statistics'" in fed_back and "SubsetError" not in fed_back, fed_back
    assert "has no attribute 'get'" in fed_back, fed_back
    # With the check on, the same agent's hints and check run.
    agent = CodeActAgent(name="coder", model=ScriptedModel(replies), runtime=MontyRuntime())
    await run(agent)
    assert "check" in looked and "hint" in looked


def test_check_scripts_off_still_rewrites_but_reports_nothing() -> None:
    runtime = MontyRuntime(check_scripts=False)  # rewrite_scripts stays on
    step = runtime.start("d = {'a': 2, 'b': 1}\nsorted(d, key=d.get)")
    assert isinstance(step, Complete) and step.value == ["b", "a"]
    step = runtime.start("import statistics\n1")
    assert isinstance(step, Raised) and "No module named 'statistics'" in step.message
    assert "SubsetError" not in step.message


def test_check_script_without_detect_gives_no_findings_but_the_rewrites() -> None:
    script = "d = dict()\nimport statistics\nsorted(d, key=d.get)"
    full = _check.check_script(script)
    lean = _check.check_script(script, detect=False)
    assert {f.key for f in full.findings} == {"stdlib_import"}
    assert lean.findings == ()
    assert lean.script == full.script and lean.rewrites == full.rewrites != ()


async def test_the_agent_adds_the_fix_to_what_monty_refuses_itself() -> None:
    script = "class NotFound(Exception):\n    pass\nraise NotFound('x')"
    model = ScriptedModel([fence(script), fence("{'type': 'final_result', 'value': 1}")])
    agent = CodeActAgent(name="coder", model=model, runtime=MontyRuntime())
    await run(agent)
    fed_back = "\n".join(c.text for c in model.requests[-1].contents)
    # Monty's own words first, then the fix with the model's line and column.
    assert "does not yet support class inheritance" in fed_back, fed_back
    assert "To fix it (nothing else has run):\n- line 1, column 1: class NotFound(Exception)" in fed_back, fed_back
    assert "raise ValueError('...')" in fed_back
