"""``CodeActClient``: enqueue runs and decisions from any process, with only a ``DBOSClient``
(no DBOS launch, no agent, no workflow code)."""

from __future__ import annotations

from typing import Any, Literal

from ...events import Content
from ._protocol import (
    DBOS_APP_NAME,
    TAGGED,
    RunKind,
    RunRequest,
    RunResult,
    default_queue,
    partition_key,
    workflow_id,
    workflow_name,
)

__all__ = ("CodeActClient", "RunHandle")


class RunHandle:
    """A run or decision on the queue.

    Attributes:
        workflow_id: its DBOS workflow id (``codeact.integrations.dbos.workflow_id``).
        request: what was enqueued (None for a handle from ``CodeActClient.handle``).
    """

    def __init__(self, handle: Any, request: RunRequest | None) -> None:
        self._handle = handle
        self.request = request
        self.workflow_id: str = handle.get_workflow_id()

    def result(self, *, polling_interval: float = 0.1) -> RunResult:
        """Waits for the workflow to end (polling every ``polling_interval`` seconds) and
        returns how the ``Runner`` call ended.

        Raises:
            Exception: whatever the workflow raised (a host failure that is not a codeact
                error), as DBOS re-raises it.
        """
        raw = self._handle.get_result(polling_interval_sec=polling_interval)
        return RunResult.model_validate(raw, context=TAGGED)

    def status(self) -> str:
        """The workflow's DBOS status: ``"ENQUEUED"``, ``"PENDING"``, ``"SUCCESS"``,
        ``"ERROR"``, ..."""
        return str(self._handle.get_status().status)


class CodeActClient:
    """Producer and approver helpers on a ``dbos.DBOSClient``.

    Every method enqueues one workflow on the app's queue, in the session's partition, under
    the workflow id derived from the run key (``workflow_id``): the same call repeated with
    the same run key is the same workflow, so it runs once and returns the same result.
    Decisions get a run key from the call key by default (``approve:<call_key>`` ...), so an
    approval clicked twice is one approval.

    Args:
        client: a ``DBOSClient`` on the workers' system database.
        app_name: the codeact app (the workers' ``Runner.app_name``).
        queue_name: default ``codeact-<app_name>`` (the workers' default).

    Raises (from every enqueueing method):
        dbos.error.DBOSException: DBOS refused the enqueue (the system database is missing
            its schema: start a worker first).
    """

    def __init__(self, client: Any, *, app_name: str, queue_name: str | None = None) -> None:
        self.client = client
        self.app_name = app_name
        self.queue_name = queue_name or default_queue(app_name)

    def _enqueue(self, kind: RunKind, user_id: str, session_id: str, run_key: str, **fields: Any) -> RunHandle:
        request = RunRequest(
            kind=kind, app_name=self.app_name, user_id=user_id, session_id=session_id, run_key=run_key, **fields
        )
        options: dict[str, Any] = {
            "workflow_name": workflow_name(kind),
            "queue_name": self.queue_name,
            "workflow_id": workflow_id(self.app_name, user_id, session_id, run_key),
            "queue_partition_key": partition_key(self.app_name, user_id, session_id),
            "application_name": DBOS_APP_NAME,
        }
        # without edited args the request is the one workers before issue 49 read (they forbid extra fields)
        unset = {"args"} if request.args is None else None
        handle = self.client.enqueue(options, request.model_dump(mode="json", exclude=unset))
        return RunHandle(handle, request)

    def handle(self, user_id: str, session_id: str, run_key: str) -> RunHandle:
        """A handle on the workflow of an earlier enqueue with ``run_key`` (to wait for its
        result from another process)."""
        return RunHandle(self.client.retrieve_workflow(workflow_id(self.app_name, user_id, session_id, run_key)), None)

    def run(self, user_id: str, session_id: str, message: str | Content | None, *, run_key: str) -> RunHandle:
        """Enqueues ``Runner.run_async`` with the user's ``message`` (None: resume or recover
        without one; on a session with no turn in flight and no run under ``run_key`` it ends
        ``"done"`` with no event, and no model is called). ``run_key`` is the caller's
        idempotency key (e.g. the message id).

        Raises:
            pydantic.ValidationError: ``run_key`` is empty.
        """
        raw = message.model_dump(mode="json") if isinstance(message, Content) else message
        return self._enqueue("run", user_id, session_id, run_key, message=raw)

    def approve(
        self,
        user_id: str,
        session_id: str,
        call_key: str,
        *,
        digest: str | None = None,
        actor: str | None = None,
        run_key: str | None = None,
        args: dict[str, Any] | None = None,
        reason: str = "",
    ) -> RunHandle:
        """Enqueues ``Runner.approve`` of ``call_key`` (``digest``: refuse a call that is
        not the one shown; ``args``: run it with these edited arguments, which needs
        ``digest``; ``actor`` / ``reason``: who approves and why, journaled with the
        decision). Run key default: ``approve:<call_key>``. A call in doubt is not
        approved: the workflow ends ``"failed"`` with ``DecisionRefusedError`` (use
        ``resolve``)."""
        key = run_key or f"approve:{call_key}"
        return self._enqueue(
            "approve",
            user_id,
            session_id,
            key,
            call_key=call_key,
            digest=digest,
            actor=actor,
            args=args,
            reason=reason,
        )

    def deny(
        self,
        user_id: str,
        session_id: str,
        call_key: str,
        *,
        reason: str = "",
        digest: str | None = None,
        actor: str | None = None,
        run_key: str | None = None,
    ) -> RunHandle:
        """Enqueues ``Runner.deny`` of ``call_key`` with ``reason``. Run key default:
        ``deny:<call_key>``. A call in doubt is not denied: the workflow ends ``"failed"``
        with ``DecisionRefusedError`` (use ``resolve``)."""
        key = run_key or f"deny:{call_key}"
        return self._enqueue(
            "deny", user_id, session_id, key, call_key=call_key, reason=reason, digest=digest, actor=actor
        )

    def complete(
        self,
        user_id: str,
        session_id: str,
        call_key: str,
        value: Any = None,
        *,
        error: str | None = None,
        actor: str | None = None,
        run_key: str | None = None,
        reason: str = "",
    ) -> RunHandle:
        """Enqueues ``Runner.complete`` of the long-running call ``call_key`` with ``value``
        (plain data; JSON through DBOS) or as failed with ``error``. Run key default:
        ``complete:<call_key>``."""
        key = run_key or f"complete:{call_key}"
        return self._enqueue(
            "complete",
            user_id,
            session_id,
            key,
            call_key=call_key,
            value=value,
            error=error,
            actor=actor,
            reason=reason,
        )

    def resolve(
        self,
        user_id: str,
        session_id: str,
        call_key: str,
        action: Literal["rerun", "skip", "fail"],
        *,
        value: Any = None,
        reason: str = "",
        digest: str | None = None,
        actor: str | None = None,
        run_key: str | None = None,
    ) -> RunHandle:
        """Enqueues the decision on a call in doubt (``PausedCall.kind == "in_doubt"``: it
        started before its runner stopped and may have run): ``"rerun"`` runs the tool again,
        ``"skip"`` gives the script ``value`` (plain data) as its result without running it,
        ``"fail"`` raises ``RuntimeError`` (with ``reason``) in the script. Run key default:
        ``resolve:<call_key>``. ``digest``: the ``PendingCallInfo.digest`` shown (a call
        with another is refused); ``actor``: who decided. ``approve`` / ``deny`` on such a
        call are refused (the workflow ends ``"failed"`` with ``DecisionRefusedError``).

        Raises:
            pydantic.ValidationError: ``action`` is not one of the three.
        """
        key = run_key or f"resolve:{call_key}"
        return self._enqueue(
            "resolve_in_doubt",
            user_id,
            session_id,
            key,
            call_key=call_key,
            action=action,
            value=value,
            reason=reason,
            digest=digest,
            actor=actor,
        )

    def resolve_in_doubt(
        self,
        user_id: str,
        session_id: str,
        call_key: str,
        action: Literal["rerun", "skip", "fail"],
        *,
        value: Any = None,
        reason: str = "",
        run_key: str | None = None,
    ) -> RunHandle:
        """The former name of ``resolve`` (same arguments, same workflow)."""
        return self.resolve(user_id, session_id, call_key, action, value=value, reason=reason, run_key=run_key)
