"""The ``openqa train`` command: a reader trained on an exam's questions with the evidence a
retriever gives them (``train_reader``), or cross-fitted on dev where no train split exists
(``cross_fit_reader``); each returns its record and prints nothing. Readers, and with them torch,
are imported when one is trained."""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from openqa.corpus.sources import corpus_tag
from openqa.data import Question, load_questions
from openqa.errors import OpenQAError
from openqa.evaluate.results import ensure_writable, run_record, write_all_or_none
from openqa.methods import open_retriever
from openqa.pipeline import provenance
from openqa.workspace import Context, Exam

if TYPE_CHECKING:
    from openqa.readers.base import Example, Reader
    from openqa.readers.train import TrainConfig
    from openqa.scorers.ir import IRScorer

#: The fewest tokens a reader input may hold (question start, option and some evidence).
MIN_READER_LENGTH = 32


@dataclass(frozen=True)
class ReaderInputs:
    """What training a reader of one kind on one exam needs, opened once: new readers, the retriever
    whose paragraphs are the evidence, and what every training record says of them."""

    make: Callable[[], Reader]
    retriever: IRScorer
    query: str
    top_n: int
    record: dict[str, Any]
    cache: Callable[[str], Path]

    def examples(self, questions: list[Question], part: str) -> list[Example]:
        """``questions`` with their evidence (cached under ``part``: the questions' split and cut)."""
        from openqa.readers.evidence import load_or_compute
        from openqa.readers.registry import examples

        return examples(questions, load_or_compute(self.cache(part), self.retriever, questions, self.top_n))


def check_reader_sizes(top_n: int, max_length: int) -> None:
    """Refuse, before any data is read, evidence of no paragraph or inputs too short for a question."""
    if top_n < 1:
        raise OpenQAError(f"--top-n must be at least 1, not {top_n}")
    if max_length < MIN_READER_LENGTH:
        raise OpenQAError(f"--max-length must be at least {MIN_READER_LENGTH} tokens, not {max_length}")


def reader_inputs(
    ctx: Context, kind: str, model: str | None, dataset: str, retriever: str, top_n: int, max_length: int,
    query: str | None = None, seed: int = 13,
) -> ReaderInputs:
    """Open what training ``kind`` on ``dataset`` needs (see ``ReaderInputs``); each reader made
    starts from the weights ``seed`` gives (so that every fold of a cross-fit starts alike)."""
    from openqa.readers.registry import reader_class
    from openqa.readers.train import seed_everything

    check_reader_sizes(top_n, max_length)
    target = Exam.resolve(dataset)
    cls = reader_class(kind)
    index = ctx.open(target.lang, cls.needs_index) if cls.needs_index else None

    def fresh() -> Reader:
        seed_everything(seed)
        return cls.create(model, ctx.settings.models_dir, max_length, index)

    made = [fresh()]  # a model that cannot load fails here, before any evidence is retrieved; handed out first
    scorer = open_retriever(ctx, retriever, target, query)
    query = scorer.settings.query
    settings = {"retriever": retriever, "query": query, "top_n": top_n, "dataset": dataset, "corpus": ctx.corpus}

    def make() -> Reader:
        reader = made.pop() if made else fresh()
        reader.settings.update(settings)
        return reader

    first = make()
    made.append(first)
    record = {"dataset": dataset, "corpus": ctx.corpus, "reader": kind, "model": model, "retriever": retriever,
              "query": query, "top_n": top_n, "precision": first.precision, "reader_settings": first.settings,
              "index": provenance(scorer.engine)}
    cache_dir = ctx.settings.index_dir / "evidence"
    return ReaderInputs(make, scorer, query, top_n, record,
                        lambda part: cache_dir / f"{dataset}-{part}-{retriever}-{query}-n{top_n}{corpus_tag(ctx.corpus)}.json")


def train_reader(
    ctx: Context, kind: str, model: str | None, dataset: str, train_split: str | None, retriever: str, top_n: int,
    config: TrainConfig, output: Path, max_length: int, query: str | None = None,
) -> dict[str, Any]:
    """Train a reader on ``dataset`` (official train split, or a seeded split such as dev:0.8); ``query``
    is the evidence query mode (default: the retriever's dev-tuned one). ``cross_fit_reader`` trains
    on all of dev instead, with out-of-fold predictions."""
    from openqa.data import parse_train_split, split_questions
    from openqa.readers.registry import load_reader
    from openqa.readers.train import train

    check_reader_sizes(top_n, max_length)
    ensure_writable(output, "--output", create=False)
    data_dir = ctx.settings.require_data_dir()
    if train_split:
        source, fraction = parse_train_split(train_split)
        train_qs, select_qs = split_questions(load_questions(dataset, source, data_dir), fraction)
        protocol = (f"--train-split {train_split}: seeded (13) question-level split of {source}, "
                    f"{len(train_qs)} train / {len(select_qs)} selection")
        parts = (f"{source}{fraction:g}-train", f"{source}{fraction:g}-select")
    else:
        train_qs, select_qs = load_questions(dataset, "train", data_dir), load_questions(dataset, "dev", data_dir)
        protocol, parts = "official train split; selection on dev", ("train", "dev")
    inputs = reader_inputs(ctx, kind, model, dataset, retriever, top_n, max_length, query, config.seed)
    sets = [inputs.examples(qs, part) for qs, part in zip((train_qs, select_qs), parts)]
    record = {**inputs.record, "protocol": protocol, "train_questions": len(train_qs),
              "selection_questions": len(select_qs), **run_record()}
    return train(inputs.make(), sets[0], sets[1], config, output, record, load_reader)


#: The splits cross-fitting may train on (test never trains or selects).
CROSS_FIT_SPLIT = "dev"


def cross_fit_name(kind: str, dataset: str, k: int) -> str:
    """The stem of a cross-fit's record and predictions file: ``train-<reader>-<dataset>-crossfit<K>``."""
    return f"train-{kind}-{dataset}-crossfit{k}"


def cross_fit_protocol(k: int, seed: int) -> str:
    """The protocol, in one sentence, that a cross-fit record states."""
    return (f"--cross-fit {k}: dev cut into {k} folds by content (sha256 of '{seed}:' + the question digest, modulo {k}); "
            f"for each fold a reader trains on the other {k - 1} and scores it after every epoch; the epoch count with "
            "the best pooled out-of-fold accuracy is chosen; the out-of-fold scores at it are the dev predictions; "
            "a reader trained on all of dev for that many epochs is the checkpoint for test")


def cross_fit_reader(
    ctx: Context, kind: str, model: str | None, dataset: str, retriever: str, top_n: int, config: TrainConfig,
    output: Path, max_length: int, k: int, query: str | None = None, *, folds_run: list[int] | None = None,
    train_limit: int | None = None, final: bool = True, write: bool = True,
) -> dict[str, Any]:
    """``openqa train --cross-fit K`` (``openqa.readers.crossfit``): train a reader of ``kind`` on dev
    without a train split, so that every dev question gets a prediction from a reader that never saw it.

    Fold runs go to ``output/folds/fold-<i>``; the reader trained on all of dev (``final``) to
    ``output`` itself (``openqa eval --method reader --model OUTPUT`` reads its ``best``). With
    ``write``, the record ``train-<reader>-<dataset>-crossfit<K>.json`` and the out-of-fold predictions
    ``<that stem>.predictions.jsonl`` (a part for ``--predictions NAME=FILE``) go to the results folder.
    ``folds_run`` and ``train_limit`` cut the work (a learning curve): see ``crossfit.cross_fit``.

    :return: the record (standard fields: dataset, split, method, n, accuracy 0-100, command, version).
    """
    from openqa.readers.crossfit import cross_fit, out_of_fold_rows, train_on_all
    from openqa.readers.registry import load_reader

    check_reader_sizes(top_n, max_length)
    ensure_writable(output, "--output", create=False)
    if write:
        ensure_writable(ctx.settings.results_dir)
    questions = load_questions(dataset, CROSS_FIT_SPLIT, ctx.settings.require_data_dir())
    inputs = reader_inputs(ctx, kind, model, dataset, retriever, top_n, max_length, query, config.seed)
    data = inputs.examples(questions, CROSS_FIT_SPLIT)
    protocol = cross_fit_protocol(k, config.seed)
    record = {**inputs.record, "protocol": protocol, **run_record()}
    start = time.perf_counter()
    result = cross_fit(inputs.make, data, k, config, output / "folds", record, load_reader, folds_run, train_limit)
    fitting = time.perf_counter() - start
    summary: dict[str, Any] = {
        "dataset": dataset, "split": CROSS_FIT_SPLIT, "method": "reader", "variant": f"{kind}-crossfit{k}",
        "n": result["n"], "correct": result["correct"], "accuracy": round(result["accuracy"], 2),
        "selection_accuracy": round(result["accuracy"], 2), **{key: v for key, v in record.items() if key != "protocol"},
        "protocol": protocol,
        "cross_fit": {"k": k, "seed": config.seed, "split": CROSS_FIT_SPLIT, "questions": len(questions),
                      "folds_run": sorted(f["fold"] for f in result["folds"]), "train_limit": train_limit,
                      "folds": result["folds"], "accuracy_by_epoch": result["accuracy_by_epoch"],
                      "epochs_chosen": result["epochs_chosen"], "seconds": round(fitting, 1)},
        "config": asdict(config),
    }
    if final:
        start = time.perf_counter()
        run = train_on_all(inputs.make, data, config, result["epochs_chosen"], output,
                           {**record, "protocol": protocol + " (this run: all of dev)", "train_questions": len(data)},
                           load_reader)
        summary["final"] = {"train_questions": len(data), "epochs": result["epochs_chosen"], "checkpoint": str(output / "best"),
                            "seconds": round(time.perf_counter() - start, 1), "loss": [e["loss"] for e in run["epochs"]]}
    if write:
        name = cross_fit_name(kind, dataset, k)
        rows = out_of_fold_rows(result, data)
        summary["files"] = {"summary": f"{name}.json", "predictions": f"{name}.predictions.jsonl"}
        folder = ctx.settings.results_dir
        write_all_or_none({folder / f"{name}.predictions.jsonl": "".join(json.dumps(r) + "\n" for r in rows),
                           folder / f"{name}.json": json.dumps(summary, indent=2, ensure_ascii=False) + "\n"})
    return summary
