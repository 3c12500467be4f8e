"""The session's file layer (SPEC §5 "Files", issue 53): a script's writes through a read-write
mount reach the host once, and only after the commit that records them.

During a turn the native runtime serves each read-write mount as an overlay rebuilt from the
layer the driver hands to every advance (an ``os_replay`` entry of kind ``"files"``) and gets
back, updated, in the advance's ``os_log``; reads see the host plus the layer. The layer is never
journaled: a replay from the script's start (or from a continuation, with the layer stored beside
it) recomputes the same bytes. When the script ends, the end commit stores the *pre-images* of
every path the layer touches (the host's contents before the apply) in the turn slot, then the
layer is applied to the host (whole files, directories, deletions; a rename is its destination's
contents and its source's deletion). A crash during or after the apply recovers by replaying the
script against the pre-images, so it recomputes the same layer, and applies it again: same bytes,
never doubled.

The layer's bytes (shared with ``rust/src/files.rs``, all integers little-endian): ``b"CAFL"``, a
version byte (1), a ``u32`` count, then per entry a kind byte (0 a file, 1 a directory, 2 a
deleted entry), the ``u32`` length and UTF-8 of its full virtual path, an ``f64`` modification
time, and for a file the ``u64`` length and bytes of its contents.
"""

from __future__ import annotations

import base64
import contextlib
import os
import shutil
import struct
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

__all__ = (
    "EMPTY",
    "FILES",
    "LayerEntry",
    "apply_layer",
    "decode_layer",
    "encode_layer",
    "from_text",
    "layered_mounts",
    "overlay_mounts",
    "overlay_part",
    "preimages",
    "replay_with",
    "split_log",
    "start_layer",
    "to_text",
)

FILES = "files"
"""Kind of the ``os_replay`` / ``os_log`` entry carrying the layer."""

_MAGIC = b"CAFL\x01"


class LayerEntry(NamedTuple):
    """One path of the layer.

    Attributes:
        path: the full virtual path (``/data/log.txt``).
        kind: ``"file"``, ``"dir"`` or ``"deleted"``.
        content: a file's whole contents (empty otherwise).
        mtime: the modification time the script sees, in seconds since the epoch.
    """

    path: str
    kind: str
    content: bytes = b""
    mtime: float = 0.0


_KINDS = ("file", "dir", "deleted")


def encode_layer(entries: Iterable[LayerEntry]) -> bytes:
    """The layer's bytes (entries in path order)."""
    ordered = sorted(entries, key=lambda e: e.path)
    parts = [_MAGIC, struct.pack("<I", len(ordered))]
    for e in ordered:
        path = e.path.encode()
        parts.append(struct.pack("<BI", _KINDS.index(e.kind), len(path)))
        parts.append(path)
        parts.append(struct.pack("<d", e.mtime))
        if e.kind == "file":
            parts.append(struct.pack("<Q", len(e.content)))
            parts.append(e.content)
    return b"".join(parts)


EMPTY = encode_layer(())
"""The layer of a script that wrote nothing."""


def decode_layer(data: bytes) -> list[LayerEntry]:
    """The layer's entries, in path order.

    Raises:
        ValueError: the bytes are not a version 1 layer, or are truncated.
    """
    view = memoryview(data)
    if bytes(view[:5]) != _MAGIC:
        raise ValueError("not a version 1 file layer")
    try:
        (count,) = struct.unpack_from("<I", view, 5)
        at = 9
        entries = []
        for _ in range(count):
            kind, n = struct.unpack_from("<BI", view, at)
            at += 5
            path = bytes(view[at : at + n]).decode()
            at += n
            (mtime,) = struct.unpack_from("<d", view, at)
            at += 8
            content = b""
            if kind == 0:
                (size,) = struct.unpack_from("<Q", view, at)
                at += 8
                content = bytes(view[at : at + size])
                if len(content) != size:
                    raise ValueError("truncated file layer")
                at += size
            entries.append(LayerEntry(path, _KINDS[kind], content, mtime))
    except (struct.error, IndexError, UnicodeDecodeError) as exc:
        raise ValueError(f"malformed file layer ({exc})") from exc
    return entries


def to_text(data: bytes) -> str:
    """The layer's bytes as text for the turn record (base64)."""
    return base64.b64encode(data).decode("ascii")


def from_text(text: str) -> bytes:
    """``to_text``'s inverse."""
    return base64.b64decode(text, validate=True)


def layered_mounts(runtime: Any) -> dict[str, Path]:
    """The read-write mounts of ``runtime`` (virtual path -> host folder): those whose writes
    go through the layer. Empty for a runtime without mounts."""
    found: dict[str, Path] = {}
    for mount in getattr(runtime, "mounts", ()) or ():
        access = getattr(mount, "access", None)
        if getattr(access, "value", access) == "read-write":
            found[str(mount.virtual_path)] = Path(mount.host_path)
    return found


def overlay_mounts(runtime: Any) -> dict[str, Any]:
    """The overlay mounts of ``runtime`` (virtual path -> ``Mount``): their part of the layer
    is the session's overlay, kept in the session store and never applied to the host."""
    found: dict[str, Any] = {}
    for mount in getattr(runtime, "mounts", ()) or ():
        access = getattr(mount, "access", None)
        if getattr(access, "value", access) == "overlay":
            found[str(mount.virtual_path)] = mount
    return found


def _under(path: str, prefixes: Iterable[str]) -> bool:
    return any(path == p or path.startswith(p + "/") for p in prefixes)


def overlay_part(data: bytes, prefixes: Iterable[str], base: bytes | None = None) -> bytes:
    """The entries of layer ``data`` under the mounts at ``prefixes`` (the session's overlay);
    with ``base``, those entries over ``base``'s other entries (a turn's starting layer: the
    overlay it inherits beside a read-write mount's pre-images)."""
    keep = tuple(prefixes)
    mine = [e for e in decode_layer(data) if _under(e.path, keep)]
    if base is not None:
        mine += [e for e in decode_layer(base) if not _under(e.path, keep)]
    return encode_layer(mine)


def start_layer(runtime: Any) -> bytes | None:
    """The layer a new script starts with (``EMPTY``) when ``runtime`` serves read-write or
    overlay mounts through one (``file_layer``, ``MontyRuntime``), else None (no layer: the
    script's writes, if any, go to the host as it makes them)."""
    if getattr(runtime, "file_layer", False) and (layered_mounts(runtime) or overlay_mounts(runtime)):
        return EMPTY
    return None


def replay_with(files: bytes | None, replay: Sequence[tuple[str, Any]] | None = None) -> dict[str, Any]:
    """The ``os_replay=`` keyword of a start: the layer first, then the journal's entries."""
    if files is None:
        return {"os_replay": replay} if replay else {}
    return {"os_replay": [(FILES, files), *(replay or ())]}


def split_log(os_log: tuple[tuple[str, Any], ...]) -> tuple[tuple[tuple[str, Any], ...], bytes | None]:
    """An advance's ``os_log`` without its layer entry (the last one when the advance used a
    mount), and the layer it carried (None when it carried none)."""
    if os_log and os_log[-1][0] == FILES:
        return os_log[:-1], bytes(os_log[-1][1])
    return os_log, None


def _host_path(mounts: dict[str, Path], virtual: str) -> Path | None:
    """Where the virtual path lies on the host, or None when no read-write mount holds it or
    it would leave its mount (it never does for a path the overlay wrote)."""
    for prefix in sorted(mounts, key=len, reverse=True):
        if virtual == prefix or virtual.startswith(prefix + "/"):
            root = mounts[prefix].resolve()
            rest = virtual[len(prefix) :].lstrip("/")
            parts = [p for p in rest.split("/") if p]
            if any(p in (".", "..") for p in parts):
                return None
            target = root.joinpath(*parts)
            parent = target.parent.resolve()
            if parent != root and root not in parent.parents:
                return None  # a symlinked folder that leads out of the mount
            return parent / target.name if parts else root
    return None


def preimages(data: bytes, mounts: dict[str, Path]) -> bytes:
    """What the host holds now at every path the layer ``data`` touches (a file's contents, a
    folder, or nothing: ``"deleted"``): the base a replay of the script reads instead of a host
    that the apply may have changed."""
    out = []
    for e in decode_layer(data):
        target = _host_path(mounts, e.path)
        if target is None:
            continue
        if target.is_symlink() or not target.exists():
            out.append(LayerEntry(e.path, "deleted"))
        elif target.is_dir():
            out.append(LayerEntry(e.path, "dir", b"", target.stat().st_mtime))
        else:
            out.append(LayerEntry(e.path, "file", target.read_bytes(), target.stat().st_mtime))
    return encode_layer(out)


def apply_layer(data: bytes, mounts: dict[str, Path]) -> int:
    """Applies the layer ``data`` to the host folders of ``mounts``; idempotent (applying it
    twice leaves what applying it once does). Folders first (parents before children), then
    files (each written whole, through a temporary file renamed into place), then deletions
    (children before parents; a folder is removed with what it still holds). Returns the number
    of paths changed.

    Raises:
        OSError: the host refused a write (the apply is re-run from the stored layer).
    """
    entries = decode_layer(data)
    changed = 0
    for e in entries:  # path order: parents first
        target = _host_path(mounts, e.path)
        if target is None or e.kind != "dir":
            continue
        if target.is_symlink() or (target.exists() and not target.is_dir()):
            target.unlink()
        if not target.is_dir():
            target.mkdir(parents=True, exist_ok=True)
            changed += 1
    for e in entries:
        target = _host_path(mounts, e.path)
        if target is None or e.kind != "file":
            continue
        if target.is_dir() and not target.is_symlink():
            shutil.rmtree(target)
        if target.is_file() and not target.is_symlink() and target.read_bytes() == e.content:
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".codeact-")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(e.content)
            os.replace(tmp, target)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        changed += 1
    for e in reversed(entries):  # children first
        target = _host_path(mounts, e.path)
        if target is None or e.kind != "deleted":
            continue
        if target.is_symlink() or target.is_file():
            target.unlink()
            changed += 1
        elif target.is_dir():
            shutil.rmtree(target)
            changed += 1
    return changed
