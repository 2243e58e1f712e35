"""The paper's Max-out reader, its non-pretrained baseline: BiGRU encoders over the context and
over question + option, max-pooled over time, then ``[h_c; h_qa; h_c * h_qa; |h_c - h_qa|]`` through
a tanh layer to one score. Word embeddings start from word2vec trained on the textbooks."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence, cast

import numpy as np
import torch
from torch import nn

from openqa.readers.base import Example, Reader, pick_device
from openqa.retrieval.word2vec import UNK, WordVectors, words

CONTEXT_LENGTH = 450
QA_LENGTH = 150


def question_and_option(question: list[str], option: list[str], length: int) -> list[str]:
    """The question's last words, then the whole option, in at most ``length`` words.

    Cutting ``question + option`` to its first words drops the option from long (USMLE) questions, so
    every option would read the same input. The question gives way from its start instead: its end,
    the sentence that asks, stays. An option longer than ``length`` on its own is kept whole (the input
    then runs past ``length``): the option is what tells the inputs apart, and the GRU has no length limit.
    """
    return question[max(0, len(question) - (length - len(option))):] + option


def _reversed(rows: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """``rows`` (batch, time, features) with each row's first ``mask.sum()`` steps in reverse order and its
    padding left in place after them."""
    lengths = mask.sum(dim=1, keepdim=True)
    steps = torch.arange(rows.shape[1], device=rows.device).unsqueeze(0)
    index = torch.where(steps < lengths, lengths - 1 - steps, steps)
    return rows.gather(1, index.unsqueeze(-1).expand_as(rows))


def _one_way(gru: nn.GRU) -> nn.GRU:
    """A one-direction GRU of ``gru``'s shape, whose weights ``functional_call`` replaces (``_weights``)."""
    return nn.GRU(gru.input_size, gru.hidden_size, batch_first=True, device="meta")


def _weights(gru: nn.GRU, direction: str) -> dict[str, torch.Tensor]:
    """One direction's weights of a bidirectional one-layer ``gru`` ("" forward, "_reverse" backward),
    named as a one-direction GRU names them."""
    return {name: getattr(gru, f"{name}{direction}") for name in ("weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0")}


class MaxoutNet(nn.Module):
    """Two BiGRU encoders, max-pooling, and a tanh layer over the matching features."""

    def __init__(self, vectors: np.ndarray, hidden: int = 128) -> None:
        super().__init__()
        # fp32 whatever the vectors (or a saved reader's embedding) are stored in, like every reader's weights;
        # a copy, always: training must never write into the word2vec index's array, which the next
        # reader (a cross-fit's next fold) is made from
        self.embed = nn.Embedding.from_pretrained(torch.tensor(vectors, dtype=torch.float32), freeze=False, padding_idx=0)
        dim = vectors.shape[1]
        self.context = nn.GRU(dim, hidden, batch_first=True, bidirectional=True)
        self.qa = nn.GRU(dim, hidden, batch_first=True, bidirectional=True)
        self.score = nn.Sequential(nn.Linear(8 * hidden, hidden), nn.Tanh(), nn.Linear(hidden, 1))

    @staticmethod
    def _pooled(gru: nn.GRU, embedded: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """The GRU's states over each row's own words, max-pooled over time. Each direction reads the row's
        words from its first end, the padding last: the forward one over the row as it is, the backward
        one over the row's words reversed in place (``_reversed``), with the GRU's backward weights. So a
        padded row reads as it would alone, and a question's scores never depend on the rows batched with
        it (packing the rows would do the same, at three to four times the time on a CPU)."""
        one_way = _one_way(gru)
        forward, _ = torch.func.functional_call(one_way, _weights(gru, ""), (embedded,))
        backward, _ = torch.func.functional_call(one_way, _weights(gru, "_reverse"), (_reversed(embedded, mask),))
        states = torch.cat([forward, _reversed(backward, mask)], dim=-1)
        return states.masked_fill(~mask.unsqueeze(-1), float("-inf")).max(dim=1).values

    def forward(self, context: torch.Tensor, qa: torch.Tensor) -> torch.Tensor:
        h_c = self._pooled(self.context, self.embed(context), context != 0)
        h_qa = self._pooled(self.qa, self.embed(qa), qa != 0)
        return cast(torch.Tensor, self.score(torch.cat([h_c, h_qa, h_c * h_qa, (h_c - h_qa).abs()], dim=-1)).squeeze(-1))


class MaxoutReader(Reader):
    """Word ids from the textbook vocabulary; one score per (context, question + option)."""

    kind = "maxout"
    mixed_precision = False  # a small recurrent net: little to gain, and recurrences accumulate rounding

    def __init__(self, vocab: list[str], vectors: np.ndarray, lang: str) -> None:
        self.vocab = vocab
        self.ids = {w: i for i, w in enumerate(vocab)}
        self.lang = lang
        self.model = MaxoutNet(vectors).to(pick_device())
        self.settings = {"model": "maxout", "lang": lang, "context_length": CONTEXT_LENGTH, "qa_length": QA_LENGTH}

    needs_index = "word2vec"

    @classmethod
    def create(cls, model: str | None, models_dir: Path | None, max_length: int, index: Any = None) -> "MaxoutReader":
        """A new Max-out reader over the textbook word vectors (``index``: the word2vec index); no model."""
        return cls.from_word_vectors(index)

    @classmethod
    def from_word_vectors(cls, wv: WordVectors) -> "MaxoutReader":
        return cls(wv.vocab, wv.vectors, wv.manifest["lang"])

    def _ids(self, rows: list[list[str]]) -> torch.Tensor:
        """Word ids of word lists already cut to length, padded; unknown words map to the unknown row."""
        unk = self.ids[UNK]
        ids = [[self.ids.get(w, unk) for w in row] or [unk] for row in rows]
        width = max(len(r) for r in ids)
        return torch.tensor([r + [0] * (width - len(r)) for r in ids], device=self.device)

    def encode(self, batch: Sequence[Example]) -> tuple[torch.Tensor, torch.Tensor]:
        """(context ids, question + option ids), one row per option: contexts keep their first
        ``CONTEXT_LENGTH`` words, question + option is cut by ``question_and_option``."""
        contexts, qas = [], []
        for e in batch:
            question = words(e.question.question, self.lang)
            for letter, option in e.question.options.items():
                contexts.append(words(e.contexts.get(letter, ""), self.lang)[:CONTEXT_LENGTH])
                qas.append(question_and_option(question, words(option, self.lang), QA_LENGTH))
        return self._ids(contexts), self._ids(qas)

    def logits(self, batch: Sequence[Example]) -> torch.Tensor:
        return cast(torch.Tensor, self.model(*self.encode(batch)).view(len(batch), -1))

    def _save_weights(self, folder: Path) -> None:
        torch.save(self.model.state_dict(), folder / "maxout.pt")
        (folder / "vocab.json").write_text(json.dumps(self.vocab, ensure_ascii=False))

    @classmethod
    def from_checkpoint(cls, folder: Path, settings: dict[str, Any]) -> "MaxoutReader":
        vocab = json.loads((folder / "vocab.json").read_text())
        state = torch.load(folder / "maxout.pt", map_location="cpu")
        reader = cls(vocab, state["embed.weight"].numpy(), settings["lang"])
        reader.model.load_state_dict(state)
        return reader

