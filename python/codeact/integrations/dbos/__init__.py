"""codeact agent runs on DBOS workers (``pip install 'codeact[dbos]'``; docs/scale-out.md).

- ``Worker(runner, database_url=...)``: runs a ``Runner``'s calls as DBOS workflows from a
  queue partitioned by session (one run per session at a time, across all workers); each
  workflow is one ``Runner`` call and holds no DBOS steps (codeact's journal records what
  ran). ``codeact worker --db postgresql://… --agent module:attr`` runs one.
- ``CodeActClient(DBOSClient(...), app_name=...)``: enqueue runs and decisions (approve,
  deny, complete, ``resolve`` for a call in doubt) from any process; the workflow id comes
  from the run key, so a repeated enqueue is the same run. A decision the call's kind does
  not accept (approve or deny on a call in doubt) ends its workflow ``"failed"`` with
  ``DecisionRefusedError``, nothing run.
- ``DeadWorkerRecovery``: how a dead worker's workflows are recovered on another worker.
"""

from __future__ import annotations

from .. import require

require("dbos", "dbos")

from ._client import CodeActClient, RunHandle  # noqa: E402
from ._protocol import (  # noqa: E402
    DBOS_APP_NAME,
    RUN_KINDS,
    PausedCall,
    PausedKind,
    RunKind,
    RunRequest,
    RunResult,
    application_version,
    default_queue,
    partition_key,
    workflow_id,
    workflow_name,
)
from ._recovery import DeadWorkerRecovery  # noqa: E402
from ._worker import Worker  # noqa: E402

__all__ = (
    "DBOS_APP_NAME",
    "RUN_KINDS",
    "CodeActClient",
    "DeadWorkerRecovery",
    "PausedCall",
    "PausedKind",
    "RunHandle",
    "RunKind",
    "RunRequest",
    "RunResult",
    "Worker",
    "application_version",
    "default_queue",
    "partition_key",
    "workflow_id",
    "workflow_name",
)
