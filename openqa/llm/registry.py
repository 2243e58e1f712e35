"""The backend a command names: an OpenAI-compatible server, a GGUF file, or transformers in process
(``LLMSettings.runs_in`` says which), each opened with the settings it takes."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from openqa.llm.backends import Backend
from openqa.llm.endpoint import EndpointBackend
from openqa.llm.llamacpp import LlamaCppBackend
from openqa.llm.settings import LLMSettings
from openqa.llm.transformers_backend import TransformersBackend

#: How each runner's backend is opened from the settings (and the models folder of hub downloads).
OPENERS: dict[str, Callable[[str, LLMSettings, Path | None], Backend]] = {
    "endpoint": lambda model, s, _: EndpointBackend(s.endpoint or "", model, timeout=s.timeout, retries=s.retries,
                                                    context=s.context),
    # one prompt at a time per copy of the model (--concurrency copies), reusing the previous prompt's rows
    "llama.cpp": lambda model, s, _: LlamaCppBackend(model, context=s.context, threads=s.threads, reuse=s.prompt_reuse,
                                                     engines=s.concurrency),
    # letters in batches of --llm-batch-size prompts
    "transformers": lambda model, s, models_dir: TransformersBackend(model, models_dir, context=s.context,
                                                                     batch_size=s.batch_size),
}

#: The settings a backend is opened with: one opened with the same ones serves every language.
OPENED_WITH = ("model", "endpoint", "context", "timeout", "retries", "threads", "batch_size", "prompt_reuse", "concurrency")


def open_backend(llm: LLMSettings, models_dir: Path | None = None) -> Backend:
    """The backend for ``--model`` (and ``--endpoint``) with the settings of ``llm`` it takes."""
    assert llm.model is not None  # LLMSettings refuses a missing model
    return OPENERS[llm.runs_in](llm.model, llm, models_dir)
