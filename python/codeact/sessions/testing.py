"""The store test suite: what every session store must do (docs/stores.md), as pytest tests
any store can run, the bundled ones and a third party's.

Run it on your store by subclassing ``StoreContract`` in a test module and giving it a
``make_store`` fixture::

    import pytest
    from codeact.sessions.testing import StoreContract

    class TestMyStore(StoreContract):
        @pytest.fixture
        def make_store(self, tmp_path):
            store = MyStore(tmp_path / "db")
            yield lambda: store    # or: a new handle on the same storage per call
            store.close()

``make_store()`` returns a handle on the test's store: a fresh, empty store per test; each
call may return the same object or a new service on the same storage (then the tests also
check that several handles, like several processes, see one another's writes). The suite
needs pytest and anyio's pytest plugin; every test runs under asyncio, and under trio when
it is installed.

Or name a zero-argument factory from outside, without writing a test module::

    CODEACT_STORE_FACTORY=mypackage.stores:make_store pytest --pyargs codeact.sessions.testing

The factory is called once per test and must return a service on a fresh, empty store.
"""

from __future__ import annotations

import importlib
import os
import time
from collections.abc import Callable, Iterator
from typing import Any

import anyio
import pytest

from ._journal import JournalRecord, batch_record
from ._live import LIVE_MAX_CHARS, LiveRow
from ._service import (
    BaseSessionService,
    SessionExistsError,
    SessionNotFoundError,
    SessionStoreError,
    StaleSessionError,
    TurnConflictError,
)
from ._types import Content, Event, EventActions, Session

__all__ = ("ENV_FACTORY", "StoreContract", "StoreFactory", "load_factory")

StoreFactory = Callable[[], BaseSessionService]
"""Returns a handle on the test's store (the same object, or a new one on the same storage)."""

ENV_FACTORY = "CODEACT_STORE_FACTORY"
"""The environment variable naming a store factory as ``module:attribute``."""

APP = "app"

# Values a store must carry unchanged: NUL characters (a script printing chr(0)), text the
# agent escaped from lone surrogates, non-ASCII, big and small numbers, nesting.
AWKWARD: dict[str, Any] = {
    "nul": "a\x00b",
    "escaped": "\\udcff",
    "unicode": "ünï €𝄞 \u2028",
    "quotes": "'\"\\;--",
    "big": 2**62,
    "neg": -(2**53),
    "float": 0.1,
    "nested": {"list": [None, True, False, [], {}], "empty": ""},
}


def _backends() -> list[str]:
    try:
        import trio  # noqa: F401
    except ImportError:
        return ["asyncio"]
    return ["asyncio", "trio"]


def load_factory(spec: str) -> StoreFactory:
    """The callable named by ``module:attribute`` (``attribute`` may be dotted).

    Raises:
        ValueError: ``spec`` has no ``:``.
        ImportError: the module does not exist.
        AttributeError: the attribute does not exist.
        TypeError: the attribute is not callable.
    """
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"a store factory is named as module:attribute, not {spec!r}")
    target: Any = importlib.import_module(module_name)
    for part in attr.split("."):
        target = getattr(target, part)
    if not callable(target):
        raise TypeError(f"{spec} is not callable")
    factory: Callable[[], BaseSessionService] = target
    return factory


def user_event(text: str, delta: dict[str, Any] | None = None, **kwargs: Any) -> Event:
    """A user ``Event`` with ``text`` as content and ``delta`` as its ``state_delta``.

    Args:
        text: the message text.
        delta: the state delta (``None``: empty).
        **kwargs: further ``Event`` fields (``timestamp``, ...).
    """
    return Event(
        author="user",
        invocation_id="inv-1",
        content=Content.from_text(text),
        actions=EventActions(state_delta=delta or {}),
        **kwargs,
    )


def _texts(session: Session | None) -> list[str]:
    assert session is not None
    return [e.text for e in session.events]


def _record(**extra: Any) -> dict[str, Any]:
    return {"format": 3, "status": "running", "turn": "t", **extra}


def _claim(renewed_at: float = 1.0) -> dict[str, Any]:
    return {"owner": "h:1:x", "host": "h", "pid": 1, "taken_at": 1.0, "renewed_at": renewed_at, "lease": 30.0}


@pytest.mark.anyio
class StoreContract:
    """The store contract as tests. Subclass it (with a name pytest collects, ``Test...``)
    and define the ``make_store`` fixture (see the module docs)."""

    @pytest.fixture(params=_backends())
    def anyio_backend(self, request: pytest.FixtureRequest) -> str:
        """The anyio backend of each test: every suite test runs on asyncio, and on trio too
        when it is installed."""
        return str(request.param)

    @pytest.fixture
    def make_store(self) -> StoreFactory:
        """Override in the subclass: a fixture returning a ``StoreFactory`` (each call: a store over
        the same storage).

        Raises:
            NotImplementedError: the subclass did not define it.
        """
        raise NotImplementedError("define a make_store fixture returning a StoreFactory")

    @pytest.fixture
    def store(self, make_store: StoreFactory) -> BaseSessionService:
        """One store from ``make_store``."""
        return make_store()

    # --- sessions ------------------------------------------------------------------------

    async def test_create_get_list_delete(self, store: BaseSessionService) -> None:
        """Create, get, list (creation order, no events) and delete, keyed by app, user and id."""
        s1 = await store.create_session(app_name=APP, user_id="u1", state={"a": 1}, session_id="s1")
        assert (s1.id, s1.app_name, s1.user_id, s1.state, s1.events) == ("s1", APP, "u1", {"a": 1}, [])
        s2 = await store.create_session(app_name=APP, user_id="u1")
        assert len(s2.id) == 32
        await store.create_session(app_name=APP, user_id="u2", session_id="s1")  # same id, other user
        await store.create_session(app_name="other", user_id="u1", session_id="s1")  # other app
        got = await store.get_session(app_name=APP, user_id="u1", session_id="s1")
        assert got is not None and got.state == {"a": 1} and got.last_update_time == s1.last_update_time
        assert await store.get_session(app_name=APP, user_id="u1", session_id="missing") is None
        assert await store.get_session(app_name=APP, user_id="u3", session_id="s1") is None
        await store.append_event(s1, user_event("hi"))
        listed = await store.list_sessions(app_name=APP, user_id="u1")
        assert [s.id for s in listed] == ["s1", s2.id]  # creation order
        assert all(s.events == [] for s in listed) and listed[0].state == {"a": 1}
        everyone = await store.list_sessions(app_name=APP, user_id=None)
        assert sorted((s.user_id, s.id) for s in everyone) == sorted([("u1", "s1"), ("u1", s2.id), ("u2", "s1")])
        await store.delete_session(app_name=APP, user_id="u1", session_id="s1")
        assert await store.get_session(app_name=APP, user_id="u1", session_id="s1") is None
        assert await store.get_session(app_name=APP, user_id="u2", session_id="s1") is not None
        await store.delete_session(app_name=APP, user_id="u1", session_id="s1")  # no-op
        again = await store.create_session(app_name=APP, user_id="u1", session_id="s1")
        assert again.state == {}
        assert _texts(await store.get_session(app_name=APP, user_id="u1", session_id="s1")) == []

    async def test_duplicate_id_raises(self, store: BaseSessionService) -> None:
        """Creating a session id twice for the same app and user raises ``SessionExistsError``."""
        await store.create_session(app_name=APP, user_id="u", session_id="s")
        with pytest.raises(SessionExistsError):
            await store.create_session(app_name=APP, user_id="u", session_id="s")

    async def test_returned_sessions_are_copies(self, store: BaseSessionService) -> None:
        """Mutating an argument or a returned session never changes what is stored."""
        initial = {"nested": {"x": [1]}}
        s = await store.create_session(app_name=APP, user_id="u", state=initial, session_id="s")
        initial["nested"]["x"].append(2)
        s.state["nested"]["x"].append(3)
        event = user_event("hi", {"k": {"v": 1}})
        stored = await store.append_event(s, event)
        event.actions.state_delta["k"]["v"] = 2
        stored.actions.state_delta["k"]["v"] = 3
        got = await store.get_session(app_name=APP, user_id="u", session_id="s")
        assert got is not None and got.state == {"nested": {"x": [1]}, "k": {"v": 1}}

    async def test_event_filters(self, store: BaseSessionService) -> None:
        """``get_session``'s ``num_recent_events`` and ``after_timestamp`` filters, alone and combined."""
        s = await store.create_session(app_name=APP, user_id="u", session_id="s")
        for i in range(5):
            await store.append_event(s, user_event(f"e{i}", timestamp=100.0 + i))

        async def get(**kw: Any) -> list[str]:
            return _texts(await store.get_session(app_name=APP, user_id="u", session_id="s", **kw))

        assert await get() == ["e0", "e1", "e2", "e3", "e4"]
        assert await get(num_recent_events=2) == ["e3", "e4"]
        assert await get(num_recent_events=0) == []
        assert await get(after_timestamp=102.0) == ["e2", "e3", "e4"]
        assert await get(after_timestamp=101.5, num_recent_events=1) == ["e4"]

    async def test_state_scopes_and_temp(self, store: BaseSessionService) -> None:
        """``app:`` / ``user:`` keys are shared by scope; ``temp:`` keys are never stored."""
        a1 = await store.create_session(app_name=APP, user_id="alice", session_id="a1", state={"user:lang": "en"})
        a2 = await store.create_session(app_name=APP, user_id="alice", session_id="a2", state={"temp:t": 1})
        b1 = await store.create_session(app_name=APP, user_id="bob", session_id="b1")
        assert a2.state == {"user:lang": "en"} and b1.state == {}
        stored = await store.append_event(
            a1, user_event("x", {"app:model": "m1", "user:name": "Alice", "topic": "cats", "temp:scratch": object()})
        )
        assert "temp:scratch" in a1.state and stored.actions.state_delta == {
            "app:model": "m1",
            "user:name": "Alice",
            "topic": "cats",
        }
        await store.append_event(b1, user_event("y", {"user:name": "Bob", "app:limit": 3}))

        async def state(user: str, sid: str, app: str = APP) -> dict[str, Any]:
            got = await store.get_session(app_name=app, user_id=user, session_id=sid)
            assert got is not None
            return got.state

        base = {"user:lang": "en", "user:name": "Alice", "app:model": "m1", "app:limit": 3}
        assert await state("alice", "a1") == {**base, "topic": "cats"}
        assert await state("alice", "a2") == base
        assert await state("bob", "b1") == {"user:name": "Bob", "app:model": "m1", "app:limit": 3}
        other = await store.create_session(app_name="other", user_id="alice", session_id="o1")
        assert other.state == {}

    async def test_stale_session(self, store: BaseSessionService) -> None:
        """A copy loaded before other appends is refused with ``StaleSessionError`` and left unchanged."""
        s = await store.create_session(app_name=APP, user_id="u", session_id="s")
        copy = await store.get_session(app_name=APP, user_id="u", session_id="s")
        assert copy is not None
        for i in range(10):  # the same object never trips the check, however fast the appends
            await store.append_event(s, user_event(f"e{i}", {"n": i}))
        with pytest.raises(StaleSessionError):
            await store.append_event(copy, user_event("late", {"n": -1}))
        assert copy.events == [] and copy.state == {}
        fresh = await store.get_session(app_name=APP, user_id="u", session_id="s")
        assert fresh is not None and fresh.state == {"n": 9}

    async def test_append_to_missing_session(self, store: BaseSessionService) -> None:
        """Appending to a deleted session raises ``SessionNotFoundError``."""
        s = await store.create_session(app_name=APP, user_id="u", session_id="s")
        await store.delete_session(app_name=APP, user_id="u", session_id="s")
        with pytest.raises(SessionNotFoundError):
            await store.append_event(s, user_event("x"))

    # --- atomicity: the event and its state delta land together --------------------------

    async def test_unserializable_event_stores_nothing(self, store: BaseSessionService) -> None:
        """A value that is not JSON-serializable raises ``SessionStoreError`` and stores nothing."""
        s = await store.create_session(app_name=APP, user_id="u", session_id="s", state={"k": 0})
        await store.append_event(s, user_event("ok"))
        before = s.model_copy(deep=True)
        with pytest.raises(SessionStoreError):
            await store.append_event(s, user_event("bad", {"k": 1, "app:x": 1, "obj": object()}))
        assert s == before
        got = await store.get_session(app_name=APP, user_id="u", session_id="s")
        assert got is not None and _texts(got) == ["ok"] and got.state == {"k": 0}
        with pytest.raises(SessionStoreError):
            await store.create_session(app_name=APP, user_id="u", session_id="s2", state={"x": object()})
        assert await store.get_session(app_name=APP, user_id="u", session_id="s2") is None
        await store.append_event(s, user_event("ok2", {"k": 2}))  # the same object goes on

    async def test_racing_appends_one_lands_with_its_delta(self, make_store: StoreFactory) -> None:
        """Two writers holding the same loaded session append at once (on two handles when
        the factory gives them): one lands, with its delta; the other is stale and wrote
        nothing."""
        first = make_store()
        await first.create_session(app_name=APP, user_id="u", session_id="s", state={"n": 0})
        results: dict[str, str] = {}

        async def writer(name: str) -> None:
            store = make_store()
            session = await store.get_session(app_name=APP, user_id="u", session_id="s")
            assert session is not None
            await anyio.sleep(0)
            try:
                await store.append_event(session, user_event(name, {"n": name, f"user:{name}": 1, "app:last": name}))
                results[name] = "ok"
            except StaleSessionError:
                results[name] = "stale"

        for _ in range(3):
            async with anyio.create_task_group() as tg:
                tg.start_soon(writer, "a")
                tg.start_soon(writer, "b")
            got = await first.get_session(app_name=APP, user_id="u", session_id="s")
            assert got is not None
            winners = [k for k, v in results.items() if v == "ok"]
            assert len(winners) >= 1
            last = got.events[-1].text
            assert got.state["n"] == last and got.state["app:last"] == last and got.state[f"user:{last}"] == 1
            for event in got.events:
                assert event.actions.state_delta["n"] == event.text
            results.clear()

    async def test_concurrent_appends_same_object(self, store: BaseSessionService) -> None:
        """Concurrent appends through one ``Session`` object all land, none is reported stale."""
        s = await store.create_session(app_name=APP, user_id="u", session_id="s")

        async def add(i: int) -> None:
            await store.append_event(s, user_event(f"e{i}", {f"k{i}": i}))

        async with anyio.create_task_group() as tg:
            for i in range(8):
                tg.start_soon(add, i)
        got = await store.get_session(app_name=APP, user_id="u", session_id="s")
        assert got is not None
        assert sorted(_texts(got)) == sorted(f"e{i}" for i in range(8))
        assert got.state == {f"k{i}": i for i in range(8)} == s.state

    # --- values ----------------------------------------------------------------------------

    async def test_values_are_carried_unchanged(self, make_store: StoreFactory) -> None:
        """NUL bytes, lone surrogates and arbitrary bytes come back exactly as written."""
        store = make_store()
        s = await store.create_session(app_name=APP, user_id="u", session_id="s", state={"init": AWKWARD})
        await store.append_event(s, user_event("printed a\x00b \\udcff", {"v": AWKWARD, "app:v": AWKWARD}))
        version = await store.save_turn(
            app_name=APP,
            user_id="u",
            session_id="s",
            data=_record(turn_stdout="out\x00put", values=AWKWARD),
            snapshot=b"\x00\xff\x00snap",
            expected_version=0,
        )
        await store.append_journal(s, "t", [JournalRecord("outcome", 0, '"a\\u0000b"')], expected_version=version)
        await store.put_blob(
            app_name=APP, user_id="u", session_id="s", digest="d", data=b"\x00" * 3 + bytes(range(256))
        )
        reader = make_store()
        got = await reader.get_session(app_name=APP, user_id="u", session_id="s")
        assert got is not None
        assert got.state == {"init": AWKWARD, "v": AWKWARD, "app:v": AWKWARD}
        assert _texts(got) == ["printed a\x00b \\udcff"]
        slot = await reader.load_turn(app_name=APP, user_id="u", session_id="s")
        assert slot is not None and slot.snapshot == b"\x00\xff\x00snap"
        assert slot.data["turn_stdout"] == "out\x00put" and slot.data["values"] == AWKWARD
        journal = await reader.read_journal(app_name=APP, user_id="u", session_id="s", turn="t")
        assert journal == [JournalRecord("outcome", 0, '"a\\u0000b"')]
        blob = await reader.get_blob(app_name=APP, user_id="u", session_id="s", digest="d")
        assert blob == b"\x00" * 3 + bytes(range(256))

    # --- the turn slot: compare-and-set ------------------------------------------------------

    async def test_turn_slot_compare_and_set(self, store: BaseSessionService) -> None:
        """``save_turn`` is a compare-and-set on the slot version; ``data=None`` deletes the slot."""
        await store.create_session(app_name=APP, user_id="u", session_id="s")
        key: dict[str, Any] = {"app_name": APP, "user_id": "u", "session_id": "s"}
        assert await store.load_turn(**key) is None
        v1 = await store.save_turn(**key, data=_record(n=1), snapshot=None, expected_version=0)
        assert v1 >= 1
        with pytest.raises(TurnConflictError):
            await store.save_turn(**key, data=_record(n=2), snapshot=None, expected_version=0)
        with pytest.raises(TurnConflictError):
            await store.save_turn(**key, data=_record(n=2), snapshot=None, expected_version=v1 + 1)
        v2 = await store.save_turn(**key, data=_record(n=2), snapshot=b"s", expected_version=v1)
        assert v2 == v1 + 1
        slot = await store.load_turn(**key)
        assert slot is not None and (slot.version, slot.data["n"], slot.snapshot) == (v2, 2, b"s")
        assert await store.save_turn(**key, data=None, snapshot=None, expected_version=v2) == 0
        assert await store.load_turn(**key) is None
        # versions never repeat: a writer holding an old version cannot write after a delete
        v3 = await store.save_turn(**key, data=_record(n=3), snapshot=None, expected_version=0)
        assert v3 > v2
        with pytest.raises(TurnConflictError):
            await store.save_turn(**key, data=_record(n=4), snapshot=None, expected_version=v1)
        assert await store.save_turn(**key, data=None, snapshot=None, expected_version=v3) == 0
        assert await store.save_turn(**key, data=None, snapshot=None, expected_version=0) == 0  # nothing to delete

    async def test_save_turn_on_a_missing_session(self, store: BaseSessionService) -> None:
        """``save_turn`` on a session that does not exist raises ``SessionNotFoundError``."""
        with pytest.raises(SessionNotFoundError):
            await store.save_turn(
                app_name=APP, user_id="u", session_id="nope", data=_record(), snapshot=None, expected_version=0
            )

    async def test_racing_claims_exactly_one_wins(self, make_store: StoreFactory) -> None:
        """Stores racing to save the same slot version: exactly one wins, the others conflict."""
        first = make_store()
        await first.create_session(app_name=APP, user_id="u", session_id="s")
        key: dict[str, Any] = {"app_name": APP, "user_id": "u", "session_id": "s"}
        v = await first.save_turn(**key, data=_record(), snapshot=None, expected_version=0)
        won: list[int] = []
        lost: list[int] = []

        async def claim(i: int) -> None:
            store = make_store()
            await anyio.sleep(0)
            try:
                await store.save_turn(**key, data=_record(claim=_claim(), who=i), snapshot=None, expected_version=v)
                won.append(i)
            except TurnConflictError:
                lost.append(i)

        async with anyio.create_task_group() as tg:
            for i in range(5):
                tg.start_soon(claim, i)
        assert len(won) == 1 and len(lost) == 4
        slot = await first.load_turn(**key)
        assert slot is not None and slot.version == v + 1 and slot.data["who"] == won[0]

    async def test_renew_claim(self, store: BaseSessionService) -> None:
        """``renew_claim`` updates ``claim.renewed_at`` only at the right version and with a claim."""
        await store.create_session(app_name=APP, user_id="u", session_id="s")
        key: dict[str, Any] = {"app_name": APP, "user_id": "u", "session_id": "s"}
        v = await store.save_turn(**key, data=_record(claim=_claim(1.0), n="\x00"), snapshot=b"x", expected_version=0)
        await store.renew_claim(**key, version=v, renewed_at=42.5)
        slot = await store.load_turn(**key)
        assert slot is not None and slot.version == v and slot.snapshot == b"x"
        assert slot.data["claim"]["renewed_at"] == 42.5 and slot.data["n"] == "\x00"
        with pytest.raises(TurnConflictError):
            await store.renew_claim(**key, version=v + 1, renewed_at=50.0)
        v2 = await store.save_turn(**key, data=_record(), snapshot=None, expected_version=v)  # no claim
        with pytest.raises(TurnConflictError):
            await store.renew_claim(**key, version=v2, renewed_at=50.0)

    # --- the journal: fencing, first-writer-wins outcomes -----------------------------------

    async def test_journal_order_and_outcomes_first_writer_wins(self, store: BaseSessionService) -> None:
        """Journal read order (``os``, then intent/outcome by seq) and first-writer-wins outcomes."""
        s = await store.create_session(app_name=APP, user_id="u", session_id="s")
        await store.append_journal(
            s,
            "t1",
            [
                JournalRecord("intent", 1, '["b", "d1"]'),
                JournalRecord("os", 1, "[1]"),
                JournalRecord("intent", 0, '["a", "d0"]'),
                JournalRecord("outcome", 0, '"first"'),
                JournalRecord("os", 0, "[0]"),
            ],
        )
        await store.append_journal(s, "t1", [JournalRecord("outcome", 0, '"second"'), JournalRecord("os", 0, "[9]")])
        await store.append_journal(s, "t1", [JournalRecord("intent", 1, '["b", "d2"]')])
        await store.append_journal(s, "t2", [JournalRecord("intent", 0, '["other turn"]')])
        got = await store.read_journal(app_name=APP, user_id="u", session_id="s", turn="t1")
        assert got == [
            JournalRecord("os", 0, "[9]"),
            JournalRecord("os", 1, "[1]"),
            JournalRecord("intent", 0, '["a", "d0"]'),
            JournalRecord("outcome", 0, '"first"'),
            JournalRecord("intent", 1, '["b", "d2"]'),
        ]
        assert await store.read_journal(app_name=APP, user_id="u", session_id="s", turn="none") == []

    async def test_journal_writes_are_fenced_by_the_slot_version(self, make_store: StoreFactory) -> None:
        """A journal write with a taken-over ``expected_version`` conflicts and writes nothing."""
        store = make_store()
        s = await store.create_session(app_name=APP, user_id="u", session_id="s")
        key: dict[str, Any] = {"app_name": APP, "user_id": "u", "session_id": "s"}
        old = await store.save_turn(**key, data=_record(claim=_claim()), snapshot=None, expected_version=0)
        await store.append_journal(s, "t", [JournalRecord("intent", 0, "[]")], expected_version=old)
        new = await make_store().save_turn(**key, data=_record(claim=_claim(2.0)), snapshot=None, expected_version=old)
        batch = [JournalRecord("outcome", 0, '"late"'), JournalRecord("intent", 1, "[]")]
        with pytest.raises(TurnConflictError):
            await store.append_journal(s, "t", batch, expected_version=old)  # the old owner, taken over
        assert await store.read_journal(**key, turn="t") == [JournalRecord("intent", 0, "[]")]  # nothing of it
        await store.append_journal(s, "t", [JournalRecord("outcome", 0, '"new"')], expected_version=new)
        # a second outcome for the same call, fenced and current: accepted, and the first one stays
        await store.append_journal(s, "t", [JournalRecord("outcome", 0, '"again"')], expected_version=new)
        with pytest.raises(TurnConflictError):  # one record of the old owner
            await store.append_journal(s, "t", [JournalRecord("outcome", 1, '"late"')], expected_version=old)
        with pytest.raises(TurnConflictError):
            await store.append_journal(s, "t", [], expected_version=old)
        await store.save_turn(**key, data=None, snapshot=None, expected_version=new)
        with pytest.raises(TurnConflictError):  # no slot any more: version 0
            await store.append_journal(s, "t", [JournalRecord("os", 0, "[]")], expected_version=new)
        assert await store.read_journal(**key, turn="t") == [
            JournalRecord("intent", 0, "[]"),
            JournalRecord("outcome", 0, '"new"'),
        ]

    async def test_racing_outcomes_first_writer_wins(self, make_store: StoreFactory) -> None:
        """Racing outcome writes for one seq keep exactly one, and later writes never replace it."""
        first = make_store()
        s = await first.create_session(app_name=APP, user_id="u", session_id="s")

        async def write(i: int) -> None:
            await make_store().append_journal(s, "t", [JournalRecord("outcome", 0, f'"{i}"')])

        async with anyio.create_task_group() as tg:
            for i in range(6):
                tg.start_soon(write, i)
        (record,) = await first.read_journal(app_name=APP, user_id="u", session_id="s", turn="t")
        assert record.kind == "outcome" and record.data in {f'"{i}"' for i in range(6)}
        await first.append_journal(s, "t", [JournalRecord("outcome", 0, '"later"')])
        assert await first.read_journal(app_name=APP, user_id="u", session_id="s", turn="t") == [record]

    async def test_commit_turn_writes_the_held_records_and_the_slot_in_one_commit(
        self, make_store: StoreFactory
    ) -> None:
        """The buffered commit (SPEC §5 v4): ``commit_turn`` writes a turn's held journal records
        (read-only calls' outcomes naming their call, OS answers) and its slot together, fenced
        by the slot's version; a stale one writes neither."""
        store = make_store()
        s = await store.create_session(app_name=APP, user_id="u", session_id="s")
        key = {"app_name": APP, "user_id": "u", "session_id": "s"}
        v1 = await store.save_turn(**key, data=_record(claim=_claim()), snapshot=None, expected_version=0)
        await store.append_journal(s, "t", [JournalRecord("outcome", 0, '{"v":"first"}')], expected_version=v1)
        held = [
            JournalRecord("os", 1, '[["clock", 1.5]]'),
            JournalRecord("outcome", 0, '{"v":"late","c":["read","0000000000000000"]}'),
            JournalRecord("outcome", 1, '{"v":10,"c":["read","0123456789abcdef"]}'),
        ]
        v2 = await store.commit_turn(
            s, "t", held, data=_record(status="suspended"), snapshot=b"\x00snap", expected_version=v1
        )
        assert v2 == v1 + 1
        slot = await make_store().load_turn(**key)
        assert slot is not None and slot.version == v2 and slot.data["status"] == "suspended"
        assert slot.snapshot == b"\x00snap"
        assert await make_store().read_journal(**key, turn="t") == [
            JournalRecord("os", 1, '[["clock", 1.5]]'),
            JournalRecord("outcome", 0, '{"v":"first"}'),  # outcomes stay first-writer-wins
            JournalRecord("outcome", 1, '{"v":10,"c":["read","0123456789abcdef"]}'),
        ]
        with pytest.raises(TurnConflictError):  # a taken-over writer: neither part is written
            await store.commit_turn(
                s, "t", [JournalRecord("outcome", 2, '{"v":0}')], data=_record(), snapshot=None, expected_version=v1
            )
        assert len(await store.read_journal(**key, turn="t")) == 3
        assert (await store.load_turn(**key)).version == v2  # type: ignore[union-attr]
        await store.save_turn(**key, data=None, snapshot=None, expected_version=v2)
        v3 = await store.commit_turn(  # a slot deleted, then committed again: a new version from 0
            s,
            "t2",
            [JournalRecord("outcome", 0, '{"v":1,"c":["r","d"]}')],
            data=_record(),
            snapshot=None,
            expected_version=0,
        )
        assert v3 > 0 and (await store.load_turn(**key)).version == v3  # type: ignore[union-attr]
        assert [r.seq for r in await store.read_journal(**key, turn="t2")] == [0]
        missing = Session(id="nope", app_name=APP, user_id="u")
        with pytest.raises(SessionNotFoundError):
            await store.commit_turn(missing, "t", [], data=_record(), snapshot=None, expected_version=0)

    async def test_a_batch_record_is_one_write_read_back_expanded(self, make_store: StoreFactory) -> None:
        """A ``batch`` record (the held outcomes of one commit, issue 50) is written as it is, by
        ``append_journal``, the store's ``journal_appender`` and ``commit_turn``, and
        ``read_journal`` returns the records it holds, in replay order; a batch is first-writer-wins
        as an outcome is, and an outcome stored as its own row is kept over a batched one."""
        store = make_store()
        s = await store.create_session(app_name=APP, user_id="u", session_id="s")
        key = {"app_name": APP, "user_id": "u", "session_id": "s"}
        v1 = await store.save_turn(**key, data=_record(claim=_claim()), snapshot=None, expected_version=0)
        read = [JournalRecord("outcome", k, f'{{"v":{k},"c":["read","{k:016x}"]}}') for k in range(3)]
        await store.append_journal(
            s, "t", [batch_record([JournalRecord("os", 1, "[2]"), *read]), JournalRecord("intent", 3, '["w","d"]')]
        )
        again = batch_record([JournalRecord("outcome", 0, '{"v":"second","c":["read","x"]}')])
        appender = store.journal_appender()
        if appender is None or not appender(s, "t", [again], v1):
            await store.append_journal(s, "t", [again], expected_version=v1)
        later = [JournalRecord("outcome", 4, '{"v":4,"c":["read","y"]}'), JournalRecord("outcome", 5, '{"v":5}')]
        v2 = await store.commit_turn(s, "t", [batch_record(later)], data=_record(), snapshot=None, expected_version=v1)
        await store.append_journal(s, "t", [JournalRecord("outcome", 3, '{"v":"w"}')], expected_version=v2)
        assert await make_store().read_journal(**key, turn="t") == [
            JournalRecord("os", 1, "[2]"),
            *read,  # the first batch at seq 0 is kept: the second one is dropped
            JournalRecord("intent", 3, '["w","d"]'),
            JournalRecord("outcome", 3, '{"v":"w"}'),
            *later,
        ]
        await store.append_journal(s, "t", [JournalRecord("outcome", 6, '"row"')], expected_version=v2)
        await store.append_journal(s, "t", [batch_record([JournalRecord("outcome", 6, '"batched"')])])
        assert (await store.read_journal(**key, turn="t"))[-1] == JournalRecord("outcome", 6, '"row"')

    # --- blobs, deletion, listing ----------------------------------------------------------

    async def test_blobs(self, store: BaseSessionService) -> None:
        """Blobs are stored once per digest and scoped to their session."""
        await store.create_session(app_name=APP, user_id="u", session_id="s")
        key: dict[str, Any] = {"app_name": APP, "user_id": "u", "session_id": "s"}
        assert await store.get_blob(**key, digest="d") is None
        await store.put_blob(**key, digest="d", data=b"one")
        await store.put_blob(**key, digest="d", data=b"one")  # again: a no-op
        assert await store.get_blob(**key, digest="d") == b"one"
        assert await store.get_blob(app_name=APP, user_id="u", session_id="other", digest="d") is None

    async def test_delete_session_deletes_slot_journal_and_blobs(self, store: BaseSessionService) -> None:
        """Deleting a session deletes its turn slot, journal and blobs."""
        s = await store.create_session(app_name=APP, user_id="u", session_id="s")
        key: dict[str, Any] = {"app_name": APP, "user_id": "u", "session_id": "s"}
        v = await store.save_turn(**key, data=_record(), snapshot=b"x", expected_version=0)
        await store.append_journal(s, "t", [JournalRecord("intent", 0, "[]")], expected_version=v)
        await store.put_blob(**key, digest="d", data=b"b")
        await store.delete_session(**key)
        await store.create_session(app_name=APP, user_id="u", session_id="s")
        assert await store.load_turn(**key) is None
        assert await store.read_journal(**key, turn="t") == []
        assert await store.get_blob(**key, digest="d") is None
        assert await store.list_turns(app_name=APP) == []

    async def test_list_turns(self, store: BaseSessionService) -> None:
        """``list_turns`` lists the sessions of one app (optionally one user) holding a turn."""
        for user, sid in [("u1", "a"), ("u1", "b"), ("u2", "c"), ("u2", "d")]:
            await store.create_session(app_name=APP, user_id=user, session_id=sid)
        await store.create_session(app_name="other", user_id="u1", session_id="x")
        for user, sid, app in [("u1", "a", APP), ("u2", "c", APP), ("u2", "d", APP), ("u1", "x", "other")]:
            await store.save_turn(
                app_name=app, user_id=user, session_id=sid, data=_record(), snapshot=None, expected_version=0
            )
        slot = await store.load_turn(app_name=APP, user_id="u2", session_id="d")
        assert slot is not None
        await store.save_turn(
            app_name=APP, user_id="u2", session_id="d", data=None, snapshot=None, expected_version=slot.version
        )
        assert sorted(await store.list_turns(app_name=APP)) == [("u1", "a"), ("u2", "c")]
        assert await store.list_turns(app_name=APP, user_id="u2") == [("u2", "c")]
        assert await store.list_turns(app_name="none") == []

    async def test_list_decisions(self, store: BaseSessionService) -> None:
        """``list_decisions`` returns the ``"decision"`` journal records of an app (optionally
        one user, one session) of every turn, and nothing else of the journal."""
        for user, sid in [("u1", "a"), ("u1", "b"), ("u2", "c")]:
            await store.create_session(app_name=APP, user_id=user, session_id=sid)
        other = await store.create_session(app_name="other", user_id="u1", session_id="a")
        a = await store.get_session(app_name=APP, user_id="u1", session_id="a")
        b = await store.get_session(app_name=APP, user_id="u1", session_id="b")
        c = await store.get_session(app_name=APP, user_id="u2", session_id="c")
        assert a is not None and b is not None and c is not None
        await store.append_journal(
            a, "t1", [JournalRecord("intent", 0, '["x", "d"]'), JournalRecord("decision", 0, '{"act": "approve"}')]
        )
        await store.append_journal(a, "t2", [JournalRecord("decision", 0, '{"act": "deny"}')])
        await store.append_journal(b, "t1", [JournalRecord("decision", 0, '{"act": "complete"}')])
        await store.append_journal(c, "t1", [JournalRecord("decision", 3, '{"act": "skip"}')])
        await store.append_journal(other, "t1", [JournalRecord("decision", 0, '{"act": "fail"}')])
        every = sorted(await store.list_decisions(app_name=APP))
        assert [(d.user_id, d.session_id, d.turn, d.record) for d in every] == [
            ("u1", "a", "t1", JournalRecord("decision", 0, '{"act": "approve"}')),
            ("u1", "a", "t2", JournalRecord("decision", 0, '{"act": "deny"}')),
            ("u1", "b", "t1", JournalRecord("decision", 0, '{"act": "complete"}')),
            ("u2", "c", "t1", JournalRecord("decision", 3, '{"act": "skip"}')),
        ]
        assert [d.session_id for d in await store.list_decisions(app_name=APP, user_id="u2")] == ["c"]
        mine = await store.list_decisions(app_name=APP, user_id="u1", session_id="a")
        assert sorted(d.turn for d in mine) == ["t1", "t2"]
        assert await store.list_decisions(app_name="none") == []
        read = await store.read_journal(app_name=APP, user_id="u1", session_id="a", turn="t1")
        assert read == [JournalRecord("intent", 0, '["x", "d"]'), JournalRecord("decision", 0, '{"act": "approve"}')]

    # --- the live row (optional: issue 51) -------------------------------------------------

    async def test_live_row(self, make_store: StoreFactory) -> None:
        """A store that keeps live rows (``keeps_live``): one bounded, overwritten row per
        session, its version one more per write, seen by every handle, never an event, gone
        with ``live=None`` and with its session. Skipped for a store that keeps none."""
        store = make_store()
        if not store.keeps_live:
            pytest.skip("this store keeps no live rows (save_live / load_live are optional)")
        key: dict[str, Any] = {"app_name": APP, "user_id": "u", "session_id": "s"}
        assert await store.load_live(**key) is None
        with pytest.raises(SessionNotFoundError):
            await store.save_live(**key, live=LiveRow(reply="x"))
        session = await store.create_session(**key)
        await store.append_event(session, user_event("go"))
        before = time.time()
        first = LiveRow(reply="```python\nprint(", output="", author="coder", invocation_id="i1", after="e1")
        assert await store.save_live(**key, live=first) == 1
        got = await make_store().load_live(**key)
        assert got is not None and (got.reply, got.output, got.author, got.invocation_id, got.after) == (
            "```python\nprint(",
            "",
            "coder",
            "i1",
            "e1",
        )
        assert got.version == 1 and before - 1 <= got.updated_at <= time.time() + 1 and not got.truncated
        awkward = "a\x00b \\udcff ünï €𝄞 \u2028"
        assert await store.save_live(**key, live=LiveRow(reply="r", output=awkward, after=None)) == 2
        got = await make_store().load_live(**key)
        assert got is not None and (got.reply, got.output, got.after, got.version) == ("r", awkward, None, 2)
        big = "".join(chr(ord("a") + i % 26) for i in range(3 * LIVE_MAX_CHARS))
        await store.save_live(**key, live=LiveRow(reply=big, output="short"))
        got = await store.load_live(**key)
        assert got is not None and got.reply == big[-LIVE_MAX_CHARS:] and got.output == "short" and got.truncated
        stored = await store.get_session(**key)
        assert stored is not None and _texts(stored) == ["go"]  # never part of the event log
        assert await store.save_live(**key, live=None) == 0
        assert await make_store().load_live(**key) is None
        assert await store.save_live(**key, live=None) == 0  # a second delete: a no-op
        await store.save_live(**key, live=LiveRow(reply="again"))
        await store.delete_session(**key)
        await store.create_session(**key)
        assert await store.load_live(**key) is None  # deleted with its session

    # --- end to end: a paused approval through the runner -----------------------------------

    async def test_runner_decisions_say_who_decided(self, make_store: StoreFactory) -> None:
        """Each decision is journaled with its actor, reason and time, shown on the resumed
        run's first event, and listed by ``Runner.decisions`` (newest first) from another
        handle, after the turns ended."""
        from .. import CodeActAgent, FunctionTool, MontyRuntime, Runner, ScriptedModel

        def send(to: str) -> str:
            """Sends a message.

            Args:
                to: the recipient.
            """
            return f"sent to {to}"

        script = '```python\nr = call_tool("send", {"to": "ops"})\n{"type": "final_result", "value": r}\n```'
        ticks = iter(range(1000, 2000))

        def runner(store: BaseSessionService) -> Runner:
            agent = CodeActAgent(
                name="coder",
                model=ScriptedModel(lambda request: script),
                runtime=MontyRuntime(snapshot_key=b"s" * 32),
                tools=[FunctionTool(send, requires_confirmation=True)],
            )
            return Runner(app_name=APP, agent=agent, session_service=store, clock=lambda: float(next(ticks)))

        store = make_store()
        first = runner(store)
        for sid in ("s1", "s2"):
            await store.create_session(app_name=APP, user_id="u", session_id=sid)
            [e async for e in first.run_async(user_id="u", session_id=sid, new_message="go")]
        (one,) = await first.pending(user_id="u", session_id="s1")
        events = [
            e
            async for e in first.approve(
                user_id="u", session_id="s1", call_key=one.call_key, actor="alice", reason="looks right"
            )
        ]
        (shown,) = (events[0].custom_metadata or {})["codeact_decisions"]
        assert (shown["act"], shown["actor"], shown["reason"], shown["call_key"]) == (
            "approve",
            "alice",
            "looks right",
            one.call_key,
        )
        (two,) = await first.pending(user_id="u", session_id="s2")
        [e async for e in first.deny(user_id="u", session_id="s2", call_key=two.call_key, reason="no", actor="bob")]
        listed = await runner(make_store()).decisions(APP)
        assert [(d.act, d.actor, d.reason, d.session_id, d.tool) for d in listed] == [
            ("deny", "bob", "no", "s2", "send"),
            ("approve", "alice", "looks right", "s1", "send"),
        ]
        assert listed[0].at > listed[1].at and listed[1].call_key == one.call_key and listed[1].user_id == "u"
        assert [d.actor for d in await first.decisions(APP, user_id="u", session_id="s1")] == ["alice"]
        assert await first.decisions(APP, user_id="nobody") == []

    async def test_runner_approval_round_trip(self, make_store: StoreFactory) -> None:
        """A script pauses for an approval; ``Runner.list_pending`` finds it (on another
        handle), the approval runs the tool once, and the session's events match what the
        in-memory store records for the same run."""
        from .. import CodeActAgent, FunctionTool, MontyRuntime, Runner, ScriptedModel
        from ._memory import InMemorySessionService

        async def scenario(store_for: Callable[[], BaseSessionService]) -> tuple[list[Any], list[str]]:
            ran: list[str] = []

            def send(to: str) -> str:
                """Sends a message.

                Args:
                    to: the recipient.
                """
                ran.append(to)
                return f"sent \x00 to {to}"

            script = (
                '```python\nr = call_tool("send", {"to": "ops"})\nprint("a\\x00b")\n'
                '{"type": "final_result", "value": r}\n```'
            )

            def runner(store: BaseSessionService) -> Runner:
                agent = CodeActAgent(
                    name="coder",
                    model=ScriptedModel([script]),
                    runtime=MontyRuntime(),
                    tools=[FunctionTool(send, requires_confirmation=True)],
                )
                return Runner(app_name=APP, agent=agent, session_service=store)

            store = store_for()
            await store.create_session(app_name=APP, user_id="u", session_id="s")
            [e async for e in runner(store).run_async(user_id="u", session_id="s", new_message="go")]
            other = runner(store_for())
            pending = await other.list_pending(APP)
            assert [(key, [(p.tool, p.args) for p in calls]) for key, calls in pending.items()] == [
                (("u", "s"), [("send", {"to": "ops"})])
            ]
            assert await other.list_pending(APP, user_id="nobody") == {}
            (call,) = pending[("u", "s")]
            events = [e async for e in other.approve(user_id="u", session_id="s", call_key=call.call_key)]
            assert events[-1].text == "sent \x00 to ops"
            assert await other.list_pending(APP) == {}
            session = await store.get_session(app_name=APP, user_id="u", session_id="s")
            assert session is not None
            shape = [
                (e.author, e.text.replace(call.call_key, "<call>"), sorted(e.actions.state_delta))
                for e in session.events
            ]
            return shape, ran

        memory = InMemorySessionService()
        expected, ran = await scenario(lambda: memory)
        assert ran == ["ops"]
        got, ran = await scenario(make_store)
        assert ran == ["ops"]
        assert got == expected


class TestStoreFromEnvironment(StoreContract):
    """The suite on the store named by ``CODEACT_STORE_FACTORY`` (``module:attribute``);
    skipped when it is not set."""

    @pytest.fixture
    def make_store(self) -> Iterator[StoreFactory]:
        """The store named by the environment variable ``ENV_FACTORY`` names (``module:attribute``),
        shared by every call and closed after the test; the test is skipped when it is unset.
        """
        spec = os.environ.get(ENV_FACTORY)
        if not spec:
            pytest.skip(f"set {ENV_FACTORY}=module:attribute to run the store suite on that store")
        store = load_factory(spec)()
        yield lambda: store
        store.close()
