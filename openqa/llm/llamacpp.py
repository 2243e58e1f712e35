"""A GGUF file run by llama.cpp (``xllamacpp``, the optional ``llamacpp`` extra, imported when one
is opened): in process, or behind llama.cpp's own HTTP server (``serve_gguf``) with the same
parameters. In process, a prompt reuses the rows of the previous one that llama.cpp keeps, where
that gives the bits of a cold run (``openqa.llm.prefix``): the shared system prompt is not
computed again for every question."""

from __future__ import annotations

import hashlib
import math
import queue
import shutil
import tempfile
import threading
from pathlib import Path
from typing import Any, cast

from openqa import arguments as arg
from openqa.config import user_cache_dir
from openqa.errors import OpenQAError
from openqa.extras import needs
from openqa.llm.backends import CHARS_PER_TOKEN, DEFAULT_CONTEXT, ChatBackend, first_line
from openqa.llm.prefix import UBATCH, Reuse, failed
from openqa.llm.prompts import Messages
from openqa.signals import native_call


def llama_params(xllamacpp: Any, file: Path, context: int, threads: int) -> Any:
    """llama.cpp's parameters for a GGUF file as openqa runs it: one sequence, ``threads`` threads,
    micro-batches of ``prefix.UBATCH`` rows (llama.cpp's default, which ``prefix`` plans with), no
    host-memory prompt cache (it could bring back rows openqa did not plan), no warm-up, quiet. The
    same in process and behind ``serve_gguf``, so both give the same numbers."""
    params = xllamacpp.CommonParams()
    params.model.path = str(file)
    params.n_ctx = context
    params.n_parallel = 1
    params.n_ubatch = UBATCH
    params.cache_ram_mib = 0
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
    check_gguf(file, str(file))
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
    try:
        return xllamacpp.Server(params)
    except RuntimeError as exc:  # llama.cpp could not load the file or listen on the port
        raise OpenQAError(f"llama.cpp cannot serve {file.name} on port {port} ({arg.shown(exc, 200)})") from None


def check_gguf(file: Path, shown: str) -> None:
    """Refuse a file that does not begin as a GGUF file does (one line, naming it as ``shown``)."""
    try:
        with open(file, "rb") as handle:
            magic = handle.read(4)
    except OSError as exc:
        raise OpenQAError(f"{shown}: cannot read it ({exc.strerror or exc})") from None
    if magic != b"GGUF":
        raise OpenQAError(f"{shown}: not a GGUF file")


#: Bytes of a GGUF file's start that, with its size, name its tokenizer's kept copy: the file's
#: metadata, which holds the vocabulary, merges and chat template, comes first.
TOKENIZER_KEY_BYTES = 32 << 20


def kept_tokenizer(file: Path) -> Path | None:
    """Where the tokenizer of the GGUF ``file`` is kept once read (None without a cache folder):
    named by the sha256 of the file's size, its first ``TOKENIZER_KEY_BYTES`` and the version of
    transformers that converts it, so a copy of the file finds it and another file never does."""
    import transformers

    folder = user_cache_dir("tokenizers")
    if folder is None:
        return None
    digest = hashlib.sha256(f"{file.stat().st_size}:{transformers.__version__}:".encode())
    try:
        with open(file, "rb") as f:
            digest.update(f.read(TOKENIZER_KEY_BYTES))
    except OSError:
        return None
    return folder / f"gguf-{digest.hexdigest()[:24]}"


def keep(tokenizer: Any, folder: Path) -> None:
    """Save ``tokenizer`` as ``folder``, whole or not at all (written beside it, then renamed; a
    copy another process kept first stays); a folder that cannot be written keeps nothing."""
    scratch = None
    try:
        scratch = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", dir=folder.parent))
        tokenizer.save_pretrained(str(scratch))
        scratch.rename(folder)
        scratch = None
    except Exception:  # noqa: BLE001 (keeping it only saves time: any failure keeps nothing)
        pass
    finally:
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)


class Engine:
    """One copy of the model in llama.cpp (``server``, loaded at its first prompt) and, where prompts
    reuse rows, what its one sequence holds (``reuse``)."""

    def __init__(self, reuse: bool) -> None:
        self.server: Any = None
        self.reuse = Reuse() if reuse else None


class LlamaCppBackend(ChatBackend):
    """A GGUF file run in process by llama.cpp (``xllamacpp``): one thread by default (spinning
    threads collapse on a loaded machine), and ``engines`` copies of the model answering prompts at
    once (``--concurrency``; each its own memory); tokens counted with the file's own tokenizer
    (read by transformers through ``gguf``), which also tells which rows of the previous prompt a
    prompt may reuse (``reuse``; none without the tokenizer). llama.cpp loads the file at the first
    prompt the cache does not answer."""

    kind = "gguf"

    def __init__(self, path: str, context: int | None = None, threads: int = 1, reuse: bool = True, engines: int = 1) -> None:
        super().__init__()
        file = Path(path).expanduser()
        if not file.is_file():
            raise OpenQAError(f"{path}: GGUF file not found")
        check_gguf(file, path)
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
        copies = f", {engines} copies of the model at once" if engines > 1 else ""
        self.runs_on = f"llama.cpp (xllamacpp), {threads} thread{'s' if threads > 1 else ''}{copies}"
        self._params = params
        self._xllamacpp = xllamacpp
        self.tokenizer = self._tokenizer()
        self.token_count = ("the GGUF file's own tokenizer (via transformers and gguf)" if self.tokenizer
                            else f"estimated: 1 token per {CHARS_PER_TOKEN} characters (the file's tokenizer could not be read)")
        self._tokens = threading.Lock()  # the tokenizer, one thread at a time ("Already borrowed")
        #: Whether prompts reuse the previous prompt's exact rows: where asked for and the tokenizer was read.
        self.reuse = bool(reuse and self.tokenizer is not None and getattr(self.tokenizer, "chat_template", None))
        #: The copies of the model not answering a prompt now (each answers one at a time).
        self.engines: queue.SimpleQueue[Engine] = queue.SimpleQueue()
        for _ in range(engines):
            self.engines.put(Engine(self.reuse))

    def _tokenizer(self) -> Any:
        """The file's tokenizer through transformers' GGUF reader (10-30 s on two cores), kept once
        read in this user's cache folder (``kept_tokenizer``: read again in about 2 s), or None when
        it cannot be read."""
        try:
            from transformers import AutoTokenizer
        except ImportError:
            return None
        kept = kept_tokenizer(self.file)
        if kept is not None and kept.is_dir():
            try:
                return AutoTokenizer.from_pretrained(str(kept))
            except Exception:  # noqa: BLE001 (a damaged copy: read the file again, and keep it anew)
                shutil.rmtree(kept, ignore_errors=True)
        try:
            tokenizer = AutoTokenizer.from_pretrained(str(self.file.parent), gguf_file=self.file.name)
        except Exception:  # noqa: BLE001 (any failure: fall back to the stated estimate)
            return None
        if kept is not None:
            keep(tokenizer, kept)
        return tokenizer

    def identity(self) -> dict[str, Any]:
        # "prompt_cache": False: a reply does not depend on the request before it (replies made
        # before llama.cpp's own prompt cache was turned off did). The exact reuse of rows keeps
        # that true, so it leaves the key alone.
        return {"kind": self.kind, "file": self.name, "bytes": self.file.stat().st_size, "prompt_cache": False}

    @property
    def prompt_cache(self) -> str:
        if not self.reuse:
            return super().prompt_cache
        return ("exact reuse: a prompt reuses the rows of the previous one llama.cpp holds only where they give the bits "
                "of a cold run (openqa.llm.prefix), so replies do not depend on the one before")

    def count(self, text: str) -> int:
        if self.tokenizer is None:
            return math.ceil(len(text) / CHARS_PER_TOKEN)
        with self._tokens:
            return len(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def prompt_ids(self, messages: Messages) -> list[int] | None:
        """The prompt's tokens as the file's chat template and tokenizer give them (None without them)."""
        if self.tokenizer is None or not getattr(self.tokenizer, "chat_template", None):
            return None
        with self._tokens:
            text = self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
            return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def prompt_tokens(self, messages: Messages) -> int:
        ids = self.prompt_ids(messages)
        return len(ids) if ids is not None else sum(self.count(m["content"]) + 4 for m in messages) + 2

    def _post(self, body: dict[str, Any]) -> dict[str, Any]:
        engine = self.engines.get()  # waits for a free copy
        try:
            with native_call():  # a stop does not wait for the prompt to end (see native_call)
                data = self._ask(engine, body)
        finally:
            self.engines.put(engine)
        if failed(data):
            error = data["error"]
            raise OpenQAError(f"llama.cpp: {first_line(error.get('message') if isinstance(error, dict) else error)}")
        return cast(dict[str, Any], data)

    def _ask(self, engine: Engine, body: dict[str, Any]) -> Any:
        """llama.cpp's reply to ``body`` from ``engine`` (loading its copy of the model first)."""
        if engine.server is None:
            try:
                engine.server = self._xllamacpp.Server(self._params)
            except Exception as exc:  # noqa: BLE001 (llama.cpp's own failure, said in one line)
                raise OpenQAError(f"llama.cpp cannot load {self.name} ({first_line(exc) or type(exc).__name__})") from None
        if self.reuse and engine.reuse is not None:
            data = engine.reuse.ask(engine.server, body, self.prompt_ids(body["messages"]) or [])
            self.reuse = self.reuse and engine.reuse.on  # off for good where llama.cpp's tokens are not the tokenizer's
            return data
        return engine.server.handle_chat_completions(body)
