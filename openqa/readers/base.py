"""What every reader is: a torch model that turns (question, options, evidence) into one logit
per option, trains on a loss, and saves to / loads from a folder."""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, ClassVar, Sequence, cast

import torch

from openqa.data import Question
from openqa.errors import OpenQAError

READER_FILE = "reader.json"


@dataclass(frozen=True)
class Example:
    """A question with the evidence text retrieved for each of its options."""

    question: Question
    contexts: dict[str, str]

    @property
    def label(self) -> int:
        """Position of the correct option."""
        return list(self.question.options).index(self.question.answer_idx)


def pick_device() -> torch.device:
    """The GPU when there is one, else the CPU."""
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def bf16_supported(device: torch.device) -> bool:
    """Whether ``device`` computes bf16 natively: a GPU with bf16 units (emulation does not count:
    it is slower than fp16 there), a CPU with AVX512-BF16."""
    if device.type == "cuda":
        return bool(torch.cuda.is_bf16_supported(including_emulation=False))
    return device.type == "cpu" and torch.cpu._is_avx512_bf16_supported()


def choose_precision(device_type: str, bf16: bool) -> str:
    """The mixed precision readers train and read in on a device of ``device_type`` that computes bf16
    natively (``bf16``) or not: bf16 wherever it is native (its range is fp32's, so no loss scaling);
    fp16 with loss scaling on a GPU without it; fp32 on any other device (MiniLM trains 1.7x faster
    in bf16 than in fp32 on this project's CPU, but fp16 on a CPU gains nothing). The weights stay
    fp32 in every case (autocast only computes in the lower precision)."""
    if bf16:
        return "bf16"
    return "fp16" if device_type == "cuda" else "fp32"


class Reader(ABC):
    """A trainable option scorer over evidence."""

    kind: ClassVar[str]
    #: whether training and reading may run in mixed precision (see ``precision``)
    mixed_precision: ClassVar[bool] = True
    #: The engine whose index a new reader of this kind is made from (maxout: word2vec), if any.
    needs_index: ClassVar[str | None] = None
    model: torch.nn.Module
    settings: dict[str, Any]

    @classmethod
    def create(cls, model: str | None, models_dir: Path | None, max_length: int, index: Any = None) -> "Reader":
        """A new reader to train: from ``model`` (a name, folder or hub id), or from the index of
        ``needs_index`` (opened by the caller)."""
        if not model:
            raise OpenQAError(f"--reader {cls.kind} needs --model (e.g. all-MiniLM-L6-v2 or a hub id)")
        make: Callable[..., Reader] = cls  # the readers that keep this create take these arguments
        return make(model, models_dir, max_length=max_length)

    @abstractmethod
    def logits(self, batch: Sequence[Example]) -> torch.Tensor:
        """(len(batch), n_options) scores; higher is better."""

    def loss(self, batch: Sequence[Example]) -> torch.Tensor:
        """Training loss: cross-entropy of the option logits against the correct option."""
        labels = torch.tensor([e.label for e in batch], device=self.device)
        return torch.nn.functional.cross_entropy(self.logits(batch), labels)

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    @property
    def precision(self) -> str:
        """``choose_precision`` for the device the reader is on; fp32 when the reader opts out."""
        if not self.mixed_precision:
            return "fp32"
        return choose_precision(self.device.type, bf16_supported(self.device))

    def autocast(self) -> torch.autocast:
        """The autocast context for ``precision`` (the weights stay fp32: readers load them so)."""
        dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}.get(self.precision)
        return torch.autocast(self.device.type, dtype=dtype, enabled=dtype is not None)

    def save(self, folder: Path) -> None:
        """Weights and everything ``load`` needs, in ``folder``."""
        folder.mkdir(parents=True, exist_ok=True)
        self._save_weights(folder)
        (folder / READER_FILE).write_text(json.dumps({"kind": self.kind, "settings": self.settings}, indent=2))

    @abstractmethod
    def _save_weights(self, folder: Path) -> None:
        """Write the model's weights (and tokenizer or vocabulary) into ``folder``."""

    @classmethod
    @abstractmethod
    def from_checkpoint(cls, folder: Path, settings: dict[str, Any]) -> "Reader":
        """Rebuild a saved reader."""


def read_checkpoint_info(folder: Path) -> dict[str, Any]:
    """The kind and settings of a saved reader, or a one-line error for anything else."""
    path = Path(folder) / READER_FILE
    if not path.is_file():
        raise OpenQAError(f"{folder} is not an openqa reader checkpoint (no {READER_FILE}); train one with `openqa train`")
    try:
        return cast(dict[str, Any], json.loads(path.read_text()))
    except json.JSONDecodeError as exc:
        raise OpenQAError(f"{path}: unreadable ({exc})") from None
