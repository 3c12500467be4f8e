"""The incremental turn slot (issue 54, turn record format 4): what a run's turns share is
stored once per run, not with every turn's slot.

A turn's slot used to hold the system prompt and the whole transcript (8-11 KB of JSON, the
bulk of the record) and was written again at every turn. Format 4 stores them in the
session's content-addressed blobs (``put_blob``; SHA-256 of the bytes):

* ``system_prompt_ref``: the system prompt's UTF-8 bytes, stored once per run;
* ``transcript_refs``: the transcript in chunks, each a JSON list of messages: the
  transcript the run started a turn with (stored at its first turn), then, at each later
  turn, only the messages added since the last chunk (the turn's delta);
* ``transcript``: empty (the record's own list is appended after the chunks when read, so a
  format 3 record, with everything inline, reads the same).

A store without blobs (``put_blob`` not implemented) keeps everything inline, as format 3
did. A model hook may edit earlier messages (``_turn_record`` dumps them all again then):
when the earlier messages are not the ones stored, the run's chunks start again with the
whole transcript as one chunk.
"""

from __future__ import annotations

import hashlib
import operator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pydantic_core

if TYPE_CHECKING:
    from ..sessions import BaseSessionService
    from ..turns._record import TurnRecord

__all__ = ("StoredContext", "load_context", "shared_context")


@dataclass
class StoredContext:
    """What one run stored of its turns' shared context (``Run.stored_context``).

    Attributes:
        prompt / prompt_ref: the system prompt stored, and its blob's digest.
        messages: the transcript messages the chunks hold (the JSON dicts themselves, which
            ``_turn_record`` never changes once dumped).
        refs: the chunks' digests, in order.
        inline: the store has no blobs: every turn keeps its context inline.
    """

    prompt: str | None = None
    prompt_ref: str = ""
    messages: list[dict[str, Any]] = field(default_factory=list)
    refs: list[str] = field(default_factory=list)
    inline: bool = False


async def shared_context(
    service: BaseSessionService,
    key: tuple[str, str, str],
    stored: StoredContext,
    prompt: str,
    transcript: list[dict[str, Any]],
) -> dict[str, Any] | None:
    """The record fields that stand for ``prompt`` and ``transcript`` (the turn's fixed part,
    as ``record_data`` gives it) in format 4, after storing what ``stored`` does not hold yet:
    the prompt when it changed, the messages added since the last chunk as one more chunk.
    None: keep them inline (the store has no blobs).

    Raises:
        SessionStoreError: the store failed.
    """
    if stored.inline:
        return None
    app, user, sid = key
    try:
        if stored.prompt != prompt:
            data = prompt.encode("utf-8", "surrogatepass")
            digest = hashlib.sha256(data).hexdigest()
            await service.put_blob(app_name=app, user_id=user, session_id=sid, digest=digest, data=data)
            stored.prompt, stored.prompt_ref = prompt, digest
        held = stored.messages
        if len(held) > len(transcript) or not all(map(operator.is_, held, transcript)):
            held, stored.refs = [], []  # earlier messages changed (a model hook): start again
            stored.messages = held
        if len(transcript) > len(held):
            data = pydantic_core.to_json(transcript[len(held) :], inf_nan_mode="constants")
            digest = hashlib.sha256(data).hexdigest()
            await service.put_blob(app_name=app, user_id=user, session_id=sid, digest=digest, data=data)
            held.extend(transcript[len(held) :])
            stored.refs.append(digest)
    except NotImplementedError:  # a store without the blob API: everything inline
        stored.inline = True
        return None
    return {
        "system_prompt": "",
        "system_prompt_ref": stored.prompt_ref,
        "transcript": [],
        "transcript_refs": list(stored.refs),
    }


async def load_context(
    service: BaseSessionService | None, key: tuple[str, str, str], record: TurnRecord
) -> tuple[str, list[dict[str, Any]]]:
    """The system prompt and transcript ``record`` stands for: its blobs (format 4) read and
    checked, then its inline messages; a format 3 record's inline fields as they are.

    Raises:
        ValueError: a blob is missing from the store or altered (its SHA-256 differs), or
            holds no list of messages.
        SessionStoreError: the store failed.
    """
    prompt = record.system_prompt
    if record.system_prompt_ref is None and not record.transcript_refs:
        return prompt, list(record.transcript)
    if service is None:
        raise ValueError("the stored turn's context is in the store's blobs, and there is no store")
    if record.system_prompt_ref:
        prompt = (await _blob(service, key, record.system_prompt_ref, "system prompt")).decode("utf-8", "surrogatepass")
    messages: list[dict[str, Any]] = []
    for ref in record.transcript_refs:
        chunk = pydantic_core.from_json(await _blob(service, key, ref, "transcript"))
        if not isinstance(chunk, list) or not all(isinstance(m, dict) for m in chunk):
            raise ValueError(f"the stored turn's transcript blob {ref[:12]} holds no list of messages")
        messages.extend(chunk)
    messages.extend(record.transcript)
    return prompt, messages


async def _blob(service: BaseSessionService, key: tuple[str, str, str], digest: str, what: str) -> bytes:
    app, user, sid = key
    data = await service.get_blob(app_name=app, user_id=user, session_id=sid, digest=digest)
    if data is None or hashlib.sha256(data).hexdigest() != digest:
        raise ValueError(f"the stored turn's {what} (blob {digest[:12]}) is missing from the store, or altered")
    return data
