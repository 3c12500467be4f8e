"""``python -m codeact.corpus``: real agent scripts on Monty and on CPython (docs/corpus.md)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from codeact.corpus import load_items, main, run_corpus, run_cpython

ITEMS = [
    {"id": "plain", "code": "x = [3, 1, 2]\nprint(sorted(x))\nlen(x)", "tools_used": []},
    {"id": "tool", "code": "r = search(query='a')\nprint(r)", "tools_used": ["search"]},
    {"id": "final", "code": "final_answer(web('q') + '!')", "tools_used": ["web", "final_answer"]},
    {"id": "fmt", "code": "n = 3\nprint('%d items, {}'.format('ok') % (n,) if False else '{} items'.format(n))"},
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
    for item_id in ("plain", "tool", "final", "fmt", "t-s0", "t-s1"):
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
    assert by_id(figures)["fmt"].ran and not by_id(without)["fmt"].ran
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
        [sys.executable, "-m", "codeact.corpus", str(corpus)], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert "| no third-party: same_as_cpython |" in proc.stdout
