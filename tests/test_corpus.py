"""``python tools/corpus.py`` (formerly ``python -m codeact.corpus``): real agent scripts on Monty and on CPython
(docs/corpus.md)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from codeact.runtime import MontyRuntime
from conftest import REPO

sys.path.insert(0, str(REPO / "tools"))
from corpus import DOC_END, DOC_START, load_items, main, run_corpus, run_cpython, run_monty

ITEMS = [
    {"id": "plain", "code": "x = [3, 1, 2]\nprint(sorted(x))\nlen(x)", "tools_used": []},
    {"id": "tool", "code": "r = search(query='a')\nprint(r)", "tools_used": ["search"]},
    {"id": "final", "code": "final_answer(web('q') + '!')", "tools_used": ["web", "final_answer"]},
    {"id": "nextgen", "code": "xs = [1, 2, 3]\nprint(next((x for x in xs if x > 1), None))"},
    {"id": "t-s0", "code": "base = search('x')", "tools_used": ["search"], "trajectory": "t", "step": 0},
    {"id": "t-s1", "code": "print(base.upper())", "tools_used": [], "trajectory": "t", "step": 1},
    {"id": "np", "code": "import numpy as np\nprint(np.zeros(2))", "tools_used": []},
    {"id": "shell", "code": "import subprocess\nsubprocess.run(['ls'])", "tools_used": []},
    {"id": "clock", "code": "import datetime\nprint(datetime.datetime.now())", "tools_used": []},
    {"id": "gen", "code": "def g():\n    yield 1\nprint(list(g()))", "tools_used": []},
]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("corpus") / "scripts.jsonl"
    path.write_text("\n".join(json.dumps(i) for i in ITEMS) + "\n")
    return path


@pytest.fixture(scope="module")
def figures(corpus: Path) -> dict:
    return run_corpus(corpus)


def by_id(figures: dict) -> dict:
    return {r.id: r for r in figures["results"]}


def test_trajectories_run_in_order_in_one_namespace(corpus: Path) -> None:
    items = {i.id: i for i in load_items(corpus)}
    assert items["t-s1"].script == "base = search('x')\n\nprint(base.upper())"
    assert items["t-s1"].tools == ("search",)  # the earlier steps' tools are bound too


def test_items_are_classified(corpus: Path) -> None:
    items = {i.id: i for i in load_items(corpus)}
    assert items["np"].third_party == ("numpy",)
    assert items["shell"].shells_out and not items["plain"].shells_out


def test_the_same_stub_and_final_answer_on_both_sides(figures: dict) -> None:
    results = by_id(figures)
    for item_id in ("plain", "tool", "final", "nextgen", "t-s0", "t-s1"):
        assert results[item_id].ran and results[item_id].same, results[item_id]
    assert results["final"].monty[2] == {"type": "final_result", "value": "stub result!"}
    assert results["t-s1"].monty[1] == "STUB RESULT\n"


def test_the_clock_is_refused_the_same_way_on_both_sides(figures: dict) -> None:
    clock = by_id(figures)["clock"]
    assert not clock.ran and clock.same
    assert clock.cpython is not None and clock.cpython[2] == "OSError"


def test_shelling_out_is_skipped_on_cpython(figures: dict) -> None:
    assert by_id(figures)["shell"].same is None
    assert figures["skipped_on_cpython"] == 1


def test_third_party_and_unsupported_constructs_are_counted_apart(figures: dict) -> None:
    assert figures["items"] == len(ITEMS)
    assert figures["no_third_party"]["items"] == len(ITEMS) - 1
    assert figures["third_party"]["items"] == 1 and figures["third_party"]["ran"] == 0
    assert any("yield" in k for k in figures["failure_kinds"])


def test_rewrites_change_the_figures(corpus: Path, figures: dict) -> None:
    without = run_corpus(corpus, rewrite=False, cpython=run_cpython(load_items(corpus)))
    assert by_id(figures)["nextgen"].ran and not by_id(without)["nextgen"].ran
    assert figures["ran"] == without["ran"] + 1


def test_json_output_has_the_documented_keys(corpus: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([str(corpus), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    for key in ("items", "parsed", "ran", "same_as_cpython"):
        assert isinstance(data[key], int)
        assert isinstance(data["no_third_party"][key], int)
        assert isinstance(data["without_rewrites"][key], int)
    assert data["items"] == len(ITEMS)


def test_the_module_runs_as_a_command(corpus: Path) -> None:
    proc = subprocess.run(
        [sys.executable, str(REPO / "tools" / "corpus.py"), str(corpus)], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert "| no third-party: same_as_cpython |" in proc.stdout


def _outcomes_file(path: Path, outcomes: dict, binding: str, version: str) -> Path:
    path.write_text(json.dumps({"binding": binding, "version": version, "os_policy": "codeact", "outcomes": outcomes}))
    return path


def test_compare_json_scores_another_bindings_outcomes_and_writes_the_doc(
    corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Outcomes measured elsewhere (here: codeact's own, without rewrites, written to a file) are
    scored against the same CPython outcomes, and the side-by-side table lands in the doc."""
    rt = MontyRuntime(tool_style="functions", system_clock=False, rewrite_scripts=False, check_scripts=False)
    theirs = {i.id: list(run_monty(rt, i)) for i in load_items(corpus)}
    other = _outcomes_file(tmp_path / "other.json", theirs, "other-binding", "9.9")
    doc = tmp_path / "corpus.md"
    doc.write_text(f"# head\n\n{DOC_START}\nold table\n{DOC_END}\n\ntail\n")
    assert main([str(corpus), "--compare-json", str(other), "--write-doc", str(doc)]) == 0
    out = capsys.readouterr().out
    assert "| no third-party (9 items) | codeact (Monty " in out and "| other-binding 9.9 |" in out
    # the rewrites make `nextgen` run on codeact; the other side ran the script as written
    assert "Same as CPython on codeact but not on other-binding 9.9: nextgen." in out
    assert "Same as CPython on other-binding 9.9 but not on codeact (rewrites on): none." in out
    text = doc.read_text()
    assert text.startswith("# head") and text.endswith("tail\n") and "old table" not in text
    assert "| **same as CPython, ran on both sides** |" in text

    assert main([str(corpus), "--json", "--compare-json", str(other)]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["compare"]["items"] == {"only_other_same_as_cpython": [], "only_codeact_same_as_cpython": ["nextgen"]}
    assert data["compare"]["version"] == "9.9"


@pytest.mark.skipif(importlib.util.find_spec("pydantic_monty") is None, reason="pydantic-monty is not installed")
def test_the_pydantic_monty_driver_runs_the_same_items(corpus: Path, figures: dict) -> None:
    """tools/pydantic_monty_corpus.py on the official binding: the same stubs, final_answer and
    clock policy, so on these items it is the same as CPython where codeact is."""
    proc = subprocess.run(
        [sys.executable, str(REPO / "tools" / "pydantic_monty_corpus.py"), str(corpus)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["binding"] == "pydantic-monty" and set(data["outcomes"]) == {i["id"] for i in ITEMS}
    theirs = run_corpus(corpus, rewrite=False, cpython=run_cpython(load_items(corpus)), outcomes=data["outcomes"])
    same = {r.id for r in theirs["results"] if r.same}
    assert {"plain", "tool", "final", "t-s0", "t-s1", "clock"} <= same
    assert data["outcomes"]["final"][2] == {"type": "final_result", "value": "stub result!"}
    assert data["outcomes"]["clock"][2] == "OSError"  # the clock refused, as on CPython
