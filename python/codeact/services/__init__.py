"""Services a run can reach from tools and callbacks: artifacts (versioned files), memory
(searchable past conversations) and secrets (values tools need but the model never sees)."""

from ._access import ServiceAccess
from ._artifacts import Artifact, BaseArtifactService, FileArtifactService, InMemoryArtifactService
from ._memory import BaseMemoryService, InMemoryMemoryService, MemoryEntry
from ._secrets import SecretNotFoundError, SecretsProvider

__all__ = (
    "Artifact",
    "BaseArtifactService",
    "BaseMemoryService",
    "FileArtifactService",
    "InMemoryArtifactService",
    "InMemoryMemoryService",
    "MemoryEntry",
    "SecretNotFoundError",
    "SecretsProvider",
    "ServiceAccess",
)
