"""Training a reader on questions with their evidence, as ``openqa train`` does, for scripts that
time or check the training itself on examples of their own (``scripts/benchmarks/gpu_models.py``)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from openqa import arguments as arg
from openqa.errors import UsageError

if TYPE_CHECKING:
    from openqa.data import Question
    from openqa.readers.base import Reader
    from openqa.readers.train import TrainConfig


def train_reader(reader: Reader, train: Sequence[tuple[Question, Mapping[str, str]]],
                 select: Sequence[tuple[Question, Mapping[str, str]]], config: TrainConfig, folder: str | Path) -> dict[str, Any]:
    """Train ``reader`` as ``openqa train`` trains one (seeded shuffles, gradient accumulation, linear
    warm-up, mixed precision over fp32 weights), keeping the checkpoint with the best accuracy on
    ``select`` in ``folder/best`` (a run stopped there resumes from its last finished epoch).

    :param reader: the reader to train (e.g. a ``MultipleChoiceReader``).
    :param train: the training questions, each with its options' evidence text (letter -> text).
    :param select: the questions the best epoch is chosen on, in the same form.
    :param config: the optimisation settings (``TrainConfig``).
    :param folder: the run folder.
    :returns: the run record: each of its ``epochs`` with its loss, seconds, examples per second and
        selection accuracy.
    :raises OpenQAError: on examples that are not questions with evidence, or a run folder of another run (one line)."""
    from openqa.data import Question
    from openqa.readers.base import Example, Reader
    from openqa.readers.registry import load_reader
    from openqa.readers.train import TrainConfig
    from openqa.readers.train import train as run

    if not isinstance(reader, Reader):
        raise UsageError(f"reader must be a Reader, not {type(reader).__name__}")
    if not isinstance(config, TrainConfig):
        raise UsageError(f"config must be a TrainConfig, not {type(config).__name__}")
    where = arg.path("folder", folder)
    if where is None:
        raise UsageError("folder must name the run folder, not None")

    def examples(name: str, pairs: Any) -> list[Example]:
        if not isinstance(pairs, (list, tuple)) or not pairs:
            raise UsageError(f"{name} must be a list of (question, evidence) pairs, at least one")
        for number, pair in enumerate(pairs, start=1):
            if not (isinstance(pair, tuple) and len(pair) == 2 and isinstance(pair[0], Question) and isinstance(pair[1], Mapping)
                    and all(isinstance(k, str) and isinstance(v, str) for k, v in pair[1].items())):
                raise UsageError(f"{name}: item {number} must be a (Question, letter -> evidence text) pair")
        return [Example(question, dict(evidence)) for question, evidence in pairs]

    return run(reader, examples("train", train), examples("select", select), config, where, {}, load_reader)
