"""Where replies come from: the interface every backend answers through (``Backend``), what one
prompt asks for (``Request``), and the chat-completions replies shared by llama.cpp in process and
OpenAI-compatible servers (``ChatBackend``). The backends live one per module:
``transformers_backend.py`` (a model run in process with transformers), ``llamacpp.py`` (a GGUF
file run in process by llama.cpp, ``xllamacpp``, the optional ``llamacpp`` extra) and
``endpoint.py`` (any OpenAI-compatible server); ``registry.py`` opens the one a command names.
Each answers prompts with either the probability of each option letter as the next token
(``letters``) or a generated reply (``generate``), one at a time unless it batches them (``replies``:
transformers scores letters in padded batches on a GPU), and counts tokens the way its model does
(a server without a tokenizer: a stated, conservative estimate)."""

from __future__ import annotations

import json
import math
import threading
from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass
from typing import Any, Iterator, Sequence

from openqa.errors import OpenQAError
from openqa.llm.prompts import Messages

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
    for key in ("tokens_in", "tokens_out", "tokens_reused"):
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
    #: Prompts the model reads in one pass where it batches them (``replies``); 1: one at a time.
    batch_size: int = 1

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

    def _replies(self, items: Sequence[tuple[Messages, Request]]) -> Iterator[tuple[int, dict[str, Any]]]:
        """The model's replies to ``items`` as (position in ``items``, reply), each as soon as it is
        made: here one ``_reply`` at a time, in order; a backend that batches overrides this."""
        for i, (messages, request) in enumerate(items):
            yield i, self._reply(messages, request)

    def replies(self, items: Sequence[tuple[Messages, Request]]) -> Iterator[tuple[int, dict[str, Any]]]:
        """A model call for each of ``items`` (messages and request), counted: (position in ``items``,
        reply) as each reply comes, in any order; a reply that is not well formed is an error (never cached)."""
        for i, reply in self._replies(items):
            with self._count_lock:
                self.calls += 1
            problem = reply_problem(reply)
            if problem:
                raise OpenQAError(f"{getattr(self, 'where', self.name)} sent a reply openqa cannot read ({problem})")
            yield i, reply

    def reply(self, messages: Messages, request: Request) -> dict[str, Any]:
        """One model call (``replies`` of one prompt)."""
        ((_, reply),) = self.replies([(messages, request)])
        return reply


def first_line(text: object, limit: int = 200) -> str:
    line = (str(text).strip().splitlines() or [""])[0]
    return line if len(line) <= limit else line[: limit - 3] + "..."



class ChatBackend(Backend):
    """Replies from the OpenAI chat-completions API (a server, or llama.cpp in process): letters from
    the first token's ``top_logprobs``; a server that gives none is refused with a one-line error."""

    where: str
    #: Whether the model runs in llama.cpp, whose prompt cache is turned off in every request
    #: (``cache_prompt: false``): reusing the previous request's shared prefix changes the letter
    #: probabilities of the next (5 of 20 letters differed, by up to 0.07), so a run would depend on
    #: the order of its requests. (In process, openqa reuses rows itself where that changes no bit:
    #: ``openqa.llm.prefix``.)
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
                              f"chat completion ({first_line(json.dumps(data))})") from None
        usage = data.get("usage") or {}
        out = {"text": text, "probs": None, "tokens_in": usage.get("prompt_tokens"),
               "tokens_out": usage.get("completion_tokens")}
        timings = data.get("timings")  # llama.cpp's own time for the prompt and the reply
        spent: list[Any] = [timings.get(k) for k in ("prompt_ms", "predicted_ms")] if isinstance(timings, dict) else []
        if spent and all(isinstance(v, (int, float)) and math.isfinite(v) and v >= 0 for v in spent):
            out["model_ms"] = round(sum(spent), 3)
        reused = timings.get("cache_n") if isinstance(timings, dict) else None
        if isinstance(reused, int) and not isinstance(reused, bool) and reused >= 0:
            out["tokens_reused"] = reused  # prompt tokens llama.cpp did not compute again
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
                                  f"({first_line(json.dumps(content[0].get('top_logprobs')), 120)})") from None
            out["probs"] = letter_probabilities(top, request.letters)
        return out
