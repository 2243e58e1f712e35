"""Any OpenAI-compatible server (vLLM, llama.cpp's server, Ollama, ``transformers serve``) over HTTP
(``httpx``, imported when one is opened): what it says about its context and model, and its replies
with retries and backoff."""

from __future__ import annotations

import json
import math
import os
import time
from typing import Any, cast

from openqa.errors import OpenQAError
from openqa.jsonl import decode
from openqa.llm.backends import CHARS_PER_TOKEN, DEFAULT_CONTEXT, ChatBackend, first_line
from openqa.llm.prompts import Messages
from openqa.llm.settings import KEY_VARIABLES, check_endpoint

#: Seconds before the first retry of a 429 or 5xx; each retry waits twice as long (at most ``MAX_WAIT``).
BACKOFF_SECONDS = 1.0
MAX_WAIT = 30.0


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
        base = check_endpoint(url).rstrip("/")
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
            raise OpenQAError(f"cannot reach {self.base} ({first_line(exc) or type(exc).__name__}): is the server "
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
            raise OpenQAError(f"{self.base} sent a reply that is not valid JSON ({exc}; {first_line(response.text, 80)!r}): "
                              "is it an OpenAI-compatible server?") from None

    def _status_message(self, response: Any) -> str:
        try:
            body = response.json()
            error = body.get("error", body) if isinstance(body, dict) else body
            detail = error.get("message") or error.get("detail") if isinstance(error, dict) else error
        except ValueError:
            detail = response.text
        detail = first_line(detail if isinstance(detail, str) else json.dumps(detail))
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
                    raise OpenQAError(f"cannot reach {self.base} ({first_line(exc) or type(exc).__name__})") from None
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
