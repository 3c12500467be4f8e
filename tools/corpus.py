"""Run a corpus of real agent scripts on Monty and on CPython, and compare (docs/corpus.md).

``python tools/corpus.py PATH [--json]`` (from a checkout; formerly ``python -m codeact.corpus``)
reads a JSON-lines scripts file (fields of
``shared/corpus/scripts.jsonl``: ``id``, ``code``, ``tools_used``, ``trajectory``, ``step``)
and runs every item twice:

- on ``MontyRuntime(tool_style="functions", system_clock=False)``, once with the subset
  rewrites and once without (the static check's refusals are off, so Monty's own error kind
  is measured); every tool in ``tools_used`` returns the same fixed string, ``final_answer(x)``
  ends the script with ``x``, any other bare call of an unknown name raises ``NameError``;
- on CPython, in one child process (``python -I``) whose working directory is a fresh
  temporary folder, with the same stubs, sockets refused and the clock refused the same way
  Monty's is (``datetime.now()`` / ``date.today()`` raise ``OSError``). Items that shell out
  or install packages are not run there and are counted as skipped.

Trajectories: Monty keeps no namespace between two starts, so step ``k`` of a trajectory runs
as one script made of steps ``0..k`` joined in order (on both sides alike); an error in an
earlier step therefore also fails the later ones, on both sides.

An outcome is ``("ok", stdout, result)`` or ``("error", stdout, exception type)``; an item is
the same as CPython when both outcomes are equal (``ran_same_as_cpython`` also asks that both
ran to the end without an exception). Items importing a package outside the
standard library are in ``third_party``; ``no_third_party`` is the rest. ``headline`` gives the
no-third-party share the same as CPython over all those items and over the ones that ran on both
sides (items skipped on CPython and items that need the network are counted apart and listed).

``--compare-json FILE`` reads another binding's outcomes for the same items (written by
``tools/pydantic_monty_corpus.py``; pydantic-monty 1.4.0's are committed in
``tools/corpus_outcomes/``), scores them against the same CPython outcomes and sets them beside
codeact's (with and without the rewrites), listing the items where one side is the same as CPython
and the other is not; ``--write-doc docs/corpus.md`` also writes that table into the doc.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import subprocess
import sys
import tempfile
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from codeact._monty import MONTY_VERSION
from codeact._values import in_script_check
from codeact.runtime import Call, Complete, Gather, MontyRuntime, Raised, ResumeError, ResumeValue
from codeact.runtime.monty import FINAL_ANSWER, final_answer_step

__all__ = ("CorpusItem", "load_items", "main", "run_corpus")

STUB_RESULT = "stub result"
"""What every tool returns, on both sides."""
MAX_CALLS = 1000

_SHELL_OUT = re.compile(r"subprocess|os\.system|os\.popen|pip install|^\s*[!%]", re.M)


@dataclass
class CorpusItem:
    """One item, with the script actually run (earlier trajectory steps included)."""

    id: str
    code: str
    tools: tuple[str, ...]
    script: str
    third_party: tuple[str, ...] = ()
    shells_out: bool = False


@dataclass
class ItemResult:
    id: str
    third_party: bool
    parsed: bool
    ran: bool
    same: bool | None  # None: not run on CPython (skipped)
    monty: tuple[Any, ...] = ()
    cpython: tuple[Any, ...] | None = None
    kind: str = ""
    flagged: list[str] = field(default_factory=list)


def _imports(script: str) -> set[str]:
    try:
        tree = ast.parse(script)
    except SyntaxError:
        return set(re.findall(r"^\s*(?:from|import)\s+([A-Za-z_]\w*)", script, re.M))
    roots: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            roots |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            roots.add(node.module.split(".")[0])
    return roots


def _parses(code: str) -> bool:
    try:
        ast.parse(code)
    except SyntaxError:
        return False
    return True


def load_items(path: str | Path) -> list[CorpusItem]:
    """Reads a scripts file. A trajectory step gets the code of the earlier steps prepended
    (those that parse: a step that does not parse never ran, so it defined nothing) and the
    tools they used."""
    rows = [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines() if line.strip()]
    steps: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        if row.get("trajectory"):
            steps[row["trajectory"]].append(row)
    items = []
    for row in rows:
        code = row["code"]
        script = code
        tools = list(row.get("tools_used") or ())
        traj = row.get("trajectory")
        if traj and len(steps[traj]) > 1:
            earlier = [r for r in steps[traj] if (r.get("step") or 0) < (row.get("step") or 0) and _parses(r["code"])]
            earlier.sort(key=lambda r: r.get("step") or 0)
            script = "\n\n".join([*(r["code"] for r in earlier), code])
            for r in earlier:
                tools += [t for t in r.get("tools_used") or () if t not in tools]
        third = tuple(sorted(m for m in _imports(script) if m not in sys.stdlib_module_names))
        items.append(
            CorpusItem(
                id=row["id"],
                code=code,
                tools=tuple(tools),
                script=script,
                third_party=third,
                shells_out=bool(_SHELL_OUT.search(script)),
            )
        )
    return items


# ------------------------------------------------------------------ Monty side


def _exc_type(message: str) -> str:
    last = message.strip().splitlines()[-1] if message.strip() else ""
    m = re.match(r"([A-Za-z_][\w.]*)(?::|$)", last)
    return m.group(1).rsplit(".", 1)[-1] if m else "Error"


def run_monty(rt: MontyRuntime, item: CorpusItem) -> tuple[Any, ...]:
    """Runs ``item`` to the end on ``rt``: ``("ok", stdout, value)`` or ``("error", stdout, type, message)``."""
    step = rt.start(item.script)
    stdout = ""
    for _ in range(MAX_CALLS):
        stdout += step.stdout
        if isinstance(step, Complete):
            return ("ok", stdout, step.value)
        if isinstance(step, Raised):
            return ("error", stdout, _exc_type(step.message), step.message)
        if isinstance(step, Gather):  # awaited together: every call answered as a lone one would be
            step = step.resume(
                {
                    c.call_id: ResumeValue(STUB_RESULT)
                    if c.name in item.tools
                    else ResumeError(f"name {c.name!r} is not defined", "NameError")
                    for c in step.calls
                }
            )
            continue
        assert isinstance(step, Call)
        call = step.call
        if call.name == FINAL_ANSWER:
            outcome = final_answer_step(call.positional_args, call.keyword_args)
            if isinstance(outcome, Complete):
                return ("ok", stdout, outcome.value)
            step = call.resume(outcome)
        elif call.name in item.tools:
            step = call.resume(ResumeValue(STUB_RESULT))
        else:
            step = call.resume(ResumeError(f"name {call.name!r} is not defined", "NameError"))
    return ("error", stdout, "TooManyCalls", "more than 1000 tool calls")


# ------------------------------------------------------------------ CPython side

_HARNESS = r"""
import ast, contextlib, datetime as _dt, io, json, signal, socket, sys

STUB = sys.argv[1]

class _Final(BaseException):
    def __init__(self, value):
        self.value = value

def _no_clock(*a, **k):
    raise OSError("the clock is not available")

class datetime(_dt.datetime):
    now = classmethod(_no_clock)
    utcnow = classmethod(_no_clock)
    today = classmethod(_no_clock)
class date(_dt.date):
    today = classmethod(_no_clock)
datetime.__module__ = date.__module__ = "datetime"
_dt.datetime, _dt.date = datetime, date

def _no_network(*a, **k):
    raise OSError("network is unreachable (no network in the corpus run)")
socket.socket.connect = _no_network
socket.create_connection = _no_network
socket.getaddrinfo = _no_network

#PLAIN_CHECK

def _timeout(*a):
    raise TimeoutError("corpus item took too long")
signal.signal(signal.SIGALRM, _timeout)

def run(script, tools):
    ns = {"__name__": "__main__"}
    for name in tools:
        ns[name] = lambda *a, **k: STUB
    def final_answer(*a, **k):
        if len(a) == 1 and not k:
            raise _Final(a[0])
        if not a and len(k) == 1:
            raise _Final(next(iter(k.values())))
        raise TypeError("final_answer() takes exactly one argument")
    ns["final_answer"] = final_answer
    out = io.StringIO()
    try:
        tree = ast.parse(script)
    except SyntaxError:
        return ["error", "", "SyntaxError"]
    last = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = ast.Expression(tree.body.pop().value)
    signal.alarm(10)
    try:
        with contextlib.redirect_stdout(out):
            exec(compile(tree, "main.py", "exec"), ns)
            value = eval(compile(last, "main.py", "eval"), ns) if last is not None else None
    except _Final as f:
        value = {"type": "final_result", "value": f.value}
    except BaseException as e:
        return ["error", out.getvalue(), type(e).__name__, repr(e)[:300]]
    finally:
        signal.alarm(0)
    if not _plain(value):
        return ["error", out.getvalue(), "TypeError", "result is not plain data"]
    try:
        json.dumps(value)
        return ["ok", out.getvalue(), value]
    except (TypeError, ValueError):
        return ["ok", out.getvalue(), repr(value)]

for line in sys.stdin:
    job = json.loads(line)
    print(json.dumps(run(job["script"], job["tools"])), flush=True)
"""


def run_cpython(items: Sequence[CorpusItem], python: str = sys.executable) -> dict[str, tuple[Any, ...]]:
    """Runs the items that do not shell out in one child CPython, in a temporary folder."""
    jobs = [i for i in items if not i.shells_out]
    with tempfile.TemporaryDirectory(prefix="codeact-corpus-") as tmp:
        harness = Path(tmp) / "_harness.py"
        harness.write_text(_HARNESS.replace("#PLAIN_CHECK\n", in_script_check("_plain")), encoding="utf-8")
        work = Path(tmp) / "work"
        work.mkdir()
        results: dict[str, tuple[Any, ...]] = {}
        for item in jobs:  # one child per item: a crash or hang costs one item
            try:
                proc = subprocess.run(
                    [python, "-I", str(harness), STUB_RESULT],
                    input=json.dumps({"script": item.script, "tools": list(item.tools)}) + "\n",
                    capture_output=True,
                    text=True,
                    cwd=work,
                    timeout=60,
                )
                lines = [ln for ln in proc.stdout.splitlines() if ln.strip()]
                out = json.loads(lines[-1]) if lines else ["error", "", "ChildDied", proc.stderr[-300:]]
            except subprocess.TimeoutExpired:
                out = ["error", "", "TimeoutError", "child timed out"]
            results[item.id] = tuple(out)
    return results


# ------------------------------------------------------------------ comparison


def _comparable(outcome: tuple[Any, ...]) -> tuple[Any, ...]:
    if outcome[0] == "ok":
        value = outcome[2]
        return ("ok", outcome[1], json.loads(json.dumps(value, default=repr)) if value is not None else None)
    return ("error", outcome[1], outcome[2])


def _kind(item: CorpusItem, monty: tuple[Any, ...], cpython: tuple[Any, ...] | None) -> str:
    if monty[0] == "ok":
        if cpython is None:
            return ""
        if cpython[0] == "error":
            return f"CPython fails ({cpython[2]}), Monty runs"
        return "different output or result"
    exc = monty[2]
    message = monty[3] if len(monty) > 3 else ""
    if exc == "ModuleNotFoundError":
        name = re.search(r"module named '([\w.]+)'", message)
        root = name.group(1).split(".")[0] if name else ""
        if root and root not in sys.stdlib_module_names:
            return "third-party import"
        return f"stdlib module not in Monty ({root or '?'})"
    if cpython is not None and cpython[0] == "error" and "network" in str(cpython[-1]):
        return "network"
    if (exc == "NotImplementedError" and "syntax parser" in message) or "not supported" in message:
        short = re.sub(r".*(?:does not yet support|not supported)\s*", "", message.strip().splitlines()[-1])
        return f"unsupported syntax: {short[:60]}"
    last = message.strip().splitlines()[-1] if message.strip() else exc
    last = re.sub(r"'[^']*'", "'…'", last)
    return last[:90]


@dataclass
class Figures:
    items: int = 0
    parsed: int = 0
    ran: int = 0
    same_as_cpython: int = 0
    ran_same_as_cpython: int = 0

    def add(self, r: ItemResult) -> None:
        self.items += 1
        self.parsed += r.parsed
        self.ran += r.ran
        self.same_as_cpython += bool(r.same)
        self.ran_same_as_cpython += bool(r.same) and r.ran


def _share(count: int, of: int) -> dict[str, Any]:
    return {"count": count, "of": of, "share": round(count / of, 4) if of else None}


def _headline(results: Sequence[ItemResult]) -> dict[str, Any]:
    """The closing-note figure for the no-third-party items, two ways: over all of them, and over
    the items that ran on both sides (those skipped on CPython because they shell out or install,
    and those that need the network, are counted apart and listed)."""
    clean = [r for r in results if not r.third_party]
    skipped = sorted(r.id for r in clean if r.same is None)
    network = sorted(
        r.id for r in clean if r.cpython is not None and r.cpython[0] == "error" and "network" in str(r.cpython[-1])
    )
    apart = set(skipped) | set(network)
    runnable = [r for r in clean if r.id not in apart]
    return {
        "no_third_party_same_as_cpython": _share(sum(bool(r.same) for r in clean), len(clean)),
        "no_third_party_runnable_same_as_cpython": {
            **_share(sum(bool(r.same) for r in runnable), len(runnable)),
            "counted_apart": {"skipped_on_cpython": skipped, "needs_network": network},
        },
    }


def run_corpus(
    path: str | Path,
    *,
    rewrite: bool = True,
    cpython: dict[str, tuple[Any, ...]] | None = None,
    outcomes: dict[str, Sequence[Any]] | None = None,
) -> dict:
    """Runs every item and returns the figures (the ``--json`` object) plus per-item results.

    ``outcomes`` (id -> ``["ok", stdout, result]`` / ``["error", stdout, type, message]``) replaces
    the Monty run with outcomes measured elsewhere (``tools/pydantic_monty_corpus.py``), compared
    with CPython the same way; an item missing from it counts as an error that did not parse."""
    items = load_items(path)
    if cpython is None:
        cpython = run_cpython(items)
    rt = MontyRuntime(tool_style="functions", system_clock=False, rewrite_scripts=rewrite, check_scripts=False)
    from codeact.runtime._check import check_script

    results = []
    for item in items:
        if outcomes is None:
            monty = run_monty(rt, item)
        else:
            monty = tuple(outcomes.get(item.id) or ("error", "", "SyntaxError", "no outcome given"))
            if monty[0] == "error" and len(monty) < 4:
                monty = (*monty, "")
        parsed = not (
            monty[0] == "error"
            and (monty[2] == "SyntaxError" or (monty[2] == "NotImplementedError" and "parser" in monty[3]))
        )
        cp = cpython.get(item.id)
        same = None if cp is None else _comparable(monty) == _comparable(cp)
        flagged = [f.key for f in check_script(item.script, rewrite=rewrite, functions_style=True).findings]
        results.append(
            ItemResult(
                item.id,
                bool(item.third_party),
                parsed,
                monty[0] == "ok",
                same,
                monty,
                cp,
                "" if same else _kind(item, monty, cp),
                flagged,
            )
        )
    total, clean, third = Figures(), Figures(), Figures()
    kinds: dict[str, list[str]] = defaultdict(list)
    for r in results:
        total.add(r)
        (third if r.third_party else clean).add(r)
        if not r.same:
            kinds[("[third-party] " if r.third_party else "") + (r.kind or "not run on CPython")].append(r.id)
    return {
        **total.__dict__,
        "no_third_party": clean.__dict__,
        "third_party": third.__dict__,
        "needs_network": sorted(
            r.id
            for r in results
            if r.cpython is not None and r.cpython[0] == "error" and "network" in str(r.cpython[-1])
        ),
        "skipped_on_cpython": sum(1 for r in results if r.same is None),
        "headline": _headline(results),
        "flagged_by_check": sum(1 for r in results if r.flagged),
        "failure_kinds": {k: {"count": len(v), "examples": v[:3]} for k, v in sorted(kinds.items())},
        "results": results,
    }


def _table(with_rw: dict, without_rw: dict) -> str:
    def pct(n: int, d: int) -> str:
        return f"{n} ({100 * n / d:.0f}%)" if d else "0"

    rows = [
        "| figure | with rewrites | without rewrites |",
        "| --- | --- | --- |",
    ]
    for scope, get in (("all", lambda f: f), ("no third-party", lambda f: f["no_third_party"])):
        for key in ("items", "parsed", "ran", "same_as_cpython", "ran_same_as_cpython"):
            a, b = get(with_rw), get(without_rw)
            rows.append(f"| {scope}: {key} | {pct(a[key], a['items'])} | {pct(b[key], b['items'])} |")
    rows.append(
        f"| skipped on CPython (shell / pip) | {with_rw['skipped_on_cpython']} | {without_rw['skipped_on_cpython']} |"
    )
    rows.append(
        f"| third-party items / ran | {with_rw['third_party']['items']} / {with_rw['third_party']['ran']} | "
        f"{without_rw['third_party']['items']} / {without_rw['third_party']['ran']} |"
    )
    rows.append(
        f"| need the network (fail on CPython for it) | {len(with_rw['needs_network'])} | "
        f"{len(without_rw['needs_network'])} |"
    )
    rows.append(f"| flagged by the static check | {with_rw['flagged_by_check']} | {without_rw['flagged_by_check']} |")
    rows += [
        "",
        "Failure kinds (with rewrites; not the same as CPython):",
        "",
        "| kind | count | examples |",
        "| --- | --- | --- |",
    ]
    for kind, v in sorted(with_rw["failure_kinds"].items(), key=lambda kv: (-kv[1]["count"], kv[0])):
        rows.append(f"| {kind.replace('|', '/')} | {v['count']} | {', '.join(v['examples'])} |")
    h = with_rw["headline"]
    a, r = h["no_third_party_same_as_cpython"], h["no_third_party_runnable_same_as_cpython"]
    apart = r["counted_apart"]
    rows += [
        "",
        f"Headline (with rewrites): no third-party, same as CPython: {_pct(a['count'], a['of'])}; "
        f"over the items that ran on both sides: {_pct(r['count'], r['of'])} (counted apart: skipped on CPython "
        f"{', '.join(apart['skipped_on_cpython']) or '-'}; "
        f"need the network {', '.join(apart['needs_network']) or '-'})",
    ]
    return "\n".join(rows)


def _pct(n: int, d: int) -> str:
    return f"{n}/{d} ({100 * n / d:.0f}%)" if d else "0"


RUNNABLE_TARGET = 66
"""Issue 10's goal for codeact on Monty 1.4: no-third-party items the same as CPython, of those that
ran on both sides."""

DOC_START = "<!-- corpus-compare:start -->"
DOC_END = "<!-- corpus-compare:end -->"


def compare_items(ours: dict, theirs: dict) -> dict[str, list[str]]:
    """No-third-party items where one side is the same as CPython and the other is not."""
    by_id = {r.id: r for r in theirs["results"]}
    clean = [r for r in ours["results"] if not r.third_party]
    return {
        "only_other_same_as_cpython": [r.id for r in clean if by_id[r.id].same and not r.same],
        "only_codeact_same_as_cpython": [r.id for r in clean if r.same and not by_id[r.id].same],
    }


def _compare_table(with_rw: dict, without_rw: dict, theirs: dict, label: str) -> str:
    """codeact's figures (with and without the rewrites) beside another binding's, on the same
    items and the same CPython outcomes, with the items where they differ and the goal."""
    n = with_rw["no_third_party"]["items"]
    ours_label = f"codeact (Monty {MONTY_VERSION})"
    rows = [
        f"| no third-party ({n} items) | {ours_label}, rewrites on | {ours_label}, rewrites off | {label} |",
        "| --- | --- | --- | --- |",
    ]
    for key in ("parsed", "ran", "same_as_cpython", "ran_same_as_cpython"):
        cells = [_pct(f["no_third_party"][key], n) for f in (with_rw, without_rw, theirs)]
        rows.append(f"| {key} | {' | '.join(cells)} |")
    runnable = [f["headline"]["no_third_party_runnable_same_as_cpython"] for f in (with_rw, without_rw, theirs)]
    rows.append(
        f"| **same as CPython, ran on both sides** | {' | '.join(_pct(r['count'], r['of']) for r in runnable)} |"
    )
    diff = compare_items(with_rw, theirs)
    ours = runnable[0]
    met = ours["count"] >= RUNNABLE_TARGET and not diff["only_other_same_as_cpython"]
    rows += [
        "",
        f"Same as CPython on {label} but not on codeact (rewrites on): "
        f"{', '.join(diff['only_other_same_as_cpython']) or 'none'}.",
        f"Same as CPython on codeact but not on {label}: {', '.join(diff['only_codeact_same_as_cpython']) or 'none'}.",
        f"Goal (issue 10: codeact >= {RUNNABLE_TARGET}/{ours['of']} over the items that ran on both sides, "
        f"and at least as good as {label} on every item): {'met' if met else 'NOT met'}.",
    ]
    return "\n".join(rows)


def write_doc(path: str | Path, table: str, command: str) -> None:
    """Replaces the text between ``DOC_START`` and ``DOC_END`` in ``path`` with ``table``."""
    doc = Path(path)
    text = doc.read_text(encoding="utf-8")
    if DOC_START not in text or DOC_END not in text:
        raise SystemExit(f"{path}: no {DOC_START} ... {DOC_END} section to replace")
    head, rest = text.split(DOC_START, 1)
    _, tail = rest.split(DOC_END, 1)
    block = f"{DOC_START}\n<!-- generated by: {command} -->\n\n{table}\n\n{DOC_END}"
    doc.write_text(head + block + tail, encoding="utf-8")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python tools/corpus.py", description=__doc__.splitlines()[0])
    parser.add_argument("path", help="a scripts.jsonl file")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    parser.add_argument(
        "--compare-json",
        metavar="FILE",
        help="outcomes of another binding on the same items (tools/pydantic_monty_corpus.py), compared with "
        "the same CPython outcomes",
    )
    parser.add_argument(
        "--write-doc",
        metavar="MARKDOWN",
        help=f"with --compare-json: also write the side-by-side table between {DOC_START} and {DOC_END} "
        "in this file (docs/corpus.md)",
    )
    args = parser.parse_args(argv)
    items = load_items(args.path)
    cpython = run_cpython(items)
    with_rw = run_corpus(args.path, rewrite=True, cpython=cpython)
    without_rw = run_corpus(args.path, rewrite=False, cpython=cpython)
    other = label = None
    if args.compare_json:
        data = json.loads(Path(args.compare_json).read_text(encoding="utf-8"))
        label = f"{data.get('binding', 'other')} {data.get('version', '')}".strip()
        other = run_corpus(args.path, rewrite=False, cpython=cpython, outcomes=data["outcomes"])
        other["binding"], other["version"], other["os_policy"] = (
            data.get("binding"),
            data.get("version"),
            data.get("os_policy"),
        )
    if args.json:
        keep = {k: v for k, v in with_rw.items() if k != "results"}
        keep["monty_version"] = MONTY_VERSION
        keep["without_rewrites"] = {
            k: v for k, v in without_rw.items() if k not in ("results", "failure_kinds", "needs_network")
        }
        if other is not None:
            keep["compare"] = {k: v for k, v in other.items() if k not in ("results", "flagged_by_check")}
            keep["compare"]["items"] = compare_items(with_rw, other)
        print(json.dumps(keep, indent=2))
    else:
        print(_table(with_rw, without_rw))
        if other is not None:
            print(f"\nThe same items on {label}:\n")
            print(_compare_table(with_rw, without_rw, other, label or "other"))
    if args.write_doc:
        if other is None:
            parser.error("--write-doc needs --compare-json")
        command = "python tools/corpus.py SCRIPTS --compare-json " + Path(args.compare_json).name + " --write-doc"
        write_doc(args.write_doc, _compare_table(with_rw, without_rw, other, label or "other"), command)
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
