"""Training a reader on questions with their evidence, as ``openqa train`` does, for scripts that
time or check the training itself on examples of their own (``scripts/benchmarks/gpu_models.py``),
and cross-fitting one on a dataset's dev split (``openqa train --cross-fit K``; ``scripts/studies/reader_curve.py``)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from openqa import arguments as arg
from openqa.errors import UsageError

if TYPE_CHECKING:
    from openqa.api.workspace import Workspace
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


def cross_fit_reader(dataset: str, reader: str = "maxout", *, folds: int = 5, output: str | Path,
                     config: TrainConfig | None = None, model: str | None = None, retriever: str = "ir-custom",
                     top_n: int = 3, max_length: int = 256, query: str | None = None,
                     folds_run: Sequence[int] | None = None, train_limit: int | None = None, final: bool = True,
                     write: bool = True, workspace: Workspace | None = None, **where: Any) -> dict[str, Any]:
    """Train a reader on ``dataset``'s dev split by k-fold cross-fitting, as ``openqa train --cross-fit K``
    does (for a data folder without a train split): dev cut into ``folds`` folds by question content,
    each fold scored after every epoch by a reader trained on the others, the epoch count chosen by the
    pooled out-of-fold accuracy, and (``final``) one reader trained on all of dev for that many epochs.

    :param dataset: the dataset whose dev split trains (``us``, ``mainland``, ``tw-en``...).
    :param reader: the reader kind (``maxout``, ``bert``, ``t5``).
    :param folds: K, at least 2.
    :param output: the run folder: each fold's run in ``folds/fold-<i>``, the final reader's checkpoint
        in ``best`` (a rerun resumes every run from its last finished epoch).
    :param config: the optimisation settings (default: ``TrainConfig()``; Max-out trains at lr 1e-3).
    :param model: the model of a bert or t5 reader.
    :param retriever: the method whose retrieval gives the evidence.
    :param top_n: evidence paragraphs per option.
    :param max_length: tokens per input of a bert or t5 reader.
    :param query: the evidence query mode (default: the retriever's dev-tuned one).
    :param folds_run: the folds (1..K) to hold out and predict (default: all of them); a learning
        curve may run one.
    :param train_limit: train each fold's reader on at most this many questions of the other folds
        (the first in a seeded order of their content; default: all).
    :param final: train the reader on all of dev too.
    :param write: write the record ``train-<reader>-<dataset>-crossfit<K>.json`` and the out-of-fold
        predictions beside it (``--predictions NAME=FILE`` reads them) into the results folder.
    :param workspace: where data, indexes and results are (a ``Workspace``); its fields may also be
        given as keywords (``data_dir=...``, ``index_dir=...``, ``results_dir=...``).
    :returns: the record: dataset, split (dev), method (reader), n, correct, accuracy (0-100, out of
        fold), the protocol, ``cross_fit`` (folds, seed, questions per fold, seconds, accuracy by epoch,
        the epoch count chosen), ``final`` and the provenance (command, openqa version).
    :raises OpenQAError: on bad arguments, missing data or indexes (one line)."""
    from openqa.api.workspace import Workspace
    from openqa.data.questions import DATASETS
    from openqa.readers.registry import READERS
    from openqa.readers.train import TrainConfig
    from openqa.training import cross_fit_reader as run

    dataset = arg.one_of("dataset", dataset, DATASETS)
    reader = arg.one_of("reader", reader, READERS)
    k = arg.whole("folds", folds, 2)
    where_to = arg.path("output", output)
    if where_to is None:
        raise UsageError("output must name the run folder, not None")
    if config is None:
        config = TrainConfig(lr=1e-3 if reader == "maxout" else 2e-5)
    if not isinstance(config, TrainConfig):
        raise UsageError(f"config must be a TrainConfig, not {type(config).__name__}")
    if folds_run is not None and (not isinstance(folds_run, (list, tuple)) or not folds_run):
        raise UsageError("folds_run must be a list of fold numbers (1..K), at least one")
    chosen = None if folds_run is None else [arg.whole("folds_run", f, 1, k) for f in folds_run]
    return run(Workspace.of(workspace, **where).context(), reader, arg.optional_text("model", model), dataset, arg.text("retriever", retriever),
               arg.whole("top_n", top_n, 1), config, where_to, arg.whole("max_length", max_length, 1), k,
               arg.optional_text("query", query), folds_run=chosen,
               train_limit=arg.optional_whole("train_limit", train_limit, 1), final=arg.flag("final", final),
               write=arg.flag("write", write))
