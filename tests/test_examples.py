"""Every example in examples/ runs offline, as a user would run it (a child process, in an
empty working directory, with this interpreter and environment), and prints the answer it
must reach. The examples use scripted models (``ScriptedModel``, pydantic-ai's
``FunctionModel``) and local servers only; those needing an optional extra skip, saying
which, when it is not installed."""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import REPO

EXAMPLES = REPO / "examples"
TIMEOUT = 180.0


def run_example(name: str, *args: str, cwd: Path, returncode: int = 0) -> subprocess.CompletedProcess[str]:
    """Runs ``examples/<name>/main.py`` with ``args`` in ``cwd``; fails the test on another exit
    status than ``returncode``."""
    env = {**os.environ, "PYTHONFAULTHANDLER": "1", "COLUMNS": "200", "NO_COLOR": "1", "TERM": "dumb"}
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / name / "main.py"), *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
    assert done.returncode == returncode, (
        f"{name} {' '.join(args)} exited with {done.returncode}\n{done.stdout}\n{done.stderr}"
    )
    return done


def lines_of(done: subprocess.CompletedProcess[str]) -> list[str]:
    return [line.rstrip() for line in done.stdout.splitlines() if line.strip()]


# ------------------------------------------------------------------ what each example must print


def check_runtime_steps(tmp_path: Path) -> None:
    out = lines_of(run_example("runtime_steps", cwd=tmp_path))
    calls = [line.split()[1] for line in out if line.startswith("CALL ")]
    assert [c.split("(")[0] for c in calls] == ["fetch_cart", "tax_rate"]
    assert any(line.startswith("SNAPSHOT ") and "resuming from the bytes" in line for line in out)
    assert "  stdout: 3 lines, subtotal 132.00, tax rate 0.0725" in out
    start = next(i for i, line in enumerate(out) if line.startswith("COMPLETE "))
    value = json.loads("\n".join([out[start].removeprefix("COMPLETE "), *out[start + 1 :]]))
    # tea 4 x 4.50 + mug 2 x 12.00 + kettle 90.00 = 132.00; with 7.25 % tax: 141.57
    assert value == {"type": "final_result", "value": {"user": "u-42", "subtotal": 132.0, "total": 141.57}}


def check_codeact_agent(tmp_path: Path) -> None:
    out = run_example("codeact_agent", cwd=tmp_path).stdout
    prefix = "[calculator] "
    answer = json.loads(out[out.rindex(prefix) + len(prefix) :])
    assert answer == {"answer": 42, "explanation": "40 + 2 = 42"}


IRIS_MEANS = {"setosa": 1.462, "versicolor": 4.26, "virginica": 5.552}  # petal length, cm


def check_codeact_monty_agent(tmp_path: Path) -> None:
    db, outbox = tmp_path / "demo.db", tmp_path / "outbox"
    common = ("--db", str(db), "--outbox", str(outbox))
    first = run_example("codeact_monty_agent", *common, cwd=tmp_path).stdout
    assert "The run is paused; its continuation is in" in first
    assert "send_report" in first
    assert not outbox.exists(), "the report was sent before a human approved it"

    waiting = run_example("codeact_monty_agent", *common, cwd=tmp_path, returncode=2).stdout
    assert "A run is waiting for approval of send_report" in waiting

    second = run_example("codeact_monty_agent", *common, "--approve", cwd=tmp_path).stdout
    assert "HUMAN approves call" in second
    [sent] = list(outbox.iterdir())
    assert f"sent as {sent.stem}" in second
    report = sent.read_text()
    assert report.startswith("To: lab@example.org\nSubject: Iris petal lengths\n")
    for species, mean in IRIS_MEANS.items():
        assert f"{species} (" in report and f"mean {mean} cm" in report, (species, report)

    done = run_example("codeact_monty_agent", *common, cwd=tmp_path).stdout
    assert "This demo session has finished" in done


def check_adk_approval(tmp_path: Path) -> None:
    out = lines_of(run_example("adk_approval", cwd=tmp_path))
    assert any("adk_request_confirmation(" in line and "'amount': 450" in line for line in out)
    assert any(line.startswith("user: approves") and "'amount': 450" in line for line in out)
    assert out[-1].strip() == "[answer] refunded 470 euros"


def check_adk_tools(tmp_path: Path) -> None:
    out = lines_of(run_example("adk_tools", cwd=tmp_path))
    deltas = [ast.literal_eval(line.removeprefix("state delta: ")) for line in out if line.startswith("state delta:")]
    assert deltas and deltas[-1] == ["1 tea", "2 cake"]
    assert out[-1] == "2 lines recorded"


def check_langchain_tools(tmp_path: Path) -> None:
    out = lines_of(run_example("langchain_tools", cwd=tmp_path))
    text = "to be or not to be or not to be or not"
    assert json.loads("\n".join(out[out.index("{") :])) == {"text": text, "words": 12}


def check_mcp_toolset(tmp_path: Path) -> None:
    out = run_example("mcp_toolset", cwd=tmp_path).stdout
    prefix = "[shop] "
    # cheese (3) and wine (0) were below 5 and got 10 more each; bread (12) was not touched
    assert json.loads(out[out.rindex(prefix) + len(prefix) :]) == {"cheese": 13, "wine": 10}


def check_pydantic_ai_run_code(tmp_path: Path) -> None:
    out = lines_of(run_example("pydantic_ai_run_code", cwd=tmp_path))
    # bread 150 + cheese 900 = 1050 cents, paid only once approved
    assert out[0] == "approval needed: pay({'amount': 1050}); printed so far: 'total 1050\\n'"
    assert out[-1].startswith("Done: ") and "paid 1050 cents" in out[-1]


@dataclass(frozen=True)
class Example:
    name: str
    check: Callable[[Path], None]
    extra: str | None = None  # the codeact extra it needs
    module: str | None = None  # a module of that extra


CASES = [
    Example("runtime_steps", check_runtime_steps),
    Example("codeact_agent", check_codeact_agent),
    Example("codeact_monty_agent", check_codeact_monty_agent),
    Example("adk_approval", check_adk_approval, "adk", "google.adk"),
    Example("adk_tools", check_adk_tools, "adk", "google.adk"),
    Example("langchain_tools", check_langchain_tools, "langchain", "langchain_core"),
    Example("mcp_toolset", check_mcp_toolset, "mcp", "mcp"),
    Example("pydantic_ai_run_code", check_pydantic_ai_run_code, "pydantic-ai", "pydantic_ai"),
]


def installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # a missing parent package
        return False


@pytest.mark.parametrize("example", CASES, ids=[c.name for c in CASES])
def test_example_prints_its_answer(example: Example, tmp_path: Path) -> None:
    if example.module is not None and not installed(example.module):
        pytest.skip(f"examples/{example.name} needs codeact[{example.extra}], which is not installed")
    example.check(tmp_path)


def test_every_example_is_covered() -> None:
    on_disk = sorted(p.parent.name for p in EXAMPLES.glob("*/main.py"))
    assert sorted(c.name for c in CASES) == on_disk


def test_the_demo_denied_sends_nothing(tmp_path: Path) -> None:
    db, outbox = tmp_path / "demo.db", tmp_path / "outbox"
    common = ("--db", str(db), "--outbox", str(outbox))
    run_example("codeact_monty_agent", *common, cwd=tmp_path)
    denied = run_example("codeact_monty_agent", *common, "--deny", cwd=tmp_path).stdout
    assert "HUMAN denies call" in denied
    assert "not sent:" in denied
    assert not outbox.exists()
