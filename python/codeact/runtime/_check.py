"""The static subset check: what the pinned Monty cannot run, found before running.

Every detector and rewriter here is keyed to an entry of ``SUBSET`` (``_subset.py``), the one
table that also renders the language section of the prompt and that the tests probe against
the real interpreter. ``check_script`` parses a script with CPython's ``ast``, applies the
same-meaning rewrites (when asked), and returns one ``Finding`` per remaining construct, each
with its 1-based line and column and what to write instead.

A script CPython cannot parse is returned unchanged with no findings: Monty reports the
syntax error itself (and Monty's parser accepts a few things older CPythons do not).
"""

from __future__ import annotations

import queue
import re
import threading
from collections import OrderedDict

from .._monty import SubsetScreen, remaining_stack
from ._awaits import deferred_offsets
from ._check_detect import _detect
from ._check_facts import (
    _DATETIME_GAPS,
    _EXCEPTION_NAMES,
    _METHOD_NAMES,
    _MISSING_BUILTINS,
    _STDLIB_ALTERNATIVES,
    _STDLIB_GAPS,
    CheckResult,
    Finding,
    Rewrite,
    _defined_names,
    _imported_names,
    _Source,
    format_findings,
)
from ._check_lazy import lazy_findings, rewrite_lazy
from ._check_rewrite import _apply, _json_dumps_names, _rewrites
from ._precheck import parse_script, parsed
from ._subset import STDLIB_MODULES

__all__ = (
    "CheckResult",
    "Finding",
    "Rewrite",
    "check_script",
    "check_script_safely",
    "explain_failure",
    "format_findings",
)

# The name tables the tests read through this module (``_check._STDLIB_GAPS``, ...).
_TABLES = (_DATETIME_GAPS, _STDLIB_ALTERNATIVES)


_MONTY_REFUSED = re.compile(r"does not yet support|Wildcard imports|No module named|cannot import name")
"""The errors with which Monty itself refuses what the check leaves to it (``_detect``)."""


def explain_failure(script: str, message: str, *, functions_style: bool = False) -> str | None:
    """What to write instead, for a script Monty refused itself.

    The check leaves to Monty what it reports before anything of the script could run (a
    construct its parser rejects: class inheritance, ``yield``, ``del``, method decorators,
    ``async with``, ``from m import *``; an import at the start of the script, or one that may
    never run): its own error comes first, and this adds the fix to it.

    Args:
        script: the script as the model wrote it.
        message: Monty's error for it.
        functions_style: as ``check_script``.

    Returns:
        One line per construct of those kinds, with its line, column and alternative, under a
        heading; None when ``message`` is not such an error or the script has none of them.
    """
    if not _MONTY_REFUSED.search(message):
        return None
    tree = parse_script(script)
    if tree is None:
        return None
    try:
        src = _Source(script)
        lean = set(_detect(tree, src, functions_style))
        extra = [f for f in _detect(tree, src, functions_style, everything=True) if f not in lean]
    except (RecursionError, MemoryError):  # pragma: no cover - the parse itself stops far earlier
        return None
    if not extra:
        return None
    return "To fix it (nothing else has run):\n" + "\n".join(f"- {f}" for f in extra)


def check_script(
    script: str, *, rewrite: bool = True, functions_style: bool = False, detect: bool = True
) -> CheckResult:
    """Finds the constructs of ``SUBSET`` the pinned Monty cannot run, rewriting those that
    have a same-meaning rewrite first.

    Args:
        script: the script as the model wrote it.
        rewrite: apply the same-meaning rewrites (``SubsetEntry.rewrite``).
        functions_style: tools are bare functions, so calls of names Monty lacks (``input``,
            ``format``) may be tool calls and are not reported.
        detect: look for the constructs to report (``MontyRuntime(check_scripts=False)``
            passes False: only the rewrites, if asked, and the awaited-call offsets are done).

    Returns:
        The script to run, the rewrites applied and the findings left (empty when the script
        passes). A script CPython cannot parse comes back unchanged with no findings.
    """
    if not _SCREEN.needs_check(script):
        return CheckResult(script)  # no rule could apply and nothing is awaited (the native screen)
    try:
        return _check(script, rewrite, functions_style, detect)
    except (RecursionError, MemoryError):  # absurd nesting: Monty reports it itself
        return CheckResult(script)


def _at(finding: Finding) -> tuple[int, int]:
    return finding.line, finding.column


def _check(script: str, rewrite: bool, functions_style: bool, detect: bool) -> CheckResult:
    tree = parsed(script)  # the one parse, shared with the agent's pre-check (``_precheck``)
    if tree is None:
        return CheckResult(script)
    applied: list[Rewrite] = []
    if rewrite:
        for _ in range(4):
            src = _Source(script)
            edits = _rewrites(tree, src, _imported_names(tree), _defined_names(tree), _json_dumps_names(tree))
            if not edits:
                break
            new_script, done = _apply(src, edits)
            new_tree = parsed(new_script)
            if new_tree is None:  # pragma: no cover - a rewrite must never break the parse
                break
            applied += done
            script, tree = new_script, new_tree
        for serial in range(0, 80, 10):  # generator expressions that could reach a tool: loops
            lazy = rewrite_lazy(tree, _Source(script), functions_style, serial)
            if lazy is None:
                break
            new_tree = parsed(lazy[0])
            if new_tree is None:  # pragma: no cover - a rewrite must never break the parse
                break
            applied += lazy[1]
            script, tree = lazy[0], new_tree
    findings: list[Finding] = []
    if detect:
        src = _Source(script)
        findings = sorted([*_detect(tree, src, functions_style), *lazy_findings(tree, src, functions_style)], key=_at)
    return CheckResult(script, tuple(applied), tuple(findings), deferred_offsets(script, tree))


_SCREEN = SubsetScreen(
    sorted(_MISSING_BUILTINS),
    sorted(_EXCEPTION_NAMES),
    sorted(_METHOD_NAMES),
    sorted({name for _module, name in _STDLIB_GAPS} | {"maketrans"}),
    sorted({"format_map", *_DATETIME_GAPS}),
    sorted(STDLIB_MODULES),
    sorted(_STDLIB_GAPS),
)
"""Whether a script needs the check at all: a pass of the lexer Monty's parser uses (ruff's),
then, for a script its tokens do not clear, one parse, in Rust (rust/src/screen.rs); true when
any rule here could apply (each rule's trigger in a weaker form) or a call is awaited.
tests/test_subset_screen.py holds it to that. A script it passes has no finding, no rewrite
and no awaited call, and is not parsed by CPython."""


# ------------------------------------------------------------------ a stack the parser cannot overflow

_STACK_BYTES = 64 * 1024 * 1024
_jobs: queue.SimpleQueue[tuple[str, bool, bool, bool, queue.SimpleQueue[CheckResult | BaseException]]] = (
    queue.SimpleQueue()
)
_worker_lock = threading.Lock()
_worker: threading.Thread | None = None


def _serve() -> None:
    while True:
        script, rewrite, functions_style, detect, reply = _jobs.get()
        try:
            reply.put(_cached_check(script, rewrite, functions_style, detect))
        except BaseException as exc:
            reply.put(exc)


_INLINE_STACK = 6 * 1024 * 1024
"""Native stack (bytes) the calling thread must have left for the check to run on it: CPython's
parser stops deep nesting at its own limits (about 6,000 levels) well within this."""


_CACHE_SIZE = 512
"""Check results kept (least recently used first out)."""

_CheckKey = tuple[str, bool, bool, bool]
_results: OrderedDict[_CheckKey, CheckResult] = OrderedDict()
_results_lock = threading.Lock()


def cached_check_result(key: _CheckKey) -> CheckResult | None:
    """The stored result for ``(script, rewrite, functions_style, detect)``, or None."""
    hit = _results.get(key)
    if hit is not None:
        try:
            _results.move_to_end(key)
        except KeyError:  # evicted by another thread in between: still a valid result
            pass
    return hit


def _cached_check(script: str, rewrite: bool, functions_style: bool, detect: bool) -> CheckResult:
    key = (script, rewrite, functions_style, detect)
    result = cached_check_result(key)
    if result is None:
        result = check_script(script, rewrite=rewrite, functions_style=functions_style, detect=detect)
        with _results_lock:
            _results[key] = result
            while len(_results) > _CACHE_SIZE:
                _results.popitem(last=False)
    return result


def clear_check_cache() -> None:
    """Forgets every stored check result (tests that count parses start from nothing)."""
    with _results_lock:
        _results.clear()


def check_script_safely(
    script: str, *, rewrite: bool = True, functions_style: bool = False, detect: bool = True
) -> CheckResult:
    """``check_script`` without risk to the host's stack, memoized by script text.

    CPython's parser and AST builder recurse in C: on a small thread stack (a host may run
    the runtime on a 256 KiB thread) a deeply nested script would crash the process before
    CPython's own limits answer. On a thread with at least ``_INLINE_STACK`` bytes of stack
    left (a default 8 MiB thread) the check runs in place; on a smaller one it runs on a
    dedicated thread with a 64 MiB stack, where CPython's limits answer first (SyntaxError,
    RecursionError) and the script then goes to Monty unchanged, which reports it. Results
    are cached (512 scripts), so a script started again costs a dictionary lookup.
    """
    hit = cached_check_result((script, rewrite, functions_style, detect))
    if hit is not None:  # the common restart: no stack probe, no parse
        return hit
    if (remaining_stack() or 0) >= _INLINE_STACK:
        return _cached_check(script, rewrite, functions_style, detect)
    global _worker
    if _worker is None:
        with _worker_lock:
            if _worker is None:
                old = threading.stack_size()
                threading.stack_size(_STACK_BYTES)
                try:
                    worker = threading.Thread(target=_serve, name="codeact-subset-check", daemon=True)
                    worker.start()
                finally:
                    threading.stack_size(old)
                _worker = worker
    reply: queue.SimpleQueue[CheckResult | BaseException] = queue.SimpleQueue()
    _jobs.put((script, rewrite, functions_style, detect, reply))  # the worker memoizes too
    result = reply.get()
    if isinstance(result, BaseException):
        raise result
    return result
