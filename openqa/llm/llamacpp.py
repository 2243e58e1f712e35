"""A GGUF file run by llama.cpp (``xllamacpp``, the optional ``llamacpp`` extra, imported when one
is opened): in process, or behind llama.cpp's own HTTP server (``serve_gguf``) with the same
parameters."""

from __future__ import annotations

import math
import threading
from pathlib import Path
from typing import Any, cast

from openqa import arguments as arg
from openqa.errors import OpenQAError
from openqa.extras import needs
from openqa.llm.backends import CHARS_PER_TOKEN, DEFAULT_CONTEXT, ChatBackend, first_line
from openqa.llm.prompts import Messages


def llama_params(xllamacpp: Any, file: Path, context: int, threads: int) -> Any:
    """llama.cpp's parameters for a GGUF file as openqa runs it: one sequence, ``threads`` threads,
    no warm-up, quiet. The same in process and behind ``serve_gguf``, so both give the same numbers."""
    params = xllamacpp.CommonParams()
    params.model.path = str(file)
    params.n_ctx = context
    params.n_parallel = 1
    params.cpuparams.n_threads = threads
    params.cpuparams_batch.n_threads = threads
    params.warmup = False
    params.verbosity = -1
    return params


def serve_gguf(path: str | Path, port: int, context: int = DEFAULT_CONTEXT, threads: int = 1, alias: str | None = None) -> Any:
    """llama.cpp's own HTTP server (OpenAI-compatible ``/v1``, ``/props``, ``/tokenize``) for a GGUF
    file on 127.0.0.1:``port``, with the parameters openqa uses in process, so that an endpoint
    (``LLMSettings(endpoint=...)``) and the same model in process can be compared. It serves until
    the returned object is released.

    :param path: the ``.gguf`` file.
    :param port: the loopback port to listen on.
    :param context: the context in tokens.
    :param threads: llama.cpp's threads.
    :param alias: the model name the server lists (default: the file's).
    :returns: the running server (``listening_address`` is its URL).
    :raises OpenQAError: on a missing file, impossible numbers or a missing ``llamacpp`` extra (one line)."""
    file = arg.path("path", path)
    if file is None or not file.is_file():
        raise OpenQAError(f"GGUF file not found: {str(file)!r}")
    arg.whole("port", port, 1, 65535)
    arg.whole("context", context, 64)
    arg.whole("threads", threads, 1)
    arg.optional_text("alias", alias)
    with needs("serve_gguf", "llamacpp"):
        import xllamacpp

    params = llama_params(xllamacpp, file, context, threads)
    params.hostnames = ["127.0.0.1"]
    params.port = port
    params.n_threads_http = 2
    params.endpoint_props = True
    if alias:
        params.model_alias = {alias}  # a set of names
    return xllamacpp.Server(params)


class LlamaCppBackend(ChatBackend):
    """A GGUF file run in process by llama.cpp (``xllamacpp``): one thread by default (spinning
    threads collapse on a loaded machine); tokens counted with the file's own tokenizer (read by
    transformers through ``gguf``). llama.cpp loads the file at the first prompt the cache does not answer."""

    kind = "gguf"

    def __init__(self, path: str, context: int | None = None, threads: int = 1) -> None:
        super().__init__()
        file = Path(path).expanduser()
        if not file.is_file():
            raise OpenQAError(f"{path}: GGUF file not found")
        with open(file, "rb") as handle:
            if handle.read(4) != b"GGUF":
                raise OpenQAError(f"{path}: not a GGUF file")
        try:
            import xllamacpp
        except ImportError:
            raise OpenQAError("a .gguf model needs llama.cpp: pip install 'openqa-medqa[llamacpp]' (xllamacpp)") from None
        self.file = file.resolve()
        self.name = self.where = file.name
        self.context = context or DEFAULT_CONTEXT
        self.context_source = "--context" if context else f"default for GGUF files ({DEFAULT_CONTEXT}; give --context)"
        params = llama_params(xllamacpp, self.file, self.context, threads)
        self.threads = threads
        self.llama_cpp = True
        self.runs_on = f"llama.cpp (xllamacpp), {threads} thread{'s' if threads > 1 else ''}"
        self._params = params
        self._xllamacpp = xllamacpp
        self.server: Any = None
        self.tokenizer = self._tokenizer()
        self.token_count = ("the GGUF file's own tokenizer (via transformers and gguf)" if self.tokenizer
                            else f"estimated: 1 token per {CHARS_PER_TOKEN} characters (the file's tokenizer could not be read)")
        self._lock = threading.Lock()
        self._tokens = threading.Lock()  # the tokenizer, one thread at a time ("Already borrowed")

    def _tokenizer(self) -> Any:
        """The file's tokenizer through transformers' GGUF reader, or None when it cannot be read."""
        try:
            from transformers import AutoTokenizer

            return AutoTokenizer.from_pretrained(str(self.file.parent), gguf_file=self.file.name)
        except Exception:  # noqa: BLE001 (any failure: fall back to the stated estimate)
            return None

    def identity(self) -> dict[str, Any]:
        # "prompt_cache": replies made before it was turned off depended on the request before them
        return {"kind": self.kind, "file": self.name, "bytes": self.file.stat().st_size, "prompt_cache": False}

    def count(self, text: str) -> int:
        if self.tokenizer is None:
            return math.ceil(len(text) / CHARS_PER_TOKEN)
        with self._tokens:
            return len(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def prompt_tokens(self, messages: Messages) -> int:
        if self.tokenizer is None or not getattr(self.tokenizer, "chat_template", None):
            return sum(self.count(m["content"]) + 4 for m in messages) + 2
        with self._tokens:
            text = self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        return self.count(text)

    def _post(self, body: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            if self.server is None:
                try:
                    self.server = self._xllamacpp.Server(self._params)
                except Exception as exc:  # noqa: BLE001 (llama.cpp's own failure, said in one line)
                    raise OpenQAError(f"llama.cpp cannot load {self.name} ({first_line(exc) or type(exc).__name__})") from None
            data = self.server.handle_chat_completions(body)
        if isinstance(data, dict) and data.get("error"):
            error = data["error"]
            raise OpenQAError(f"llama.cpp: {first_line(error.get('message') if isinstance(error, dict) else error)}")
        return cast(dict[str, Any], data)
