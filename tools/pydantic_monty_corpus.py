"""Run the real-script corpus on the official ``pydantic-monty`` binding, for docs/corpus.md.

Run it with a Python that has ``pydantic-monty`` (``pip install pydantic-monty==1.4.0``, the
``benchmark`` extra; codeact need not be installed there)::

    OUT=tools/corpus_outcomes/pydantic-monty-1.4.0.json
    python tools/pydantic_monty_corpus.py ../shared/corpus/scripts.jsonl > $OUT
    python tools/corpus.py ../shared/corpus/scripts.jsonl --compare-json $OUT

It prints one JSON object: ``{"binding": ..., "version": ..., "os_policy": ..., "outcomes": {id: outcome}}``
where an outcome is ``["ok", stdout, result]`` or ``["error", stdout, exception type, message]``, the
shape ``tools/corpus.py`` gives its own Monty and CPython outcomes, so the comparison with CPython is the
same function. Each item runs exactly as in ``tools/corpus.py``:

- the script is the item's code with the earlier steps of its trajectory prepended (the same
  ``load_items`` rule, repeated here because codeact is not importable in this environment);
- every tool in ``tools_used`` (bare calls, functions style) returns the fixed string ``"stub result"``;
  ``final_answer(x)`` ends the script with ``{"type": "final_result", "value": x}`` (as codeact's
  ``final_answer_step``); any other external call raises ``NameError``;
- OS calls get codeact's ``MontyRuntime`` policy with no mounts and ``system_clock=False``: existence
  checks answer ``False``, ``os.getenv`` its default, ``os.environ`` an empty mapping,
  ``date.today()`` / ``datetime.now()`` raise ``OSError`` (the session's ``os_policy`` routes the
  clock to the host for that: ``{"datetime": "call_host"}``), ``time.time()`` the host's clock (as the
  CPython side, which refuses only the date clock), sleeps return at once; everything else gets
  Monty's own "not handled" answer (``PermissionError``). ``--os-policy not-handled`` answers every
  OS call with Monty's default instead (and leaves the clock to the worker).

Each item gets a fresh session from one pool of one worker (``Monty(max_processes=1)``); a 30 s
``request_timeout`` backstops runaway scripts. Tested with pydantic-monty 0.0.19 and 1.4.0.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import pydantic_monty as pm

STUB_RESULT = "stub result"
MAX_CALLS = 1000
FINAL_ANSWER = "final_answer"
_EXISTENCE = {"Path.exists", "Path.is_file", "Path.is_dir", "Path.is_symlink"}
_CLOCK = {"date.today", "datetime.now"}
_SLEEP = {"time.sleep", "asyncio.sleep", "system.sleep", "system.async_sleep"}


def _parses(code: str) -> bool:
    try:
        ast.parse(code)
    except SyntaxError:
        return False
    return True


def load_items(path: str) -> list[dict[str, Any]]:
    """The same items as ``tools/corpus.py``'s ``load_items``: id, script (trajectory steps joined), tools."""
    rows = [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines() if line.strip()]
    steps: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        if row.get("trajectory"):
            steps[row["trajectory"]].append(row)
    items = []
    for row in rows:
        script, tools = row["code"], list(row.get("tools_used") or ())
        traj = row.get("trajectory")
        if traj and len(steps[traj]) > 1:
            earlier = [r for r in steps[traj] if (r.get("step") or 0) < (row.get("step") or 0) and _parses(r["code"])]
            earlier.sort(key=lambda r: r.get("step") or 0)
            script = "\n\n".join([*(r["code"] for r in earlier), row["code"]])
            for r in earlier:
                tools += [t for t in r.get("tools_used") or () if t not in tools]
        items.append({"id": row["id"], "script": script, "tools": tools})
    return items


def _plain(value: Any) -> Any:
    """JSON-safe, the way ``tools/corpus.py`` compares results (``default=repr``)."""
    return json.loads(json.dumps(value, default=repr))


def _error(stdout: str, err: BaseException) -> list[Any]:
    if isinstance(err, pm.MontyError):
        text = err.display("type-msg") if hasattr(err, "display") else str(err)
        exc = err.exception()
        name = type(exc).__name__ if isinstance(exc, BaseException) else "Error"
        m = re.match(r"([A-Za-z_][\w.]*)(?::|$)", text.strip().splitlines()[-1] if text.strip() else "")
        if m:
            name = m.group(1).rsplit(".", 1)[-1]
        return ["error", stdout, name, text]
    return ["error", stdout, type(err).__name__, str(err)]


def _answer_os(snap: Any, policy: str) -> Any:
    name = snap.function_name
    if policy == "codeact":
        if name in _EXISTENCE:
            return snap.resume({"return_value": False})
        if name == "os.getenv":
            default = snap.args[1] if len(snap.args) > 1 else snap.kwargs.get("default")
            return snap.resume({"return_value": default})
        if name == "os.environ":
            return snap.resume({"return_value": {}})
        if name in _CLOCK:
            msg = "the host clock is not granted to this script (system_clock=False)"
            return snap.resume({"exc_type": "OSError", "message": msg})
        if name == "time.time":
            return snap.resume({"return_value": time.time()})
        if name in _SLEEP:
            return snap.resume({"return_value": None})
    return snap.resume_not_handled()


def _checkout_options(policy: str) -> dict[str, Any]:
    """1.x sessions take an ``os_policy``: under codeact's policy the clock and sleeps come to the host."""
    if policy != "codeact" or _major(pm.__version__) < 1:
        return {}
    return {"os_policy": {"datetime": "call_host", "sleep": "call_host"}}


def _major(version: str) -> int:
    head = version.split(".")[0]
    return int(head) if head.isdigit() else 0


def run_item(pool: Any, item: dict[str, Any], policy: str) -> list[Any]:
    out = pm.CollectString()
    try:
        with pool.checkout(script_name="script.py", **_checkout_options(policy)) as session:
            snap = session.feed_start(item["script"], print_callback=out)
            for _ in range(MAX_CALLS):
                if isinstance(snap, pm.MontyComplete):
                    return ["ok", out.output, _plain(snap.output)]
                if isinstance(snap, pm.NameLookupSnapshot):
                    snap = snap.resume()  # an undefined name stays undefined: NameError
                elif isinstance(snap, pm.FutureSnapshot):
                    return ["error", out.output, "NotImplementedError", "async externals are not answered"]
                elif snap.is_os_function:
                    snap = _answer_os(snap, policy)
                elif snap.function_name == FINAL_ANSWER:  # as codeact's final_answer_step
                    args, kwargs = snap.args, snap.kwargs
                    if len(args) == 1 and not kwargs:
                        value = args[0]
                    elif not args and len(kwargs) == 1 and next(iter(kwargs)) in ("answer", "value", "result"):
                        value = next(iter(kwargs.values()))
                    else:
                        msg = "final_answer() takes exactly one argument, the final result: final_answer(value)"
                        snap = snap.resume({"exc_type": "TypeError", "message": msg})
                        continue
                    return ["ok", out.output, _plain({"type": "final_result", "value": value})]
                elif snap.function_name in item["tools"]:
                    snap = snap.resume({"return_value": STUB_RESULT})
                else:
                    msg = f"name {snap.function_name!r} is not defined"
                    snap = snap.resume({"exc_type": "NameError", "message": msg})
            return ["error", out.output, "TooManyCalls", f"more than {MAX_CALLS} tool calls"]
    except pm.MontyCrashedError as err:
        return ["error", out.output, "MontyCrashedError", str(err)]
    except pm.MontyError as err:
        return _error(out.output, err)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", help="a scripts.jsonl file")
    parser.add_argument("--os-policy", choices=("codeact", "not-handled"), default="codeact")
    args = parser.parse_args()
    items = load_items(args.path)
    outcomes = {}
    with pm.Monty(min_processes=1, max_processes=1, request_timeout=30) as pool:
        for item in items:
            outcomes[item["id"]] = run_item(pool, item, args.os_policy)
    print(
        json.dumps(
            {"binding": "pydantic-monty", "version": pm.__version__, "os_policy": args.os_policy, "outcomes": outcomes},
            indent=1,
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
