"""``ServiceAccess``: the artifact, memory and secrets accessors shared by ``ToolContext``
and ``CallbackContext``, so a tool and a callback reach services the same way."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..events import EventActions
    from ..sessions._types import Session
    from ._artifacts import Artifact, BaseArtifactService
    from ._memory import BaseMemoryService, MemoryEntry
    from ._secrets import SecretsProvider

from ..exceptions import ServiceNotConfiguredError

__all__ = ("ServiceAccess", "ServiceNotConfiguredError")


class ServiceAccess:
    """Mixin: needs ``session``, ``actions`` and the three service attributes."""

    actions: EventActions
    artifact_service: BaseArtifactService | None
    memory_service: BaseMemoryService | None
    secrets: SecretsProvider | None

    def _session(self) -> Session:
        return self.session  # type: ignore[attr-defined]

    def _artifacts(self) -> BaseArtifactService:
        if self.artifact_service is None:
            raise ServiceNotConfiguredError("no artifact service: pass Runner(artifact_service=...)")
        return self.artifact_service

    async def save_artifact(self, filename: str, artifact: Artifact | str | bytes) -> int:
        """Saves a new version of ``filename`` and records it in ``actions.artifact_delta``
        (it rides on the next event). Returns the version number."""
        s = self._session()
        version = await self._artifacts().save_artifact(
            app_name=s.app_name, user_id=s.user_id, session_id=s.id, filename=filename, artifact=artifact
        )
        self.actions.artifact_delta[filename] = version
        return version

    async def load_artifact(self, filename: str, version: int | None = None) -> Artifact | None:
        """A version of ``filename`` (default: the latest), or None."""
        s = self._session()
        return await self._artifacts().load_artifact(
            app_name=s.app_name, user_id=s.user_id, session_id=s.id, filename=filename, version=version
        )

    async def list_artifacts(self) -> list[str]:
        """The artifact names visible from this session."""
        s = self._session()
        return await self._artifacts().list_artifact_keys(app_name=s.app_name, user_id=s.user_id, session_id=s.id)

    async def search_memory(self, query: str) -> list[MemoryEntry]:
        """This user's memories matching ``query``, best first."""
        if self.memory_service is None:
            raise ServiceNotConfiguredError("no memory service: pass Runner(memory_service=...)")
        s = self._session()
        return await self.memory_service.search_memory(app_name=s.app_name, user_id=s.user_id, query=query)

    def get_secret(self, name: str) -> str:
        """The secret ``name`` (never show it to the model: values that reach model-facing
        text are redacted).

        Raises:
            SecretNotFoundError: no such secret, or no secrets provider.
        """
        from ._secrets import SecretNotFoundError

        if self.secrets is None:
            raise SecretNotFoundError(f"secret {name!r} is not configured (no Runner(secrets=...))")
        return self.secrets.get_secret(name)
