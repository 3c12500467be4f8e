"""``codeact serve``: an approval inbox in the browser (``pip install 'codeact[web]'``).

A Starlette application over a ``Runner``: the sessions of an app with their status, one
session's timeline, and the inbox of calls waiting for a human (``Runner.list_pending``),
each decided through ``Runner.approve/deny/complete/resolve_in_doubt`` naming the call's
digest, so a page open on a stale view cannot decide a different call. Pages are rendered
on the server (Jinja2 templates shipped with the package) and kept current with
server-sent events; the same data is served as JSON under ``/api`` (``docs/web.md``).
"""

from __future__ import annotations

from ._app import TOKEN_ENV, create_app, is_loopback
from ._reviewers import load_reviewers

__all__ = ("TOKEN_ENV", "create_app", "is_loopback", "load_reviewers")
