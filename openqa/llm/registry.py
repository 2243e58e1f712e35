"""The backend a command names: an OpenAI-compatible server, a GGUF file, or transformers in process."""

from __future__ import annotations

from pathlib import Path

from openqa.llm.backends import Backend
from openqa.llm.endpoint import EndpointBackend
from openqa.llm.llamacpp import LlamaCppBackend
from openqa.llm.transformers_backend import TransformersBackend


def open_backend(model: str, endpoint: str | None, *, models_dir: Path | None = None, context: int | None = None,
                 timeout: float = 120.0, retries: int = 4, threads: int = 1, batch_size: int | None = None) -> Backend:
    """The backend for ``--model`` (and ``--endpoint``): a server, a GGUF file, or transformers in process
    (``batch_size``: its prompts a forward for letters; None: its default)."""
    if endpoint:
        return EndpointBackend(endpoint, model, timeout=timeout, retries=retries, context=context)
    if model.lower().endswith(".gguf"):
        return LlamaCppBackend(model, context=context, threads=threads)
    return TransformersBackend(model, models_dir, context=context, batch_size=batch_size)
