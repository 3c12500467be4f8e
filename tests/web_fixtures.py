"""The agent and store the web tests serve: a script that looks a name up (with a secret),
prints, then asks a human before it pays; and one that starts a long-running job."""

from __future__ import annotations

import json
from typing import Any

import anyio
from pydantic import BaseModel, Field

from codeact import CodeActAgent, FunctionTool, LongRunningFunctionTool, MontyRuntime, Runner, ScriptedModel
from codeact.models import LlmRequest
from codeact.sessions import SqliteSessionService
from codeact.tools import ToolContext

APP = "webapp"
SECRET = "sk-LIVE-7f3a9c2e51"
PAID: list[int] = []
SYNCED: list[int] = []
HANG: dict[str, Any] = {"started": None}

PAY_SCRIPT = """\
who = call_tool("lookup", {"name": "bob"})
print("looked up", who)
try:
    r = call_tool("pay", {"amount": 900})
except PermissionError as e:
    r = "refused: " + str(e)
{"type": "final_result", "value": r}"""

JOB_SCRIPT = """\
j = call_tool("start_job", {"name": "nightly"})
{"type": "final_result", "value": "job said " + str(j)}"""


def lookup(name: str, tool_context: ToolContext) -> str:
    """Looks a customer up in the bank's API (with the API key)."""
    return f"found {name} (key {tool_context.get_secret('bank_key')})"


def pay(amount: int) -> str:
    """Pays out (needs a human's approval)."""
    PAID.append(amount)
    return f"paid {amount}"


def start_job(name: str) -> str:
    """Starts a long job; its result comes later."""
    return f"job {name} started"


SYNC_SCRIPT = """\
n = call_tool("sync_ledger", {"n": 3})
{"type": "final_result", "value": "synced " + str(n)}"""


async def sync_ledger(n: int) -> int:
    """Syncs the ledger (asks a human when it may or may not have happened)."""
    SYNCED.append(n)
    started = HANG["started"]
    if started is not None:  # the runner "dies" here: crash() cancels it
        started.set()
        await anyio.sleep_forever()
    return n


TWICE_SCRIPT = """\
a = call_tool("pay", {"amount": 100})
b = call_tool("pay", {"amount": 200})
{"type": "final_result", "value": a + " and " + b}"""

DECOY_SCRIPT = """\
label = "pay"
print("about to", label, "pay(...)")
who = call_tool("lookup", {"name": "bob"})
r = call_tool("pay", {"amount": 900})
{"type": "final_result", "value": r}"""

MIRROR_SCRIPT = """\
memo = "fine \u202e 009 yap \u202c"  # bidi controls: shown escaped
r = call_tool("pay", {"amount": 900})
{"type": "final_result", "value": r}"""

LONG_SCRIPT = """\
r = call_tool("pay", {"amount": "9" * 3000})
{"type": "final_result", "value": r}"""

FAIL_SCRIPT = """\
raise ValueError("kaput")"""

LOOP_SCRIPT = """\
print("pay", "twice:", 'call_tool("pay", ...)')
paid = []
for amount in (100, 200):
    paid.append(call_tool("pay", {"amount": amount}))
{"type": "final_result", "value": " and ".join(paid)}"""

# With persist_namespace: a first script defines what the next one (in the same run) uses.
SETUP_SCRIPT = """\
def settle(amount):
    return call_tool("pay", {"amount": amount})
rate = 2
print("next: %s")"""

SETTLE_SCRIPT = """\
r = settle(300)
{"type": "final_result", "value": r}"""

REFUND_SCRIPT = """\
r = call_tool("refund", {"amount": 50})
{"type": "final_result", "value": r}"""

# A gather paused at two calls of one turn: the inbox's batch card.
BOTH_SCRIPT = """\
import asyncio
r = await asyncio.gather(call_tool("pay", {"amount": 300}), call_tool("pay", {"amount": 400}))
{"type": "final_result", "value": " and ".join(r)}"""

RENDER_SCRIPT = """\
f = call_tool("render", {"scene": "beach"})
{"type": "final_result", "value": "rendered " + f["url"] + " at " + str(f["width"])}"""

SHIP_SCRIPT = """\
r = call_tool("ship", {"order": 7})
{"type": "final_result", "value": r}"""

SCRIPTS = {
    "refund": REFUND_SCRIPT,
    "both": BOTH_SCRIPT,
    "render": RENDER_SCRIPT,
    "ship": SHIP_SCRIPT,
    "twice": TWICE_SCRIPT,
    "decoy": DECOY_SCRIPT,
    "mirror": MIRROR_SCRIPT,
    "a lot": LONG_SCRIPT,
    "loop": LOOP_SCRIPT,
    "prepare one": SETUP_SCRIPT % "loop",
    "prepare two": SETUP_SCRIPT % "settle",
    "settle": SETTLE_SCRIPT,
}


def _reply(request: LlmRequest) -> str:
    last = request.contents[-1].text
    for word, script in SCRIPTS.items():
        if word in last:
            return f"```python\n{script}\n```"
    if "explode" in last:
        return f"```python\n{FAIL_SCRIPT}\n```"
    if "pay" in last:
        return f"```python\n{PAY_SCRIPT}\n```"
    if "sync" in last:
        return f"```python\n{SYNC_SCRIPT}\n```"
    if "job" in last:
        return f"```python\n{JOB_SCRIPT}\n```"
    return '```python\n{"type": "final_result", "value": ' + json.dumps(f"ok: {last[:40]}") + "}\n```"


REFUNDED: list[int] = []
SHIPPED: list[Any] = []


class Frame(BaseModel):
    """A rendered frame: what completes a ``render`` call (its ``result_type``)."""

    url: str = Field(description="where the frame is")
    width: int = Field(description="pixels")


class Priority(BaseModel):
    """What a reviewer gives with an approval of ``ship`` (its ``payload_type``)."""

    level: int = Field(description="1 (low) to 3 (urgent)")
    note: str = ""


def refund(amount: int) -> str:
    """Refunds a payment (needs approval; the amount may not be edited)."""
    REFUNDED.append(amount)
    return f"refunded {amount}"


def render(scene: str) -> str:
    """Starts rendering a scene; a human completes it with the frame."""
    return f"rendering {scene}"


def ship(order: int, tool_context: ToolContext) -> str:
    """Ships an order at the priority the reviewer gives."""
    answer = tool_context.tool_confirmation
    payload = answer.payload if answer is not None else None
    SHIPPED.append(payload)
    return f"shipped {order} at {payload}"


def make_agent(*, persist_namespace: bool = False) -> CodeActAgent:
    """A fresh agent (its scripted model answers by the last message)."""
    return CodeActAgent(
        name="assistant",
        persist_namespace=persist_namespace,
        model=ScriptedModel(_reply),
        runtime=MontyRuntime(),
        tools=[
            lookup,
            FunctionTool(pay, requires_confirmation=True),
            LongRunningFunctionTool(start_job),
            FunctionTool(sync_ledger, on_in_doubt="ask"),
            FunctionTool(refund, requires_confirmation=True, editable=False),
            LongRunningFunctionTool(render, result_type=Frame),
            FunctionTool(ship, requires_confirmation=True, payload_type=Priority),
        ],
    )


AGENT = make_agent()


def make_runner(db: str, *, persist_namespace: bool = False) -> Runner:
    """A runner over the SQLite file ``db`` with the secret."""
    return Runner(
        app_name=APP,
        agent=make_agent(persist_namespace=persist_namespace),
        session_service=SqliteSessionService(db),
        secrets={"bank_key": SECRET},
        auto_create_session=True,
    )


async def start(runner: Runner, session_id: str, message: str, user_id: str = "alice") -> None:
    """Runs one message (it pauses at the human's call)."""
    async for _ in runner.run_async(user_id=user_id, session_id=session_id, new_message=message):
        pass


async def crash(runner: Runner, session_id: str, message: str, user_id: str = "alice") -> None:
    """Runs one message and stops its runner while ``sync_ledger`` runs (cancelled, as a
    runner that died): the turn is left interrupted with the call in doubt."""
    HANG["started"] = anyio.Event()
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(start, runner, session_id, message, user_id)
            await HANG["started"].wait()
            tg.cancel_scope.cancel()
    finally:
        HANG["started"] = None
