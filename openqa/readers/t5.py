"""T5 reader in the style of DR.BENCH: the input is the question, the lettered options, then the
evidence; the target is the answer text. Each option is scored by the model's mean token
log-likelihood of producing it, so the prediction is always one of the options."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence, cast

import torch

from openqa.errors import OpenQAError
from openqa.readers.base import Example, Reader, pick_device
from openqa.retrieval.encoders import resolve_model

if TYPE_CHECKING:
    from transformers import PreTrainedModel

#: model types T5ForConditionalGeneration loads weights for
T5_TYPES = ("t5", "mt5")


def prompt(example: Example) -> tuple[str, str, str]:
    """(question, options, evidence): the encoder reads ``question: {question} {options} {evidence}``,
    the options as ``options: (A) .. (B) .. context:`` and the evidence as ``(A) .. (B) ..``."""
    q = example.question
    options = " ".join(f"({letter}) {text}" for letter, text in q.options.items())
    evidence = " ".join(f"({letter}) {example.contexts.get(letter, '')}" for letter in q.options)
    return q.question, f"options: {options} context:", evidence


class T5Reader(Reader):
    """A sequence-to-sequence model scoring options by likelihood."""

    kind = "t5"
    model: PreTrainedModel

    def __init__(self, model: str, models_dir: Path | None = None, max_length: int = 512, path: str | None = None,
                 modules: tuple[Any, Any] | None = None) -> None:
        from transformers import AutoConfig, AutoTokenizer, T5ForConditionalGeneration

        if modules is not None:  # an in-memory model and tokenizer (tests build tiny random ones)
            self.model, self.tokenizer = modules
        else:
            source = path or resolve_model(model, models_dir)
            try:
                kind = AutoConfig.from_pretrained(source).model_type
                if kind not in T5_TYPES:  # transformers would warn and start from random weights
                    raise OpenQAError(f"{source} is a {kind} model, not a T5 one; --reader t5 needs a T5 checkpoint (e.g. google/flan-t5-base)")
                self.tokenizer = AutoTokenizer.from_pretrained(source)
                # fp32 master weights whatever the checkpoint stores (see MultipleChoiceReader)
                self.model = T5ForConditionalGeneration.from_pretrained(source, dtype=torch.float32)
            except (OSError, ValueError) as exc:
                raise OpenQAError(f"cannot load a T5 model from {source}: {str(exc).splitlines()[0]}") from None
        # transformers wraps Module.to with functools.wraps, whose type mypy does not bind (python/mypy#17166)
        self.model.to(pick_device())  # type: ignore[arg-type]
        self.settings = {"model": model, "max_length": max_length}
        self.max_length = max_length

    def encode(self, batch: Sequence[Example]) -> dict[str, torch.Tensor]:
        """Encoder ids, at most ``max_length`` of them (eos included) unless the options alone are longer.

        The evidence gets the room the question and the options leave. A question too long for even that
        loses its start (its end, the sentence that asks, stays); the options are never cut, since the
        scores come from reading them.
        """
        label = self._tokens("question:")
        rows = []
        for e in batch:
            question, options, evidence = (self._tokens(part) for part in prompt(e))
            room = self.max_length - 1 - len(label) - len(options)
            head = label + question[max(0, len(question) - room):] + options
            rows.append(head + evidence[: max(0, self.max_length - 1 - len(head))] + [self.tokenizer.eos_token_id])
        return self._pad(rows)

    def _tokens(self, text: str) -> list[int]:
        """Token ids without special tokens, so that the parts of the input join as one text would."""
        return cast(list[int], self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def _pad(self, rows: list[list[int]]) -> dict[str, torch.Tensor]:
        width = max(len(r) for r in rows)
        pad = self.tokenizer.pad_token_id
        ids = torch.tensor([r + [pad] * (width - len(r)) for r in rows], device=self.device)
        return {"input_ids": ids, "attention_mask": (ids != pad).long()}

    def _targets(self, texts: Sequence[str]) -> torch.Tensor:
        ids = self._pad([self.tokenizer(t)["input_ids"] for t in texts])["input_ids"]
        return ids.masked_fill(ids == self.tokenizer.pad_token_id, -100)

    def logits(self, batch: Sequence[Example]) -> torch.Tensor:
        """Mean log-likelihood of each option's text given the input (higher is better)."""
        n = len(batch[0].question.options)
        inputs = {k: v.repeat_interleave(n, dim=0) for k, v in self.encode(batch).items()}
        labels = self._targets([text for e in batch for text in e.question.options.values()])
        out = self.model(**inputs, labels=labels)
        logp = torch.log_softmax(out.logits, dim=-1)
        mask = labels != -100
        token_logp = logp.gather(-1, labels.clamp(min=0).unsqueeze(-1)).squeeze(-1) * mask
        return (token_logp.sum(-1) / mask.sum(-1)).view(len(batch), n)

    def loss(self, batch: Sequence[Example]) -> torch.Tensor:
        """Teacher-forced cross-entropy of the correct answer's text."""
        labels = self._targets([e.question.options[e.question.answer_idx] for e in batch])
        return cast(torch.Tensor, self.model(**self.encode(batch), labels=labels).loss)

    def _save_weights(self, folder: Path) -> None:
        self.model.save_pretrained(folder)
        self.tokenizer.save_pretrained(folder)

    @classmethod
    def from_checkpoint(cls, folder: Path, settings: dict[str, Any]) -> "T5Reader":
        return cls(settings["model"], max_length=settings["max_length"], path=str(folder))
