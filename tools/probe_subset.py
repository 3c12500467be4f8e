"""Run every probe of the subset table on a Monty backend and on CPython, and write the table.

    python tools/probe_subset.py                                   # pydantic-monty and CPython
    python tools/probe_subset.py --backend codeact --backend pydantic-monty --write
    python tools/probe_subset.py --backend codeact --check         # exit 1 if a flag is wrong

Each ``SubsetEntry.probe`` of ``codeact/runtime/_subset.py`` (and an ``import`` of each module in
``STDLIB_MODULES``) is a tiny script whose last expression is ``True`` when the construct works.
It runs on each backend asked for:

- ``pydantic-monty``: the official binding (``pip install pydantic-monty==1.4.0``, the ``benchmark``
  extra), one fresh session per probe from a pool of one ``monty`` worker; the host clock and
  ``random`` are the worker's own, other OS calls get Monty's "not handled" answer;
- ``codeact``: codeact's own ``MontyRuntime(rewrite_scripts=False, check_scripts=False)``, the raw
  interpreter without the static check (whatever Monty ``codeact._monty.MONTY_VERSION`` embeds);
- ``cpython``: always run, in a child ``python -I`` in a fresh temporary folder (the truth each
  probe must meet: ``True`` there for every entry).

A probe may call the tool ``call_tool("double", {"x": n})``, answered with ``2 * n`` on every side.
The result of a probe is ``True`` or a short reason (``TypeError: ...``, ``returned False``).

``--write`` writes the measured table to docs/subset-probes.md; ``--json FILE`` writes the raw
results; ``--check`` exits 1 when the first backend disagrees with a ``supported`` flag of the
table (or CPython fails a probe). The table module is loaded by path, so this runs in an
environment that has only ``pydantic-monty`` (``--backend codeact`` needs codeact installed).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SUBSET_FILE = ROOT / "python" / "codeact" / "runtime" / "_subset.py"
DOC = ROOT / "docs" / "subset-probes.md"

Outcome = str
"""``"True"`` when the probe passed, else a one-line reason."""


def load_table() -> ModuleType:
    """``codeact.runtime._subset`` loaded from its file (no codeact import needed)."""
    spec = importlib.util.spec_from_file_location("_codeact_subset_table", SUBSET_FILE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses looks the module up by name
    spec.loader.exec_module(module)
    return module


def probes(table: ModuleType | None = None) -> list[tuple[str, str, bool | None]]:
    """``(name, script, expected)`` for every probe: the table's entries, then one import per
    listed module (expected ``None`` would mean "no flag"; every probe here has one)."""
    table = table or load_table()
    out: list[tuple[str, str, bool | None]] = [(e.construct, e.probe, e.supported) for e in table.SUBSET]
    out += [(f"import {m}", f"import {m}\nTrue", True) for m in table.STDLIB_MODULES]
    return out


def _tool(name: str, args: dict[str, Any]) -> Any:
    if name != "double":
        raise NameError(f"name {name!r} is not defined")
    return 2 * args["x"]


def _short(text: str) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return (lines[-1] if lines else "error")[:160]


# ------------------------------------------------------------------ backends


def run_pydantic_monty(scripts: Sequence[str]) -> list[Outcome]:
    """The official binding, one fresh session per script."""
    import pydantic_monty as pm

    results: list[Outcome] = []
    with pm.Monty(min_processes=1, max_processes=1, request_timeout=30) as pool:
        for script in scripts:
            out = pm.CollectString()
            try:
                with pool.checkout(script_name="main.py") as session:
                    snap = session.feed_start(script, print_callback=out)
                    for _ in range(1000):
                        if isinstance(snap, pm.MontyComplete):
                            break
                        if isinstance(snap, pm.NameLookupSnapshot):
                            snap = snap.resume()  # stays undefined: NameError
                        elif isinstance(snap, pm.FutureSnapshot):
                            raise RuntimeError("futures are not answered by the probes")
                        elif snap.is_os_function:
                            snap = snap.resume_not_handled()
                        elif snap.function_name == "call_tool":
                            name, args = snap.args[0], snap.args[1] if len(snap.args) > 1 else {}
                            try:
                                snap = snap.resume({"return_value": _tool(name, args)})
                            except NameError as exc:
                                snap = snap.resume({"exc_type": "NameError", "message": str(exc)})
                        else:
                            msg = f"name {snap.function_name!r} is not defined"
                            snap = snap.resume({"exc_type": "NameError", "message": msg})
                    value = snap.output if isinstance(snap, pm.MontyComplete) else "too many calls"
                results.append("True" if value is True else f"returned {value!r}"[:160])
            except pm.MontyError as exc:
                text = exc.display("type-msg") if hasattr(exc, "display") else str(exc)
                results.append(_short(text))
            except RuntimeError as exc:
                results.append(_short(f"{type(exc).__name__}: {exc}"))
    return results


def run_codeact(scripts: Sequence[str]) -> list[Outcome]:
    """codeact's ``MontyRuntime``, without the static check or rewrites."""
    from codeact import Call, Complete, MontyRuntime, Raised, ResumeError, ResumeValue

    rt = MontyRuntime(rewrite_scripts=False, check_scripts=False)
    results: list[Outcome] = []
    for script in scripts:
        step = rt.start(script, "main.py")
        for _ in range(1000):
            if not isinstance(step, Call):
                break
            call = step.call
            try:
                outcome: Any = ResumeValue(_tool(call.name, dict(call.keyword_args)))
            except NameError as exc:
                outcome = ResumeError(str(exc), "NameError")
            step = call.resume(outcome)
        if isinstance(step, Complete):
            results.append("True" if step.value is True else f"returned {step.value!r}"[:160])
        elif isinstance(step, Raised):
            results.append(_short(step.message))
        else:
            results.append("too many calls")
    return results


_CPYTHON_HARNESS = r"""
import ast, contextlib, io, json, sys

def call_tool(name, args):
    if name != "double":
        raise NameError(f"name {name!r} is not defined")
    return 2 * args["x"]

for line in sys.stdin:
    script = json.loads(line)
    ns = {"__name__": "__main__", "call_tool": call_tool}
    try:
        tree = ast.parse(script)
        last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            exec(compile(tree, "main.py", "exec"), ns)
            value = eval(compile(ast.Expression(last.value), "main.py", "eval"), ns) if last else None
        out = "True" if value is True else f"returned {value!r}"[:160]
    except BaseException as exc:
        out = f"{type(exc).__name__}: {exc}"[:160]
    print(json.dumps(out), flush=True)
"""


def run_cpython(scripts: Sequence[str], python: str = sys.executable) -> list[Outcome]:
    """Every script in one child ``python -I``, in a fresh temporary folder."""
    with tempfile.TemporaryDirectory(prefix="codeact-probe-") as tmp:
        proc = subprocess.run(
            [python, "-I", "-c", _CPYTHON_HARNESS],
            input="".join(json.dumps(s) + "\n" for s in scripts),
            capture_output=True,
            text=True,
            cwd=tmp,
            timeout=120,
            check=True,
        )
    return [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]


_NOT_ON_CPYTHON = {e.construct for e in load_table().SUBSET if e.key == "third_party_import"}
"""Probes CPython need not pass: a third-party package is absent there too."""

BACKENDS: dict[str, Callable[[Sequence[str]], list[Outcome]]] = {
    "pydantic-monty": run_pydantic_monty,
    "codeact": run_codeact,
}


def backend_label(name: str) -> str:
    """The backend and the Monty version it runs."""
    if name == "pydantic-monty":
        import pydantic_monty as pm

        return f"pydantic-monty {pm.__version__}"
    from codeact import _monty

    return f"codeact (Monty {_monty.MONTY_VERSION})"


# ------------------------------------------------------------------ the table


def measure(backends: Sequence[str]) -> dict[str, Any]:
    """Runs every probe on each backend and on CPython."""
    rows = probes()
    scripts = [script for _, script, _ in rows]
    columns = {backend_label(b): BACKENDS[b](scripts) for b in backends}
    columns["CPython " + sys.version.split()[0]] = run_cpython(scripts)
    return {
        "columns": list(columns),
        "rows": [
            {"construct": name, "table_says": expected, "results": {c: columns[c][i] for c in columns}}
            for i, (name, _, expected) in enumerate(rows)
        ],
    }


def disagreements(measured: dict[str, Any], column: str) -> list[str]:
    """The probes where ``column`` contradicts the table's flag, or CPython fails."""
    cpython = measured["columns"][-1]
    bad = []
    for row in measured["rows"]:
        works = row["results"][column] == "True"
        if row["table_says"] is not None and works != row["table_says"]:
            bad.append(f"{row['construct']}: table says {row['table_says']}, {column}: {row['results'][column]}")
        if row["results"][cpython] != "True" and row["construct"] not in _NOT_ON_CPYTHON:
            bad.append(f"{row['construct']}: CPython: {row['results'][cpython]}")
    return bad


def markdown(measured: dict[str, Any]) -> str:
    cols = measured["columns"]

    def cell(text: str) -> str:
        return "yes" if text == "True" else "no: " + text.replace("|", "/").replace("`", "'")

    lines = [
        "# The subset table, measured",
        "",
        "Generated by `python tools/probe_subset.py --write` (see its docstring): every probe of",
        "`codeact.runtime._subset.SUBSET`, and an import of each module of `STDLIB_MODULES`, run on each",
        "backend and on CPython. A probe's last expression is `True` when the construct works; otherwise the",
        'cell gives the error. "table" is the `supported` flag the prompt and the static check use.',
        "",
        "| construct | table | " + " | ".join(cols) + " |",
        "| --- | --- | " + " | ".join("---" for _ in cols) + " |",
    ]
    for row in measured["rows"]:
        flag = {True: "works", False: "not available", None: ""}[row["table_says"]]
        cells = " | ".join(cell(row["results"][c]) for c in cols)
        lines.append(f"| {row['construct'].replace('|', '/')} | {flag} | {cells} |")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--backend",
        action="append",
        choices=sorted(BACKENDS),
        help="a Monty backend to probe (repeatable; default pydantic-monty); the first is the one --check judges",
    )
    parser.add_argument("--json", metavar="FILE", help="write the raw results as JSON")
    parser.add_argument("--write", action="store_true", help=f"write the table to {DOC.relative_to(ROOT)}")
    parser.add_argument("--check", action="store_true", help="exit 1 if the first backend contradicts the table")
    args = parser.parse_args(argv)
    backends = args.backend or ["pydantic-monty"]
    measured = measure(backends)
    text = markdown(measured)
    if args.json:
        Path(args.json).write_text(json.dumps(measured, indent=1) + "\n", encoding="utf-8")
    if args.write:
        DOC.write_text(text, encoding="utf-8")
    else:
        print(text)
    bad = disagreements(measured, measured["columns"][0])
    for line in bad:
        print("DISAGREES:", line, file=sys.stderr)
    return 1 if (args.check and bad) else 0


if __name__ == "__main__":
    raise SystemExit(main())
