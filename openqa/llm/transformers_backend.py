"""A causal LM run in process with transformers (torch and transformers are imported when one is
opened, never with openqa)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from openqa.errors import OpenQAError
from openqa.llm.backends import DEFAULT_CONTEXT, Backend, Request, first_line
from openqa.llm.prompts import Messages


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
            raise OpenQAError(f"cannot load model {model!r} ({first_line(exc)}): give a local folder or a hub id "
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
            raise OpenQAError(f"cannot load model {model!r} ({first_line(exc)})") from None
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
                raise OpenQAError(f"cannot load model {self.name!r} as a causal LM ({first_line(exc)})") from None
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
