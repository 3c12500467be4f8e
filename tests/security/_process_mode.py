"""pytest plugin: every ``MontyRuntime`` built without an explicit ``isolation`` uses
``isolation="process"``. Loaded with ``-p _process_mode`` by ``test_isolation_modes.py`` to
run the runtime suite, unchanged, against the worker pool."""

from __future__ import annotations

import functools

from codeact.runtime.monty import MontyRuntime

_original = MontyRuntime.__init__


@functools.wraps(_original)
def _init(self, *args, **kwargs):  # type: ignore[no-untyped-def]
    kwargs.setdefault("isolation", "process")
    _original(self, *args, **kwargs)


MontyRuntime.__init__ = _init  # type: ignore[method-assign]
