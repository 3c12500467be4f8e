"""The inbox's reviewers (issue 49): each reviewer's own token (``codeact serve --reviewers
FILE``) and the name every decision is recorded with; the reviewer's context on each card (the
message that started the turn, the agent, the tool's and its arguments' descriptions); filters
by status and tool; **Dismiss**. On a real uvicorn server over a real SQLite file (the fixtures
of ``test_web``), the browser part in the machine's Chromium."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import web_fixtures as wf
from codeact.web import load_reviewers
from test_web import TOKEN, Served, _expect, _serve, http
from test_web import browser as browser
from test_web import context as context

ALICE, BOB = "alice-token-0123456789", "bob-token-9876543210ab"


@pytest.fixture
def reviewed(tmp_path: Path) -> Iterator[Served]:
    """A server with the shared token and two reviewers; records each decision's actor."""
    decisions: list[Any] = []
    for served in _serve(tmp_path, TOKEN, reviewers={ALICE: "alice", BOB: "bob"}):
        real = served.runner.decide

        def recording(decision: Any, _real: Any = real, **kwargs: Any) -> Any:
            decisions.append(decision)
            return _real(decision, **kwargs)

        served.runner.decide = recording
        served.decisions = decisions  # type: ignore[attr-defined]
        yield served


def _pay(served: Served, session_id: str, token: str) -> dict[str, Any]:
    status, body = http("GET", f"{served.url}/api/pending?tool=pay", token=token)
    assert status == 200, body
    return next(p for p in body["pending"] if p["session_id"] == session_id)


def test_the_reviewers_file_is_read_and_its_mistakes_named(tmp_path: Path) -> None:
    good = tmp_path / "reviewers"
    good.write_text(f"# who may decide\nalice {ALICE}\n\n  bob   {BOB}  \n")
    assert load_reviewers(good) == {ALICE: "alice", BOB: "bob"}
    for text, message in [
        (f"alice {ALICE} extra\n", "expected 'name token', got 3 fields"),
        ("alice short\n", "shorter than 16 characters"),
        (f"alice {ALICE}\nalice {BOB}\n", "named twice"),
        (f"alice {ALICE}\nbob {ALICE}\n", "also alice's"),
        (f"al/ice {ALICE}\n", "must be 1-64 letters"),
        ("# nobody\n", "names no reviewer"),
    ]:
        bad = tmp_path / "bad"
        bad.write_text(text)
        with pytest.raises(ValueError, match=message) as caught:
            load_reviewers(bad)
        assert ALICE not in str(caught.value), "a token is never printed"


def test_each_decision_is_made_as_the_reviewer_whose_token_it_carries(reviewed: Served) -> None:
    call = _pay(reviewed, "pay-1", ALICE)
    status, body = http(
        "POST",
        f"{reviewed.url}/api/pending/{call['call_key']}/approve",
        {"digest": call["digest"], "session_id": "pay-1"},
        token=ALICE,
    )
    assert status == 200, body
    assert wf.PAID == [900]
    other = _pay(reviewed, "pay-2", TOKEN)
    status, body = http(
        "POST",
        f"{reviewed.url}/api/pending/{other['call_key']}/deny",
        {"digest": other["digest"], "session_id": "pay-2", "reason": "not today"},
        token=TOKEN,
    )
    assert status == 200, body
    actors = [(d.verb, d.actor) for d in reviewed.decisions]  # type: ignore[attr-defined]
    assert actors == [("approve", "alice"), ("deny", "web")]
    assert http("GET", f"{reviewed.url}/api/pending", token="not-a-reviewer-token")[0] == 401
    assert wf.PAID == [900]


def test_the_body_cannot_claim_another_actor(reviewed: Served) -> None:
    call = _pay(reviewed, "pay-1", BOB)
    body = {"digest": call["digest"], "session_id": "pay-1", "actor": "alice"}
    status, _ = http("POST", f"{reviewed.url}/api/pending/{call['call_key']}/approve", body, token=BOB)
    assert status == 200
    assert [d.actor for d in reviewed.decisions] == ["bob"]  # type: ignore[attr-defined]


def test_the_inbox_filters_by_status_and_tool(reviewed: Served) -> None:
    def listed(query: str) -> list[tuple[str, str]]:
        status, body = http("GET", f"{reviewed.url}/api/pending{query}", token=ALICE)
        assert status == 200, body
        return sorted((p["session_id"], p["tool"]) for p in body["pending"])

    assert listed("") == [("job-1", "start_job"), ("pay-1", "pay"), ("pay-2", "pay")]
    assert listed("?kind=completion") == [("job-1", "start_job")]
    assert listed("?kind=confirmation&tool=pay") == [("pay-1", "pay"), ("pay-2", "pay")]
    assert listed("?tool=start_job") == [("job-1", "start_job")]
    assert listed("?kind=in_doubt") == []
    status, body = http("GET", f"{reviewed.url}/api/pending?kind=urgent", token=ALICE)
    assert status == 400 and "no such kind 'urgent'" in body["error"]


def test_each_card_carries_the_reviewers_context(reviewed: Served) -> None:
    call = _pay(reviewed, "pay-1", ALICE)
    assert call["context"] == {
        "message": "please pay bob",
        "agent": "assistant",
        "agent_description": "",
        "tool_description": "Pays out (needs a human's approval).",
        "args": {},
        "editable": True,
        "edit": [
            {"name": "amount", "kind": "integer", "value": "900", "required": True, "description": "", "options": []}
        ],
    }
    job = next(
        p for p in http("GET", f"{reviewed.url}/api/pending", token=ALICE)[1]["pending"] if p["tool"] == "start_job"
    )
    assert job["context"]["editable"] is False and job["context"]["edit"] == []  # only a confirmation is edited


def test_dismiss_denies_with_the_stock_reason_and_runs_nothing(reviewed: Served) -> None:
    call = _pay(reviewed, "pay-1", ALICE)
    body = {"digest": call["digest"], "session_id": "pay-1", "dismiss": True, "reason": "ignored"}
    status, answer = http("POST", f"{reviewed.url}/api/pending/{call['call_key']}/deny", body, token=ALICE)
    assert status == 200, answer
    (decision,) = reviewed.decisions  # type: ignore[attr-defined]
    assert decision.reason == "dismissed in the inbox by alice: nobody should act on this call"
    assert wf.PAID == []
    final = answer["events"][-1]["content"]["parts"][0]["text"]
    assert "refused: " in final and "dismissed in the inbox by alice" in final


def test_the_browser_shows_who_decides_the_context_and_dismisses(reviewed: Served, context: Any) -> None:
    expect = _expect()
    page = context.new_page()
    page.goto(f"{reviewed.url}/inbox?token={BOB}&kind=confirmation")
    expect(page.locator(".actor")).to_contain_text("bob")
    expect(page.locator("article.pending")).to_have_count(2)  # the job's completion is filtered out
    card = page.locator("article.pending").filter(has_text="pay-1")
    expect(card.locator(".context .message")).to_have_text("please pay bob")
    expect(card.locator(".context .tool-doc")).to_contain_text("Pays out")
    card.locator("button.dismiss").click()
    expect(page.locator(".notice")).to_contain_text("Dismissed")
    expect(page.locator(".item.reply")).to_contain_text("dismissed in the inbox by bob")
    assert [(d.verb, d.actor) for d in reviewed.decisions] == [("deny", "bob")]  # type: ignore[attr-defined]
    assert wf.PAID == []


def test_serve_refuses_a_malformed_reviewers_file(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from codeact.cli import app

    bad = tmp_path / "reviewers"
    bad.write_text("alice short\n")
    result = CliRunner().invoke(
        app, ["serve", "--db", str(tmp_path / "s.db"), "--agent", "nowhere:agent", "--reviewers", str(bad)]
    )
    assert result.exit_code == 2
    assert "shorter than 16 characters" in result.output
