"""Where replies come from: a model run in process with transformers, a GGUF file run in process
by llama.cpp (``xllamacpp``, the optional ``llamacpp`` extra), or any OpenAI-compatible server.
Each answers one prompt at a time with either the probability of each option letter as the next
token (``letters``) or a generated reply (``generate``), and counts tokens the way its model does
(a server without a tokenizer: a stated, conservative estimate)."""

from __future__ import annotations

import json
import math
import os
import threading
import time
from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, cast

from openqa.errors import OpenQAError
from openqa.jsonl import decode
from openqa.llm.prompts import Messages

#: Environment variables read, in order, for an endpoint's API key.
KEY_VARIABLES = ("OPENQA_API_KEY", "OPENAI_API_KEY")
#: Seconds before the first retry of a 429 or 5xx; each retry waits twice as long (at most ``MAX_WAIT``).
BACKOFF_SECONDS = 1.0
MAX_WAIT = 30.0
#: Alternatives asked of a server for the first reply token (letter probabilities).
TOP_LOGPROBS = 20
#: Characters per token assumed where no tokenizer is at hand (conservative: English runs about 4).
CHARS_PER_TOKEN = 3
#: Context assumed for a server that does not report its own, and for GGUF files without --context.
DEFAULT_CONTEXT = 4096


@dataclass(frozen=True)
class Request:
    """What one prompt asks for: the letters' probabilities or a reply, and the sampling."""

    scoring: str
    letters: tuple[str, ...]
    max_tokens: int
    temperature: float
    seed: int

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def letter_probabilities(candidates: dict[str, float], letters: tuple[str, ...]) -> dict[str, float]:
    """Probability mass of each letter among next-token ``candidates`` (token text -> probability):
    "A", " A" and the like count for A; normalised over the letters (empty when no letter is there)."""
    mass = dict.fromkeys(letters, 0.0)
    for token, p in candidates.items():
        text = token.replace("Ġ", " ").replace("▁", " ").strip().strip("(").strip()
        if text in mass:
            mass[text] += p
    total = sum(mass.values())
    return {k: v / total for k, v in mass.items()} if total > 0 else {}


def reply_problem(reply: Any) -> str | None:
    """What is wrong with a reply as backends return and the cache keeps it (``text`` a string,
    ``probs`` None or finite probabilities by letter, token counts whole numbers or None), or None."""
    if not isinstance(reply, dict):
        return f"a {type(reply).__name__}, not a reply"
    if not isinstance(reply.get("text"), str):
        return "its text is not a string"
    probs = reply.get("probs")
    if probs is not None and not (isinstance(probs, dict) and all(
            isinstance(v, (int, float)) and math.isfinite(v) and 0 <= v <= 1 for v in probs.values())):
        return "its letter probabilities are not numbers between 0 and 1"
    for key in ("tokens_in", "tokens_out"):
        if reply.get(key) is not None and (not isinstance(reply[key], int) or isinstance(reply[key], bool)):
            return f"{key} is not a whole number"
    return None


class Backend(ABC):
    """A model answering prompts; ``calls`` counts the model calls made (cached replies make none)."""

    kind: str
    #: The model's name as the user gave it (a GGUF file's name).
    name: str
    context: int
    context_source: str
    token_count: str
    #: Where the model runs (device and precision, threads, or a server), for the record.
    runs_on: str

    def __init__(self) -> None:
        self.calls = 0
        self._count_lock = threading.Lock()

    @abstractmethod
    def identity(self) -> dict[str, Any]:
        """What identifies the model in the cache key and the record."""

    @abstractmethod
    def count(self, text: str) -> int:
        """Tokens in ``text`` (this model's tokenizer, or the stated estimate)."""

    @abstractmethod
    def prompt_tokens(self, messages: Messages) -> int:
        """Tokens of the whole prompt the model reads (chat template included where known)."""

    @abstractmethod
    def _reply(self, messages: Messages, request: Request) -> dict[str, Any]:
        """One model call: ``{"text", "probs", "tokens_in", "tokens_out"}``."""

    def reply(self, messages: Messages, request: Request) -> dict[str, Any]:
        """One model call, counted; a reply that is not well formed is an error (never cached)."""
        with self._count_lock:
            self.calls += 1
        reply = self._reply(messages, request)
        problem = reply_problem(reply)
        if problem:
            raise OpenQAError(f"{getattr(self, 'where', self.name)} sent a reply openqa cannot read ({problem})")
        return reply


def _first_line(text: object, limit: int = 200) -> str:
    line = (str(text).strip().splitlines() or [""])[0]
    return line if len(line) <= limit else line[: limit - 3] + "..."


class TransformersBackend(Backend):
    """A causal LM run in process: its chat template, bf16 on a GPU (fp16 where bf16 is not
    supported), fp32 on the CPU; letters from the exact next-token distribution. The weights load
    at the first prompt the cache does not answer (a cached rerun reads only the tokenizer)."""

    kind = "transformers"

    def __init__(self, model: str, models_dir: Path | None = None, context: int | None = None) -> None:
        super().__init__()
        import torch
        from transformers import AutoConfig, AutoTokenizer
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()  # one bar per loaded file is noise beside openqa's own
        self.name = model
        path = Path(model).expanduser()
        if not path.is_dir() and models_dir is not None and (Path(models_dir) / model).is_dir():
            path = Path(models_dir) / model
        self.source = str(path.resolve()) if path.is_dir() else model
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(self.source)
        except (OSError, ValueError) as exc:
            raise OpenQAError(f"cannot load model {model!r} ({_first_line(exc)}): give a local folder or a hub id "
                              "reachable from here") from None
        if not getattr(self.tokenizer, "chat_template", None):
            raise OpenQAError(f"model {model!r} has no chat template: --method llm needs an instruction (chat) model")
        self.device = "cuda" if torch.cuda.is_available() else "cpu"
        self.dtype = torch.float32
        if self.device == "cuda":
            self.dtype = torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
        try:
            config = AutoConfig.from_pretrained(self.source)
        except (OSError, ValueError) as exc:
            raise OpenQAError(f"cannot load model {model!r} ({_first_line(exc)})") from None
        self._model: Any = None
        limit = getattr(config, "max_position_embeddings", None)
        self.context = context or limit or DEFAULT_CONTEXT
        self.context_source = "--context" if context else ("model config max_position_embeddings" if limit
                                                            else f"assumed {DEFAULT_CONTEXT} (give --context)")
        self.token_count = "the model's own tokenizer"
        self.runs_on = f"transformers, {self.device}, {str(self.dtype).removeprefix('torch.')}"
        self._torch = torch
        #: One thread at a time uses the tokenizer and the weights (a fast tokenizer shared between
        #: threads fails with "Already borrowed"; the server scores on several threads).
        self._lock = threading.RLock()

    @property
    def model(self) -> Any:
        """The weights, loaded at first use."""
        if self._model is None:
            from transformers import AutoModelForCausalLM

            try:
                # transformers wraps Module.to with functools.wraps, whose type mypy does not bind (python/mypy#17166)
                self._model = AutoModelForCausalLM.from_pretrained(self.source, dtype=self.dtype).to(self.device).eval()  # type: ignore[arg-type]
            except (OSError, ValueError) as exc:
                raise OpenQAError(f"cannot load model {self.name!r} as a causal LM ({_first_line(exc)})") from None
        return self._model

    def identity(self) -> dict[str, Any]:
        return {"kind": self.kind, "model": self.source}

    def count(self, text: str) -> int:
        with self._lock:
            return len(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def _encode(self, messages: Messages) -> Any:
        text = self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        ids = self.tokenizer(text, add_special_tokens=False, return_tensors="pt")
        return ids["input_ids"].to(self.device), ids["attention_mask"].to(self.device)

    def prompt_tokens(self, messages: Messages) -> int:
        with self._lock:
            return int(self._encode(messages)[0].shape[1])

    def _letter_ids(self, letter: str) -> list[int]:
        ids = {enc[0] for variant in (letter, f" {letter}")
               for enc in [self.tokenizer.encode(variant, add_special_tokens=False)] if len(enc) == 1}
        if not ids:
            raise OpenQAError(f"the tokenizer of {self.name!r} has no single token for the letter {letter}: "
                              "use --scoring generate")
        return sorted(ids)

    def _reply(self, messages: Messages, request: Request) -> dict[str, Any]:
        with self._lock:
            return self._locked_reply(messages, request)

    def _locked_reply(self, messages: Messages, request: Request) -> dict[str, Any]:
        torch = self._torch
        input_ids, mask = self._encode(messages)
        with torch.inference_mode():
            if request.scoring == "letters":
                logits = self.model(input_ids=input_ids, attention_mask=mask).logits[0, -1].float()
                probs = torch.softmax(logits, dim=-1)
                mass = {letter: float(probs[self._letter_ids(letter)].sum()) for letter in request.letters}
                total = sum(mass.values())
                best = int(probs.argmax())
                return {"text": self.tokenizer.decode([best]), "tokens_in": int(input_ids.shape[1]), "tokens_out": 1,
                        "probs": {k: v / total for k, v in mass.items()} if total > 0 else {},
                        "letter_mass": round(total, 6)}
            torch.manual_seed(request.seed)
            sample = request.temperature > 0
            out = self.model.generate(
                input_ids=input_ids, attention_mask=mask, max_new_tokens=request.max_tokens, do_sample=sample,
                **({"temperature": request.temperature} if sample else {"temperature": None, "top_p": None, "top_k": None}),
                pad_token_id=self.tokenizer.pad_token_id or self.tokenizer.eos_token_id,
            )
        new = out[0, input_ids.shape[1]:]
        return {"text": self.tokenizer.decode(new, skip_special_tokens=True), "probs": None,
                "tokens_in": int(input_ids.shape[1]), "tokens_out": int(new.shape[0])}


class ChatBackend(Backend):
    """Replies from the OpenAI chat-completions API (a server, or llama.cpp in process): letters from
    the first token's ``top_logprobs``; a server that gives none is refused with a one-line error."""

    where: str
    #: Whether the model runs in llama.cpp, whose prompt cache is turned off in every request
    #: (``cache_prompt: false``): reusing the previous request's shared prefix changes the letter
    #: probabilities of the next (5 of 20 letters differed, by up to 0.07), so a run would depend on
    #: the order of its requests.
    llama_cpp: bool = False

    @abstractmethod
    def _post(self, body: dict[str, Any]) -> dict[str, Any]:
        """Send one chat-completions request; its decoded reply."""

    @property
    def prompt_cache(self) -> str:
        """What the record says about the server's prompt cache (reproducibility)."""
        if self.llama_cpp:
            return "off: llama.cpp is sent cache_prompt false with every request (replies do not depend on the one before)"
        return ("the server's own: openqa cannot turn off a prompt cache of a server other than llama.cpp; one that "
                "reuses a shared prefix may give other probabilities for the same prompt (the reply cache replays the first)")

    def _reply(self, messages: Messages, request: Request) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.name, "messages": messages, "max_tokens": request.max_tokens,
                                "temperature": request.temperature, "seed": request.seed}
        if self.llama_cpp:
            body["cache_prompt"] = False
        if request.scoring == "letters":
            body.update(logprobs=True, top_logprobs=TOP_LOGPROBS)
        data = self._post(body)
        try:
            choice = data["choices"][0]
            text = choice["message"].get("content") or ""
        except (KeyError, IndexError, TypeError, AttributeError):
            raise OpenQAError(f"{self.where} sent a reply without choices[0].message: not an OpenAI-compatible "
                              f"chat completion ({_first_line(json.dumps(data))})") from None
        usage = data.get("usage") or {}
        out = {"text": text, "probs": None, "tokens_in": usage.get("prompt_tokens"),
               "tokens_out": usage.get("completion_tokens")}
        timings = data.get("timings")  # llama.cpp's own time for the prompt and the reply
        spent: list[Any] = [timings.get(k) for k in ("prompt_ms", "predicted_ms")] if isinstance(timings, dict) else []
        if spent and all(isinstance(v, (int, float)) and math.isfinite(v) and v >= 0 for v in spent):
            out["model_ms"] = round(sum(spent), 3)
        if request.scoring == "letters":
            content = (choice.get("logprobs") or {}).get("content") or []
            if not content or "top_logprobs" not in content[0]:
                raise OpenQAError(f"{self.where} returned no logprobs, so letter probabilities cannot be read: "
                                  "use --scoring generate (or a server that returns top_logprobs, such as vLLM or llama.cpp)")
            top: dict[str, float] = {}
            try:
                for alt in content[0]["top_logprobs"]:
                    top[str(alt["token"])] = top.get(str(alt["token"]), 0.0) + math.exp(float(alt["logprob"]))
            except (KeyError, TypeError, ValueError, OverflowError):
                raise OpenQAError(f"{self.where} sent top_logprobs that are not token/logprob pairs "
                                  f"({_first_line(json.dumps(content[0].get('top_logprobs')), 120)})") from None
            out["probs"] = letter_probabilities(top, request.letters)
        return out


def server_context(entry: dict[str, Any], props: dict[str, Any], probe: dict[str, Any] | None) -> tuple[int | None, str]:
    """The context a server runs its model with, and where it said so: llama.cpp's ``meta.n_ctx`` or
    ``/props``, vLLM's ``max_model_len``, a ``context_length``; the context the model was trained
    with (``n_ctx_train``) only where nothing else is said (llama.cpp may run fewer tokens)."""
    meta = given if isinstance(given := entry.get("meta"), dict) else {}
    settings = props.get("default_generation_settings")
    candidates = (
        (meta.get("n_ctx"), "meta.n_ctx"),
        (props.get("n_ctx"), "/props n_ctx"),
        (settings.get("n_ctx") if isinstance(settings, dict) else None, "/props n_ctx"),
        (entry.get("max_model_len"), "max_model_len"),
        ((probe or {}).get("max_model_len"), "/tokenize max_model_len"),
        (entry.get("context_length"), "context_length"),
        (meta.get("n_ctx_train"), "meta.n_ctx_train: the context the model was trained with"),
    )
    for value, where in candidates:
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value, where
    return None, ""


#: Fields of a server's model entry that change on every start, not with the weights.
VOLATILE_FIELDS = ("created", "object", "permission", "id", "aliases", "tags")


def model_fingerprint(entry: dict[str, Any], props: dict[str, Any]) -> dict[str, Any]:
    """What a server says about the model it runs, for the reply cache's key: its ``/v1/models``
    entry without the fields that change on every start (llama.cpp's ``meta``: parameters, size,
    quantisation; vLLM's ``root``), and llama.cpp's model file and build from ``/props``. Replies of
    a server restarted with other weights under the same name are then never replayed."""
    said = {k: v for k, v in entry.items() if k not in VOLATILE_FIELDS}
    said.update({k: props[k] for k in ("model_path", "build_info") if k in props})
    return {"served": said} if said else {}


class EndpointBackend(ChatBackend):
    """Any OpenAI-compatible server (vLLM, llama.cpp's server, Ollama, ``transformers serve``), over
    HTTP with retries and backoff on 429 and 5xx and a per-request timeout; the key comes from
    ``$OPENQA_API_KEY`` (else ``$OPENAI_API_KEY``). Tokens are counted by the server's own
    ``/tokenize`` where it has one (vLLM, llama.cpp's server; each text once), else estimated."""

    kind = "endpoint"

    def __init__(self, url: str, model: str, timeout: float = 120.0, retries: int = 4, context: int | None = None) -> None:
        super().__init__()
        import httpx

        self._httpx = httpx
        base = url.rstrip("/")
        if not base.startswith(("http://", "https://")):
            raise OpenQAError(f"--endpoint {url!r} is not an http:// or https:// URL")
        self.base = base if base.endswith("/v1") else f"{base}/v1"
        self.where = self.base
        self.name = model
        self.runs_on = "an OpenAI-compatible server"
        self.retries = retries
        key = next((os.environ[v] for v in KEY_VARIABLES if os.environ.get(v)), None)
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self.client = httpx.Client(base_url=self.base, headers=headers, timeout=timeout)
        self.timeout = timeout
        listed = self._models()
        ids = [m.get("id") for m in listed if isinstance(m, dict)]
        entries = [m for m in listed if isinstance(m, dict)]
        entry = next((m for m in entries if m.get("id") == model), None) or next(
            (m for m in entries if str(m.get("id")).endswith(model) or model.endswith(str(m.get("id")))), None)
        if ids and entry is None:
            shown = ", ".join(map(str, ids[:5])) + (", ..." if len(ids) > 5 else "")
            raise OpenQAError(f"unknown model {model!r} at {self.base}: the server offers {shown}")
        entry = entry or {}
        props = self._props()
        self.llama_cpp = entry.get("owned_by") == "llamacpp" or "default_generation_settings" in props
        if self.llama_cpp:
            self.runs_on = "llama.cpp's server"
        self._counts: dict[str, int] = {}
        probe = self._tokenize("a b")
        self.server_tokens = probe is not None
        reported, where = server_context(entry, props, probe)
        self.context = context or reported or DEFAULT_CONTEXT
        self.context_source = ("--context" if context else f"the server ({where})" if reported
                               else f"assumed {DEFAULT_CONTEXT}: the server does not say (give --context)")
        self._identity = {"kind": self.kind, "server": self.base, "model": model, **model_fingerprint(entry, props),
                          **({"prompt_cache": False} if self.llama_cpp else {})}
        self.token_count = ("the server's /tokenize (the model's own tokenizer; 8 tokens per message for the chat "
                            "template)" if self.server_tokens else f"estimated: 1 token per {CHARS_PER_TOKEN} characters "
                            "(the server has no /tokenize; conservative for English)")

    def _tokenize(self, text: str) -> dict[str, Any] | None:
        """The server's ``/tokenize`` of ``text`` (beside ``/v1``, as vLLM and llama.cpp serve it), or
        None where there is none."""
        try:
            response = self.client.post(f"{self.base.removesuffix('/v1')}/tokenize", json={"model": self.name, "prompt": text,
                                                                                        "content": text})
            data = decode(response.text) if response.status_code == 200 else None
        except (self._httpx.HTTPError, ValueError):
            return None
        return data if isinstance(data, dict) and isinstance(data.get("tokens"), list) else None

    def identity(self) -> dict[str, Any]:
        return self._identity

    def _props(self) -> dict[str, Any]:
        """llama.cpp's ``/props`` (beside ``/v1``): its running context and model file; empty elsewhere."""
        try:
            response = self.client.get(f"{self.base.removesuffix('/v1')}/props")
            data = decode(response.text) if response.status_code == 200 else None
        except (self._httpx.HTTPError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def count(self, text: str) -> int:
        if not self.server_tokens:
            return math.ceil(len(text) / CHARS_PER_TOKEN)
        if text not in self._counts:
            reply = self._tokenize(text)
            if reply is None:
                raise OpenQAError(f"{self.base.removesuffix('/v1')}/tokenize stopped answering")
            self._counts[text] = len(reply["tokens"])
        return self._counts[text]

    def prompt_tokens(self, messages: Messages) -> int:
        return sum(self.count(m["content"]) + 8 for m in messages)

    def _models(self) -> list[Any]:
        """The server's model list (one request, no retries: an unreachable server fails at once)."""
        try:
            response = self.client.get("/models")
        except self._httpx.TransportError as exc:
            raise OpenQAError(f"cannot reach {self.base} ({_first_line(exc) or type(exc).__name__}): is the server "
                              "running at that address?") from None
        if response.status_code == 404:
            return []  # a server without the list (the first request will say more)
        data = self._decode(response)
        models = data.get("data") if isinstance(data, dict) else None
        return models if isinstance(models, list) else []

    def _decode(self, response: Any) -> dict[str, Any]:
        """The JSON body of a successful response, or the one-line error its status calls for."""
        if response.status_code >= 400:
            raise OpenQAError(self._status_message(response))
        try:
            return cast(dict[str, Any], decode(response.text))
        except ValueError as exc:  # not JSON, or nested past the recursion limit
            raise OpenQAError(f"{self.base} sent a reply that is not JSON ({exc}; {_first_line(response.text, 80)!r}): "
                              "is it an OpenAI-compatible server?") from None

    def _status_message(self, response: Any) -> str:
        try:
            body = response.json()
            error = body.get("error", body) if isinstance(body, dict) else body
            detail = error.get("message") or error.get("detail") if isinstance(error, dict) else error
        except ValueError:
            detail = response.text
        detail = _first_line(detail if isinstance(detail, str) else json.dumps(detail))
        status = response.status_code
        if status in (401, 403):
            return (f"{self.base} refused the request ({status}: {detail}): set the API key in "
                    f"${KEY_VARIABLES[0]} (or ${KEY_VARIABLES[1]})")
        lowered = detail.lower()
        if any(w in lowered for w in ("context", "too long", "maximum", "exceeds")):
            return (f"the prompt does not fit the model's context ({status}: {detail}); lower --evidence-tokens "
                    "or give the server's context with --context")
        if status == 404:
            return f"{self.base} answered 404 ({detail}): unknown model {self.name!r}, or not an OpenAI-compatible server"
        return f"{self.base} answered {status}: {detail}"

    def _post(self, body: dict[str, Any]) -> dict[str, Any]:
        httpx = self._httpx
        for attempt in range(self.retries + 1):
            wait = min(MAX_WAIT, BACKOFF_SECONDS * 2**attempt)
            try:
                response = self.client.post("/chat/completions", json=body)
            except httpx.TimeoutException:
                if attempt == self.retries:
                    raise OpenQAError(f"{self.base} did not answer within --timeout {self.timeout:g} s "
                                      f"({self.retries + 1} tries)") from None
            except httpx.TransportError as exc:
                if attempt == self.retries:
                    raise OpenQAError(f"cannot reach {self.base} ({_first_line(exc) or type(exc).__name__})") from None
            else:
                if response.status_code != 429 and response.status_code < 500:
                    return self._decode(response)
                if attempt == self.retries:
                    raise OpenQAError(f"{self._status_message(response)} (after {self.retries + 1} tries)")
                after = response.headers.get("retry-after")
                if after and after.replace(".", "", 1).isdigit():
                    wait = min(MAX_WAIT, float(after))
            time.sleep(wait)
        raise AssertionError("unreachable")


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


def serve_gguf(path: Path, port: int, context: int = DEFAULT_CONTEXT, threads: int = 1, alias: str | None = None) -> Any:
    """llama.cpp's own HTTP server (OpenAI-compatible ``/v1``, ``/props``, ``/tokenize``) for a GGUF
    file on 127.0.0.1:``port``, with the parameters openqa uses in process; it serves until the
    returned object is released. For comparing an endpoint with the same model in process."""
    import xllamacpp

    params = llama_params(xllamacpp, Path(path), context, threads)
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
                    raise OpenQAError(f"llama.cpp cannot load {self.name} ({_first_line(exc) or type(exc).__name__})") from None
            data = self.server.handle_chat_completions(body)
        if isinstance(data, dict) and data.get("error"):
            error = data["error"]
            raise OpenQAError(f"llama.cpp: {_first_line(error.get('message') if isinstance(error, dict) else error)}")
        return cast(dict[str, Any], data)


def open_backend(model: str, endpoint: str | None, *, models_dir: Path | None = None, context: int | None = None,
                 timeout: float = 120.0, retries: int = 4, threads: int = 1) -> Backend:
    """The backend for ``--model`` (and ``--endpoint``): a server, a GGUF file, or transformers in process."""
    if endpoint:
        return EndpointBackend(endpoint, model, timeout=timeout, retries=retries, context=context)
    if model.lower().endswith(".gguf"):
        return LlamaCppBackend(model, context=context, threads=threads)
    return TransformersBackend(model, models_dir, context=context)
