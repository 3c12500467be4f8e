"""The inbox's decisions beyond yes and no (issue 49, web part): **Edit** end to end (the
edited call runs once; a bad edit is refused with 400 and the call stays pending; a tool with
``editable=False`` has no Edit form), typed answers (a completion's form from the tool's
``result_type``, an approval's payload from its ``payload_type``), the batch card (a turn's
calls on one card, **Approve all** as one ``Runner.decide([...])``) and who decided on the
timeline. On a real uvicorn server over a real SQLite file (the fixtures of ``test_web``), the
browser part in the machine's Chromium."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import web_fixtures as wf
from test_web import DOCS_IMG, TOKEN, Served, _expect, _serve, http, in_thread
from test_web import browser as browser
from test_web import context as context
from test_web import open_served as open_served
from test_web import served as served


def _shots(tmp_path: Path) -> Path:
    shots = DOCS_IMG if os.environ.get("CODEACT_DOCS_SCREENSHOTS") == "1" else tmp_path
    shots.mkdir(parents=True, exist_ok=True)
    return shots


def _calls(served: Served, session_id: str) -> list[dict[str, Any]]:
    status, body = http("GET", f"{served.url}/api/pending", token=TOKEN)
    assert status == 200, body
    return [p for p in body["pending"] if p["session_id"] == session_id]


# ------------------------------------------------------------------ Edit


def test_an_edited_approval_runs_the_edited_call_once(open_served: Served, context: Any, tmp_path: Path) -> None:
    expect = _expect()
    shots = _shots(tmp_path)
    page = context.new_page()
    page.goto(f"{open_served.url}/inbox")
    card = page.locator("article.pending", has_text="pay-1")
    card.locator("details.edit summary").click()
    amount = card.locator('input[name="arg:amount"]')
    expect(amount).to_have_value("900")
    amount.fill("450")
    card.screenshot(path=str(shots / "web-edit.png"))
    card.locator("button.approve-edited").click()
    expect(page.locator(".notice")).to_contain_text("Approved")
    expect(page.locator(".item.reply")).to_contain_text("paid 450")
    expect(page.locator(".item.decision")).to_contain_text("approved by web (localhost)")
    expect(page.locator(".item.decision")).to_contain_text("with edited arguments pay(amount=450)")
    assert wf.PAID == [450]  # the edited call, once; never the script's 900
    assert (shots / "web-edit.png").stat().st_size > 0


def test_a_bad_edit_is_refused_with_400_and_the_call_stays_pending(open_served: Served, context: Any) -> None:
    expect = _expect()
    page = context.new_page()
    before = _calls(open_served, "pay-1")
    for typed, says in [("lots", "argument 'amount' is not a number"), ("", "missing required argument")]:
        page.goto(f"{open_served.url}/inbox")
        card = page.locator("article.pending", has_text="pay-1")
        card.locator("details.edit summary").click()
        card.locator('input[name="arg:amount"]').fill(typed)
        with page.expect_response(lambda r: r.url.split("?")[0].endswith("/approve")) as answer:
            card.locator("button.approve-edited").click()
        assert answer.value.status == 400, typed
        expect(page.locator("h1")).to_have_text("Bad request")
        expect(page.locator(".error")).to_contain_text(says)
        expect(page.locator(".error")).to_contain_text("nothing")
    assert _calls(open_served, "pay-1") == before  # still pending, as it was
    assert wf.PAID == []


def test_the_api_maps_the_decision_errors_to_statuses(served: Served) -> None:
    (call,) = _calls(served, "pay-1")
    url = f"{served.url}/api/pending/{call['call_key']}/approve"
    body = {"digest": call["digest"], "session_id": "pay-1", "args": {"amount": 1, "memo": "x"}}
    status, answer = http("POST", url, body, token=TOKEN)
    assert status == 400 and "memo: unexpected argument" in answer["error"], answer  # DecisionValueError
    in_thread(wf.start, served.runner, "refund-1", "please refund")
    (refund,) = _calls(served, "refund-1")
    assert refund["context"]["editable"] is False and refund["context"]["edit"] == []
    status, answer = http(
        "POST",
        f"{served.url}/api/pending/{refund['call_key']}/approve",
        {"digest": refund["digest"], "session_id": "refund-1", "args": {"amount": 5}},
        token=TOKEN,
    )
    assert status == 409 and "editable=False" in answer["error"], answer  # EditNotSupportedError
    assert wf.PAID == [] and wf.REFUNDED == []
    assert _calls(served, "pay-1") == [call] and _calls(served, "refund-1") == [refund]


def test_a_tool_that_forbids_edits_has_no_edit_form(open_served: Served, context: Any) -> None:
    expect = _expect()
    in_thread(wf.start, open_served.runner, "refund-1", "please refund")
    page = context.new_page()
    page.goto(f"{open_served.url}/inbox")
    refund = page.locator("article.pending", has_text="refund-1")
    expect(refund.locator("button.approve")).to_be_visible()
    expect(refund.locator("details.edit")).to_have_count(0)
    expect(page.locator("article.pending", has_text="pay-1").locator("details.edit")).to_have_count(1)
    refund.locator("button.approve").click()
    expect(page.locator(".item.reply")).to_contain_text("refunded 50")
    assert wf.REFUNDED == [50]


# ------------------------------------------------------------------ typed answers


def test_a_typed_completion_is_given_through_its_schema_form(open_served: Served, context: Any) -> None:
    expect = _expect()
    in_thread(wf.start, open_served.runner, "render-1", "please render the beach")
    before = _calls(open_served, "render-1")
    page = context.new_page()
    for url, width, status, says in [
        ("frame.png", "wide", 400, "field 'width' is not a number"),  # not of its kind: the form says so
        ("frame.png", "", 400, "width"),  # missing: the runner refuses it (DecisionValueError)
    ]:
        page.goto(f"{open_served.url}/inbox")
        card = page.locator("article.pending", has_text="render-1")
        expect(card.locator("textarea[name=value]")).to_have_count(0)  # no free JSON: the schema's fields
        expect(card.locator(".result-field")).to_have_count(2)
        expect(card.locator(".result-field", has_text="width")).to_contain_text("pixels")
        card.locator('input[name="result:url"]').fill(url)
        card.locator('input[name="result:width"]').fill(width)
        with page.expect_response(lambda r: r.url.split("?")[0].endswith("/complete")) as answer:
            card.locator("form.result-form button.complete").click()
        assert answer.value.status == status
        expect(page.locator(".error")).to_contain_text(says)
        assert _calls(open_served, "render-1") == before  # nothing resumed
    page.goto(f"{open_served.url}/inbox")
    card = page.locator("article.pending", has_text="render-1")
    card.locator('input[name="result:url"]').fill("frame.png")
    card.locator('input[name="result:width"]').fill("640")
    card.locator("form.result-form button.complete").click()
    expect(page.locator(".notice")).to_contain_text("Completed")
    expect(page.locator(".item.reply")).to_contain_text("rendered frame.png at 640")


def test_an_approval_payload_is_given_through_its_schema_form(open_served: Served, context: Any) -> None:
    expect = _expect()
    in_thread(wf.start, open_served.runner, "ship-1", "please ship order 7")
    page = context.new_page()
    page.goto(f"{open_served.url}/inbox")
    card = page.locator("article.pending", has_text="ship-1")
    form = card.locator("form.payload-form")
    expect(form.locator(".payload-field")).to_have_count(2)
    expect(form.locator(".payload-field", has_text="level")).to_contain_text("1 (low) to 3 (urgent)")
    form.locator('input[name="payload:level"]').fill("3")
    form.locator('input[name="payload:note"]').fill("rush")
    form.locator("button.approve").click()
    expect(page.locator(".notice")).to_contain_text("Approved")
    expect(page.locator(".item.reply")).to_contain_text("shipped 7 at {'level': 3, 'note': 'rush'}")
    assert wf.SHIPPED == [{"level": 3, "note": "rush"}]


def test_a_wrong_shaped_answer_is_refused_through_the_api_and_nothing_runs(served: Served) -> None:
    in_thread(wf.start, served.runner, "render-1", "please render the beach")
    in_thread(wf.start, served.runner, "ship-1", "please ship order 7")
    (render,) = _calls(served, "render-1")
    (ship,) = _calls(served, "ship-1")
    assert [f["name"] for f in render["context"]["answer"]] == ["url", "width"]
    assert [f["name"] for f in ship["context"]["payload"]] == ["level", "note"]
    assert render["context"]["payload"] == [] and ship["context"]["answer"] == []
    status, answer = http(
        "POST",
        f"{served.url}/api/pending/{render['call_key']}/complete",
        {"digest": render["digest"], "session_id": "render-1", "value": {"url": "u", "width": "wide"}},
        token=TOKEN,
    )
    assert status == 400 and "width" in answer["error"] and "result_type" in answer["error"], answer
    status, answer = http(
        "POST",
        f"{served.url}/api/pending/{ship['call_key']}/approve",
        {"digest": ship["digest"], "session_id": "ship-1", "payload": {"level": "high"}},
        token=TOKEN,
    )
    assert status == 400 and "level" in answer["error"] and "payload_type" in answer["error"], answer
    assert _calls(served, "render-1") == [render] and _calls(served, "ship-1") == [ship]
    assert wf.SHIPPED == []
    status, answer = http(
        "POST",
        f"{served.url}/api/pending/{ship['call_key']}/approve",
        {"digest": ship["digest"], "session_id": "ship-1", "payload": {"level": 1}},
        token=TOKEN,
    )
    assert status == 200, answer
    assert wf.SHIPPED == [{"level": 1}]


# ------------------------------------------------------------------ the batch card


def _recording(served: Served) -> list[Any]:
    """Every ``Runner.decide`` call the server makes, as what it was given."""
    given: list[Any] = []
    real = served.runner.decide

    def recording(decision: Any, **kwargs: Any) -> Any:
        given.append(decision)
        return real(decision, **kwargs)

    served.runner.decide = recording
    return given


def test_approve_all_on_a_batch_card_runs_every_call_once(open_served: Served, context: Any, tmp_path: Path) -> None:
    expect = _expect()
    shots = _shots(tmp_path)
    given = _recording(open_served)
    in_thread(wf.start, open_served.runner, "both-1", "please pay both")
    page = context.new_page()
    page.goto(f"{open_served.url}/inbox")
    card = page.locator("article.card.batch", has_text="both-1")
    expect(card.locator("fieldset.batch-call")).to_have_count(2)
    expect(card.locator("h2")).to_contain_text("2 calls of one turn")
    expect(card.locator("fieldset.batch-call").nth(0)).to_contain_text("pay(amount=300)")
    expect(card.locator("fieldset.batch-call").nth(1)).to_contain_text("pay(amount=400)")
    expect(page.locator("article.card:not(.batch)", has_text="both-1")).to_have_count(0)  # grouped, not repeated
    card.screenshot(path=str(shots / "web-batch.png"))
    card.locator("button.approve-all").click()
    expect(page.locator(".notice")).to_contain_text("Decided together")
    expect(page.locator(".item.reply")).to_contain_text("paid 300 and paid 400")
    expect(page.locator(".item.decision")).to_have_count(2)  # one per call, both on the resumed run
    expect(page.locator(".item.decision").first).to_contain_text("approved by web (localhost)")
    assert sorted(wf.PAID) == [300, 400]  # each once
    (batch,) = given  # one Runner.decide, with both decisions
    assert [(d.verb, d.actor) for d in batch] == [("approve", "web (localhost)")] * 2
    assert (shots / "web-batch.png").stat().st_size > 0


def test_per_call_choices_on_a_batch_card_are_one_decision(open_served: Served, context: Any) -> None:
    expect = _expect()
    given = _recording(open_served)
    in_thread(wf.start, open_served.runner, "both-1", "please pay both")
    page = context.new_page()
    page.goto(f"{open_served.url}/inbox")
    card = page.locator("article.card.batch", has_text="both-1")
    first, second = card.locator("fieldset.batch-call").nth(0), card.locator("fieldset.batch-call").nth(1)
    first.locator('input[type=radio][value="approve"]').check()
    second.locator('input[type=radio][value="deny"]').check()
    second.locator('input[name="reason:1"]').fill("one is enough")
    card.locator("button.decide-batch").click()
    expect(page.locator(".notice")).to_contain_text("Decided together")
    assert wf.PAID == [300]
    (batch,) = given
    assert [(d.verb, d.reason) for d in batch] == [("approve", None), ("deny", "one is enough")]


def test_a_call_decided_elsewhere_turns_approve_all_off_live(open_served: Served, context: Any, tmp_path: Path) -> None:
    expect = _expect()
    in_thread(wf.start, open_served.runner, "both-1", "please pay both")
    page = context.new_page()
    page.goto(f"{open_served.url}/inbox")
    card = page.locator("article.card.batch", has_text="both-1")
    expect(card.locator("button.approve-all")).to_be_enabled()
    key = card.get_attribute("data-key")
    x, y = _calls(open_served, "both-1")
    status, body = http(
        "POST",
        f"{open_served.url}/api/pending/{x['call_key']}/approve",
        {"digest": x["digest"], "session_id": "both-1"},
    )
    assert status == 200 and [p["call_key"] for p in body["pending"]] == [y["call_key"]], body  # decided elsewhere
    old = page.locator(f'article.card[data-key="{key}"]')
    expect(old.locator("button.approve-all")).to_be_disabled()  # live, before anyone clicks
    expect(old.locator(".gone-note")).to_contain_text(f"pay(amount=300) (call {x['call_key']})")
    expect(old.locator(".gone-note")).not_to_contain_text(y["call_key"])
    expect(old.locator("fieldset.batch-call.changed")).to_have_count(1)
    expect(old.locator("fieldset.batch-call.changed")).to_contain_text("pay(amount=300)")
    rest = page.locator("article.card.pending:not(.gone)", has_text="both-1")
    expect(rest).to_contain_text("pay(amount=400)")  # the call left waits on its own card
    expect(rest.locator("button.approve")).to_be_enabled()
    old.screenshot(path=str(_shots(tmp_path) / "web-batch-changed.png"))
    assert wf.PAID == [300]


def test_the_batch_api_decides_all_or_nothing(served: Served) -> None:
    in_thread(wf.start, served.runner, "both-1", "please pay both")
    x, y = _calls(served, "both-1")
    url = f"{served.url}/api/sessions/both-1/decide"
    approve_x = {"call_key": x["call_key"], "verb": "approve", "digest": x["digest"]}
    for members, status, says in [
        ([approve_x, {"call_key": y["call_key"], "verb": "approve", "digest": "0" * 16}], 409, "stale view"),
        (
            [approve_x, {**approve_x, "call_key": y["call_key"], "digest": y["digest"], "args": {"amount": "x"}}],
            400,
            "amount",
        ),
        ([approve_x, {"call_key": y["call_key"], "verb": "launch", "digest": y["digest"]}], 404, "launch"),
        ([approve_x, {"call_key": y["call_key"], "digest": y["digest"]}], 400, "needs call_key and verb"),
        ([], 400, "non-empty list"),
    ]:
        status_got, body = http("POST", url, {"decisions": members}, token=TOKEN)
        assert status_got == status and says in body["error"], (members, body)
        assert _calls(served, "both-1") == [x, y] and wf.PAID == []  # nothing decided, nothing ran
    members = [approve_x, {"call_key": y["call_key"], "verb": "deny", "digest": y["digest"], "reason": "no"}]
    status, body = http("POST", url, {"decisions": members, "user_id": "alice"}, token=TOKEN)
    assert status == 200, body
    assert not {x["call_key"], y["call_key"]} & {p["call_key"] for p in body["pending"]}  # both decided
    assert wf.PAID == [300]
    status, body = http("POST", url, {"decisions": members}, token=TOKEN)
    assert status == 409 and "decided already" in body["error"], body
    assert wf.PAID == [300]


# ------------------------------------------------------------------ who decided, on the timeline

ALICE = "alice-token-0123456789"


@pytest.fixture
def reviewed(tmp_path: Path) -> Iterator[Served]:
    """A server with the shared token and one reviewer, alice."""
    yield from _serve(tmp_path, TOKEN, reviewers={ALICE: "alice"})


def test_the_timeline_shows_who_decided_and_why(reviewed: Served, context: Any) -> None:
    expect = _expect()
    (pay,) = [p for p in _calls(reviewed, "pay-1") if p["tool"] == "pay"]
    status, body = http(
        "POST",
        f"{reviewed.url}/api/pending/{pay['call_key']}/approve",
        {"digest": pay["digest"], "session_id": "pay-1", "reason": "checked the invoice"},
        token=ALICE,
    )
    assert status == 200, body
    (other,) = _calls(reviewed, "pay-2")
    status, body = http(
        "POST",
        f"{reviewed.url}/api/pending/{other['call_key']}/deny",
        {"digest": other["digest"], "session_id": "pay-2", "reason": "not today"},
        token=TOKEN,
    )
    assert status == 200, body
    status, body = http("GET", f"{reviewed.url}/api/sessions/pay-1/events", token=TOKEN)
    (decided,) = [i for i in body["timeline"] if i["kind"] == "decision"]
    assert decided["text"] == "approved by alice: checked the invoice"
    assert (decided["act"], decided["actor"], decided["tool"], decided["call_key"]) == (
        "approve",
        "alice",
        "pay",
        pay["call_key"],
    )
    kinds = [i["kind"] for i in body["timeline"]]
    assert kinds.index("decision") < kinds.index("reply")  # the decision, then the run it resumed
    status, body = http("GET", f"{reviewed.url}/api/sessions/pay-2/events?user=bob", token=TOKEN)
    assert [i["text"] for i in body["timeline"] if i["kind"] == "decision"] == ["denied by web: not today"]
    page = context.new_page()
    page.goto(f"{reviewed.url}/sessions/pay-1?user=alice&token={ALICE}")
    expect(page.locator(".item.decision")).to_contain_text("approved by alice: checked the invoice")
    expect(page.locator(".item.decision .label")).to_have_text("decision")
