"""The agent the DBOS scenario's workers run (``codeact worker --agent dbos_agent:build``),
and the expected outcome of each session. Not a test module.

A scripted model answers from the request alone (the task in the user's message and the
number of model turns so far), so any worker gives the same reply to the same state. The
tools write one row per run into the ``ledger`` table of ``CODEACT_DBOS_LEDGER`` (with the
call key and the worker's pid); a call whose key matches ``CODEACT_DBOS_BLOCK`` (a
``,``-separated list of ``<session>:<tool>``) records a row in ``barriers`` after its side
effect, then blocks, the first time only: the test kills the worker there.
"""

from __future__ import annotations

import os
import re
import threading
from typing import Any

from codeact import CodeActAgent, FunctionTool, LongRunningFunctionTool, MontyRuntime, ScriptedModel, ToolContext
from codeact.models import LlmRequest

KINDS = ("plain", "gated", "long", "both")
"""What session ``i`` does, by ``i % 4``: two notes; a note then an approved payment; a note
then a long-running render completed from outside; a note, a payment, then a render."""

LEDGER_DDL = """
CREATE TABLE IF NOT EXISTS ledger (
    id BIGSERIAL PRIMARY KEY, session TEXT NOT NULL, tool TEXT NOT NULL, arg TEXT NOT NULL,
    call_key TEXT NOT NULL, pid INTEGER NOT NULL, at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp());
CREATE TABLE IF NOT EXISTS barriers (
    name TEXT PRIMARY KEY, pid INTEGER NOT NULL, at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp());
"""


def kind_of(i: int) -> str:
    return KINDS[i % len(KINDS)]


def expected(i: int) -> str:
    """The final answer of session ``i`` in an uninterrupted run."""
    kind = kind_of(i)
    if kind == "plain":
        return f"noted s{i}-a; noted s{i}-b"
    if kind == "gated":
        return f"noted s{i}-a; paid {i} for s{i}"
    if kind == "long":
        return f"noted s{i}-a; frame-{i}"
    return f"noted s{i}-a; paid {i} for s{i}; frame-{i}"


def _fence(code: str) -> str:
    return f"```python\n{code}\n```"


def _reply(request: LlmRequest) -> str:
    task = next(c.text for c in request.contents if c.role == "user" and c.text.startswith("task "))
    i = int(re.match(r"task (\d+)", task).group(1))  # type: ignore[union-attr]
    turns = sum(1 for c in request.contents if c.role == "model")
    if turns == 0:
        return _fence(f'a = call_tool("note", {{"text": "s{i}-a"}})\n{{"type": "observation", "value": a}}')
    kind = kind_of(i)
    lines = [f'b = call_tool("note", {{"text": "s{i}-b"}})'] if kind == "plain" else []
    parts = ["b"] if kind == "plain" else []
    if kind in ("gated", "both"):
        lines.append(f'p = call_tool("pay", {{"amount": {i}, "to": "s{i}"}})')
        parts.append("p")
    if kind in ("long", "both"):
        lines.append(f'r = call_tool("render", {{"scene": "s{i}"}})')
        parts.append("r")
    value = " + '; ' + ".join([f"'noted s{i}-a'", *parts])
    lines.append(f'{{"type": "final_result", "value": {value}}}')
    return _fence("\n".join(lines))


class _Ledger:
    def __init__(self) -> None:
        self._local = threading.local()

    def _conn(self) -> Any:
        import psycopg

        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = psycopg.connect(os.environ["CODEACT_DBOS_LEDGER"], autocommit=True)
            self._local.conn = conn
        return conn

    def record(self, session: str, tool: str, arg: str, call_key: str) -> None:
        conn = self._conn()
        conn.execute(
            "INSERT INTO ledger (session, tool, arg, call_key, pid) VALUES (%s, %s, %s, %s, %s)",
            (session, tool, arg, call_key, os.getpid()),
        )
        name = f"{session}:{tool}"
        if name in os.environ.get("CODEACT_DBOS_BLOCK", "").split(","):
            # the first run only: the barrier row exists once
            cur = conn.execute(
                "INSERT INTO barriers (name, pid) VALUES (%s, %s) ON CONFLICT DO NOTHING", (name, os.getpid())
            )
            if cur.rowcount == 1:
                threading.Event().wait(600)  # the test kills this process now


_ledger = _Ledger()


def build() -> CodeActAgent:
    """The agent every worker runs."""

    def note(text: str, tool_context: ToolContext) -> str:
        """Writes a note."""
        _ledger.record(text.split("-")[0], "note", text, tool_context.function_call_id or "")
        return f"noted {text}"

    def pay(amount: int, to: str, tool_context: ToolContext) -> str:
        """Pays (needs approval)."""
        _ledger.record(to, "pay", str(amount), tool_context.function_call_id or "")
        return f"paid {amount} for {to}"

    def render(scene: str, tool_context: ToolContext) -> dict:
        """Starts a render; the frame arrives later."""
        _ledger.record(scene, "render", scene, tool_context.function_call_id or "")
        return {"status": "started"}

    return CodeActAgent(
        name="coder",
        model=ScriptedModel(_reply),
        runtime=MontyRuntime(),
        tools=[
            FunctionTool(note),
            FunctionTool(pay, requires_confirmation=True),
            LongRunningFunctionTool(render),
        ],
    )
