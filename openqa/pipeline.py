"""Putting the pieces together for a command: open a method's index and scorer with its dev-tuned
settings, tune a method on dev, train a reader. The CLI parses flags into a ``Context`` and calls
these; nothing here prints."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from openqa.config import Settings
from openqa.data import dataset_spec, load_questions, parse_train_split, split_questions
from openqa.errors import OpenQAError
from openqa.evaluate import load_tuned, run_record, tune_fusion, tune_ir, tune_query_mode, tuned_path, write_atomic
from openqa.readers.evidence import load_or_compute
from openqa.readers.registry import ReaderScorer, examples, load_reader, reader_class
from openqa.readers.train import TrainConfig, train
from openqa.retrieval.base import EngineOptions, Index
from openqa.retrieval.hybrid import Fusion, FusedEngine
from openqa.retrieval.registry import open_index, tokenizer_config
from openqa.scorers.base import OptionScorer
from openqa.scorers.hybrid import HybridScorer
from openqa.scorers.ir import TUNED_QUERY_MODES, IRScorer, IRSettings
from openqa.scorers.registry import method


@dataclass(frozen=True)
class Context:
    """Where things are and how indexes were built, as the user gave them."""

    settings: Settings
    options: EngineOptions = EngineOptions()
    ngram: int | None = None
    zh_mode: str | None = None

    def open(self, lang: str, engine: str) -> Index:
        """The ``lang``/``engine`` index, refused if built with other settings or corpus."""
        tokenizer = tokenizer_config(lang, engine, ngram=self.ngram, **({"mode": self.zh_mode} if lang == "zh" else {}))
        return open_index(self.settings.index_dir, lang, engine, tokenizer, self.settings.data_dir, self.options)


def open_scorer(
    ctx: Context, name: str, lang: str, exam: str, dataset: str | None, *, engine: str | None = None,
    query: str | None = None, top_n: int | None = None, aggregate: str | None = None, model: str | None = None,
) -> tuple[OptionScorer, Index, str]:
    """A method's scorer over its index, with dev-tuned settings overridden by any given; and their source."""
    if name == "reader":
        return open_reader_scorer(ctx, model, lang, exam)
    m = method(name)
    tuned, source = load_tuned(name, dataset, query)
    flags = {k: v for k, v in {"top_n": top_n, "aggregate": aggregate}.items() if v is not None}
    if flags or (m.parts and query):
        source += " + command-line flags"
    if m.parts:  # fuse the parts' option scores, each part with its own dev-tuned settings unless flags override them
        if engine:
            raise OpenQAError(f"--engine does not apply to {name}: it reads each part's own index ({', '.join(m.parts)})")
        first, second = (open_scorer(ctx, part, lang, exam, dataset, query=query, **flags)[0] for part in m.parts)
        hybrid = HybridScorer(first, second, Fusion(tuned.fusion, tuned.weight))
        return hybrid, FusedEngine(first.engine, second.engine), source
    index = ctx.open(lang, engine or m.engine)
    return m.make(index, exam, IRSettings(**{**asdict(tuned), **flags})), index, source


def open_retriever(ctx: Context, name: str, lang: str, exam: str, dataset: str | None, query: str | None = None) -> IRScorer:
    """An IR scorer (dev-tuned; ``query`` overrides its query mode) whose retrieval feeds a reader."""
    scorer, _, _ = open_scorer(ctx, name, lang, exam, dataset, query=query)
    if not isinstance(scorer, IRScorer):
        raise OpenQAError(f"{name} does not retrieve paragraphs; use ir-custom, ir-es, dense or hybrid as the retriever")
    return scorer


def open_reader_scorer(ctx: Context, model: str | None, lang: str, exam: str) -> tuple[OptionScorer, Index, str]:
    """A trained reader with the retriever and evidence depth it was trained with."""
    if not model:
        raise OpenQAError("--method reader needs --model: a run folder or checkpoint written by openqa train")
    reader = load_reader(Path(model))
    trained = reader.settings
    retriever = open_retriever(ctx, trained.get("retriever", "ir-custom"), lang, exam, trained.get("dataset"), trained.get("query"))
    return ReaderScorer(reader, retriever, trained.get("top_n", 3)), retriever.engine, f"reader {model}"


def tune(ctx: Context, name: str, dataset: str, engine: str | None = None) -> tuple[IRSettings, dict[str, Any], Path]:
    """Grid-search a method's settings on ``dataset`` dev and record the choice in eval/tuned/."""
    spec = dataset_spec(dataset)
    questions = load_questions(dataset, "dev", ctx.settings.require_data_dir())
    m = method(name)
    if m.parts:
        scorer, index, _ = open_scorer(ctx, name, spec.lang, spec.exam, dataset)
        best, table = tune_fusion(scorer, questions)
    else:
        index = ctx.open(spec.lang, engine or m.engine)
        scorer = m.make(index, spec.exam, IRSettings())
        modes = TUNED_QUERY_MODES if spec.lang == "en" else ("full",)
        search = tune_ir if isinstance(scorer, IRScorer) else tune_query_mode
        best, table = search(scorer, questions, modes)
    record = {
        "dataset": dataset, "split": "dev", "method": name, "chosen": asdict(best),
        "dev_accuracy": max(row["accuracy"] for row in table),
        "grid": [{k: row[k] for k in ("top_n", "aggregate", "query", "fusion", "weight", "accuracy") if k in row} for row in table],
        "index": {"tokenizer": index.manifest["tokenizer"]},
        **run_record(),
    }
    path = tuned_path(name, dataset)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, json.dumps(record, indent=2) + "\n")
    return best, record, path


def train_reader(
    ctx: Context, kind: str, model: str | None, dataset: str, train_split: str | None, retriever: str, top_n: int,
    config: TrainConfig, output: Path, max_length: int, query: str | None = None,
) -> dict[str, Any]:
    """Train a reader on ``dataset`` (official train split, or a seeded split such as dev:0.8); ``query``
    is the evidence query mode (default: the retriever's dev-tuned one)."""
    spec = dataset_spec(dataset)
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
    if kind == "maxout":
        from openqa.readers.maxout import MaxoutReader

        reader = MaxoutReader.from_word_vectors(ctx.open(spec.lang, "word2vec"))
    elif not model:
        raise OpenQAError(f"--reader {kind} needs --model (e.g. all-MiniLM-L6-v2 or a hub id)")
    else:
        reader = reader_class(kind)(model, ctx.settings.models_dir, max_length=max_length)
    scorer = open_retriever(ctx, retriever, spec.lang, spec.exam, dataset, query)
    query = scorer.settings.query
    cache = ctx.settings.index_dir / "evidence"
    sets = [
        examples(qs, load_or_compute(cache / f"{dataset}-{part}-{retriever}-{query}-n{top_n}.json", scorer, qs, top_n))
        for qs, part in zip((train_qs, select_qs), parts)
    ]
    reader.settings.update({"retriever": retriever, "query": query, "top_n": top_n, "dataset": dataset})
    record = {"dataset": dataset, "reader": kind, "model": model, "protocol": protocol, "retriever": retriever,
              "query": query, "top_n": top_n, "precision": reader.precision, "train_questions": len(train_qs),
              "selection_questions": len(select_qs), "reader_settings": reader.settings, **run_record()}
    return train(reader, sets[0], sets[1], config, output, record, load_reader)
