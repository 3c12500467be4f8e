"""An analyst agent on MontyRuntime over Fisher's Iris data, with a human in the loop.

The data folder is mounted read-only at ``/data``. The (scripted) model writes one script
per turn: the first fails (it guesses a column name the file does not have), the next
fixes it and composes two tools per species, the last sends a report through a tool that
needs a human's confirmation. The run then suspends: the paused script is checkpointed in a
SQLite file and the program exits. Run it again with ``--approve`` (or ``--deny``) and the
script resumes from that checkpoint — earlier tools are not run again — and prints the
final result.

Run::

    python examples/codeact_monty_agent/main.py            # phase 1: runs, suspends
    python examples/codeact_monty_agent/main.py --approve  # phase 2: resumes, finishes

Options: ``--db PATH`` (default ``./codeact_demo.db``), ``--reset``, and
``--model openai:<name> --base-url URL`` to use a real OpenAI-compatible model instead.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio

from codeact import (
    CodeActAgent,
    Event,
    LlmRequest,
    MontyRuntime,
    Mount,
    OpenAIChatModel,
    RunConfig,
    Runner,
    ScriptedModel,
    SqliteSessionService,
    Tool,
    ToolContext,
    tool,
)

DATA_DIR = Path(__file__).resolve().parent.parent / "data"
APP, USER, SESSION = "iris-analyst", "analyst", "demo"
DEFAULT_DB = "codeact_demo.db"
QUESTION = "How do the three iris species differ in petal length? Send a short report to lab@example.org."

SPECIES_NOTES = {
    "setosa": {"common_name": "bristle-pointed iris", "region": "Arctic and subarctic North America, Asia"},
    "versicolor": {"common_name": "harlequin blue flag", "region": "eastern North America"},
    "virginica": {"common_name": "Virginia iris", "region": "eastern United States"},
}


def describe(values: list[float]) -> dict[str, float]:
    """Summary statistics of a list of numbers.

    Args:
        values: the numbers.

    Returns:
        {"count", "mean", "sd", "min", "max"} (sd is the sample standard deviation).
    """
    n = len(values)
    mean = sum(values) / n
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1)) if n > 1 else 0.0
    return {"count": n, "mean": round(mean, 3), "sd": round(sd, 3), "min": min(values), "max": max(values)}


def species_info(species: str) -> dict[str, str]:
    """Background on an iris species.

    Args:
        species: "setosa", "versicolor" or "virginica".
    """
    if species not in SPECIES_NOTES:
        raise KeyError(f"unknown species {species!r}")
    return {"species": species, **SPECIES_NOTES[species]}


def make_send_report(outbox: Path) -> Tool:
    @tool(requires_confirmation=True)
    def send_report(to: str, subject: str, body: str, tool_context: ToolContext) -> dict[str, Any]:
        """Sends a report by email (needs a human's approval).

        Args:
            to: the recipient's address.
            subject: the subject line.
            body: the text of the report.
        """
        outbox.mkdir(parents=True, exist_ok=True)
        message_id = f"msg-{tool_context.function_call_id.split(':')[-1]}"
        (outbox / f"{message_id}.txt").write_text(f"To: {to}\nSubject: {subject}\n\n{body}\n")
        return {"sent": True, "id": message_id, "to": to}

    return send_report


# ------------------------------------------------------------------ the scripted model

FAILING_SCRIPT = """\
import csv
with open("/data/iris.csv") as f:
    rows = list(csv.DictReader(f))
lengths = [float(row["petal_length_cm"]) for row in rows]
{"type": "observation", "value": len(lengths)}"""

ANALYSIS_SCRIPT = """\
import csv
with open("/data/iris.csv") as f:
    rows = list(csv.DictReader(f))
petal = {}
for row in rows:
    petal.setdefault(row["species"], []).append(float(row["petal_length"]))
summary = {}
for species in sorted(petal):
    stats = call_tool("describe", {"values": petal[species]})
    info = call_tool("species_info", {"species": species})
    summary[species] = {"common_name": info["common_name"], "petal_length": stats}
print(f"read {len(rows)} rows, {len(summary)} species")
{"type": "observation", "value": summary}"""

REPORT_SCRIPT = """\
summary = {summary}
lines = []
for species, s in summary.items():
    p = s["petal_length"]
    spread = f"sd {{p['sd']}}, range {{p['min']}}-{{p['max']}}"
    lines.append(f"{{species}} ({{s['common_name']}}): mean {{p['mean']}} cm, {{spread}}")
body = "Petal length by species (Fisher's Iris data, n=150):\\n" + "\\n".join(lines)
try:
    receipt = call_tool("send_report", {{"to": "lab@example.org", "subject": "Iris petal lengths", "body": body}})
    status = f"sent as {{receipt['id']}}"
except PermissionError as exc:
    status = f"not sent: {{exc}}"
{{"type": "final_result", "value": {{"report": lines, "status": status}}}}"""


def scripted_reply(request: LlmRequest) -> str:
    """Plays the model: looks at the last feedback and writes the next script."""
    feedback = [c.text for c in request.contents if c.role == "user"]
    if not any(t.startswith(("Error during execution", "Observation:")) for t in feedback):
        return f"I'll load the CSV and count the rows first.\n```python\n{FAILING_SCRIPT}\n```"
    observations = [t for t in feedback if t.startswith("Observation:")]
    if not observations:
        return (
            "There is no petal_length_cm column: the header says petal_length. I'll use it and summarise "
            "each species.\n"
            f"```python\n{ANALYSIS_SCRIPT}\n```"
        )
    summary = json.loads(observations[-1].split("\n", 1)[1])
    return f"Now I'll write and send the report.\n```python\n{REPORT_SCRIPT.format(summary=repr(summary))}\n```"


# ------------------------------------------------------------------ printing


def make_printer() -> Callable[[Event], None]:
    """``codeact.console.EventPrinter`` (rich, from ``codeact[cli]``): each model reply with its
    script, each tool call and result, what was fed back to the model, the approval request
    and the final answer. Without rich, one plain line per event."""
    try:
        from codeact.console import EventPrinter
    except ImportError:
        return lambda event: print(
            f"[{event.kind or 'event'}] {event.author}: {event.text or event.error_message or ''}"
        )
    return EventPrinter()


# ------------------------------------------------------------------ main


def build_agent(args: argparse.Namespace) -> CodeActAgent:
    if args.model:
        provider, _, name = args.model.partition(":")
        if provider != "openai" or not name:
            raise SystemExit("--model must look like openai:<model-name>")
        model: Any = OpenAIChatModel(name, base_url=args.base_url)
    else:
        model = ScriptedModel(scripted_reply)
    return CodeActAgent(
        name="iris_analyst",
        model=model,
        runtime=MontyRuntime(mounts=[Mount(virtual_path="/data", host_path=DATA_DIR)]),
        instruction="You analyse the Iris dataset mounted at /data/iris.csv (columns: sepal_length, "
        "sepal_width, petal_length, petal_width, species).",
        tools=[describe, species_info, make_send_report(Path(args.outbox))],
        max_iterations=8,
    )


async def main_async(args: argparse.Namespace) -> int:
    show_event = make_printer()
    config = RunConfig(emit_tool_events=True)  # tool calls and results as events, for the printer
    with SqliteSessionService(args.db) as sessions:
        if args.reset:
            await sessions.delete_session(app_name=APP, user_id=USER, session_id=SESSION)
        session = await sessions.get_session(app_name=APP, user_id=USER, session_id=SESSION)
        runner = Runner(app_name=APP, agent=build_agent(args), session_service=sessions)
        if session is None and (args.approve or args.deny):
            print(f"Nothing to approve or deny: no demo session in {args.db}. Run without --approve first.")
            return 2
        if session is None:
            await sessions.create_session(app_name=APP, user_id=USER, session_id=SESSION)
            print(f"USER  {QUESTION}")
            events = runner.run_async(user_id=USER, session_id=SESSION, new_message=QUESTION, run_config=config)
        elif pending := await runner.pending(user_id=USER, session_id=SESSION):
            (call,) = pending
            if not (args.approve or args.deny):
                print(f"A run is waiting for approval of {call.tool} (call {call.call_key}).")
                print("Run again with --approve or --deny.")
                return 2
            print(f"HUMAN {'approves' if args.approve else 'denies'} call {call.call_key}; resuming the paused script")
            decide = runner.approve if args.approve else runner.deny
            events = decide(user_id=USER, session_id=SESSION, call_key=call.call_key, run_config=config)
        else:
            print("This demo session has finished. Run with --reset to start over.")
            return 0
        async for event in events:
            show_event(event)
            if event.actions.requested_tool_confirmations:
                db = "" if args.db == DEFAULT_DB else f" --db {args.db}"
                print(f"\nThe run is paused; its continuation is in {args.db}.")
                print(f"Resume it with: python {sys.argv[0]}{db} --approve   (or --deny)")
    return 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    decision = parser.add_mutually_exclusive_group()
    decision.add_argument("--approve", action="store_true", help="approve the pending report and resume")
    decision.add_argument("--deny", action="store_true", help="deny the pending report and resume")
    parser.add_argument("--db", default=DEFAULT_DB, help="SQLite file for sessions (default: %(default)s)")
    parser.add_argument("--outbox", default="outbox", help="folder where sent reports land (default: %(default)s)")
    parser.add_argument("--reset", action="store_true", help="start a fresh demo session")
    parser.add_argument("--model", help="openai:<model-name> to use a real model instead of the scripted one")
    parser.add_argument("--base-url", help="base URL of the OpenAI-compatible endpoint")
    args = parser.parse_args()
    raise SystemExit(anyio.run(main_async, args))


if __name__ == "__main__":
    main()
