"""The type check before a script runs (issue 48 item 1): its three figures, rerunnable.

``python benchmarks/type_check.py [--quick] [--corpus PATH] [--cases DIR] [--json FILE]``

1. **False rejections.** Every corpus item (``shared/corpus/scripts.jsonl``, read as
   ``tools/corpus.py`` reads it: a trajectory step with the steps before it), in both tool
   styles, and every ``test_cases/*.py`` of the monty 1.4.0 crate, in both styles: how many
   the check refuses (with the check off nothing is refused, so each is a new refusal;
   target 0). The corpus's tools get the signatures in ``CORPUS_TOOLS`` (what the scripts
   call them with); a test case's free calls are tools with open arguments.
2. **Caught before running.** Seeded scripts generated mechanically from the corpus's real
   tool calls (``seeded_scripts``): for each call, one script per kind of change — the tool
   renamed (a letter dropped), a required argument dropped, an argument renamed, a literal
   argument replaced by one of another type — in both styles; each has exactly one wrong
   call. The figure is the share the check reports (at the changed call's line) before
   anything runs, per kind (target ≥ 95 %).
3. **Cost.** A warm check of a 1 KB script (target ≤ 20 ms), the first check in a fresh
   process (≤ 1 s), the resident memory a checker adds, and the check's time for new 1, 10
   and 40 KB scripts beside ``start`` of the same script.

``--quick`` (CI): fewer repeats and test cases. The sections run in the order 2, 3, 1: Monty's
``functools__partial.py`` makes ty 0.0.14 spin without end; the check gives up on it after
``CHECK_TIMEOUT``, but its thread keeps running, and after two such checks a process stops
checking (``_typecheck._MAX_STUCK``), so that case comes last.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import statistics
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tools"))

from codeact.runtime import MontyRuntime  # noqa: E402
from codeact.runtime._typecheck import check_tool_calls  # noqa: E402

DEFAULT_CORPUS = Path(os.environ.get("CODEACT_CORPUS", "/work/shared/corpus/scripts.jsonl"))
DEFAULT_CASES = Path(
    os.environ.get(
        "CODEACT_MONTY_TEST_CASES",
        str(Path.home() / ".cargo/registry/src/index.crates.io-1949cf8c6b5b557f/monty-1.4.0/test_cases"),
    )
)

S = {"type": "string"}
I = {"type": "integer"}  # noqa: E741
N = {"type": "number"}
PAIR = {"type": "array", "items": N}
CORPUS_TOOLS: dict[str, list[tuple[str, dict[str, Any], bool]]] = {
    "sql_engine": [("query", S, True)],
    "search_agent": [("request", S, True)],
    "orders": [("request", S, True)],
    "inventory": [("request", S, True)],
    "delivery": [("request", S, True)],
    "web_search": [("query", S, True)],
    "image_generator": [("prompt", S, True)],
    "StableDiffusionPromptGenerator": [("query", S, True)],
    "image_generation": [("request", S, True)],
    "search": [("query", S, True)],
    "retriever": [("request", S, True)],
    "get_youtube_caption": [("video_id", S, True)],
    "print_secret": [],
    "print_ascii_cat": [],
    "add": [("a", I, True), ("b", I, True)],
    "multiply": [("a", N, True), ("b", N, True)],
    "visit_webpage": [("url", S, True)],
    "calculate_cargo_travel_time": [
        ("origin_coords", PAIR, True),
        ("destination_coords", PAIR, True),
        ("cruising_speed_kmh", N, False),
    ],
    "web_agent": [("task", S, True)],
    "superhero_party_theme_generator": [("category", S, True)],
    "create_file": [("filename", S, True)],
    "append_file": [("file_name", S, True), ("content", S, True)],
    "open_file": [("path", S, True), ("line_number", I, False)],
    "find_file": [("file_name", S, True)],
    "edit_file": [("start", I, True), ("end", I, True), ("content", S, True)],
    "edit_file_by_line": [("file_name", S, True), ("start", I, True), ("end", I, True), ("new_content", S, True)],
    "edit_file_by_replace": [("file_name", S, True), ("to_replace", S, True), ("new_content", S, True)],
    "insert_content_at_line": [("file_name", S, True), ("line_number", I, True), ("content", S, True)],
    "wikipedia_search": [("query", S, True)],
}
"""The corpus's tools, as the scripts call them (smolagents and OpenHands signatures)."""


class SchemaTool:
    """A tool with a JSON schema and nothing else (what the seam's ``Tool`` needs)."""

    def __init__(self, name: str, params: list[tuple[str, dict[str, Any], bool]] | None) -> None:
        self.name = name
        self.description = ""
        self.is_long_running = False
        if params is None:
            self.parameters: dict[str, Any] | None = {"type": "object", "additionalProperties": True}
        else:
            self.parameters = {
                "type": "object",
                "properties": {n: s for n, s, _r in params},
                "required": [n for n, _s, r in params if r],
                "additionalProperties": False,
            }


CORPUS_TOOL_LIST = [SchemaTool(n, p) for n, p in CORPUS_TOOLS.items()]

# ------------------------------------------------------------------ scripts in both styles


def _tool_calls(tree: ast.AST) -> list[ast.Call]:
    return [
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in CORPUS_TOOLS
    ]


def _bind(call: ast.Call) -> dict[str, ast.expr] | None:
    """The call's arguments by parameter name (positionals bound as ``bind_call_args`` does),
    or None when they do not bind (``*args``, ``**kw``)."""
    params = [n for n, _s, _r in CORPUS_TOOLS[call.func.id]]  # type: ignore[attr-defined]
    if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
        return None
    if len(call.args) > len(params):
        return None
    bound = {params[i]: a for i, a in enumerate(call.args)}
    for k in call.keywords:
        assert k.arg is not None
        bound[k.arg] = k.value
    return bound


def _as_call_tool(name: str, args: dict[str, ast.expr]) -> ast.Call:
    keys: list[ast.expr | None] = [ast.Constant(k) for k in args]
    return ast.Call(ast.Name("call_tool", ast.Load()), [ast.Constant(name), ast.Dict(keys, list(args.values()))], [])


def _as_function(name: str, args: dict[str, ast.expr]) -> ast.Call:
    return ast.Call(ast.Name(name, ast.Load()), [], [ast.keyword(k, v) for k, v in args.items()])


class _Restyle(ast.NodeTransformer):
    """Every corpus tool call in the call_tool style (or, ``functions``, with keywords)."""

    def __init__(self, functions: bool) -> None:
        self.functions = functions

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        if isinstance(node.func, ast.Name) and node.func.id in CORPUS_TOOLS:
            bound = _bind(node)
            if bound is not None:
                make = _as_function if self.functions else _as_call_tool
                return ast.copy_location(make(node.func.id, bound), node)
        return node


def restyled(script: str, style: str) -> str | None:
    """``script`` with its tool calls in ``style``, or None when it does not parse."""
    try:
        tree = ast.parse(script)
    except SyntaxError:
        return None
    return ast.unparse(ast.fix_missing_locations(_Restyle(style == "functions").visit(tree)))


# ------------------------------------------------------------------ seeded mistakes

KINDS = ("rename_tool", "drop_argument", "rename_argument", "retype_literal")


def _other_literal(value: Any) -> Any:
    if isinstance(value, bool):
        return "yes"
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, str):
        return 42
    return None


def _misspelt(name: str) -> str:
    i = max(1, len(name) // 2)
    return name[:i] + name[i + 1 :]


def _mutate(call: ast.Call, kind: str, functions: bool) -> ast.Call | None:
    """``call`` (in the restyled form) with one change of ``kind``, or None when the change
    does not apply to it."""
    if functions:
        name = call.func.id  # type: ignore[attr-defined]
        args = {k.arg: k.value for k in call.keywords if k.arg is not None}
    else:
        name = call.args[0].value  # type: ignore[attr-defined]
        d = call.args[1] if len(call.args) > 1 else ast.Dict([], [])
        assert isinstance(d, ast.Dict)
        args = {k.value: v for k, v in zip(d.keys, d.values, strict=True)}  # type: ignore[union-attr]
    make = _as_function if functions else _as_call_tool
    params = CORPUS_TOOLS[name]
    if kind == "rename_tool":
        return make(_misspelt(name), args)
    if kind == "drop_argument":
        required = [n for n, _s, r in params if r and n in args]
        if not required:
            return None
        return make(name, {k: v for k, v in args.items() if k != required[0]})
    if kind == "rename_argument":
        if not args:
            return None
        first = next(iter(args))
        return make(name, {(f"{k}_value" if k == first else k): v for k, v in args.items()})
    if kind == "retype_literal":
        for k, v in args.items():
            if isinstance(v, ast.Constant) and _other_literal(v.value) is not None:
                return make(name, {**args, k: ast.Constant(_other_literal(v.value))})
        return None
    raise ValueError(kind)


def seeded_scripts(corpus: Path) -> list[dict[str, Any]]:
    """One script per (corpus item, tool call, kind, style) where the change applies: the
    item's script restyled, with that one call changed. Duplicate texts are kept once."""
    from corpus import load_items

    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    for item in load_items(corpus):
        for style in ("call_tool", "functions"):
            base = restyled(item.script, style)
            if base is None:
                continue
            tree = ast.parse(base)
            calls = [
                n
                for n in ast.walk(tree)
                if isinstance(n, ast.Call)
                and isinstance(n.func, ast.Name)
                and (
                    n.func.id in CORPUS_TOOLS
                    if style == "functions"
                    else n.func.id == "call_tool" and isinstance(n.args[0], ast.Constant)
                )
            ]
            for index in range(len(calls)):
                for kind in KINDS:
                    tree = ast.parse(base)
                    target = [
                        n
                        for n in ast.walk(tree)
                        if isinstance(n, ast.Call)
                        and isinstance(n.func, ast.Name)
                        and (
                            n.func.id in CORPUS_TOOLS
                            if style == "functions"
                            else n.func.id == "call_tool" and isinstance(n.args[0], ast.Constant)
                        )
                    ][index]
                    changed = _mutate(target, kind, style == "functions")
                    if changed is None:
                        continue
                    line = target.lineno
                    _replace(tree, target, changed)
                    text = ast.unparse(ast.fix_missing_locations(tree))
                    if text in seen:
                        continue
                    seen.add(text)
                    out.append({"id": item.id, "style": style, "kind": kind, "line": line, "script": text})
    return out


def _replace(tree: ast.AST, old: ast.Call, new: ast.Call) -> None:
    for parent in ast.walk(tree):
        for field, value in ast.iter_fields(parent):
            if value is old:
                setattr(parent, field, ast.copy_location(new, old))
                return
            if isinstance(value, list):
                for i, v in enumerate(value):
                    if v is old:
                        value[i] = ast.copy_location(new, old)
                        return


# ------------------------------------------------------------------ figures


def false_rejections(corpus: Path, cases: Path, quick: bool) -> dict[str, Any]:
    from corpus import load_items

    refused: list[str] = []
    checked = 0
    for item in load_items(corpus):
        for style in ("call_tool", "functions"):
            script = item.script if style == "functions" else restyled(item.script, style)
            if script is None:
                continue
            checked += 1
            found = check_tool_calls(script, CORPUS_TOOL_LIST, functions_style=style == "functions")
            if found:
                refused.append(f"{item.id} [{style}]: {found[0]}")
    case_refused: list[str] = []
    case_checked = 0
    paths = sorted(cases.glob("*.py")) if cases.is_dir() else []
    if quick:
        paths = paths[::10]
    for path in paths:
        script = path.read_text(encoding="utf-8")
        tools = [SchemaTool(n, None) for n in sorted(_free_calls(script))]
        for style in ("call_tool", "functions"):
            case_checked += 1
            found = check_tool_calls(script, tools, functions_style=style == "functions")
            if found:
                case_refused.append(f"{path.name} [{style}]: {found[0]}")
    return {
        "corpus_checked": checked,
        "corpus_refused": refused,
        "cases_checked": case_checked,
        "cases_refused": case_refused,
    }


def _free_calls(script: str) -> set[str]:
    try:
        tree = ast.parse(script)
    except (SyntaxError, ValueError):
        return set()
    bound = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)}
    bound |= {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
    import builtins

    return {
        n.func.id
        for n in ast.walk(tree)
        if isinstance(n, ast.Call)
        and isinstance(n.func, ast.Name)
        and n.func.id not in bound
        and not hasattr(builtins, n.func.id)
    }


def caught(corpus: Path) -> dict[str, Any]:
    seeded = seeded_scripts(corpus)
    per_kind: Counter[str] = Counter()
    hit: Counter[str] = Counter()
    wrong_line: Counter[str] = Counter()
    missed: list[str] = []
    for s in seeded:
        key = f"{s['kind']} ({s['style']})"
        per_kind[key] += 1
        found = check_tool_calls(s["script"], CORPUS_TOOL_LIST, functions_style=s["style"] == "functions")
        if found:
            hit[key] += 1
            if all(e.line != s["line"] for e in found):
                wrong_line[key] += 1
        else:
            missed.append(f"{s['id']} {key} line {s['line']}")
    total = sum(per_kind.values())
    return {
        "seeded": total,
        "caught": sum(hit.values()),
        "share": sum(hit.values()) / total if total else 0.0,
        "per_kind": {
            k: {"seeded": per_kind[k], "caught": hit[k], "wrong_line": wrong_line[k]} for k in sorted(per_kind)
        },
        "missed": missed,
    }


def _script_of(size: int) -> str:
    """A new script of about ``size`` bytes: tool calls, loops and functions (distinct text
    each time, so no cache answers)."""
    block = (
        "def total_{i}(rows):\n"
        "    return sum(r['qty'] * r['price'] for r in rows)\n"
        "o_{i} = call_tool('get_order', {{'order_id': 'A-{i}', 'verbose': True}})\n"
        "t_{i} = total_{i}(o_{i}['items'])\n"
        "if t_{i} > 10:\n"
        "    call_tool('add', {{'a': {i}, 'b': 2.5}})\n"
    )
    parts, i = [], 0
    stamp = time.perf_counter_ns()
    parts.append(f"# {stamp}\n")
    while sum(map(len, parts)) < size:
        parts.append(block.format(i=i))
        i += 1
    return "".join(parts) + "{'type': 'final_result', 'value': 1}\n"


COST_TOOLS = [
    SchemaTool("get_order", [("order_id", S, True), ("verbose", {"type": "boolean"}, False)]),
    SchemaTool("add", [("a", I, True), ("b", N, True)]),
]


def _timed(fn: Callable[[], Any]) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def _rss() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def cost(quick: bool) -> dict[str, Any]:
    first = subprocess.run(
        [sys.executable, __file__, "--first-check"], capture_output=True, text=True, check=True, cwd=REPO
    )
    first_s = float(first.stdout.strip().splitlines()[-1])
    from codeact._monty import type_check

    rss0 = _rss()
    check_tool_calls(_script_of(1024), COST_TOOLS)
    rss1 = _rss()
    repeats = 5 if quick else 20
    warm = [_timed(lambda: check_tool_calls(_script_of(1024), COST_TOOLS)) for _ in range(repeats)]
    # memory a further checker adds: four checks at once make the pool build more
    import concurrent.futures

    before = _rss()
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        list(pool.map(lambda _: type_check(_script_of(1024), ""), range(4)))
    extra = _rss() - before
    runtime = MontyRuntime(check_scripts=False, rewrite_scripts=False)
    sizes = {}
    for kb in (1, 10, 40):
        checks = [
            _timed(lambda kb=kb: check_tool_calls(_script_of(kb * 1024), COST_TOOLS))
            for _ in range(max(2, repeats // 4))
        ]
        starts = [_timed(lambda kb=kb: runtime.start(_script_of(kb * 1024))) for _ in range(max(2, repeats // 4))]
        sizes[f"{kb}KB"] = {"check_ms": statistics.median(checks) * 1e3, "start_ms": statistics.median(starts) * 1e3}
    return {
        "first_check_in_process_s": first_s,
        "warm_1KB_ms": statistics.median(warm) * 1e3,
        "rss_first_checker_bytes": rss1 - rss0,
        "rss_per_extra_checker_bytes_approx": max(0, extra) // 3,
        "sizes": sizes,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--cases", type=Path, default=DEFAULT_CASES)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--only", choices=("false", "caught", "cost"))
    parser.add_argument("--first-check", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.first_check:  # in a fresh process (cost()): the first check's time, imports done
        print(_timed(lambda: check_tool_calls(_script_of(1024), COST_TOOLS)))
        return 0
    out: dict[str, Any] = {}
    if args.corpus.is_file() and args.only in (None, "caught"):
        out["caught"] = ca = caught(args.corpus)
        print(f"caught before running: {ca['caught']} of {ca['seeded']} ({ca['share']:.1%}; target >= 95%)")
        for kind, f in ca["per_kind"].items():
            print(
                f"  {kind}: {f['caught']}/{f['seeded']} ({f['caught'] / f['seeded']:.0%})"
                + (f", {f['wrong_line']} on another line" if f["wrong_line"] else "")
            )
        for line in ca["missed"][:20]:
            print("   missed:", line)
    if args.only in (None, "cost"):
        out["cost"] = cost(args.quick)
        c = out["cost"]
        print(f"first check in a process: {c['first_check_in_process_s'] * 1e3:.0f} ms (target <= 1000)")
        print(f"warm check, 1 KB: {c['warm_1KB_ms']:.2f} ms (target <= 20)")
        print(
            f"memory: first checker {c['rss_first_checker_bytes'] / 2**20:.1f} MiB, "
            f"each further one about {c['rss_per_extra_checker_bytes_approx'] / 2**20:.1f} MiB"
        )
        for size, f in c["sizes"].items():
            print(
                f"  {size}: check {f['check_ms']:.1f} ms, start {f['start_ms']:.2f} ms "
                f"({f['check_ms'] / f['start_ms']:.1f}x start)"
            )
    if args.corpus.is_file() and args.only in (None, "false"):
        out["false_rejections"] = fr = false_rejections(args.corpus, args.cases, args.quick)
        print(
            f"false rejections: corpus {len(fr['corpus_refused'])} of {fr['corpus_checked']}, "
            f"monty test_cases {len(fr['cases_refused'])} of {fr['cases_checked']} (target 0)"
        )
        for line in fr["corpus_refused"] + fr["cases_refused"]:
            print("  ", line)
    if args.json:
        args.json.write_text(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
