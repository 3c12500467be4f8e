"""The web inbox's JSON API on a call in doubt (issue 47): the decision is built as one
``Decision`` and sent through ``Runner.decide``; an approval or a denial of a call in doubt is
refused (409, naming what the call awaits) and it used to be settled by ``POST .../deny``
(200), telling the script the call "was denied"."""

from __future__ import annotations

import pytest

pytest.importorskip("starlette", reason="codeact[web] is not installed")
pytest.importorskip("uvicorn", reason="codeact[web] is not installed")

import web_fixtures as wf
from test_web import TOKEN, Served, http, in_thread, served  # noqa: F401  (served: the fixture)


@pytest.mark.parametrize("verb", ["approve", "deny"])
def test_a_call_in_doubt_is_not_approved_or_denied_over_the_api(served: Served, verb: str) -> None:  # noqa: F811
    crashed = wf.make_runner(str(served.db))
    try:
        in_thread(wf.crash, crashed, "sync-9", "sync the ledger")
    finally:
        crashed.session_service.close()
    status, body = http("POST", f"{served.url}/api/sessions/sync-9/recover", {"user_id": "alice"}, token=TOKEN)
    assert status == 200, body
    call = served.call_of("sync-9")
    assert call["kind"] == "in_doubt"
    url = f"{served.url}/api/pending/{call['call_key']}/{verb}"
    status, body = http("POST", url, {"digest": call["digest"], "reason": "no"}, token=TOKEN)
    assert status == 409, body
    assert "is in doubt: awaits rerun, skip or fail" in str(body)
    assert wf.SYNCED == [3]  # neither run again nor settled
    assert served.call_of("sync-9")["call_key"] == call["call_key"]
    url = f"{served.url}/api/pending/{call['call_key']}/resolve"
    status, body = http(
        "POST", url, {"digest": call["digest"], "action": "skip", "value": "checked by hand"}, token=TOKEN
    )
    assert status == 200, body
    assert wf.SYNCED == [3]
