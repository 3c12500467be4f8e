"""Time to the first visible token (issue 51): how long after a streaming model sends its first
token the caller sees it, for codeact and for peers, over the same fake streaming model (first
token 400 ms after the request, then 30, 60 or 120 tokens per second; a token is 4 characters
of a fixed 40-line reply).

codeact runs in this process (``RunConfig(streaming=True)``, ``ScriptedModel`` paced); each
peer runs in its own virtual environment, created by this benchmark from PyPI on first use
under ``~/.cache/codeact/bench-venvs/`` (``--venvs DIR``; pinned versions in ``_peers.VENVS``), with
``_latency_peers.py`` (which gives each peer the same reply in its native form):

* pydantic-ai-harness ``CodeMode()`` (the script streams as its ``run_code`` tool call's
  arguments; ``Agent.run_stream_events`` over a ``FunctionModel`` with a ``stream_function``);
* smolagents ``CodeAgent(stream_outputs=True)`` over a ``Model`` whose ``generate_stream``
  yields the tokens;
* Google ADK ``LlmAgent`` with ``StreamingMode.SSE`` over a ``BaseLlm`` that yields partial
  ``LlmResponse`` chunks.

Every run goes to its end (the script runs); each column starts with one warm-up run that is
not counted. Each row: the model's first token (ms after the request), the caller's first
visible token, and the gap between them (goal for codeact: within 5 ms), medians of
``--repeat`` runs. One run prints one table, all columns measured in the same invocation, one
after the other. ``--smoke`` (``--quick``): one rate, one repetition, and peers only when
their venv already exists (never installs: bounded, for CI); ``--no-peers`` skips them.

The second table (issue 52, ``--task answer``; ``--task all``, the default, prints both):
time to the final answer of one fixed task, a reply of ``ANSWER_CHARS`` characters (the
median length of the shared corpus's replies) whose script makes three read-only lookups of
150 ms early and one write of 100 ms late, for codeact with streaming off, streaming and
eager start, pydantic-ai-harness ``CodeMode`` with eager start off and on
(``speculate="declared"``; it also runs the write early, codeact never does), smolagents
``CodeAgent(stream_outputs=True)`` (its code block runs once the reply is complete) and ADK
``LlmAgent`` with SSE (no code execution: three paced requests, the lookups as parallel
function calls, then save, then the closing text).

Run: ``python benchmarks/latency.py`` (``--json PATH`` also writes the figures).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
from _peers import DEFAULT_ROOT, peer_python

from codeact import CodeActAgent, FunctionTool, MontyRuntime, RunConfig, Runner, ScriptedModel
from codeact.models import LlmRequest, LlmResponse
from codeact.sessions import InMemorySessionService

HERE = Path(__file__).resolve().parent
FIRST_TOKEN = 0.4  # seconds from the request to the model's first token
RATES = (30, 60, 120)  # tokens per second after the first
CHARS_PER_TOKEN = 4
GOAL_MS = 5.0
REPLY = (
    "I will compute the totals step by step.\n```python\n"
    + "".join(f"total_{i} = {i} * {i} + {i}\n" for i in range(38))
    + '{"type": "final_result", "value": total_37}\n```'
)

PEERS: dict[str, str] = {
    # column -> its venv's key in _peers.VENVS (pinned versions there)
    "pydantic-ai-harness CodeMode": "pydantic_ai",
    "smolagents CodeAgent(stream_outputs=True)": "smolagents",
    "ADK LlmAgent (SSE)": "adk",
}


class _Timed(ScriptedModel):
    """The fake streaming model: records when it sends its first token."""

    first_sent: float | None = None

    async def generate_content_stream(self, request: LlmRequest) -> Any:
        async for item in super().generate_content_stream(request):
            if item.partial and self.first_sent is None:
                self.first_sent = time.perf_counter()
            yield item

    async def generate_content(self, request: LlmRequest) -> LlmResponse:
        response = await super().generate_content(request)
        if self.first_sent is None:  # not streaming: the first token reaches no one before the end
            self.first_sent = time.perf_counter() - (len(response.text) // CHARS_PER_TOKEN) / (
                self.tokens_per_second or 1
            )
        return response


async def codeact_once(rate: int, streaming: bool) -> tuple[float, float]:
    """(model's first token, caller's first visible text), ms after the request."""
    model = _Timed([REPLY], time_to_first_token=FIRST_TOKEN, tokens_per_second=rate, chars_per_token=CHARS_PER_TOKEN)
    agent = CodeActAgent(name="bench", model=model, runtime=MontyRuntime())
    service = InMemorySessionService()
    runner = Runner(app_name="b", agent=agent, session_service=service)
    await service.create_session(app_name="b", user_id="u", session_id="s")
    start = time.perf_counter()
    seen: float | None = None
    async for event in runner.run_async(
        user_id="u", session_id="s", new_message="go", run_config=RunConfig(streaming=streaming)
    ):
        if seen is None and event.author == "bench" and event.text:
            seen = time.perf_counter()
    assert seen is not None and model.first_sent is not None
    return (model.first_sent - start) * 1000, (seen - start) * 1000


# ---- time to the answer (issue 52): eager start

ANSWER_CHARS = 290  # the reply's length: the median of the shared corpus's 32 real replies
LOOKUP_S, WRITE_S = 0.15, 0.1  # three read-only lookups early, one write late
ANSWER_SCRIPT = (
    'a = call_tool("lookup", {"key": "alpha"})\nb = call_tool("lookup", {"key": "beta"})\n'
    'c = call_tool("lookup", {"key": "gamma"})\ns = call_tool("save", {"text": a + b + c})\n'
    '{"type": "final_result", "value": s}\n'
)
_CLOSING = "```\nSaved: the summary holds all three records."
_FILLER = "I will look up the three records first, then save their summary of all of them together. " * 4
ANSWER_REPLY = (
    _FILLER[: ANSWER_CHARS - len(ANSWER_SCRIPT) - len(_CLOSING) - len("\n```python\n")].rstrip()
    + "\n```python\n"
    + ANSWER_SCRIPT
    + _CLOSING
)
ANSWER_MODES = {  # label -> RunConfig options
    "codeact (streaming off)": {},
    "codeact (streaming)": {"streaming": True},
    "codeact (eager)": {"eager": True},
}


async def codeact_answer_once(rate: int, options: dict[str, bool]) -> float:
    """ms from the request to the final answer of the fixed task (``ANSWER_REPLY``)."""

    async def lookup(key: str) -> str:
        """Looks a record up (read-only)."""
        await anyio.sleep(LOOKUP_S)
        return key[:1].upper()

    async def save(text: str) -> str:
        """Saves the summary (an effect)."""
        await anyio.sleep(WRITE_S)
        return "saved " + text

    model = ScriptedModel(
        [ANSWER_REPLY], time_to_first_token=FIRST_TOKEN, tokens_per_second=rate, chars_per_token=CHARS_PER_TOKEN
    )
    tools = [FunctionTool(lookup, read_only=True), FunctionTool(save)]
    agent = CodeActAgent(name="bench", model=model, runtime=MontyRuntime(), tools=tools)
    service = InMemorySessionService()
    runner = Runner(app_name="b", agent=agent, session_service=service)
    await service.create_session(app_name="b", user_id="u", session_id="s")
    start = time.perf_counter()
    answer = None
    async for event in runner.run_async(user_id="u", session_id="s", new_message="go", run_config=RunConfig(**options)):
        if event.is_final_response():
            answer = event.text
    assert answer == "saved ABG", answer
    return (time.perf_counter() - start) * 1000


def answer_table(args: argparse.Namespace, rates: list[int], repeat: int, given: dict[str, str]) -> dict[str, Any]:
    """The time-to-answer table (issue 52): codeact plain, streaming and eager, pydantic-ai-harness
    CodeMode with eager start off and on (``speculate="declared"``), smolagents
    ``CodeAgent(stream_outputs=True)`` and ADK ``LlmAgent`` (SSE, function calls)."""
    print(
        f"\ntime to the final answer: one reply of {len(ANSWER_REPLY)} characters (first token after "
        f"{FIRST_TOKEN * 1000:.0f} ms), three read-only lookups of {LOOKUP_S * 1000:.0f} ms early, one write of "
        f"{WRITE_S * 1000:.0f} ms late"
    )
    figures: dict[str, dict[str, float]] = {label: {} for label in ANSWER_MODES}
    anyio.run(codeact_answer_once, rates[0], {"eager": True})  # warm-up, not counted
    for rate in rates:
        for label, options in ANSWER_MODES.items():
            runs = [anyio.run(codeact_answer_once, rate, options) for _ in range(repeat)]
            figures[label][str(rate)] = statistics.median(runs)
    notes: dict[str, str] = {}
    for peer in () if args.no_peers else PEERS:
        python = peer_python(PEERS[peer], args.venvs, create=not args.smoke, given=given)
        got = python if isinstance(python, str) else run_peer(python, peer, rates, repeat, task="answer")
        if isinstance(got, str) or "error" in got:
            notes[peer] = got if isinstance(got, str) else got["error"]
            continue
        version = got.get("version", "")
        if "off" in got:
            figures[f"CodeMode {version} (eager off)"] = got["off"]
            figures[f"CodeMode {version} (eager, speculate='declared')*"] = got["eager"]
        elif PEERS[peer] == "smolagents":
            figures[f"smolagents {version} CodeAgent(stream_outputs=True)"] = got["answer"]
        else:
            figures[f"ADK {version} LlmAgent (SSE, function calls)+"] = got["answer"]
    width = 52
    print("ms to the final answer (median) / x codeact eager: that time / codeact (eager)'s")
    print(f"{'':<{width}}" + "".join(f"{f'{r} tok/s':>22}" for r in rates))
    ours = figures["codeact (eager)"]
    for label, row in figures.items():
        cells = [f"{row[str(r)]:.0f} ms / {row[str(r)] / ours[str(r)]:.2f}x" for r in rates]
        print(f"{label:<{width}}" + "".join(f"{c:>22}" for c in cells))
    for label, note in notes.items():
        print(f"{label:<{width}}  {note}")
    print("* CodeMode's eager start also runs statements with effects (the write) before the reply is complete;")
    print("  codeact's eager start runs only the read-only lookups early (the write waits for the stored reply).")
    print("  CodeMode's closing reply after run_code is paced like every reply (a second model request);")
    print("  codeact's script returns the answer itself. smolagents runs its code block once the reply is")
    print("  complete (one request; final_answer ends the run).")
    print("+ ADK runs no code by default: the same task as function calls, three requests, each paced: prose and")
    print("  three parallel lookup calls in one response, then save, then the closing text.")
    peers = [row for label, row in figures.items() if not label.startswith("codeact")]
    saved = min(figures["codeact (streaming)"][str(r)] - ours[str(r)] for r in rates)
    goal = 3 * LOOKUP_S * 1000
    verdict = "PASS" if saved >= goal * 0.9 else "MISS"
    print(f"eager saves at least {saved:.0f} ms over codeact's own streaming run ({verdict}: ~{goal:.0f} ms lookups)")
    if peers:
        worst = max(ours[str(r)] / min(p[str(r)] for p in peers) for r in rates)
        print(f"codeact eager / best peer, worst rate: {worst:.2f}x ({'PASS' if worst <= 0.8 else 'MISS'}: <= 0.8x)")
    return figures


def run_peer(python: Path, name: str, rates: list[int], repeat: int, task: str = "first-token") -> dict[str, Any]:
    args = [str(python), str(HERE / "_latency_peers.py"), PEERS[name], "--first-token", str(FIRST_TOKEN)]
    args += ["--task", task]
    args += ["--rates", ",".join(map(str, rates)), "--repeat", str(repeat), "--chars-per-token", str(CHARS_PER_TOKEN)]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=1800, cwd=HERE)
    marker = "LATENCY_FIGURES "
    found = [line.split(marker, 1)[1] for line in proc.stdout.splitlines() if marker in line]
    if proc.returncode != 0 or not found:
        return {"error": f"exit {proc.returncode}: {proc.stderr.strip()[-600:]}"}
    result: dict[str, Any] = json.loads(found[-1])
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--smoke", "--quick", action="store_true", help="one rate, one repetition, existing peer venvs only"
    )
    parser.add_argument("--repeat", type=int, default=5, help="measured runs per rate and column (median)")
    parser.add_argument("--no-peers", action="store_true", help="codeact only")
    parser.add_argument("--venvs", type=Path, default=DEFAULT_ROOT)
    parser.add_argument(
        "--peer-python",
        action="append",
        default=[],
        metavar="KEY=PYTHON",
        help="use this interpreter for a peer (keys: pydantic_ai, smolagents, adk) instead of its venv",
    )
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    parser.add_argument(
        "--task",
        choices=["all", "first-token", "answer"],
        default="all",
        help="first-token: the first visible token (issue 51); answer: time to the answer, eager start (issue 52)",
    )
    args = parser.parse_args(argv)
    rates = [120] if args.smoke else list(RATES)
    repeat = 1 if args.smoke else args.repeat
    given = dict(item.split("=", 1) for item in args.peer_python)
    if args.task == "answer":
        answers = answer_table(args, rates, repeat, given)
        if args.json:
            args.json.write_text(json.dumps({"answer": answers}, indent=2))
        return 0
    print(
        f"time to first visible token (first token after {FIRST_TOKEN * 1000:.0f} ms), python "
        f"{sys.version.split()[0]}, {os.cpu_count()} cpus, load {os.getloadavg()[0]:.2f}"
    )
    figures: dict[str, Any] = {"codeact": {}, "codeact (streaming off)": {}}
    anyio.run(codeact_once, rates[0], True)  # warm-up, not counted
    for rate in rates:
        for label, streaming in (("codeact", True), ("codeact (streaming off)", False)):
            runs = [anyio.run(codeact_once, rate, streaming) for _ in range(repeat)]
            figures[label][str(rate)] = {
                "model_first_ms": statistics.median(r[0] for r in runs),
                "visible_ms": statistics.median(r[1] for r in runs),
                "gap_ms": statistics.median(r[1] - r[0] for r in runs),
            }
    if not args.no_peers:
        for name, key in PEERS.items():
            python = peer_python(key, args.venvs, create=not args.smoke, given=given)
            if isinstance(python, str):
                figures[name] = {"skipped": python}
                continue
            figures[name] = run_peer(python, name, rates, repeat)
    width = 52
    print("model: the fake model's first token; visible: the caller's first visible token (both ms after the")
    print("caller starts the run); gap: visible - model (medians); x codeact: visible / codeact's visible")
    print(f"{'':<{width}}" + "".join(f"{f'{r} tok/s':>36}" for r in rates))
    print(f"{'':<{width}}" + "".join(f"{'model / visible / gap / x codeact':>36}" for _ in rates))
    for label, rows in figures.items():
        if "version" in rows:
            label = f"{label} {rows['version']}"
        if "error" in rows or "skipped" in rows:
            print(f"{label:<{width}}  {rows.get('error') or rows.get('skipped')}")
            continue
        cells = []
        for rate in rates:
            row, ours = rows.get(str(rate)), figures["codeact"][str(rate)]
            cells.append(
                "-"
                if row is None
                else f"{row['model_first_ms']:.0f} / {row['visible_ms']:.0f} / {row['gap_ms']:.1f} ms / "
                f"{row['visible_ms'] / ours['visible_ms']:.2f}x"
            )
        print(f"{label:<{width}}" + "".join(f"{c:>36}" for c in cells))
    worst = max(row["gap_ms"] for row in figures["codeact"].values())
    verdict = "PASS" if worst <= GOAL_MS else "MISS"
    print(f"\ncodeact's first visible token, worst gap after the model's: {worst:.2f} ms {verdict} (<= {GOAL_MS:g} ms)")
    if args.task == "all":
        figures["answer"] = answer_table(args, rates, repeat, given)
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
