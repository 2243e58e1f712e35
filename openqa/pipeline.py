"""Putting the pieces together for a command: evaluate a method, tune it on dev, answer one
question (training a reader: ``openqa.training``). The CLI parses flags into a ``Context`` and
calls these; each returns a record and nothing here prints (one-line notes go to
``Context.notify``). What is special about a method is asked of its entry in ``openqa.methods``:
nothing here names one."""

from __future__ import annotations

import hashlib
import time
from contextlib import AbstractContextManager, nullcontext
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, cast

from openqa.answer import AnswerRecord, as_dict, assess, solve
from openqa.config import Settings
from openqa.corpus.sources import corpus_tag
from openqa.data import DATASETS, QUESTION_FILE, Question, dataset_spec, load_questions, read_question_file_digest
from openqa.errors import OpenQAError
from openqa.evaluate.calibration import confidence_report, risk_coverage_png
from openqa.evaluate.metrics import paired_bootstrap, prediction_rows, summarise
from openqa.evaluate.results import (
    ensure_writable,
    refuse_replacing,
    result_lock,
    result_stem,
    run_record,
    write_results,
)
from openqa.languages import language
from openqa.llm.settings import LLMSettings
from openqa.methods import (
    DEFAULT_METHOD,
    Opened,
    Overrides,
    Request,
    calibration_key,
    method,
    open_method,
    open_retriever,
)
from openqa.methods.bank import bank_file_digests, exam_bank
from openqa.retrieval.base import Index, SearchEngine
from openqa.retrieval.manifest import corpus_fingerprint
from openqa.scorers.bank import checked_overlap
from openqa.tuning import FINGERPRINT, calibrate, pair_lock, record_file, save_records, staged, tuned_file
from openqa.workspace import Context, Exam

if TYPE_CHECKING:
    pass

#: What a record says of the index behind it.
PROVENANCE_KEYS = ("engine", "scoring", "tokenizer", "doc_params", "corpus", "corpus_checksum", "built_at")


def provenance(index: Index) -> dict[str, Any]:
    """The manifest entries that identify how ``index`` was built, for result, tune and train records."""
    return {k: index.manifest[k] for k in PROVENANCE_KEYS if k in index.manifest}


def fingerprint_of(index: Index) -> dict[str, Any]:
    """The record entry of the corpus fingerprint of ``index`` (none for an index of no corpus)."""
    fingerprint = corpus_fingerprint(index.manifest)
    return {FINGERPRINT: fingerprint} if fingerprint else {}


@dataclass(frozen=True)
class QuestionSource:
    """Which questions a command scores or fits on: a named ``dataset``'s ``split``, or a user's
    ``questions`` file (MedQA JSON lines, MIRAGE with ``subset``, MedMCQA, MMLU CSV) in ``lang``,
    scored as ``exam``. Checked when made, so a combination that cannot be meant is refused in one
    line before any work (``eval`` and ``tune`` take the same flags and give the same refusals)."""

    dataset: str | None = None
    split: str | None = None
    questions: Path | None = None
    lang: str | None = None
    exam: str | None = None
    subset: str | None = None

    def __post_init__(self) -> None:
        if (self.dataset is None) == (self.questions is None):
            raise OpenQAError("give --dataset or --questions (one of them)")
        if self.exam is not None and not self.exam.strip():
            raise OpenQAError("--exam is empty: name an exam (usmle, mcmle, twmle) or a dataset, or leave --exam out")
        if self.dataset is not None and self.exam is not None and (
                DATASETS[self.exam].exam if self.exam in DATASETS else self.exam) != dataset_spec(self.dataset).exam:
            raise OpenQAError(f"--exam applies to --questions (what they are scored as); --dataset {self.dataset} "
                              f"is scored as its own exam, {dataset_spec(self.dataset).exam}")
        if self.questions is not None and self.split is not None:
            raise OpenQAError("--split applies to --dataset; a --questions file is scored whole")
        if self.dataset is not None and self.lang is not None and self.lang != dataset_spec(self.dataset).lang:
            raise OpenQAError(f"--lang {self.lang} does not apply to --dataset {self.dataset}, "
                              f"whose questions are {dataset_spec(self.dataset).lang}")
        if self.subset is not None and self.questions is None:
            raise OpenQAError("--subset picks a dataset of a MIRAGE --questions file")

    def target(self) -> Exam:
        """What the questions are scored as: a dataset's own exam, else ``exam`` in ``lang``
        (``Exam.resolve``); its ``dataset`` is the one whose tuned settings apply."""
        return Exam.resolve(self.dataset, self.lang, self.exam)

    def load(self, ctx: Context, split: str) -> Loaded:
        """The questions, read once and validated (a dataset's ``split`` when none was given)."""
        if self.dataset:
            split = self.split or split
            questions = load_questions(self.dataset, split, ctx.settings.require_data_dir())
            return Loaded(questions, self.dataset, split, dataset_spec(self.dataset).files[split])
        assert self.questions is not None  # a source holds a dataset or a question file
        path = Path(self.questions)
        questions, digest = read_question_file_digest(path, subset=self.subset)  # one read: a pipe has no second
        # the file by name and content: no machine path in a record
        return Loaded(questions, path.stem, QUESTION_FILE, f"{path.name} (sha256 {digest[:16]})",
                      {"file": path.name, "sha256": digest, **({"subset": self.subset} if self.subset else {})})


@dataclass(frozen=True)
class Loaded:
    """A ``QuestionSource``'s questions, with what a record says of them: the ``name`` and ``split``
    a result is filed under, the ``data`` file, and for a question file its name and SHA-256 (``file``)."""

    questions: list[Question]
    name: str
    split: str
    data: str
    file: dict[str, str] | None = None


@dataclass(frozen=True)
class EvalRequest:
    """One ``openqa eval``: a method over a dataset split or a question file."""

    method: str = DEFAULT_METHOD
    dataset: str | None = None
    split: str | None = None
    questions: Path | None = None
    lang: str | None = None
    exam: str | None = None
    limit: int | None = None
    #: Questions skipped before the first scored one (with ``limit``: a slice, e.g. for two processes).
    offset: int = 0
    engine: str | None = None
    model: str | None = None
    overrides: Overrides = Overrides()
    llm: LLMSettings | None = None
    subset: str | None = None
    predictions: tuple[tuple[str, str], ...] = ()
    ensemble: str | None = None
    banks: tuple[str, ...] = ()
    allow_bank_overlap: bool = False

    def __post_init__(self) -> None:
        self.source()  # its checks (one of --dataset and --questions, and what goes with each)
        if self.limit is not None and self.limit < 1:
            raise OpenQAError("--limit must be at least 1")
        if self.offset < 0:
            raise OpenQAError(f"--offset must be 0 or more, not {self.offset}")
        self.request()  # its checks (an --ensemble name) before any work

    def variant(self) -> str | None:
        """What distinguishes this result file from the method's default one (flags overriding
        tuned settings, a reader run; for a question file, which file and how it is scored), so a
        tuned result is never overwritten by another run."""
        o = self.overrides
        parts = []
        if self.questions is not None:
            where = hashlib.sha256(str(Path(self.questions).resolve()).encode()).hexdigest()[:8]
            parts += [f"file-{where}", *(value for value in (self.subset, self.lang, self.exam) if value)]
        parts += [f"{flag}-{value}" for flag, value in (("engine", self.engine), ("query", o.query),
                                                         ("top", o.top_n), ("aggregate", o.aggregate)) if value]
        parts += method(self.method).variant(self.request())
        parts += [f"bank-{digest[:12]}" for digest in bank_file_digests(self.banks)]  # by content: a name says nothing
        if self.offset:
            parts.append(f"from{self.offset}")
        return "-".join(parts) or None

    def source(self) -> QuestionSource:
        """The questions the request scores."""
        return QuestionSource(self.dataset, self.split, self.questions, self.lang, self.exam, self.subset)

    def request(self) -> Request:
        """What the request asks of its method."""
        return Request(self.overrides, self.engine, self.model, self.llm, predictions=self.predictions, ensemble=self.ensemble,
                       banks=self.banks, allow_bank_overlap=self.allow_bank_overlap)


def load_eval_questions(ctx: Context, req: EvalRequest) -> tuple[list[Question], Exam, str, str, str, EvalRequest]:
    """The questions an evaluation scores, what they are scored as, the name, split and data file
    its record gives, and the request as run: a ``limit`` past the end of the questions is none
    (the full run, named as one). An ``offset`` at or past the end is a one-line error."""
    source = req.source()
    loaded = source.load(ctx, "test")
    questions, name, split, data = loaded.questions, loaded.name, loaded.split, loaded.data
    if req.offset >= len(questions):
        raise OpenQAError(f"--offset {req.offset} is at or past the end: {name} {split} has {len(questions)} questions")
    questions = questions[req.offset:]
    if req.limit is not None and req.limit > len(questions):
        req = replace(req, limit=None)  # more than there are from the offset on: the full run
    if req.limit is not None:
        questions = questions[: req.limit]
    return questions, source.target(), name, split, data, req


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


def evaluate(ctx: Context, req: EvalRequest, progress: bool = True, command: str | None = None) -> dict[str, Any]:
    """Score ``req``'s questions with its method, write the result files under the results folder,
    and return the summary record (accuracy, CI, ties, settings with sources, files); ``command`` is
    the command line that reproduces it, when it is not this process's (a benchmark script's run)."""
    questions, target, name, split, data, req = load_eval_questions(ctx, req)  # an offset past the end: refused before
    out_dir = ensure_writable(ctx.settings.results_dir)
    run_variant = variant(ctx, req)
    stem = result_stem(name, split, req.method, variant=run_variant, limit=req.limit)
    with result_lock(out_dir, stem):  # one run of a name at a time
        start = time.perf_counter()
        opened = open_method(ctx, req.method, target, req.request())
        load_seconds = time.perf_counter() - start
        overlap = checked_overlap(opened.scorer.banks(), questions, req.allow_bank_overlap)  # before any work
        m = opened.index.manifest
        identity = {"dataset": name, "split": split, "method": req.method, "limit": req.limit, "offset": req.offset,
                    "settings": opened.settings, "data": data, "corpus": corpus_line(m)}
        refuse_replacing(out_dir / f"{stem}.json", identity)
        start = time.perf_counter()
        results, parts = opened.scorer.score_with_parts(questions, progress=progress)
        seconds = time.perf_counter() - start
        probabilities = [opened.probabilities(r) for r in results]
        curves = {req.method: (results, probabilities)}
        curves.update({label: (scored, [opened.parts[label].probabilities(r) for r in scored]) for label, scored in parts.items()})
        summary = {
            "dataset": name,
            "split": split,
            "method": req.method,
            **summarise(results),
            **opened.scorer.report(results),
            **overlap,
            "confidence": confidence_report(results, probabilities),
            **compare_parts(opened, curves),
            **compare_baseline(ctx, req, target, results),
            "seconds": round(seconds, 3),
            "load_seconds": round(load_seconds, 3),
            "limit": req.limit,
            "offset": req.offset,
            "variant": run_variant,
            "settings": opened.settings,
            "data": data,
            "corpus": corpus_line(m),
            **fingerprint_of(opened.index),
            "index": provenance(opened.index),
            **run_record(command),
        }
        figure = None
        try:
            figure = risk_coverage_png(curves, f"{name} {split}: risk-coverage") if results else None
        except ModuleNotFoundError:  # matplotlib comes with the 'plots' extra; the figures stay in the record
            summary["figure"] = "no risk-coverage plot: matplotlib is not installed (pip install 'openqa-medqa[plots]')"
        path, written = write_results(summary, prediction_rows(results, probabilities, opened.scorer.scale), out_dir, figure)
    beside = [name[len(path.stem):] for name in written]
    return {**summary, "files": {"summary": str(path.resolve()), "folder": str(out_dir.resolve()), "beside": beside}}


def compare_parts(opened: Opened, curves: dict[str, tuple[list[Any], list[dict[str, float]]]]) -> dict[str, Any]:
    """For a method that combines parts (an ensemble): each part's accuracy and confidence figures on
    the same questions, and the paired difference from the part that was best on dev."""
    if not opened.parts:
        return {}
    method_results = next(iter(curves.values()))[0]
    parts = {label: {**{k: v for k, v in summarise(results).items() if k in ("n", "correct", "accuracy", "ci95")},
                     **confidence_report(results, probabilities)}
             for label, (results, probabilities) in list(curves.items())[1:]}
    best = opened.settings["best_part"]
    return {"parts": parts, "versus_best_part": {"part": best, **paired_bootstrap(method_results, curves[best][0])}}


def compare_baseline(ctx: Context, req: EvalRequest, target: Exam, results: list[Any]) -> dict[str, Any]:
    """The paired difference from what the method compares itself with (``Method.baseline``: a named
    ensemble against the exam's own), scored on the same questions."""
    base = method(req.method).baseline(req.request())
    if base is None:
        return {}
    other = open_method(ctx.sharing(), req.method, target, base).scorer.score([r.question for r in results], progress=False)
    return {"versus_baseline": {"method": f"{req.method} (the exam's own, {len(other)} questions)",
                                "accuracy": summarise(other)["accuracy"], **paired_bootstrap(results, other)}}


def retrieval_quality(ctx: Context, req: EvalRequest, retrievers: list[str]) -> tuple[dict[str, Any], Path, list[str]]:
    """``eval --retrieval``: answer support of each retriever's question-only evidence, written as
    Markdown, JSON and PNG, with the judgments of the retrieved paragraphs as TREC qrels and the
    questions as a topics file; also the retrievers skipped, with why."""
    from openqa.retrieval_report import answer_support, topic_lines, write_report

    ensure_writable(ctx.settings.results_dir)
    questions, target, name, split, _, req = load_eval_questions(ctx, req)
    query = language(target.lang).question_query
    table, skipped = {}, []
    judgments: dict[str, dict[str, int]] = {}
    for retriever in retrievers:
        try:
            scorer = open_retriever(ctx, retriever, target)
        except OpenQAError as exc:
            skipped.append(f"{retriever}: {exc}")
            continue
        table[retriever] = answer_support(scorer, questions, query, judgments)
    if not table:
        raise OpenQAError("no retriever could be opened: build the indexes first (openqa index ...)")
    meta = {"dataset": name, "split": split, "method": "retrieval-quality", "n": len(questions),
            "limit": req.limit, "variant": variant(ctx, req),
            "query": f"question only ({'medical filter' if query == 'filter' else 'full text'})", **run_record()}
    topics = topic_lines(questions, query, target.lang)
    return table, write_report(table, meta, ctx.settings.results_dir, judgments, topics), skipped


#: The grid columns a tuning record keeps.
GRID_KEYS = ("part", "top_n", "aggregate", "query", "fusion", "weight", "avg_ql", "accuracy")


def tune(ctx: Context, name: str, source: QuestionSource, request: Request = Request(), calibrate_only: bool = False,
         progress: bool = True, limit: int | None = None) -> dict[str, Any]:
    """Grid-search a method's settings on ``source``'s questions (a dataset's dev split, or a user's
    own solved questions; a method that has settings, unless ``calibrate_only``; the first ``limit``
    questions when given), record the choice in the settings folder, then fit the probabilities of
    the method with those settings on the same questions and record them beside it. Both are filed
    under the method's variant (an ensemble's name) and the dataset whose settings the questions are
    scored with (``QuestionSource.target``: a question file's ``--exam`` in its ``--lang``), over the
    context's corpus, where ``eval`` and ``answer`` scoring the same exam over that corpus find
    them; a question file's record names it (name and SHA-256). Returns the record: the choice (if
    searched), its accuracy, the calibration and the files written."""
    if source.split not in (None, "dev"):
        raise OpenQAError(f"tune fits on a dataset's dev split, not {source.split} (the test split measures what was fitted)")
    target = source.target()
    dataset = target.dataset  # whose settings the fit replaces
    m = method(name)
    m.require(request)
    if limit is not None and limit < 1:
        raise OpenQAError(f"--limit must be at least 1, not {limit}")
    ensure_writable(ctx.settings.settings_dir, "--settings-dir")
    loaded = source.load(ctx, "dev")
    questions = loaded.questions[:limit]
    record: dict[str, Any] = {"dataset": dataset, "split": loaded.split, **({"questions": loaded.file} if loaded.file else {}),
                              "exam": target.exam, "method": calibration_key(name, request), "corpus": ctx.corpus, "limit": limit}
    if request.banks:  # files of solved questions that hold the questions fitted on: refused before any work
        record["banks"] = [{"file": Path(file).name, "sha256": digest} for file, digest in zip(request.banks, bank_file_digests(request.banks))]
        checked_overlap([exam_bank(ctx, target, request.banks)], questions, request.allow_bank_overlap)
    key = calibration_key(name, request)
    folder = ctx.settings.settings_dir
    with pair_lock(key, dataset, folder, ctx.corpus):  # one tune of the pair at a time
        searched = m.tunes and not calibrate_only
        settings_bytes: bytes | None = None
        stage: AbstractContextManager[None] = nullcontext()
        if searched:
            best, table, index = m.tune(ctx, target, questions, request)
            record.update({
                "chosen": asdict(best),
                # the chosen settings' row: the best of a grid, an ensemble's own row (not its parts')
                "dev_accuracy": max(row["accuracy"] for row in table if row.get("part", "ensemble") == "ensemble"),
                "grid": [{k: row[k] for k in GRID_KEYS if k in row} for row in table],
                "index": provenance(index),
                **fingerprint_of(index),
                **run_record(),
            })
            settings_path, settings_bytes = record_file(record, folder)
            stage = staged(settings_path, settings_bytes)  # opened with them before they are written
        else:
            used, _ = tuned_file(key, dataset, folder, ctx.corpus)
            settings_bytes = used.read_bytes() if used is not None else None
        with stage:
            opened = open_method(ctx, name, target, request, calibrated=False)  # the old calibration is the one being replaced
        overlap = checked_overlap(opened.scorer.banks(), questions, request.allow_bank_overlap)  # before any work
        results, parts = opened.scorer.score_with_parts(questions, progress=progress)
        fit_on, fitted_on = m.calibration_scores(opened, results, parts)
        calibration, fitted = calibrate(fit_on, opened.scorer.scale, key, dataset, ctx.corpus, opened.settings, fitted_on,
                                        settings_bytes, corpus_fingerprint(opened.index.manifest), loaded.file,
                                        loaded.data if loaded.file else None)
        # the settings and their calibration (the digest of the settings' bytes) in one write: both or neither
        written = save_records({**({"": record} if searched else {}),
                                "calibration": fitted}, folder)
    files = {"settings" if kind == "" else kind: path for kind, path in written.items()}
    return {**record, **overlap, "dev_accuracy": summarise(results)["accuracy"], "calibration": calibration.to_dict(),
            "files": {k: str(v.resolve()) for k, v in files.items()}}


def compare_lookup(settings: Settings) -> Callable[[str, str], dict[str, str]]:
    """How ``compare_runs`` matches rows written before predictions carried digests: a dataset
    split's question ids to their content digests, from the data folder."""

    def digests_of(dataset: str, split: str) -> dict[str, str]:
        return {q.qid: q.digest() for q in load_questions(dataset, split, settings.require_data_dir())}

    return digests_of


def compare(settings: Settings, runs: list[Path]) -> tuple[dict[str, Any], str]:
    """``openqa compare``: the comparison record of ``runs`` and its Markdown (``openqa.evaluate.compare``)."""
    from openqa.evaluate.compare import compare_markdown, compare_runs

    record = compare_runs(runs, compare_lookup(settings))
    record.update(run_record())
    return record, compare_markdown(record)


def answer_record(opened: Opened, question: Question, evidence: int, min_confidence: float | None = None) -> AnswerRecord:
    """Solve one question with an opened method: the ranked options, each with its probability and
    best ``evidence`` paragraphs and the spans of their matched words (``openqa.answer.as_dict``),
    how sure the answer is (abstaining below ``min_confidence``), and the settings used with their
    sources (what ``answer --json`` prints and the HTTP API returns)."""
    result = solve(opened.scorer, question)
    sure = assess(result, opened.probabilities(result), opened.calibration, min_confidence)
    # evidence hits are rows of a search engine's paragraph store (an index without one gives none)
    record = as_dict(result, cast(SearchEngine, opened.index), evidence, sure)
    record["settings"] = opened.settings
    return record
