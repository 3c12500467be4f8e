"""Time to the first visible token (issue 51): how long after a streaming model sends its first
token the caller sees it, for codeact and for peers, over the same fake streaming model (first
token 400 ms after the request, then 30, 60 or 120 tokens per second; a token is 4 characters
of a fixed 40-line reply).

codeact runs in this process (``RunConfig(streaming=True)``, ``ScriptedModel`` paced); each
peer runs in its own virtual environment, created by this benchmark from PyPI on first use
under ``~/.cache/codeact/bench-venvs/`` (``--venvs DIR``; pinned versions in ``PEERS``), with
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
import venv
from pathlib import Path
from typing import Any

import anyio

from codeact import CodeActAgent, MontyRuntime, RunConfig, Runner, ScriptedModel
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

PEERS: dict[str, list[str]] = {
    # peer -> what its venv installs from PyPI
    "pydantic-ai-harness CodeMode": ["pydantic-ai-harness[codemode]==0.75.0"],
    "smolagents CodeAgent(stream_outputs=True)": ["smolagents==1.26.0"],
    "ADK LlmAgent (SSE)": ["google-adk==2.15.0"],
}
PEER_KEYS = {
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


def venv_python(root: Path, name: str, packages: list[str], create: bool) -> Path | None:
    """The interpreter of the peer's own venv (``root/<slug>``), created with ``packages``
    from PyPI when missing and ``create``; None when it is missing and not created."""
    slug = PEER_KEYS[name]
    folder = root / slug
    python = folder / ("Scripts" if os.name == "nt" else "bin") / "python"
    ready = folder / ".installed"
    if ready.exists() and ready.read_text() == " ".join(packages):
        return python
    if not create:
        return None
    print(f"creating {folder} ({' '.join(packages)}) from PyPI ...", flush=True)
    venv.EnvBuilder(with_pip=True, clear=True).create(folder)
    subprocess.run([str(python), "-m", "pip", "install", "-q", *packages], check=True)
    ready.write_text(" ".join(packages))
    return python


def run_peer(python: Path, name: str, rates: list[int], repeat: int) -> dict[str, Any]:
    args = [str(python), str(HERE / "_latency_peers.py"), PEER_KEYS[name], "--first-token", str(FIRST_TOKEN)]
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
    parser.add_argument("--venvs", type=Path, default=Path.home() / ".cache" / "codeact" / "bench-venvs")
    parser.add_argument(
        "--peer-python",
        action="append",
        default=[],
        metavar="KEY=PYTHON",
        help="use this interpreter for a peer (keys: pydantic_ai, smolagents, adk) instead of its venv",
    )
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    args = parser.parse_args(argv)
    rates = [120] if args.smoke else list(RATES)
    repeat = 1 if args.smoke else args.repeat
    given = dict(item.split("=", 1) for item in args.peer_python)
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
        for name, packages in PEERS.items():
            key = PEER_KEYS[name]
            python: Path | None = Path(given[key]) if key in given else None
            try:
                python = python or venv_python(args.venvs, name, packages, create=not args.smoke)
            except subprocess.CalledProcessError as exc:
                figures[name] = {"error": f"venv: {exc}"}
                continue
            if python is None:
                figures[name] = {"skipped": "no venv (run without --smoke once to create it)"}
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
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
