"""A causal LM run in process with transformers (torch and transformers are imported when one is
opened, never with openqa).

Letters can be scored in padded batches (``--llm-batch-size N``, off by default): one forward reads
``batch_size`` prompts, sorted by length so that little is padding. The padding goes on the right,
so each prompt's tokens keep the positions and the causal attention they have alone (no row
attends to nothing, which left padding gives its pad tokens), and the letters are read at each prompt's own last token: the probabilities
equal those of one prompt at a time up to rounding (the tests check 1e-4 on the CPU in fp32; in a
GPU's bf16 the rounding of other shapes moves them by up to about 0.01: gpu_models.py measures it).
So a batched question's probabilities depend a little on the prompts it shares a batch with: the
default is one prompt at a time (an answer depends on its question alone), batching is asked for,
and a batched run's replies are cached apart from one-at-a-time replies (``identity``).

The token ids of a prompt counted (the LLM reader counts every prompt to fit the context before any
is scored) are kept for its forward, so no prompt is tokenized twice."""

from __future__ import annotations

import threading
from array import array
from collections import OrderedDict
from pathlib import Path
from typing import Any, Iterator, Sequence

from openqa import arguments as arg
from openqa.errors import OpenQAError, UsageError
from openqa.llm.backends import DEFAULT_CONTEXT, Backend, Request, first_line
from openqa.llm.prompts import Messages, check_messages

#: Token ids kept of prompts counted and not yet read (first in, first out past this many tokens: 64 MB).
KEPT_TOKENS = 1 << 24


class TransformersBackend(Backend):
    """A causal LM run in process: its chat template, bf16 on a GPU (fp16 where bf16 is not
    supported), fp32 on the CPU; letters from the exact next-token distribution, ``batch_size``
    prompts a forward (default one: see the module's docstring; 32 was the fastest of 8, 16 and 32
    for a Qwen2.5-1.5B shape on an H200, scripts/benchmarks/gpu_models.py); generated replies one
    at a time. The weights load at the first prompt the cache
    does not answer (a cached rerun reads only the tokenizer).

    :param model: a local model folder (or one of ``models_dir``) or a hub id, with a chat template.
    :param models_dir: a folder of models looked in first.
    :param context: the context in tokens (default: the model's).
    :param device: ``cpu`` or ``cuda`` (default: the GPU when there is one).
    :param batch_size: prompts a forward pass scores letters for (default: 32 on a GPU, 1 on the CPU).
    :raises OpenQAError: on a model that cannot be loaded or has no chat template (one line)."""

    kind = "transformers"

    def __init__(self, model: str, models_dir: Path | None = None, context: int | None = None,
                 device: str | None = None, batch_size: int | None = None) -> None:
        super().__init__()
        import torch
        from transformers import AutoConfig, AutoTokenizer
        from transformers.utils import logging as hf_logging

        if arg.path("model", model) is None:
            raise UsageError("model must name a model folder or a hub id, not None")
        folder = arg.path("models_dir", models_dir)
        context = arg.optional_whole("context", context, 1, 10_000_000)
        device = arg.device("device", device, present=False)  # the weights load at the first prompt: checked there
        batch_size = arg.optional_whole("batch_size", batch_size, 1, 4096)
        hf_logging.disable_progress_bar()  # one bar per loaded file is noise beside openqa's own
        self.name = model
        path = Path(model).expanduser()
        if not path.is_dir() and folder is not None and (folder / model).is_dir():
            path = folder / model
        self.source = str(path.resolve()) if path.is_dir() else model
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(self.source)
        except (OSError, ValueError) as exc:
            raise OpenQAError(f"cannot load model {model!r} ({first_line(exc)}): give a local folder or a hub id "
                              "reachable from here") from None
        if not getattr(self.tokenizer, "chat_template", None):
            raise OpenQAError(f"model {model!r} has no chat template: --method llm needs an instruction (chat) model")
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        gpu = torch.device(self.device).type == "cuda"
        self.batch_size = batch_size or 1
        self.dtype = torch.float32
        if gpu:  # torch cannot ask a GPU it does not see (the weights then fail to load, in one line)
            self.dtype = torch.bfloat16 if torch.cuda.is_available() and torch.cuda.is_bf16_supported() else torch.float16
        try:
            config = AutoConfig.from_pretrained(self.source)
        except (OSError, ValueError) as exc:
            raise OpenQAError(f"cannot load model {model!r} ({first_line(exc)})") from None
        self._model: Any = None
        limit = getattr(config, "max_position_embeddings", None)
        self.context = context or limit or DEFAULT_CONTEXT
        self.context_source = "--context" if context else ("model config max_position_embeddings" if limit
                                                            else f"assumed {DEFAULT_CONTEXT} (give --context)")
        self.token_count = "the model's own tokenizer"
        self.runs_on = f"transformers, {self.device}, {str(self.dtype).removeprefix('torch.')}"
        if self.batch_size > 1:
            self.runs_on += f", letters in batches of {self.batch_size}"
        self._torch = torch
        #: One thread at a time uses the tokenizer and the weights (a fast tokenizer shared between
        #: threads fails with "Already borrowed"; the server scores on several threads).
        self._lock = threading.RLock()
        #: Token ids by prompt (its messages' roles and texts), and how many ids are kept in all.
        self._kept: OrderedDict[tuple[tuple[str, str], ...], array[int]] = OrderedDict()
        self._kept_tokens = 0

    @property
    def model(self) -> Any:
        """The weights, loaded at first use."""
        if self._model is None:
            from transformers import AutoModelForCausalLM

            try:
                # transformers wraps Module.to with functools.wraps, whose type mypy does not bind (python/mypy#17166)
                self._model = AutoModelForCausalLM.from_pretrained(self.source, dtype=self.dtype).to(self.device).eval()  # type: ignore[arg-type]
            except (OSError, ValueError, RuntimeError, AssertionError) as exc:  # the last two: a GPU torch does not see
                raise OpenQAError(f"cannot load model {self.name!r} as a causal LM on {self.device} ({first_line(exc)})") from None
        return self._model

    def identity(self) -> dict[str, Any]:
        """What the cache keys replies by: the model, and the batch size where prompts share forwards
        (their rounding then differs from one at a time's; one-at-a-time keys are as they always were)."""
        batched = {"letters_batch": self.batch_size} if self.batch_size > 1 else {}
        return {"kind": self.kind, "model": self.source, **batched}

    def count(self, text: str) -> int:
        arg.text("text", text)
        with self._lock:
            return len(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def _ids(self, messages: Messages) -> array[int]:
        """The prompt's token ids (its chat template with the assistant's turn opened), tokenized once
        and kept for a while (``KEPT_TOKENS``); the caller holds the lock."""
        key = tuple((m["role"], m["content"]) for m in messages)
        ids = self._kept.get(key)
        if ids is None:
            text = self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
            ids = self._kept[key] = array("i", self.tokenizer(text, add_special_tokens=False)["input_ids"])
            self._kept_tokens += len(ids)
            while self._kept_tokens > KEPT_TOKENS:
                self._kept_tokens -= len(self._kept.popitem(last=False)[1])
        return ids

    def _encode(self, messages: Messages) -> Any:
        ids = self._torch.tensor([self._ids(messages)], device=self.device)
        return ids, self._torch.ones_like(ids)

    def prompt_tokens(self, messages: Messages) -> int:
        check_messages(messages)
        with self._lock:
            return len(self._ids(messages))

    def _letter_ids(self, letter: str) -> list[int]:
        ids = {enc[0] for variant in (letter, f" {letter}")
               for enc in [self.tokenizer.encode(variant, add_special_tokens=False)] if len(enc) == 1}
        if not ids:
            raise OpenQAError(f"the tokenizer of {self.name!r} has no single token for the letter {letter}: "
                              "use --scoring generate")
        return sorted(ids)

    def _letters(self, logits: Any, requests: Sequence[Request], tokens_in: Sequence[int]) -> list[dict[str, Any]]:
        """The replies of letter scoring from next-token ``logits`` (a row per prompt, of ``tokens_in``
        tokens, asking ``requests``), brought from the device in one copy."""
        torch = self._torch
        probs = torch.softmax(logits.float(), dim=-1)
        letters = sorted({letter for request in requests for letter in request.letters})
        # each letter's mass summed where the probabilities are (as one prompt's always was), then one copy
        masses = torch.stack([probs[:, self._letter_ids(letter)].sum(dim=-1) for letter in letters], dim=-1).tolist()
        best = probs.argmax(dim=-1).tolist()
        replies = []
        for request, row, top, tokens in zip(requests, masses, best, tokens_in):
            mass = {letter: row[letters.index(letter)] for letter in request.letters}
            total = sum(mass.values())
            replies.append({"text": self.tokenizer.decode([top]), "tokens_in": tokens, "tokens_out": 1,
                            "probs": {k: v / total for k, v in mass.items()} if total > 0 else {},
                            "letter_mass": round(total, 6)})
        return replies

    def _reply(self, messages: Messages, request: Request) -> dict[str, Any]:
        with self._lock:
            return self._locked_reply(messages, request)

    def _locked_reply(self, messages: Messages, request: Request) -> dict[str, Any]:
        torch = self._torch
        input_ids, mask = self._encode(messages)
        with torch.inference_mode():
            if request.scoring == "letters":
                logits = self.model(input_ids=input_ids, attention_mask=mask).logits[:, -1]
                return self._letters(logits, [request], [int(input_ids.shape[1])])[0]
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

    def _replies(self, items: Sequence[tuple[Messages, Request]]) -> Iterator[tuple[int, dict[str, Any]]]:
        """Letters ``batch_size`` prompts a forward, the prompts sorted by length; the rest (and
        everything at batch size 1) one at a time, in order."""
        batched = [i for i, (_, request) in enumerate(items) if request.scoring == "letters"] if self.batch_size > 1 else []
        if batched:
            with self._lock:
                ids = {i: self._ids(items[i][0]) for i in batched}
            batched.sort(key=lambda i: len(ids[i]))
            for start in range(0, len(batched), self.batch_size):
                chunk = batched[start : start + self.batch_size]
                with self._lock:
                    logits = self._last_logits([ids[i] for i in chunk])
                    replies = self._letters(logits, [items[i][1] for i in chunk], [len(ids[i]) for i in chunk])
                yield from zip(chunk, replies)
        chosen = set(batched)
        for i, (messages, request) in enumerate(items):
            if i not in chosen:
                yield i, self._reply(messages, request)

    def _last_logits(self, rows: list[array[int]]) -> Any:
        """The next-token logits after each of ``rows`` (token ids), read in one forward: the rows padded
        on the right, the logits computed only at the positions where some row ends."""
        torch = self._torch
        width = max(map(len, rows))
        ids = torch.zeros((len(rows), width), dtype=torch.long)  # masked, and after every token a row reads
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        for r, row in enumerate(rows):
            ids[r, : len(row)] = torch.tensor(row)
            mask[r, : len(row)] = 1
        last = torch.tensor([len(row) - 1 for row in rows])
        ends = torch.unique(last)  # sorted
        with torch.inference_mode():
            logits = self.model(input_ids=ids.to(self.device), attention_mask=mask.to(self.device),
                                logits_to_keep=ends.to(self.device)).logits
        return logits[torch.arange(len(rows), device=logits.device), torch.searchsorted(ends, last).to(logits.device)]
