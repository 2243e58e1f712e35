"""Putting the pieces together for a command: open a method with its settings (each with its
source), evaluate it, tune it on dev, train a reader. The CLI parses flags into a ``Context`` and
calls these; each returns a record and nothing here prints (one-line notes go to
``Context.notify``). Readers, and with them torch, are imported only when a reader is used."""

from __future__ import annotations

import hashlib
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from openqa.answer import as_dict, solve
from openqa.config import Settings
from openqa.corpus.sources import corpus_tag
from openqa.data import DEFAULT_EXAMS, Question, dataset_spec, exam_dataset, load_questions, read_question_file
from openqa.errors import IndexMissingError, OpenQAError
from openqa.evaluate.metrics import prediction_rows, summarise
from openqa.evaluate.results import ensure_writable, run_record, write_results
from openqa.llm.settings import LLMSettings
from openqa.retrieval.base import EngineOptions, Index
from openqa.retrieval.hybrid import Fusion, FusedEngine
from openqa.retrieval.registry import build_index, engine_class, open_index, tokenizer_config
from openqa.scorers.base import OptionScorer
from openqa.scorers.hybrid import HybridScorer
from openqa.scorers.ir import TUNED_QUERY_MODES, IRScorer, IRSettings
from openqa.scorers.registry import method
from openqa.tuning import resolve_settings, save_tuned, tune_fusion, tune_ir, tune_query_mode

if TYPE_CHECKING:
    from openqa.readers.train import TrainConfig

#: Settings only a fused method uses (left out of other methods' records).
FUSION_KEYS = ("fusion", "weight")
#: Settings a hybrid record takes from its first part (its own tuned record holds only the fusion).
FIRST_PART_KEYS = ("top_n", "aggregate", "query")


#: The fewest tokens a reader input may hold (question start, option and some evidence).
MIN_READER_LENGTH = 32
#: What a record says of the index behind it.
PROVENANCE_KEYS = ("engine", "scoring", "tokenizer", "doc_params", "corpus", "corpus_checksum", "built_at")


def provenance(index: Index) -> dict[str, Any]:
    """The manifest entries that identify how ``index`` was built, for result, tune and train records."""
    return {k: index.manifest[k] for k in PROVENANCE_KEYS if k in index.manifest}


def _silent(message: str) -> None:
    """The default ``Context.notify``: say nothing."""


@dataclass(frozen=True)
class Context:
    """Where things are and how indexes were built, as the user gave them; ``notify`` receives
    one-line notes about work done on the user's behalf (a missing quick index being built);
    ``corpus`` names the corpus whose indexes every command opens (None: the MedQA textbooks)."""

    settings: Settings
    options: EngineOptions = EngineOptions()
    ngram: int | None = None
    zh_mode: str | None = None
    notify: Callable[[str], None] = _silent
    corpus: str | None = None

    def tokenizer(self, lang: str, engine: str) -> dict[str, Any]:
        """Index terms for ``lang``/``engine`` with this command's tokenizer flags."""
        return tokenizer_config(lang, engine, ngram=self.ngram, **({"mode": self.zh_mode} if lang == "zh" else {}))

    def open(self, lang: str, engine: str) -> Index:
        """The ``lang``/``engine`` index, refused if built with other settings or corpus.

        A missing index that builds in seconds (custom, pmi) is built first when the textbooks are
        at hand; a slow one, and any of a named corpus (whose source only ``openqa index --corpus``
        is given), keeps the error that names the command building it.
        """
        tokenizer = self.tokenizer(lang, engine)
        s = self.settings
        try:
            return open_index(s.index_dir, lang, engine, tokenizer, s.data_dir, self.options, self.corpus)
        except IndexMissingError:
            if self.corpus or not engine_class(engine).quick_build or s.data_dir is None:
                raise
        self.notify(f"no {lang} {engine} index in {s.index_dir}: building it first (a few seconds)")
        build_index(s.require_data_dir(), s.index_dir, lang, engine, tokenizer, self.options)
        return open_index(s.index_dir, lang, engine, tokenizer, s.data_dir, self.options)


@dataclass(frozen=True)
class Exam:
    """What questions are scored as: corpus language, exam (the paper's per-exam parameters) and
    the dataset whose dev-tuned settings apply; ``source`` says how the exam was chosen."""

    lang: str
    exam: str
    dataset: str
    source: str

    @classmethod
    def resolve(cls, dataset: str | None = None, lang: str | None = None, exam: str | None = None) -> "Exam":
        """A named dataset's own exam; else ``exam`` (default by language: usmle for en, mcmle for zh)."""
        if dataset:
            spec = dataset_spec(dataset)
            return cls(spec.lang, exam or spec.exam, dataset, "--exam" if exam else f"dataset {dataset}")
        lang = lang or "en"
        chosen = exam or DEFAULT_EXAMS[lang]
        return cls(lang, chosen, exam_dataset(lang, chosen), "--exam" if exam else f"default for --lang {lang}")


@dataclass(frozen=True)
class Overrides:
    """Settings given on the command line; each replaces its tuned value."""

    top_n: int | None = None
    aggregate: str | None = None
    query: str | None = None

    def given(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}


@dataclass(frozen=True)
class Opened:
    """A method ready to score: its scorer, the index it reads, and the settings it uses with the
    source of each (``settings["sources"]``)."""

    scorer: OptionScorer
    index: Index
    settings: dict[str, Any]


def open_scorer(
    ctx: Context, name: str, target: Exam, overrides: Overrides = Overrides(), *, engine: str | None = None,
    model: str | None = None, llm: LLMSettings | None = None,
) -> Opened:
    """A method's scorer over its index, with the dev-tuned settings of ``target.dataset``
    (yours, else shipped) overridden by any given; ``llm`` holds the settings of ``--method llm``."""
    if name == "reader":
        return open_reader_scorer(ctx, model, target)
    if name == "llm":
        from openqa.llm.method import open_llm

        return open_llm(ctx, target, llm)
    m = method(name)
    settings, sources = resolve_settings(name, target.dataset, ctx.settings.settings_dir, overrides.given(), ctx.corpus)
    used = [k for k in sources if m.parts or k not in FUSION_KEYS]
    record: dict[str, Any] = {**{k: getattr(settings, k) for k in used}, "exam": target.exam}
    sources = {**{k: sources[k] for k in used}, "exam": target.source}
    if m.fixed:
        fixed, where = m.fixed(target.exam)
        record.update(fixed)
        sources.update(dict.fromkeys(fixed, where))
    if m.parts:  # fuse the parts' option scores, each part with its own dev-tuned settings unless flags override them
        if engine:
            raise OpenQAError(f"--engine does not apply to {name}: it reads each part's own index ({', '.join(m.parts)})")
        first, second = (open_scorer(ctx, part, target, overrides) for part in m.parts)
        scorer = HybridScorer(first.scorer, second.scorer, Fusion(settings.fusion, settings.weight))
        for key in FIRST_PART_KEYS:  # the fused record shows the first part's retrieval settings
            record[key], sources[key] = first.settings[key], f"{m.parts[0]}: {first.settings['sources'][key]}"
        record["parts"] = {part: opened.settings for part, opened in zip(m.parts, (first, second))}
        return Opened(scorer, FusedEngine(first.index, second.index), {**record, "sources": sources})
    index = ctx.open(target.lang, engine or m.engine)
    return Opened(m.make(index, target.exam, settings), index, {**record, "sources": sources})


def open_retriever(ctx: Context, name: str, target: Exam, query: str | None = None) -> IRScorer:
    """An IR scorer (dev-tuned; ``query`` overrides its query mode) whose retrieval feeds a reader."""
    scorer = open_scorer(ctx, name, target, Overrides(query=query)).scorer
    if not isinstance(scorer, IRScorer):
        raise OpenQAError(f"{name} does not retrieve paragraphs; use ir-custom, ir-es, dense or hybrid as the retriever")
    return scorer


def open_reader_scorer(ctx: Context, model: str | None, target: Exam) -> Opened:
    """A trained reader with the retriever, evidence query and depth it was trained with."""
    from openqa.readers.registry import ReaderScorer, load_reader

    if not model:
        raise OpenQAError("--method reader needs --model: a run folder or checkpoint written by openqa train")
    reader = load_reader(Path(model))
    trained = reader.settings
    if trained.get("corpus") != ctx.corpus:
        used = f"--corpus {trained['corpus']}" if trained.get("corpus") else "the MedQA textbooks (no --corpus)"
        raise OpenQAError(f"reader {model} was trained on evidence from {used}: run it with that corpus")
    retriever_target = Exam.resolve(trained.get("dataset") or target.dataset, exam=target.exam)
    retriever = open_retriever(ctx, trained.get("retriever", "ir-custom"), retriever_target, trained.get("query"))
    scorer = ReaderScorer(reader, retriever, trained.get("top_n", 3))
    where = f"reader checkpoint {Path(model).resolve()}"
    record = {"top_n": scorer.top_n, "query": retriever.settings.query, "exam": target.exam,
              "retriever": trained.get("retriever", "ir-custom")}
    return Opened(scorer, retriever.engine, {**record, "sources": dict.fromkeys(record, where)})


@dataclass(frozen=True)
class EvalRequest:
    """One ``openqa eval``: a method over a dataset split or a question file."""

    method: str = "ir-custom"
    dataset: str | None = None
    split: str | None = None
    questions: Path | None = None
    lang: str | None = None
    exam: str | None = None
    limit: int | None = None
    engine: str | None = None
    model: str | None = None
    overrides: Overrides = Overrides()
    llm: LLMSettings | None = None

    def __post_init__(self) -> None:
        if (self.dataset is None) == (self.questions is None):
            raise OpenQAError("give --dataset or --questions (one of them)")
        if self.questions is not None and self.split is not None:
            raise OpenQAError("--split applies to --dataset; a --questions file is scored whole")
        if self.dataset is not None and self.lang is not None and self.lang != dataset_spec(self.dataset).lang:
            raise OpenQAError(f"--lang {self.lang} does not apply to --dataset {self.dataset}, "
                              f"whose questions are {dataset_spec(self.dataset).lang}")
        if self.limit is not None and self.limit < 1:
            raise OpenQAError("--limit must be at least 1")

    def variant(self) -> str | None:
        """What distinguishes this result file from the method's default one (flags overriding
        tuned settings, a reader run; for a question file, which file and how it is scored), so a
        tuned result is never overwritten by another run."""
        o = self.overrides
        parts = []
        if self.questions is not None:
            where = hashlib.sha256(str(Path(self.questions).resolve()).encode()).hexdigest()[:8]
            parts += [f"file-{where}", *(value for value in (self.lang, self.exam) if value)]
        parts += [f"{flag}-{value}" for flag, value in (("engine", self.engine), ("query", o.query),
                                                         ("top", o.top_n), ("aggregate", o.aggregate)) if value]
        if self.method == "reader" and self.model:
            parts.append(Path(self.model).resolve().name)
        if self.method == "llm" and self.llm:
            parts.append(self.llm.variant())
        return "-".join(parts) or None


def load_eval_questions(ctx: Context, req: EvalRequest) -> tuple[list[Question], Exam, str, str, str]:
    """The questions an evaluation scores, what they are scored as, and the name, split and data file
    its record gives."""
    if req.dataset:
        spec, split = dataset_spec(req.dataset), req.split or "test"
        questions = load_questions(req.dataset, split, ctx.settings.require_data_dir())
        name, data = req.dataset, spec.files[split]
    else:
        questions = read_question_file(Path(req.questions))
        name, split, data = Path(req.questions).stem, "file", str(Path(req.questions).resolve())
    if req.limit is not None:
        questions = questions[: req.limit]
    return questions, Exam.resolve(req.dataset, req.lang, req.exam), name, split, data


def variant(ctx: Context, req: EvalRequest) -> str | None:
    """The request's variant (``EvalRequest.variant``) ending with the named corpus' tag, so a result
    over another corpus never overwrites the textbooks' one."""
    return f"{req.variant() or ''}{corpus_tag(ctx.corpus)}".lstrip("-") or None


def corpus_line(manifest: dict[str, Any]) -> str:
    """What a result says of the corpus its index holds: name (or language), books, paragraphs, checksum."""
    m = manifest
    name = f"{m['corpus']} ({m.get('corpus_kind')}, {m['lang']})" if m.get("corpus") else m["lang"]
    books = f"{len(m['books'])} books, " if "books" in m else ""
    return f"{name}: {books}{m['paragraphs']} paragraphs, checksum {m['corpus_checksum'][:12]}"


def evaluate(ctx: Context, req: EvalRequest, progress: bool = True) -> dict[str, Any]:
    """Score ``req``'s questions with its method, write the result files under the results folder,
    and return the summary record (accuracy, CI, ties, settings with sources, files)."""
    out_dir = ensure_writable(ctx.settings.results_dir)
    questions, target, name, split, data = load_eval_questions(ctx, req)
    start = time.perf_counter()
    opened = open_scorer(ctx, req.method, target, req.overrides, engine=req.engine, model=req.model, llm=req.llm)
    load_seconds = time.perf_counter() - start
    start = time.perf_counter()
    results = opened.scorer.score(questions, progress=progress)
    seconds = time.perf_counter() - start
    m = opened.index.manifest
    summary = {
        "dataset": name,
        "split": split,
        "method": req.method,
        **summarise(results),
        **opened.scorer.report(results),
        "seconds": round(seconds, 3),
        "load_seconds": round(load_seconds, 3),
        "limit": req.limit,
        "variant": variant(ctx, req),
        "settings": opened.settings,
        "data": data,
        "corpus": corpus_line(m),
        "index": provenance(opened.index),
        **run_record(),
    }
    path = write_results(summary, prediction_rows(results), out_dir)
    return {**summary, "files": {"summary": str(path.resolve()), "folder": str(out_dir.resolve())}}


def retrieval_quality(ctx: Context, req: EvalRequest, retrievers: list[str]) -> tuple[dict[str, Any], Path, list[str]]:
    """``eval --retrieval``: answer support of each retriever's question-only evidence, written as
    Markdown, JSON and PNG; also the retrievers skipped, with why."""
    from openqa.retrieval_report import answer_support, write_report

    ensure_writable(ctx.settings.results_dir)
    questions, target, name, split, _ = load_eval_questions(ctx, req)
    query = "filter" if target.lang == "en" else "full"
    table, skipped = {}, []
    for retriever in retrievers:
        try:
            engine = open_scorer(ctx, retriever, target).index
        except OpenQAError as exc:
            skipped.append(f"{retriever}: {exc}")
            continue
        table[retriever] = answer_support(engine, questions, query)
    if not table:
        raise OpenQAError("no retriever could be opened: build the indexes first (openqa index ...)")
    meta = {"dataset": name, "split": split, "method": "retrieval-quality", "n": len(questions),
            "limit": req.limit, "variant": variant(ctx, req),
            "query": "question only (" + ("medical filter" if target.lang == "en" else "full text") + ")", **run_record()}
    return table, write_report(table, meta, ctx.settings.results_dir), skipped


def tune(ctx: Context, name: str, dataset: str, engine: str | None = None) -> tuple[IRSettings, dict[str, Any], Path]:
    """Grid-search a method's settings on ``dataset`` dev and record the choice in the settings folder."""
    target = Exam.resolve(dataset)
    ensure_writable(ctx.settings.settings_dir, "--settings-dir")
    questions = load_questions(dataset, "dev", ctx.settings.require_data_dir())
    m = method(name)
    if m.parts:
        opened = open_scorer(ctx, name, target)
        scorer, index = opened.scorer, opened.index
        best, table = tune_fusion(scorer, questions)
    else:
        index = ctx.open(target.lang, engine or m.engine)
        scorer = m.make(index, target.exam, IRSettings())
        modes = TUNED_QUERY_MODES if target.lang == "en" else ("full",)
        search = tune_ir if isinstance(scorer, IRScorer) else tune_query_mode
        best, table = search(scorer, questions, modes)
    record = {
        "dataset": dataset, "split": "dev", "method": name, "corpus": ctx.corpus, "chosen": asdict(best),
        "dev_accuracy": max(row["accuracy"] for row in table),
        "grid": [{k: row[k] for k in ("top_n", "aggregate", "query", "fusion", "weight", "accuracy") if k in row} for row in table],
        "index": provenance(index),
        **run_record(),
    }
    return best, record, save_tuned(record, ctx.settings.settings_dir)


def train_reader(
    ctx: Context, kind: str, model: str | None, dataset: str, train_split: str | None, retriever: str, top_n: int,
    config: TrainConfig, output: Path, max_length: int, query: str | None = None,
) -> dict[str, Any]:
    """Train a reader on ``dataset`` (official train split, or a seeded split such as dev:0.8); ``query``
    is the evidence query mode (default: the retriever's dev-tuned one)."""
    from openqa.data import parse_train_split, split_questions
    from openqa.readers.evidence import load_or_compute
    from openqa.readers.registry import examples, load_reader, reader_class
    from openqa.readers.train import train

    if top_n < 1:
        raise OpenQAError(f"--top-n must be at least 1, not {top_n}")
    if max_length < MIN_READER_LENGTH:
        raise OpenQAError(f"--max-length must be at least {MIN_READER_LENGTH} tokens, not {max_length}")
    ensure_writable(output, "--output", create=False)
    target = Exam.resolve(dataset)
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

        reader = MaxoutReader.from_word_vectors(ctx.open(target.lang, "word2vec"))
    elif not model:
        raise OpenQAError(f"--reader {kind} needs --model (e.g. all-MiniLM-L6-v2 or a hub id)")
    else:
        reader = reader_class(kind)(model, ctx.settings.models_dir, max_length=max_length)
    scorer = open_retriever(ctx, retriever, target, query)
    query = scorer.settings.query
    cache = ctx.settings.index_dir / "evidence"
    sets = [
        examples(qs, load_or_compute(cache / f"{dataset}-{part}-{retriever}-{query}-n{top_n}{corpus_tag(ctx.corpus)}.json", scorer, qs, top_n))
        for qs, part in zip((train_qs, select_qs), parts)
    ]
    reader.settings.update({"retriever": retriever, "query": query, "top_n": top_n, "dataset": dataset, "corpus": ctx.corpus})
    record = {"dataset": dataset, "corpus": ctx.corpus, "reader": kind, "model": model, "protocol": protocol, "retriever": retriever,
              "query": query, "top_n": top_n, "precision": reader.precision, "train_questions": len(train_qs),
              "selection_questions": len(select_qs), "reader_settings": reader.settings,
              "index": provenance(scorer.engine),
              **run_record()}
    return train(reader, sets[0], sets[1], config, output, record, load_reader)


def answer_record(opened: Opened, question: Question, evidence: int) -> dict[str, Any]:
    """Solve one question with an opened method: the ranked options, each with its best ``evidence``
    paragraphs and the spans of their matched words (``openqa.answer.as_dict``), and the settings
    used with their sources (what ``answer --json`` prints and the HTTP API returns)."""
    return {**as_dict(solve(opened.scorer, question), opened.index, evidence), "settings": opened.settings}
