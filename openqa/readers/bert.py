"""BERT-family multiple-choice reader (the paper's setup): for every option the input is
``[CLS] context [SEP] question + option [SEP]``; the first token's state goes to one logit and a
softmax runs over the options. Only the context is ever truncated."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import torch

from openqa.errors import OpenQAError
from openqa.readers.base import Example, Reader, pick_device
from openqa.retrieval.encoders import resolve_model


class MultipleChoiceReader(Reader):
    """Any encoder ``AutoModelForMultipleChoice`` loads (a new head is added when it has none)."""

    kind = "bert"

    def __init__(self, model: str, models_dir: Path | None = None, max_length: int = 256, path: str | None = None) -> None:
        from transformers import AutoModelForMultipleChoice, AutoTokenizer

        source = path or resolve_model(model, models_dir)
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(source)
            self.model = AutoModelForMultipleChoice.from_pretrained(source).to(pick_device())
        except (OSError, ValueError) as exc:
            raise OpenQAError(f"cannot load a multiple-choice model from {source}: {str(exc).splitlines()[0]}") from None
        self.settings = {"model": model, "max_length": max_length}
        self.max_length = max_length

    def encode(self, batch: Sequence[Example]) -> dict[str, torch.Tensor]:
        """Token ids shaped (batch, options, length); contexts truncated first, never the question."""
        contexts, endings = [], []
        for e in batch:
            for letter, option in e.question.options.items():
                contexts.append(e.contexts.get(letter, ""))
                endings.append(f"{e.question.question} {option}")
        # a question longer than --max-length stretches the input (up to the model's limit), never truncated
        longest = max(len(ids) for ids in self.tokenizer(endings, add_special_tokens=False)["input_ids"])
        limit = min(self.tokenizer.model_max_length, max(self.max_length, longest + 4))
        strategy = "only_first" if longest + 4 <= limit else "longest_first"
        encoded = self.tokenizer(contexts, endings, truncation=strategy, max_length=limit, padding="longest", return_tensors="pt")
        n_options = len(batch[0].question.options)
        return {k: v.view(len(batch), n_options, -1).to(self.device) for k, v in encoded.items()}

    def logits(self, batch: Sequence[Example]) -> torch.Tensor:
        return self.model(**self.encode(batch)).logits

    def _save_weights(self, folder: Path) -> None:
        self.model.save_pretrained(folder)
        self.tokenizer.save_pretrained(folder)

    @classmethod
    def from_checkpoint(cls, folder: Path, settings: dict[str, Any]) -> "MultipleChoiceReader":
        return cls(settings["model"], max_length=settings["max_length"], path=str(folder))
