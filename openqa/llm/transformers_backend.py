"""A causal LM run in process with transformers (torch and transformers are imported when one is
opened, never with openqa).

Letters can be scored in batches (``--llm-batch-size N``, off by default): one forward reads
``batch_size`` prompts, sorted by length so that little is padding, with the same letter
probabilities as one prompt at a time, so that a question's answer depends on that question alone,
never on the prompts beside it in a batch (issue 61). Padding used to move them (by up to 0.0095 in
a GPU's bf16): a padded row ran other attention kernels than the same prompt alone (a masked
attention over the batch's width against a causal one over its own tokens). Now the padding goes
on the right with no mask (causal attention keeps each prompt's tokens from seeing it) and the
attention is computed row by row on each prompt's own tokens (``row_attention``: the kernel and
the shapes of that prompt alone), while the linear layers, most of the work, run on the whole
batch, row for row as alone (on the CPU exactly; a GPU's are measured by
``scripts/benchmarks/gpu_models.py``). A model whose attention cannot be computed so (not SDPA, or a
sliding window) is batched by exact prompt length instead: no batch then holds padding, but
prompts of many lengths make small batches. The tests check the batched probabilities against one
at a time on the CPU in fp32 and bf16; ``gpu_models.py``'s letters section measures what each way
costs (on the CPU the row-by-row attention costs nothing against the padded batches of before,
while batches of one length were slower). Batched replies are still cached apart from
one-at-a-time replies (``identity``): a GPU's rounding of other batch shapes is measured, not proven.

The token ids of a prompt counted (the LLM reader counts every prompt to fit the context before any
is scored) are kept for its forward, so no prompt is tokenized twice."""

from __future__ import annotations

import itertools
import threading
from array import array
from collections import OrderedDict
from contextlib import contextmanager, nullcontext
from contextvars import ContextVar
from pathlib import Path
from typing import Any, Iterator, Sequence

from openqa import arguments as arg
from openqa.errors import OpenQAError, UsageError
from openqa.llm.backends import DEFAULT_CONTEXT, Backend, Request, first_line
from openqa.llm.prompts import Messages, check_messages

#: Token ids kept of prompts counted and not yet read (first in, first out past this many tokens: 64 MB).
KEPT_TOKENS = 1 << 24

#: The name ``row_attention`` is registered under in transformers' attention functions.
ROW_ATTENTION = "openqa_row_sdpa"
#: The token count of each row of the padded batch being read on this thread (None: no such batch).
_ROW_LENGTHS: ContextVar[list[int] | None] = ContextVar("openqa_row_lengths", default=None)
#: Precisions a backend can be asked for (``dtype``), by name.
DTYPES = ("fp32", "bf16", "fp16")


def row_attention(module: Any, query: Any, key: Any, value: Any, attention_mask: Any, **kwargs: Any) -> tuple[Any, None]:
    """transformers' SDPA attention, computed row by row on each row's own tokens when a padded batch
    is being read (``_ROW_LENGTHS``; right padding, no mask): each row then runs the causal kernel on
    the shapes it has alone (query, key and value of (1, heads, its length, head size), no mask),
    and its attention equals its own, whatever the rows beside it; the padding's output is zero
    (nothing reads it). Outside such a batch, plain SDPA."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    lengths = _ROW_LENGTHS.get()
    if lengths is None:
        return sdpa_attention_forward(module, query, key, value, attention_mask, **kwargs)
    batch, _, width, _ = query.shape
    out = query.new_zeros((batch, width, query.shape[1], value.shape[-1]))  # SDPA's output: (batch, tokens, heads, size)
    for row, length in enumerate(lengths):
        alone, _ = sdpa_attention_forward(module, query[row:row + 1, :, :length], key[row:row + 1, :, :length],
                                          value[row:row + 1, :, :length], None, **kwargs)
        out[row, :length] = alone[0]
    return out, None


def rows_attend_alone(config: Any) -> bool:
    """Whether a model of ``config`` can compute a padded batch's attention row by row
    (``row_attention``): SDPA attention, every layer full causal attention (no sliding window, whose
    mask the row-by-row path would not apply)."""
    layers = getattr(config, "layer_types", None) or ["full_attention"]
    return (getattr(config, "_attn_implementation", None) == "sdpa" and not getattr(config, "sliding_window", None)
            and all(layer == "full_attention" for layer in layers))


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
    :param batch_size: prompts a forward pass scores letters for (default: one).
    :param dtype: ``fp32``, ``bf16`` or ``fp16``, the weights' and activations' type (default: bf16 on a
        GPU, fp16 where bf16 is not supported, fp32 on the CPU).
    :raises OpenQAError: on a model that cannot be loaded or has no chat template (one line)."""

    kind = "transformers"

    def __init__(self, model: str, models_dir: Path | None = None, context: int | None = None,
                 device: str | None = None, batch_size: int | None = None, dtype: str | None = None) -> None:
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
        if dtype is not None:
            if dtype not in DTYPES:
                raise OpenQAError(f"unknown dtype {dtype!r}: choose one of {', '.join(DTYPES)}")
            self.dtype = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[dtype]
        #: How letters are batched: "rows" (padded batches, attention row by row: ``row_attention``),
        #: or "lengths" (batches of prompts of one length, no padding), which a model whose attention
        #: cannot be computed row by row gets whatever this says (``rows_attend_alone``).
        self.letters_batching = "rows"
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
            from transformers import AttentionInterface

            AttentionInterface.register(ROW_ATTENTION, row_attention)
        return self._model

    def _rows(self) -> bool:
        """Whether letters go in padded batches read with attention row by row (else batches of one
        prompt length); loads the weights."""
        return self.letters_batching == "rows" and rows_attend_alone(self.model.config)

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
        """Letters ``batch_size`` prompts a forward, the prompts sorted by length (and, where a padded
        batch's attention cannot be computed row by row, grouped by length: ``_rows``); the rest (and
        everything at batch size 1) one at a time, in order."""
        batched = [i for i, (_, request) in enumerate(items) if request.scoring == "letters"] if self.batch_size > 1 else []
        if batched:
            with self._lock:
                ids = {i: self._ids(items[i][0]) for i in batched}
                padded = self._rows()
            batched.sort(key=lambda i: len(ids[i]))
            groups = [batched] if padded else [list(group) for _, group in itertools.groupby(batched, key=lambda i: len(ids[i]))]
            for group in groups:
                for start in range(0, len(group), self.batch_size):
                    chunk = group[start : start + self.batch_size]
                    with self._lock:
                        logits = self._last_logits([ids[i] for i in chunk])
                        replies = self._letters(logits, [items[i][1] for i in chunk], [len(ids[i]) for i in chunk])
                    yield from zip(chunk, replies)
        chosen = set(batched)
        for i, (messages, request) in enumerate(items):
            if i not in chosen:
                yield i, self._reply(messages, request)

    @contextmanager
    def _attention_by_row(self, lengths: list[int]) -> Iterator[None]:
        """While in it, the model computes attention row by row over rows of ``lengths`` tokens
        (``row_attention``); the caller holds the lock."""
        config = self.model.config
        before = config._attn_implementation
        token = _ROW_LENGTHS.set(lengths)
        config._attn_implementation = ROW_ATTENTION
        try:
            yield
        finally:
            config._attn_implementation = before
            _ROW_LENGTHS.reset(token)

    def _last_logits(self, rows: list[array[int]]) -> Any:
        """The next-token logits after each of ``rows`` (token ids), read in one forward: the rows padded
        on the right with no mask (causal attention keeps every token from the padding after it), the
        attention computed row by row where some row is padded (``_attention_by_row``), the logits
        only at the positions where some row ends. The caller holds the lock."""
        torch = self._torch
        lengths = [len(row) for row in rows]
        width = max(lengths)
        ids = torch.zeros((len(rows), width), dtype=torch.long)  # after every token a row reads
        for r, row in enumerate(rows):
            ids[r, : len(row)] = torch.tensor(row)
        last = torch.tensor([length - 1 for length in lengths])
        ends = torch.unique(last)  # sorted
        model = self.model
        with torch.inference_mode(), self._attention_by_row(lengths) if min(lengths) < width else nullcontext():
            logits = model(input_ids=ids.to(self.device), logits_to_keep=ends.to(self.device)).logits
        return logits[torch.arange(len(rows), device=logits.device), torch.searchsorted(ends, last).to(logits.device)]

