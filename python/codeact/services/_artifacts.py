"""Artifact services: named, versioned blobs (reports, images, CSVs) tied to a session.

Following Google ADK, a file name starting with ``user:`` is scoped to the user (shared by
all of that user's sessions); any other name belongs to one session. Every save creates a
new version, numbered from 0.
"""

from __future__ import annotations

import base64
import json
import re
from abc import ABC, abstractmethod
from pathlib import Path

import anyio
from pydantic import BaseModel

__all__ = ("Artifact", "BaseArtifactService", "FileArtifactService", "InMemoryArtifactService")

USER_SCOPE = "user:"


class Artifact(BaseModel):
    """One version of an artifact: bytes and their MIME type.

    Attributes:
        data: the content.
        mime_type: e.g. ``"text/plain"``, ``"image/png"``.
    """

    data: bytes
    mime_type: str = "application/octet-stream"

    @classmethod
    def from_text(cls, text: str, mime_type: str = "text/plain") -> Artifact:
        """A text artifact: ``text`` encoded as UTF-8, with ``mime_type`` (default ``text/plain``)."""
        return cls(data=text.encode(), mime_type=mime_type)

    @property
    def text(self) -> str | None:
        """The content decoded as UTF-8 when the MIME type is textual (``text/*``, JSON,
        XML), else None."""
        textual = self.mime_type.startswith("text/") or self.mime_type in ("application/json", "application/xml")
        if not textual:
            return None
        return self.data.decode("utf-8", errors="replace")


def as_artifact(value: Artifact | str | bytes) -> Artifact:
    """``str`` becomes a text/plain artifact, ``bytes`` an octet-stream one."""
    if isinstance(value, Artifact):
        return value
    if isinstance(value, str):
        return Artifact.from_text(value)
    if isinstance(value, (bytes, bytearray)):
        return Artifact(data=bytes(value))
    raise TypeError(f"an artifact must be an Artifact, str or bytes, not {type(value).__name__}")


def check_filename(filename: str) -> None:
    """Rejects names that could escape a directory (``..``, ``/``, ``\\``) or are empty.

    Raises:
        ValueError: the name is not allowed.
    """
    bare = filename[len(USER_SCOPE) :] if filename.startswith(USER_SCOPE) else filename
    if not bare or ".." in bare or "/" in bare or "\\" in bare or "\x00" in bare:
        raise ValueError(f"invalid artifact name {filename!r}: it must be non-empty without '..', '/' or '\\'")


class BaseArtifactService(ABC):
    """Stores artifacts by (app, user, session, filename), one entry per version."""

    @abstractmethod
    async def save_artifact(
        self, *, app_name: str, user_id: str, session_id: str, filename: str, artifact: Artifact | str | bytes
    ) -> int:
        """Stores a new version and returns its number (0 for the first).

        Raises:
            ValueError: an invalid file name.
        """

    @abstractmethod
    async def load_artifact(
        self, *, app_name: str, user_id: str, session_id: str, filename: str, version: int | None = None
    ) -> Artifact | None:
        """A version (default: the latest), or None when there is none."""

    @abstractmethod
    async def list_artifact_keys(self, *, app_name: str, user_id: str, session_id: str) -> list[str]:
        """The file names visible from a session (its own and the user's), sorted."""

    @abstractmethod
    async def list_versions(self, *, app_name: str, user_id: str, session_id: str, filename: str) -> list[int]:
        """The version numbers of an artifact, ascending (empty when it does not exist)."""

    @abstractmethod
    async def delete_artifact(self, *, app_name: str, user_id: str, session_id: str, filename: str) -> None:
        """Deletes every version (no-op when missing)."""


def _key(app_name: str, user_id: str, session_id: str, filename: str) -> tuple[str, str, str, str]:
    scope = "" if filename.startswith(USER_SCOPE) else session_id
    return (app_name, user_id, scope, filename)


class InMemoryArtifactService(BaseArtifactService):
    """Artifacts in a dict; for tests and single-process apps."""

    def __init__(self) -> None:
        self._store: dict[tuple[str, str, str, str], list[Artifact]] = {}

    async def save_artifact(
        self, *, app_name: str, user_id: str, session_id: str, filename: str, artifact: Artifact | str | bytes
    ) -> int:
        """``BaseArtifactService.save_artifact``: append a version in memory.

        A ``str`` becomes a ``text/plain`` artifact and ``bytes`` an ``application/octet-stream`` one;
        a ``user:`` name is shared by the user's sessions.

        Returns:
            The new version number (0 for the first).

        Raises:
            ValueError: an invalid file name (empty, or with ``..``, ``/``, ``\\`` or NUL).
            TypeError: ``artifact`` is not an ``Artifact``, ``str`` or ``bytes``.
        """
        check_filename(filename)
        versions = self._store.setdefault(_key(app_name, user_id, session_id, filename), [])
        versions.append(as_artifact(artifact))
        return len(versions) - 1

    async def load_artifact(
        self, *, app_name: str, user_id: str, session_id: str, filename: str, version: int | None = None
    ) -> Artifact | None:
        """``BaseArtifactService.load_artifact``: version ``version`` (default the latest), or ``None``.

        Raises:
            ValueError: an invalid file name.
        """
        check_filename(filename)
        versions = self._store.get(_key(app_name, user_id, session_id, filename), [])
        if not versions:
            return None
        if version is None:
            return versions[-1]
        return versions[version] if 0 <= version < len(versions) else None

    async def list_artifact_keys(self, *, app_name: str, user_id: str, session_id: str) -> list[str]:
        """``BaseArtifactService.list_artifact_keys``: the session's and the user's names, sorted."""
        return sorted(
            k[3]
            for k, v in self._store.items()
            if v and k[0] == app_name and k[1] == user_id and k[2] in ("", session_id)
        )

    async def list_versions(self, *, app_name: str, user_id: str, session_id: str, filename: str) -> list[int]:
        """``BaseArtifactService.list_versions``: ``[0, ..., n - 1]`` for ``n`` stored versions.

        Raises:
            ValueError: an invalid file name.
        """
        check_filename(filename)
        return list(range(len(self._store.get(_key(app_name, user_id, session_id, filename), []))))

    async def delete_artifact(self, *, app_name: str, user_id: str, session_id: str, filename: str) -> None:
        """``BaseArtifactService.delete_artifact``: drop every version (no-op when missing).

        Raises:
            ValueError: an invalid file name.
        """
        check_filename(filename)
        self._store.pop(_key(app_name, user_id, session_id, filename), None)


_SAFE = re.compile(r"[^A-Za-z0-9._-]")


def _segment(value: str) -> str:
    """A directory name for an id: safe characters kept, the rest escaped reversibly."""
    return _SAFE.sub(lambda m: f"%{ord(m.group(0)):04x}", value) or "%"


class FileArtifactService(BaseArtifactService):
    """Artifacts as files under ``root``:
    ``<app>/<user>/<session or _user>/<filename>/<version>.bin`` with a ``<version>.json``
    holding the MIME type. Survives restarts; safe for one process at a time.

    Args:
        root: the directory (created if missing).
    """

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)

    def _dir(self, app_name: str, user_id: str, session_id: str, filename: str) -> Path:
        check_filename(filename)
        scope = "_user" if filename.startswith(USER_SCOPE) else "s_" + _segment(session_id)
        return self.root / _segment(app_name) / _segment(user_id) / scope / _segment(filename)

    @staticmethod
    def _versions(folder: Path) -> list[int]:
        if not folder.is_dir():
            return []
        return sorted(int(p.stem) for p in folder.glob("*.bin") if p.stem.isdigit())

    async def save_artifact(
        self, *, app_name: str, user_id: str, session_id: str, filename: str, artifact: Artifact | str | bytes
    ) -> int:
        """``BaseArtifactService.save_artifact`` on disk, in a worker thread.

        The version's bytes go to ``<version>.bin`` (written to a ``.tmp`` file, then renamed)
        and its MIME type and name to ``<version>.json``.

        Returns:
            The new version number (0 for the first).

        Raises:
            ValueError: an invalid file name.
            TypeError: ``artifact`` is not an ``Artifact``, ``str`` or ``bytes``.
            OSError: the file system refused the write.
        """
        art = as_artifact(artifact)
        folder = self._dir(app_name, user_id, session_id, filename)

        def write() -> int:
            folder.mkdir(parents=True, exist_ok=True)
            existing = self._versions(folder)
            version = existing[-1] + 1 if existing else 0
            tmp = folder / f"{version}.tmp"
            tmp.write_bytes(art.data)
            (folder / f"{version}.json").write_text(json.dumps({"mime_type": art.mime_type, "name": filename}))
            tmp.replace(folder / f"{version}.bin")
            return version

        return await anyio.to_thread.run_sync(write)

    async def load_artifact(
        self, *, app_name: str, user_id: str, session_id: str, filename: str, version: int | None = None
    ) -> Artifact | None:
        """``BaseArtifactService.load_artifact`` from disk: a version (default the latest), or ``None``.

        Raises:
            ValueError: an invalid file name.
            OSError: the files cannot be read.
        """
        folder = self._dir(app_name, user_id, session_id, filename)

        def read() -> Artifact | None:
            versions = self._versions(folder)
            if not versions:
                return None
            v = versions[-1] if version is None else version
            data_path = folder / f"{v}.bin"
            if not data_path.is_file():
                return None
            meta = json.loads((folder / f"{v}.json").read_text())
            return Artifact(data=data_path.read_bytes(), mime_type=meta["mime_type"])

        return await anyio.to_thread.run_sync(read)

    async def list_artifact_keys(self, *, app_name: str, user_id: str, session_id: str) -> list[str]:
        """``BaseArtifactService.list_artifact_keys``: the session's and the user's names, sorted.

        Raises:
            OSError: the folders cannot be read.
        """
        base = self.root / _segment(app_name) / _segment(user_id)

        def scan() -> list[str]:
            names: list[str] = []
            for scope in ("_user", "s_" + _segment(session_id)):
                for folder in (base / scope).glob("*") if (base / scope).is_dir() else ():
                    versions = self._versions(folder)
                    if versions:
                        meta = json.loads((folder / f"{versions[-1]}.json").read_text())
                        names.append(meta["name"])
            return sorted(names)

        return await anyio.to_thread.run_sync(scan)

    async def list_versions(self, *, app_name: str, user_id: str, session_id: str, filename: str) -> list[int]:
        """``BaseArtifactService.list_versions``: the stored version numbers, ascending.

        Raises:
            ValueError: an invalid file name.
        """
        folder = self._dir(app_name, user_id, session_id, filename)
        return await anyio.to_thread.run_sync(self._versions, folder)

    async def delete_artifact(self, *, app_name: str, user_id: str, session_id: str, filename: str) -> None:
        """``BaseArtifactService.delete_artifact``: remove the artifact's folder (no-op when missing).

        Raises:
            ValueError: an invalid file name.
            OSError: the files cannot be removed.
        """
        folder = self._dir(app_name, user_id, session_id, filename)

        def remove() -> None:
            if folder.is_dir():
                for p in folder.iterdir():
                    p.unlink()
                folder.rmdir()

        await anyio.to_thread.run_sync(remove)


def encode_for_json(artifact: Artifact) -> dict[str, str]:
    """A JSON-friendly form (base64 data), for scripts and transcripts."""
    return {"mime_type": artifact.mime_type, "data": base64.b64encode(artifact.data).decode()}
