"""Issue 12's interpreter gaps, each tried on Monty 1.4: it runs there, or the static check
rewrites it or answers with the working alternative, and that alternative runs.

The scripts follow the probes' convention (the last expression is ``True`` when the construct
works; the tool ``call_tool("double", {"x": n})`` returns ``2 * n``). They run on the backends of
``tests/test_subset_table.py``: codeact's own ``MontyRuntime`` once it embeds Monty 1.4 (skipped,
saying so, before), and the official pydantic-monty 1.4.0 binding when installed.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from codeact import Call, Complete, MontyRuntime, Raised, ResumeValue
from codeact.runtime._check import check_script
from test_subset_table import BACKENDS, CODEACT_ON_14, MONTY_VERSION, _monty, probe_subset


@dataclass(frozen=True)
class Gap:
    script: str
    works: bool  # on Monty 1.4, as written
    key: str = ""  # the check's entry when it does not work
    rewritten: bool = False  # the check rewrites it (else it answers with a message)
    needle: str = ""  # what the check's message must say (the working alternative)
    alternative: str = ""  # the working alternative, for a gap answered with a message


GAPS = {
    "next over a generator expression with a default": Gap(
        "xs = [1, 2, 3]\nnext((x for x in xs if x > 1), None) == 2",
        works=False,
        key="lazy_genexp",
        rewritten=True,
    ),
    "a lambda capturing a comprehension variable": Gap(
        "rows = [{'a': 1, 'b': 5}, {'a': 3, 'b': 2}]\nms = ['a', 'b']\n"
        "{m: max(rows, key=lambda r: r[m]) for m in ms} == {'a': rows[1], 'b': rows[0]}",
        works=True,
    ),
    "a tool call inside a sorted key": Gap(
        "xs = [1, 3, 2]\nsorted(xs, key=lambda v: call_tool('double', {'x': -v})) == [3, 2, 1]",
        works=False,
        key="tool_in_callback",
        needle="keys = {v: call_tool(...) for v in xs}; sorted(xs, key=lambda v: keys[v])",
        alternative="xs = [1, 3, 2]\nkeys = {v: call_tool('double', {'x': -v}) for v in xs}\n"
        "sorted(xs, key=lambda v: keys[v]) == [3, 2, 1]",
    ),
    "str.format_map on a template held in a variable": Gap(
        "t = '{a}-{b}'\nm = {'a': 1, 'b': 2}\nt.format_map(m) == '1-2'",
        works=False,
        key="format_map",
        needle="use template.format(**mapping)",
        alternative="t = '{a}-{b}'\nm = {'a': 1, 'b': 2}\nt.format(**m) == '1-2'",
    ),
    "str.format_map on a dict display": Gap(
        "t = '{a}-{b}'\nt.format_map({'a': 1, 'b': 2}) == '1-2'", works=False, key="format_map", rewritten=True
    ),
    "% on a template held in a variable": Gap(
        "t = '%s has %d items (%.1f%%)'\nt % ('cart', 3, 12.5) == 'cart has 3 items (12.5%)'", works=True
    ),
    "str.format on a template held in a variable": Gap(
        "t = '{name}: {n:>3}'\nt.format(name='a', n=7) == 'a:   7'", works=True
    ),
    "datetime.utcnow()": Gap(
        "from datetime import datetime\ndatetime.utcnow().year > 2000",
        works=False,
        key="utcnow",
        needle="datetime.now(timezone.utc)",
        alternative="from datetime import datetime, timezone\ndatetime.now(timezone.utc).year > 2000",
    ),
    "json.dumps(..., default=str)": Gap(
        "import json\nfrom datetime import date\njson.dumps({'d': date(2024, 1, 2)}, default=str) == "
        '\'{"d": "2024-01-02"}\'',
        works=False,
        key="json_default",
        rewritten=True,
    ),
    "Path.write_text(..., encoding=...)": Gap(
        "from pathlib import Path\nok = False\ntry:\n"
        "    Path('/no-such-dir/out.txt').write_text('x', encoding='utf-8')\n"
        "except OSError:\n    ok = True\nok",
        works=False,
        key="path_encoding",
        rewritten=True,
    ),
}


def fixed(gap: Gap) -> str:
    """What the model ends up running: the rewritten script, or the alternative it was told."""
    return check_script(gap.script).script if gap.rewritten else (gap.alternative or gap.script)


@pytest.mark.parametrize("backend", BACKENDS)
def test_each_gap_runs_on_monty_1_4_exactly_when_the_table_says(backend: str) -> None:
    outcomes = probe_subset.BACKENDS[backend]([g.script for g in GAPS.values()])
    got = {name: outcome == "True" for name, outcome in zip(GAPS, outcomes, strict=True)}
    assert got == {name: g.works for name, g in GAPS.items()}, dict(zip(GAPS, outcomes, strict=True))


@pytest.mark.parametrize("name", GAPS)
def test_the_check_passes_what_works_and_answers_what_does_not(name: str) -> None:
    gap = GAPS[name]
    result = check_script(gap.script)
    if gap.works:
        assert result.findings == () and result.rewrites == ()
    elif gap.rewritten:
        assert result.findings == () and gap.key in {r.key for r in result.rewrites}
    else:
        assert [f.key for f in result.findings] == [gap.key]
        assert gap.needle in result.findings[0].message


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_fix_runs_on_monty_1_4(backend: str) -> None:
    outcomes = probe_subset.BACKENDS[backend]([fixed(g) for g in GAPS.values()])
    assert dict(zip(GAPS, outcomes, strict=True)) == dict.fromkeys(GAPS, "True")


def test_every_script_and_fix_is_true_on_cpython() -> None:
    scripts = [s for g in GAPS.values() for s in (g.script, fixed(g))]
    assert probe_subset.run_cpython(scripts) == ["True"] * len(scripts)


@pytest.mark.skipif(
    not CODEACT_ON_14,
    reason=f"codeact._monty embeds Monty {_monty.MONTY_VERSION}; these gaps are measured on {MONTY_VERSION} "
    "(runs once the 1.4 port is merged)",
)
@pytest.mark.parametrize("name", GAPS)
def test_through_codeacts_checked_runtime(name: str) -> None:
    """What the agent sees: the default ``MontyRuntime`` runs the script (rewritten if need be)
    or refuses it, before running anything, with the alternative in the message."""
    gap = GAPS[name]
    step = MontyRuntime().start(gap.script)
    while isinstance(step, Call):
        step = step.call.resume(ResumeValue(2 * step.call.keyword_args["x"]))
    if gap.works or gap.rewritten:
        assert isinstance(step, Complete) and step.value is True, step
    else:
        assert isinstance(step, Raised) and step.message.startswith("SubsetError:"), step
        assert gap.needle in step.message
