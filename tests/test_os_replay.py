"""OS answers are journaled and replayed (SPEC §5): a script that reads the clock before a
tool call, interrupted after the call's intent, recovers with the same clock value and no
divergence.

The runtime reports the OS answers it gave a script as ``RunStep.os_log`` and replays them
from ``os_replay`` (INTERFACES: the Monty 1.4 port). The 0.0.19 engine gives ``os_log == ()``;
then this test skips, saying so.
"""

from __future__ import annotations

import gc
import warnings

import anyio
import pytest

from agent_helpers import APP, SESSION, USER, fence, journal_of
from codeact import Call, CodeActAgent, InMemorySessionService, MontyRuntime, Runner, ScriptedModel

pytestmark = pytest.mark.anyio

SCRIPT = """
from datetime import datetime
stamp = str(datetime.now())
r = call_tool("stamp", {"at": stamp})
{"type": "final_result", "value": [stamp, r]}
"""


def runtime_reports_os_answers() -> bool:
    step = MontyRuntime().start(SCRIPT, "probe.py")
    return isinstance(step, Call) and bool(getattr(step, "os_log", ()))


class Crash(BaseException):
    pass


class CrashAfterIntent(InMemorySessionService):
    armed = True

    async def append_journal(self, session, turn, records, **kwargs):
        await super().append_journal(session, turn, records, **kwargs)
        if self.armed and any(r.kind == "intent" for r in records):
            self.armed = False
            raise Crash


@pytest.mark.parametrize("attempt", [1, 2])
async def test_clock_reads_are_replayed_on_recovery(attempt: int) -> None:
    if not runtime_reports_os_answers():
        pytest.skip("the runtime does not report its OS answers yet (os_log == (); the Monty 1.4 port adds it)")
    seen: list[str] = []

    def stamp(at: str) -> str:
        """Records a time stamp."""
        seen.append(at)
        return "ok"

    service = CrashAfterIntent()
    await service.create_session(app_name=APP, user_id=USER, session_id=SESSION)
    agent = CodeActAgent(name="coder", model=ScriptedModel([fence(SCRIPT)]), runtime=MontyRuntime(), tools=[stamp])
    runner = Runner(app_name=APP, agent=agent, session_service=service)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        with pytest.raises(Crash):
            async for _ in runner.run_async(user_id=USER, session_id=SESSION, new_message="go"):
                pass
        gc.collect()
    assert [kind for kind, _, _ in journal_of(service)][:2] == ["os", "intent"]
    await anyio.sleep(0.01 * attempt)  # the clock moves on; the replayed script must not see it
    events = [e async for e in runner.run_async(user_id=USER, session_id=SESSION)]
    assert events[-1].error_code is None, events[-1].error_message
    assert seen and len(set(seen)) == 1  # the re-run call got the original time stamp
