"""Writes tests/data/interrupted-0.2.0.sqlite: a session whose turn was interrupted mid-script,
journaled exactly as codeact 0.2.0 journaled it (an intent and an outcome per call, no seal),
for issue 50's check that a stored 0.2.0 journal still recovers.

The journal code is Python, so the fixture is made by running 0.2.0's Python sources over the
current compiled extension (the continuation format did not change):

    git archive 006c868 python | tar -x -C /tmp/v020
    cp python/codeact/_monty*.so /tmp/v020/python/codeact/
    PYTHONPATH=/tmp/v020/python python tools/make_journal_fixture.py tests/data/interrupted-0.2.0.sqlite

The session: app ``app``, user ``u``, session ``s``. Its script is ``SCRIPT``: ``lookup(1)`` and
``note("x")`` ran (an intent and an outcome each), then the process died inside ``lookup(2)``
(its intent stored, no outcome); ``pay`` never started.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import anyio

APP, USER, SESSION = "app", "u", "s"
SCRIPT = (
    'a = call_tool("lookup", {"k": 1})\nb = call_tool("note", {"text": "x"})\nc = call_tool("lookup", {"k": 2})\n'
    'd = call_tool("pay", {"amount": a + c})\n{"type": "final_result", "value": [a, b, c, d]}'
)


class Died(BaseException):
    """The process dies inside ``lookup(2)``."""


def lookup(k: int) -> int:
    """Looks up record k.

    Args:
        k: the record.
    """
    if k == 2:
        raise Died
    return k * 10


def note(text: str) -> str:
    """Notes text.

    Args:
        text: the text.
    """
    return f"noted {text}"


def pay(amount: int) -> str:
    """Pays.

    Args:
        amount: the amount.
    """
    return f"paid {amount}"


async def make(path: Path) -> None:
    import codeact
    from codeact import CodeActAgent, FunctionTool, MontyRuntime, Runner, ScriptedModel, SqliteSessionService

    if codeact.__version__ != "0.2.0":
        raise SystemExit(f"run with codeact 0.2.0's sources on PYTHONPATH (found {codeact.__version__})")
    with SqliteSessionService(path) as service:
        agent = CodeActAgent(
            name="coder",
            model=ScriptedModel(["```python\n" + SCRIPT + "\n```"]),
            runtime=MontyRuntime(),
            tools=[FunctionTool(lookup), FunctionTool(note), FunctionTool(pay)],
        )
        runner = Runner(app_name=APP, agent=agent, session_service=service)
        await service.create_session(app_name=APP, user_id=USER, session_id=SESSION)
        try:
            async for _ in runner.run_async(user_id=USER, session_id=SESSION, new_message="go"):
                pass
        except Died:
            pass
        else:
            raise SystemExit("the run did not die inside lookup(2)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("path", type=Path)
    args = parser.parse_args()
    if args.path.exists():
        args.path.unlink()
    anyio.run(make, args.path)
    print(f"wrote {args.path}", file=sys.stderr)


if __name__ == "__main__":
    main()
