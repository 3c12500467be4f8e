"""Snapshot bytes: cross-process resume, and every kind of bad bytes giving SnapshotError
with the process alive (SPEC §3 "Snapshots")."""

from __future__ import annotations

import random
import re
import struct
from pathlib import Path

import pytest

from codeact import (
    MONTY_VERSION,
    CodeRuntimeError,
    MontyRuntime,
    ResumeValue,
    SnapshotError,
    _monty,
)
from conftest import change_bytes, expect_call, expect_complete, forge, run_child, start

KEY = b"k" * 32
# The envelope (rust/src/snapshot.rs): magic (4), format version (2), Monty version's length (1)
# and text, dump version (2), flags (1), recursion depth (4), payload length (8), payload, tag.
FLAG_AT = 4 + 2 + 1 + len(MONTY_VERSION) + 2
LENGTH_AT = FLAG_AT + 1 + 4
OTHER_KEY = b"j" * 32
SCRIPT = """
data = {"seen": [1, "two", 3.5], "big": 2**100}
print("before")
r = call_tool("double", {"x": 21})
print("after", r)
{"r": r, "data": data}
"""


@pytest.fixture
def snapshot(monty) -> bytes:
    return expect_call(start(monty, SCRIPT)).call.dump()


def test_snapshot_resumes_in_a_fresh_process(snapshot, tmp_path):
    path = tmp_path / "snap.bin"
    path.write_bytes(snapshot)
    child = run_child(
        f"""
        import json, pathlib
        from codeact import MontyRuntime, ResumeValue
        step = MontyRuntime().resume(pathlib.Path({str(path)!r}).read_bytes(), ResumeValue(42))
        print(json.dumps({{"kind": type(step).__name__, "value": step.value, "stdout": step.stdout}}))
        """
    )
    assert child.returncode == 0, child.stderr
    assert child.stdout.strip() == (
        '{"kind": "Complete", "value": {"r": 42, "data": {"seen": [1, "two", 3.5], "big": '
        + str(2**100)
        + '}}, "stdout": "after 42\\n"}'
    )


def test_snapshot_dumped_in_a_child_resumes_here(tmp_path):
    path = tmp_path / "snap.bin"
    child = run_child(
        f"""
        import pathlib
        from codeact import MontyRuntime
        step = MontyRuntime().start('x = call_tool("t", {{"a": 1}})\\n[x, x]', "agent")
        pathlib.Path({str(path)!r}).write_bytes(step.call.dump())
        """
    )
    assert child.returncode == 0, child.stderr
    assert expect_complete(MontyRuntime().resume(path.read_bytes(), ResumeValue("v"))).value == ["v", "v"]


def test_a_snapshot_can_be_resumed_more_than_once(snapshot):
    assert expect_complete(MontyRuntime().resume(snapshot, ResumeValue(1))).value["r"] == 1
    assert expect_complete(MontyRuntime().resume(snapshot, ResumeValue(2))).value["r"] == 2


def test_a_resumed_snapshot_can_pause_and_dump_again():
    rt = MontyRuntime()
    first = expect_call(start(rt, 'a = call_tool("one")\nb = call_tool("two", {"a": a})\n[a, b]')).call.dump()
    second = expect_call(rt.resume(first, ResumeValue(1)))
    assert second.call.name == "two" and second.call.keyword_args == {"a": 1}
    assert expect_complete(MontyRuntime().resume(second.call.dump(), ResumeValue(2))).value == [1, 2]


def test_inspect_reads_the_pending_call(snapshot, monty):
    name, positional, keyword, call_id = monty.inspect(snapshot)
    assert (name, positional, keyword) == ("double", (), {"x": 21})
    assert isinstance(call_id, int)


def test_inspect_matches_the_live_call(monty):
    call = expect_call(start(monty, 'call_tool("a")\ncall_tool("fetch-cart", {"user_id": "u", "n": [1, 2]})')).call
    call = expect_call(call.resume(ResumeValue(None))).call
    assert monty.inspect(call.dump()) == (call.name, call.positional_args, call.keyword_args, call.call_id)


def test_inspect_refuses_bad_bytes(monty):
    with pytest.raises(SnapshotError):
        monty.inspect(b"hello")


# ------------------------------------------------------------------ bad bytes


def assert_refused(rt: MontyRuntime, data: bytes, *words: str) -> None:
    with pytest.raises(SnapshotError) as info:
        rt.resume(data, ResumeValue(1))
    assert isinstance(info.value, CodeRuntimeError)
    message = str(info.value)
    assert message.startswith("snapshot error: ")
    for word in words:
        assert word in message, message
    # The process lives on and the runtime still works.
    assert expect_complete(start(rt, "1 + 1")).value == 2


@pytest.mark.parametrize("tenth", range(10))
def test_truncated_snapshots_are_refused(snapshot, monty, tenth):
    assert_refused(monty, snapshot[: len(snapshot) * tenth // 10])


def test_a_snapshot_missing_its_last_byte_is_refused(snapshot, monty):
    assert_refused(monty, snapshot[:-1], "truncated")


def test_trailing_bytes_are_refused(snapshot, monty):
    assert_refused(monty, snapshot + b"\x00", "trailing")


@pytest.mark.parametrize("where", [0, 4, 6, 7, 13, 20, 0.25, 0.5, 0.75, -33, -1])
def test_a_flipped_byte_is_refused(snapshot, monty, where):
    offset = where if isinstance(where, int) else int(len(snapshot) * where)
    altered = bytearray(snapshot)
    altered[offset] ^= 0x01
    assert_refused(monty, bytes(altered))


def test_an_altered_payload_is_caught_by_the_integrity_check(snapshot, monty):
    altered = bytearray(snapshot)
    altered[len(snapshot) // 2] ^= 0xFF
    assert_refused(monty, bytes(altered), "integrity")


@pytest.mark.parametrize(
    "data",
    [b"", b"hello", b"CAMS", random.Random(7).randbytes(300), random.Random(8).randbytes(50_000)],
    ids=["empty", "hello", "magic-only", "random-300", "random-50k"],
)
def test_foreign_bytes_are_refused(monty, data):
    assert_refused(monty, data)


def _reseal(body: bytes) -> bytes:
    """An unsigned envelope with its SHA-256 tag recomputed over ``body``."""
    import hashlib

    return body + hashlib.sha256(body).digest()


def _dump_version_at(snapshot: bytes) -> int:
    return 7 + snapshot[6]


def test_the_envelope_records_monty_and_its_dump_version(snapshot):
    at = _dump_version_at(snapshot)
    assert snapshot[7:at] == MONTY_VERSION.encode()
    assert struct.unpack("<H", snapshot[at : at + 2])[0] == _monty.MONTY_DUMP_VERSION


def test_a_dump_version_this_build_cannot_read_is_refused_naming_both(snapshot, monty):
    at = _dump_version_at(snapshot)
    newer = _monty.MONTY_DUMP_VERSION + 1
    other = _reseal(snapshot[:at] + struct.pack("<H", newer) + snapshot[at + 2 : -32])
    assert_refused(monty, other, f"dump version {newer}")
    assert_refused(monty, other, f"Monty {MONTY_VERSION}")


def test_another_monty_release_with_a_readable_dump_version_resumes(snapshot, monty):
    """The upgrade path: Monty reads dump versions MIN..DUMP of other releases."""
    assert _monty.MONTY_MIN_DUMP_VERSION <= _monty.MONTY_DUMP_VERSION
    release = b"1.4.9"
    other = _reseal(snapshot[:6] + bytes([len(release)]) + release + snapshot[_dump_version_at(snapshot) : -32])
    step = monty.resume(other, ResumeValue(1))
    assert type(step).__name__ in ("Call", "Complete")


def test_a_codeact_0_1_snapshot_is_refused_naming_both_versions(monty):
    """Envelope format 1, as codeact 0.1.0 (Monty 0.0.19) wrote it."""
    body = b"CAMS" + struct.pack("<H", 1) + bytes([6]) + b"0.0.19" + b"\0" + struct.pack("<I", 1000)
    body += struct.pack("<Q", 3) + b"abc"
    assert_refused(monty, _reseal(body), "codeact 0.1.0", "Monty 0.0.19", f"Monty {MONTY_VERSION}")


def test_another_format_version_is_refused(snapshot, monty):
    other = snapshot[:4] + struct.pack("<H", _monty.SNAPSHOT_FORMAT_VERSION + 1) + snapshot[6:]
    assert_refused(monty, other, "format version")


@pytest.mark.parametrize("length", [2**64 - 1, 2**64 - 10])
def test_an_absurd_payload_length_is_refused(snapshot, monty, length):
    header = LENGTH_AT
    altered = snapshot[:header] + struct.pack("<Q", length) + snapshot[header + 8 :]
    try:
        monty.resume(altered, ResumeValue(1))
    except SnapshotError:
        return
    except BaseException as exc:  # PanicException derives from BaseException
        pytest.fail(f"{type(exc).__name__}: {exc}")
    pytest.fail("accepted")


@pytest.mark.parametrize("length", [2**63, 2**40, 2**32])
def test_a_large_payload_length_is_refused(snapshot, monty, length):
    header = LENGTH_AT
    altered = snapshot[:header] + struct.pack("<Q", length) + snapshot[header + 8 :]
    assert_refused(monty, altered, "truncated")


# ------------------------------------------------------------------ signed snapshots


@pytest.fixture
def signed() -> bytes:
    return expect_call(start(MontyRuntime(snapshot_key=KEY), SCRIPT)).call.dump()


def test_a_signed_snapshot_resumes_with_its_key(signed):
    assert expect_complete(MontyRuntime(snapshot_key=KEY).resume(signed, ResumeValue(5))).value["r"] == 5


def test_a_signed_snapshot_without_the_key_is_refused(signed):
    assert_refused(MontyRuntime(), signed, "snapshot_key")


def test_a_signed_snapshot_with_another_key_is_refused(signed):
    assert_refused(MontyRuntime(snapshot_key=OTHER_KEY), signed, "integrity")


def test_an_unsigned_snapshot_on_a_keyed_runtime_is_refused(snapshot):
    assert_refused(MontyRuntime(snapshot_key=KEY), snapshot, "unsigned")


def test_a_signed_snapshot_with_its_flag_cleared_is_refused(signed):
    altered = bytearray(signed)
    altered[FLAG_AT] &= ~1  # the signed bit only (bit 1 marks codeact's own section)
    assert_refused(MontyRuntime(), bytes(altered), "integrity")
    assert_refused(MontyRuntime(snapshot_key=KEY), bytes(altered), "unsigned")


@pytest.mark.parametrize("key", [b"short", "a-str-key-of-enough-length"])
def test_weak_or_non_bytes_keys_are_rejected(key):
    with pytest.raises(ValueError):
        MontyRuntime(snapshot_key=key)  # type: ignore[arg-type]


# ------------------------------------------------------------------ forged bytes (digest recomputed)


def forgeries(snapshot: bytes, count: int, *, claim_unsigned: bool = False) -> list[bytes]:
    """``count`` keyless forgeries of ``snapshot`` (``conftest.forge``), one to three payload
    bytes changed each."""
    change = change_bytes(random.Random(2))
    return [forge(snapshot, change, claim_unsigned=claim_unsigned) for _ in range(count)]


@pytest.mark.parametrize("claim_unsigned", [False, True], ids=["signed-flag-kept", "signed-flag-cleared"])
def test_forged_snapshots_are_refused_before_decoding_on_a_keyed_runtime(signed, claim_unsigned):
    """The in-process guarantee against forged bytes is the key: each forgery is refused by
    the envelope check, so Monty's decoder (not hardened against forged payloads, see
    docs/security.md) never sees one. Unsigned forgeries on a runtime without a key can abort
    the host in-process; ``isolation="process"`` contains that
    (tests/security/test_isolation_modes.py)."""
    rt = MontyRuntime(snapshot_key=KEY)
    for forged in forgeries(signed, 300, claim_unsigned=claim_unsigned):
        with pytest.raises(SnapshotError, match="unsigned" if claim_unsigned else "integrity"):
            rt.resume(forged, ResumeValue(1))
    # The runtime is fine afterwards and the genuine bytes still resume.
    assert expect_complete(rt.resume(signed, ResumeValue(5))).value["r"] == 5


PANICS = """
import hashlib, struct
from codeact import CodeRuntimeError, MontyRuntime, ResumeValue
rt = MontyRuntime()
snapshot = rt.start({script!r}, "agent").call.dump()
head = {length_at}
plen = struct.unpack("<Q", snapshot[head : head + 8])[0]
payload = snapshot[head + 8 : head + 8 + plen]
rest = snapshot[head + 8 + plen : -32]
for at, value in {forgeries!r}:
    p = bytearray(payload)
    p[at] = value
    body = snapshot[:head] + struct.pack("<Q", len(p)) + bytes(p) + rest
    try:
        rt.resume(body + hashlib.sha256(body).digest(), ResumeValue(1))
        print("resumed")
    except CodeRuntimeError as exc:
        print(str(exc).split(":")[0] + ":" + str(exc).split(":")[1])
print(rt.start("1 + 1", "agent").value)
"""
# One byte of the paused bytecode changed (found with fuzz/forged_snapshots.py): Monty 1.4.0
# panics on each (an index out of bounds, a range start past the end, an invalid opcode).
PANICKING_FORGERIES = [(576, 22), (573, 178), (569, 210)]


def test_a_monty_panic_is_a_typed_error_and_the_host_lives_on():
    """A panic inside Monty is caught and raised as ``CodeRuntimeError`` (SPEC §3: the host
    never crashes), in the wheel as shipped. The release wheel's unwinder (LLVM's libunwind,
    linked by zig) writes a panic's exception object with 16-byte aligned moves; when the
    counting allocator handed out blocks 8 bytes past a 16-byte boundary, each of these was a
    segfault. Forged bytes are only the way to reach a panic from Python here."""
    script = 'data = [1, "two", {"k": 3.0}]\nr = call_tool("double", {"x": 21})\n[r, data]'
    child = run_child(PANICS.format(script=script, length_at=LENGTH_AT, forgeries=PANICKING_FORGERIES), timeout=120)
    assert child.returncode == 0, child.stderr[-2000:]
    *answers, after = child.stdout.splitlines()
    assert answers == ["interpreter error: Monty panicked during resume"] * len(PANICKING_FORGERIES), child.stdout
    assert after == "2", child.stdout  # the runtime still works


# ------------------------------------------------------------------ version pin


def test_monty_version_matches_cargo_lock():
    lock = Path(__file__).resolve().parent.parent / "Cargo.lock"
    if not lock.exists():
        pytest.skip("Cargo.lock not present")
    match = re.search(r'\[\[package\]\]\nname = "monty"\nversion = "([^"]+)"', lock.read_text())
    assert match, "no monty package in Cargo.lock"
    assert match.group(1) == MONTY_VERSION == _monty.MONTY_VERSION


def test_the_snapshot_carries_the_monty_version(snapshot):
    assert snapshot[:4] == b"CAMS"
    assert snapshot[6] == len(MONTY_VERSION)
    assert snapshot[7 : 7 + len(MONTY_VERSION)] == MONTY_VERSION.encode()
