"""BERT-family multiple-choice reader (the paper's setup): for every option the input is
``[CLS] context [SEP] question + option [SEP]``; the first token's state goes to one logit and a
softmax runs over the options. The context is truncated first; when question + option alone do not
fit the model, the question loses its start. The option is never cut."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence, cast

import torch

from openqa import arguments as arg
from openqa.errors import OpenQAError
from openqa.readers.base import Example, Reader, pick_device
from openqa.retrieval.encoders import resolve_model

if TYPE_CHECKING:
    from tokenizers import Encoding
    from transformers import PreTrainedModel


def question_end(text: str, tokens: Encoding, room: int) -> str:
    """The end of the question ``text`` (tokenized as ``tokens``) in at most ``room`` tokens.

    The cut falls where a word starts, so that the kept text tokenizes again into the same tokens, and
    keeps the space before that word, which byte-level BPE tokenizers read into the word's first token.
    """
    first = min(len(tokens), max(0, len(tokens) - room))
    while 0 < first < len(tokens) and tokens.word_ids[first] == tokens.word_ids[first - 1]:
        first += 1
    return text[tokens.offsets[first - 1][1]:] if first else text


class MultipleChoiceReader(Reader):
    """Any encoder ``AutoModelForMultipleChoice`` loads (a new head is added when it has none): a
    reader that ``openqa train --reader bert`` trains (``train_reader``) and ``--method reader`` reads with.

    :param model: a model name, folder or hub id.
    :param models_dir: a folder of models looked in first.
    :param max_length: tokens of question, option and evidence read per option.
    :param path: the folder to load from instead of resolving ``model`` (a checkpoint)."""

    kind = "bert"
    model: PreTrainedModel

    def __init__(self, model: str, models_dir: Path | None = None, max_length: int = 256, path: str | None = None) -> None:
        from transformers import AutoModelForMultipleChoice, AutoTokenizer

        model = arg.text("model", model)
        arg.whole("max_length", max_length, 8, 1_000_000)
        checkpoint = arg.path("path", path)
        source = str(checkpoint) if checkpoint is not None else resolve_model(model, models_dir)
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(source)
            # fp32 master weights whatever the checkpoint stores (transformers keeps a stored fp16 or bf16):
            # the optimizer's small updates vanish in fp16, and loss scaling refuses fp16 gradients
            self.model = AutoModelForMultipleChoice.from_pretrained(source, dtype=torch.float32).to(pick_device())
        except (OSError, ValueError) as exc:
            raise OpenQAError(f"cannot load a multiple-choice model from {arg.shown(source, 200)}: "
                              f"{arg.shown(exc, 300)}") from None
        self.settings = {"model": model, "max_length": max_length}
        self.max_length = max_length

    def encode(self, batch: Sequence[Example]) -> dict[str, torch.Tensor]:
        """Token ids shaped (batch, options, length).

        A question + option longer than --max-length stretches the input up to the model's limit; past
        that the question loses its start (its end, the sentence that asks, stays) and the option stays
        whole, so that long questions still give every option its own input. The context gets the room left.
        """
        n_options = len(batch[0].question.options)
        questions = self.tokenizer([e.question.question for e in batch], add_special_tokens=False, return_offsets_mapping=True)
        options = self.tokenizer([o for e in batch for o in e.question.options.values()], add_special_tokens=False)["input_ids"]
        reserved = self.tokenizer.num_special_tokens_to_add(pair=True) + 1  # and at least one context token
        longest = max(len(questions.encodings[i // n_options]) + len(ids) for i, ids in enumerate(options))
        limit = min(self.tokenizer.model_max_length, max(self.max_length, longest + reserved))
        contexts, endings = [], []
        for i, e in enumerate(batch):
            for k, (letter, option) in enumerate(e.question.options.items()):
                room = limit - reserved - len(options[i * n_options + k])
                contexts.append(e.contexts.get(letter, ""))
                endings.append(f"{question_end(e.question.question, questions.encodings[i], room)} {option}")
        # only an option too long for the model on its own leaves no choice but to cut it too
        strategy = "only_first" if max(map(len, options)) + reserved <= limit else "longest_first"
        encoded = self.tokenizer(contexts, endings, truncation=strategy, max_length=limit, padding="longest", return_tensors="pt")
        return {k: v.view(len(batch), n_options, -1).to(self.device) for k, v in encoded.items()}

    def logits(self, batch: Sequence[Example]) -> torch.Tensor:
        return cast(torch.Tensor, self.model(**self.encode(batch)).logits)

    def _save_weights(self, folder: Path) -> None:
        self.model.save_pretrained(folder)
        self.tokenizer.save_pretrained(folder)

    @classmethod
    def from_checkpoint(cls, folder: Path, settings: dict[str, Any]) -> "MultipleChoiceReader":
        return cls(settings["model"], max_length=settings["max_length"], path=str(folder))
