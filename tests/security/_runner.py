"""Runs one family of adversarial scripts in this (child) process and prints one JSON line
per case. Usage: ``python _runner.py FAMILY ISOLATION``.

Between cases it checks the host is unaffected: a neighbour runtime still runs a script,
and a neighbour script paused before the family started resumes at the end with its state
intact (nothing crossed between runtimes).
"""

from __future__ import annotations

import inspect
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _cases import FAMILIES, HOST_ENV_SECRET, SECRET, Case

from codeact import (
    Call,
    CodeActError,
    Complete,
    Gather,
    MontyRuntime,
    Mount,
    PathAccess,
    Raised,
    ResourceLimits,
    ResumeError,
    ResumeValue,
)

MiB = 1024 * 1024
# The sandbox must hold without the static subset check in front of the interpreter (it
# is a convenience for the model, not a boundary): turn it off where the runtime has it.
RAW: dict[str, Any] = (
    {"check_scripts": False, "rewrite_scripts": False}
    if "check_scripts" in inspect.signature(MontyRuntime.__init__).parameters
    else {}
)
LIMITS = {"max_duration": 0.5, "max_memory": 64 * MiB, "max_recursion_depth": 200}


def build_tree(root: Path) -> tuple[Path, Path, Path]:
    """data/ (read-only), out/ (read-write), outside/ with the secret; escaping links."""
    data, out, outside = root / "data", root / "out", root / "outside"
    for d in (data, out, outside):
        d.mkdir()
    (outside / "secret.txt").write_text(SECRET)
    (data / "inside.txt").write_text("inside")
    (data / "link_out").symlink_to(outside)
    (data / "link_secret").symlink_to(outside / "secret.txt")
    (out / "link_out").symlink_to(outside)
    (outside / "hardlinked.txt").write_text("hardlinked")
    os.link(outside / "hardlinked.txt", data / "hardlink")
    return data, out, outside


class Driver:
    """Answers tool calls; ``echo`` returns its arguments."""

    def __init__(self, rt: MontyRuntime, other_key_rt: MontyRuntime, out: Path, outside: Path) -> None:
        self.rt = rt
        self.other = other_key_rt
        self.out = out
        self.outside = outside

    def run(self, case: Case, script: str) -> Any:
        step = self.rt.start(script, "agent")
        if case.driver:
            return getattr(self, case.driver)(step)
        n = 0
        while isinstance(step, (Call, Gather)):
            if isinstance(step, Gather):  # settle every call, from snapshot bytes every other time
                outcomes = {
                    c.call_id: ResumeValue(dict(c.keyword_args) if c.name == "echo" else None) for c in step.calls
                }
                step = step.resume(outcomes) if n % 2 == 0 else self.rt.resume_gather(step.dump(), outcomes)
                n += 1
                continue
            call = step.call
            value = dict(call.keyword_args) if call.name == "echo" else None
            # Alternate in-place resumes and resumes from snapshot bytes.
            step = call.resume(ResumeValue(value)) if n % 2 == 0 else self.rt.resume(call.dump(), ResumeValue(value))
            n += 1
        return step

    def race_symlink_swap(self, _step: Any) -> Any:
        """A host thread swaps /out/target between a plain file and a symlink escaping the
        mount while the script reads it: every read sees the file or is refused."""
        target = self.out / "target"
        target.write_text("public")
        stop = threading.Event()

        def swap() -> None:
            tmp_file, tmp_link = self.out / ".tmp_file", self.out / ".tmp_link"
            while not stop.is_set():
                tmp_link.unlink(missing_ok=True)
                tmp_link.symlink_to(self.outside / "secret.txt")
                os.replace(tmp_link, target)
                tmp_file.write_text("public")
                os.replace(tmp_file, target)

        thread = threading.Thread(target=swap)
        thread.start()
        try:
            script = (
                "from pathlib import Path\nseen = []\nfor i in range(100000):\n    try:\n"
                "        t = Path('/out/target').read_text()\n    except PermissionError:\n        t = 'denied'\n"
                "    except FileNotFoundError:\n        t = 'missing'\n    if t not in seen:\n        seen.append(t)\n"
                "    if len(seen) > 2:\n        break\nsorted(seen)"
            )
            return self.rt.start(script, "agent")
        finally:
            stop.set()
            thread.join()

    def resume_set(self, step: Call) -> Any:
        return step.call.resume(ResumeValue({1, 2}))

    def resume_object(self, step: Call) -> Any:
        return step.call.resume(ResumeValue(object()))

    def resume_deep(self, step: Call) -> Any:
        x: Any = []
        for _ in range(500):
            x = [x]
        return step.call.resume(ResumeValue(x))

    def resume_surrogate(self, step: Call) -> Any:
        return step.call.resume(ResumeValue("\udcff"))

    def resume_junk(self, step: Call) -> Any:
        return step.call.resume("not an outcome")  # type: ignore[arg-type]

    def resume_system_exit(self, step: Call) -> Any:
        return step.call.resume(ResumeError("bye", "SystemExit"))

    def resume_unknown_exc(self, step: Call) -> Any:
        return step.call.resume(ResumeError("odd", "NoSuchError"))

    def resume_twice(self, step: Call) -> Any:
        step.call.resume(ResumeValue(1))
        return step.call.resume(ResumeValue(1))

    def dump_after_resume(self, step: Call) -> Any:
        step.call.resume(ResumeValue(1))
        return step.call.dump()

    def resume_wrong_key(self, step: Call) -> Any:
        return self.other.resume(step.call.dump(), ResumeValue(1))

    def resume_many(self, step: Call) -> Any:
        snap = step.call.dump()
        values = [self.rt.resume(snap, ResumeValue(i)) for i in (1, 2, 3)]
        assert all(isinstance(v, Complete) for v in values), values
        return Complete([v.value for v in values], "")  # type: ignore[union-attr]


def outcome(result: Any) -> dict[str, Any]:
    if isinstance(result, Complete):
        v = result.value
        shown = v if len(repr(v)) < 10_000 else {"__len__": len(v), "__head__": repr(v)[:50]}
        return {
            "kind": "complete",
            "value": repr(shown),
            "stdout_len": len(result.stdout),
            "stdout": result.stdout[-300:],
        }
    if isinstance(result, Raised):
        lines = result.message.rstrip().splitlines() or [""]
        return {
            "kind": "raised",
            "last_line": lines[-1][:300],
            "message": result.message[:3000],
            "stdout_len": len(result.stdout),
        }
    return {"kind": "other", "value": repr(result)[:300]}


def main() -> None:
    family, isolation = sys.argv[1], sys.argv[2]
    only = set(sys.argv[3:])
    os.environ[HOST_ENV_SECRET] = SECRET
    root = Path(tempfile.mkdtemp(prefix="codeact-adv-"))
    data, out, outside = build_tree(root)
    mounts = [
        Mount(virtual_path="/data", host_path=data),
        Mount(virtual_path="/out", host_path=out, access=PathAccess.READ_WRITE),
    ]
    key = b"k" * 32
    neighbour = MontyRuntime(isolation=isolation)  # type: ignore[arg-type]
    paused = neighbour.start("state = {'mine': [1, 2, 3]}\nr = call_tool('t')\n[state, r]", "neighbour")
    assert isinstance(paused, Call)
    for case in FAMILIES[family]:
        if only and case.name not in only:
            continue
        limits = ResourceLimits(**{**LIMITS, **case.limits})
        rt = MontyRuntime(
            limits,
            mounts=mounts,
            environ={"VISIBLE": "yes"},
            snapshot_key=key,
            isolation=isolation,  # type: ignore[arg-type]
            **RAW,
        )
        other = MontyRuntime(limits, snapshot_key=b"j" * 32, isolation=isolation)  # type: ignore[arg-type]
        script = case.script.replace("{OUTSIDE}", str(outside))
        t0 = time.perf_counter()
        try:
            res = outcome(Driver(rt, other, out, outside).run(case, script))
        except CodeActError as exc:
            res = {"kind": "host_error", "type": type(exc).__name__, "message": str(exc)}
        except TypeError as exc:
            res = {"kind": "host_error", "type": "TypeError", "message": str(exc)}
        res["seconds"] = round(time.perf_counter() - t0, 3)
        res["name"] = case.name
        sentinel = neighbour.start("sum([1, 2, 3])", "sentinel")
        res["neighbour_ok"] = isinstance(sentinel, Complete) and sentinel.value == 6
        res["secret_file_intact"] = (outside / "secret.txt").read_text() == SECRET
        res["host_env_intact"] = os.environ.get(HOST_ENV_SECRET) == SECRET and "NEW" not in os.environ
        print(json.dumps(res), flush=True)
    final = paused.call.resume(ResumeValue("r"))
    ok = isinstance(final, Complete) and final.value == [{"mine": [1, 2, 3]}, "r"]
    print(json.dumps({"name": "__neighbour__", "ok": ok, "value": repr(final)[:300]}), flush=True)


if __name__ == "__main__":
    main()
