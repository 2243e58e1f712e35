"""Readers by name, loading saved ones, and the option scorer that runs a reader over evidence."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Sequence

import numpy as np

from openqa.data import Question
from openqa.errors import OpenQAError, UsageError
from openqa.readers.base import Example, Reader, read_checkpoint_info
from openqa.readers.bert import MultipleChoiceReader
from openqa.readers.evidence import retrieve_evidence
from openqa.readers.maxout import MaxoutReader
from openqa.readers.t5 import T5Reader
from openqa.readers.train import predict
from openqa.scorers.base import OptionScorer, OptionScores
from openqa.scorers.ir import IRScorer

READERS: dict[str, type[Reader]] = {r.kind: r for r in (MultipleChoiceReader, T5Reader, MaxoutReader)}


def reader_class(kind: str) -> type[Reader]:
    """The reader registered under ``kind``, or an error listing the known ones."""
    if kind not in READERS:
        raise UsageError(f"unknown reader {kind!r}: choose one of {sorted(READERS)}")
    return READERS[kind]


def load_reader(folder: Path) -> Reader:
    """A reader saved by ``openqa train`` (its ``best`` or ``last`` folder, or the run folder)."""
    folder = Path(folder)
    if (folder / "best").is_dir():
        folder = folder / "best"
    info = read_checkpoint_info(folder)
    try:
        reader = reader_class(info.get("kind", "")).from_checkpoint(folder, info["settings"])
    except (KeyError, FileNotFoundError, RuntimeError) as exc:  # a missing setting or file, weights of another shape
        raise OpenQAError(f"{folder}: incomplete or incompatible reader checkpoint ({type(exc).__name__}: "
                          f"{(str(exc).splitlines() or [''])[0]}); train it again with `openqa train`") from None
    reader.settings.update(info["settings"])  # the retriever and evidence depth it was trained with
    return reader


def examples(questions: Sequence[Question], evidence: dict[str, dict[str, str]]) -> list[Example]:
    """Pair each question with its options' evidence."""
    return [Example(q, evidence.get(q.qid, {})) for q in questions]


class ReaderScorer(OptionScorer):
    """A trained reader over the evidence a retriever finds for each option."""

    #: Its scores are the reader's logits.
    scale = "logits"

    def __init__(self, reader: Reader, retriever: IRScorer, top_n: int) -> None:
        self.reader = reader
        self.retriever = retriever
        self.top_n = top_n
        self.settings = replace(retriever.settings, top_n=top_n)  # the evidence depth the reader reads

    def score(self, questions: Sequence[Question], progress: bool = True) -> list[OptionScores]:
        evidence, hits = retrieve_evidence(self.retriever, questions, self.top_n, progress)
        batch = examples(questions, evidence)
        scores = predict(self.reader, batch, progress=progress)
        return [
            OptionScores(e.question, {letter: float(s) for letter, s in zip(e.question.options, np.asarray(row))},
                         dict(zip(e.question.options, per_q)))
            for e, row, per_q in zip(batch, scores, hits)
        ]
