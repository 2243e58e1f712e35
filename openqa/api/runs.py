"""Evaluating and tuning methods on a dataset, and reading the records they leave."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence, cast

from openqa import arguments as arg
from openqa.api.checks import bank_files, check_llm, lang_name, method_name, optional_engine, overrides_of
from openqa.api.workspace import Workspace
from openqa.errors import UsageError
from openqa.progress import shown

if TYPE_CHECKING:
    from openqa.llm.settings import LLMSettings
    from openqa.methods import Request
    from openqa.pipeline import EvalRequest, QuestionSource
    from openqa.workspace import Context


@dataclass(frozen=True)
class Evaluation:
    """What ``run_eval`` (``openqa eval``) wrote: the summary record (``to_dict()``), with the
    accuracy (0-100), its 95% CI and the question count at hand."""

    record: dict[str, Any]

    def __post_init__(self) -> None:
        """Refuse a record without the figures the properties read (one line)."""
        record: Any = self.record
        if not isinstance(record, dict):
            raise UsageError(f"record must be an eval record (a dict), not {type(record).__name__}")
        ci95 = record.get("ci95")
        if not (arg.is_number(record.get("accuracy")) and isinstance(record.get("n"), int) and not isinstance(record["n"], bool)
                and isinstance(ci95, (list, tuple)) and len(ci95) == 2 and all(map(arg.is_number, ci95))):
            raise UsageError("record must hold the accuracy (a number), n (a whole number) and ci95 (two numbers)")

    @property
    def accuracy(self) -> float:
        return cast(float, self.record["accuracy"])

    @property
    def n(self) -> int:
        return cast(int, self.record["n"])

    @property
    def ci95(self) -> tuple[float, float]:
        low, high = self.record["ci95"]
        return low, high

    def to_dict(self) -> dict[str, Any]:
        return dict(self.record)


def run_eval(method: str = "ir-custom", dataset: str | None = None, *, split: str | None = None,
             questions: str | Path | None = None, lang: str | None = None, exam: str | None = None,
             limit: int | None = None, top_n: int | None = None, aggregate: str | None = None, query: str | None = None,
             engine: str | None = None, model: str | None = None, llm: LLMSettings | None = None,
             subset: str | None = None, progress: bool = False, workspace: Workspace | None = None,
             banks: Sequence[str | Path] = (), allow_bank_overlap: bool = False, command: str | None = None,
             offset: int = 0, ensemble: str | None = None, predictions: Mapping[str, str | Path] | None = None,
             **where: Any) -> Evaluation:
    """Accuracy of ``method`` on a ``dataset`` split (default test) or a ``questions`` file, with the
    result files written under ``results_dir`` as ``openqa eval`` writes them.

    :param method: the method's name (``ir-custom``, ``pmi``, ``bank``, ``ensemble``, ``llm``...).
    :param dataset: a named dataset (``us``, ``mainland``, ``tw-en``...); or give ``questions``.
    :param split: ``train``, ``dev`` or ``test`` (default: test).
    :param questions: a question file (MedQA JSON lines, MIRAGE, MedMCQA, MMLU CSV).
    :param lang: the language of ``questions`` (default: en).
    :param exam: what ``questions`` are scored as (``usmle``, ``mcmle``, ``twmle``, or a dataset's name).
    :param limit: only the first ``limit`` questions.
    :param top_n: paragraphs per option (default: dev-tuned).
    :param aggregate: how top-N scores combine (default: dev-tuned).
    :param query: the question part of queries (default: dev-tuned).
    :param engine: another engine's index for the method.
    :param model: a reader's checkpoint, or the LLM's model.
    :param llm: the LLM reader's settings (``LLMSettings``).
    :param subset: the dataset of a MIRAGE file.
    :param progress: show progress bars.
    :param banks: files of solved questions added to the bank method's bank.
    :param allow_bank_overlap: let a file of ``banks`` hold questions being scored (their copies are
        still left out of each one's evidence, and counted); refused otherwise.
    :param command: the command line the record says reproduces it (default: this process's; a
        script's run names the script's own).
    :param offset: questions skipped before the first scored one (with ``limit``: a slice).
    :param ensemble: with ``method="ensemble"``: the fitted ensemble's name (default: the exam's own).
    :param predictions: with ``method="ensemble"``: part label -> a predictions file that part reads.
    :param workspace: where data, indexes, settings and results are (a ``Workspace``); its fields may
    also be given as keywords (``data_dir=...``, ``index_dir=...``), each defaulting to its
    environment variable.
    :returns: the evaluation (``record``: accuracy, interval, ties, confidence, settings and sources).
    :raises OpenQAError: on bad arguments, missing data or indexes (one line); nothing is written then."""
    from openqa.data.questions import DATASETS, SPLITS
    from openqa.pipeline import EvalRequest

    overrides = overrides_of(top_n, aggregate, query)
    arg.flag("progress", progress)
    check_llm(llm)
    request = EvalRequest(method=method_name(method), dataset=arg.optional_one_of("dataset", dataset, DATASETS),
                          split=arg.optional_one_of("split", split, SPLITS), questions=arg.path("questions", questions),
                          lang=None if lang is None else lang_name(lang), exam=arg.optional_text("exam", exam),
                          limit=arg.optional_whole("limit", limit, 1), engine=optional_engine(engine),
                          model=arg.optional_text("model", model), overrides=overrides, llm=llm,
                          subset=arg.optional_text("subset", subset), banks=bank_files(banks),
                          allow_bank_overlap=arg.flag("allow_bank_overlap", allow_bank_overlap),
                          offset=arg.whole("offset", offset, 0), ensemble=arg.optional_text("ensemble", ensemble),
                          predictions=prediction_files(predictions))
    return evaluate_request(Workspace.of(workspace, **where).context(), request, progress, arg.optional_text("command", command))


def prediction_files(predictions: Any) -> tuple[tuple[str, str], ...]:
    """``predictions`` (part label -> file) as a request carries them, each label text and each file a path."""
    if predictions is None:
        return ()
    if not isinstance(predictions, Mapping):
        raise UsageError(f"predictions must map part labels to files, not {type(predictions).__name__}")
    files = []
    for label, file in predictions.items():
        path = arg.path(f"the predictions file of {label!r}", file)
        if path is None:
            raise UsageError(f"predictions must give a file for part {label!r}, not None")
        files.append((arg.text("a predictions part label", label), str(path)))
    return tuple(files)


def evaluate_request(ctx: Context, request: EvalRequest, progress: bool = False, command: str | None = None) -> Evaluation:
    """``openqa.pipeline.evaluate`` of an ``EvalRequest`` in ``ctx``, typed (the CLI's path)."""
    from openqa.pipeline import evaluate as run

    with shown(progress):
        return Evaluation(run(ctx, request, progress=progress, command=command))


@dataclass(frozen=True)
class Tuning:
    """What ``tune`` (``openqa tune``) chose and recorded: the settings (none when only probabilities
    were fitted), the record with its dev grid and calibration (``to_dict()``), and the files written."""

    chosen: dict[str, Any] | None
    record: dict[str, Any]
    files: dict[str, str]

    def __post_init__(self) -> None:
        """Refuse fields of the wrong type (one line)."""
        if self.chosen is not None and not isinstance(self.chosen, dict):
            raise UsageError(f"chosen must be None or a dict of settings, not {type(self.chosen).__name__}")
        if not isinstance(self.record, dict):
            raise UsageError(f"record must be a tune record (a dict), not {type(self.record).__name__}")
        if not isinstance(self.files, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in self.files.items()):
            raise UsageError("files must map each file's role to its path (text)")

    def to_dict(self) -> dict[str, Any]:
        return dict(self.record)


def tune(method: str = "ir-custom", dataset: str | None = None, *, questions: str | Path | None = None,
         lang: str | None = None, exam: str | None = None, subset: str | None = None, engine: str | None = None,
         parts: Sequence[str] | None = None, calibrate_only: bool = False, progress: bool = False,
         workspace: Workspace | None = None, ensemble: str | None = None, banks: Sequence[str | Path] = (),
         allow_bank_overlap: bool = False, limit: int | None = None, predictions: Mapping[str, str | Path] | None = None,
         **where: Any) -> Tuning:
    """Grid-search ``method``'s settings on ``dataset`` dev, or on a ``questions`` file of your own
    solved questions (an ensemble: fit its weights over ``parts``), and fit its probabilities there;
    record both in ``settings_dir``, where ``Solver`` and ``run_eval`` then find them.

    A ``questions`` fit is filed as the settings of the exam they are scored as (``exam`` in
    ``lang``: its dataset's, e.g. ``us`` for usmle in en) over the workspace's corpus, replacing
    that exam's tuned settings there: ``run_eval(questions=..., lang=..., exam=...)``, ``run_eval``
    on that exam's datasets and ``Solver.open`` with the same language, exam and corpus use it. Its
    record names the file (name and SHA-256).

    :param method: the method whose settings are searched.
    :param dataset: the dataset whose dev split is searched (default: us, unless ``questions`` is given).
    :param questions: a file of solved questions to fit on instead (MedQA JSON lines, MIRAGE, MedMCQA, MMLU CSV).
    :param lang: the language of ``questions`` (default: en).
    :param exam: what ``questions`` are scored as, and so whose settings the fit replaces (``usmle``,
        ``mcmle``, ``twmle``, or a dataset's name; default: usmle for en, mcmle for zh).
    :param subset: the dataset of a MIRAGE ``questions`` file.
    :param engine: another engine's index for the method.
    :param parts: with ``ensemble``: the methods it combines (``METHOD`` or ``METHOD:top_n=N``).
    :param calibrate_only: keep the settings and fit only the probabilities.
    :param progress: show progress bars.
    :param workspace: where data, indexes, settings and results are (a ``Workspace``); its fields may
    also be given as keywords (``data_dir=...``, ``index_dir=...``), each defaulting to its
    environment variable.
    :param ensemble: with ``ensemble``: the name its fit is filed under (default: the exam's own).
    :param banks: files of solved questions added to a bank part's bank.
    :param allow_bank_overlap: let a file of ``banks`` hold questions fitted on (refused otherwise).
    :param limit: only the first ``limit`` questions.
    :param predictions: with ``ensemble``: part label -> a predictions file that part reads (its dev questions).
    :returns: the tuning (``record``: the grid, the chosen settings, the calibration, their files).
    :raises OpenQAError: on bad arguments, a missing or bad question file, missing data or indexes (one line)."""
    from openqa.data.questions import DATASETS
    from openqa.methods import Request
    from openqa.pipeline import QuestionSource

    method = method_name(method)
    file = arg.path("questions", questions)
    source = QuestionSource(dataset=arg.optional_one_of("dataset", dataset, DATASETS) or (None if file else "us"),
                            questions=file, lang=None if lang is None else lang_name(lang),
                            exam=arg.optional_text("exam", exam), subset=arg.optional_text("subset", subset))
    arg.flag("calibrate_only", calibrate_only)
    arg.flag("progress", progress)
    given = None if parts is None else tuple(arg.texts("parts", list(parts) if isinstance(parts, tuple) else parts))
    if given is not None and not given:
        raise UsageError("parts must name at least one method (or leave parts out for the default ones)")
    request = Request(engine=optional_engine(engine), parts=given, ensemble=arg.optional_text("ensemble", ensemble),
                      banks=bank_files(banks), allow_bank_overlap=arg.flag("allow_bank_overlap", allow_bank_overlap),
                      predictions=prediction_files(predictions))
    return tune_in(Workspace.of(workspace, **where).context(), method, source, request, calibrate_only, progress,
                   arg.optional_whole("limit", limit, 1))


def tune_in(ctx: Context, method: str, source: QuestionSource, request: Request, calibrate_only: bool = False,
            progress: bool = False, limit: int | None = None) -> Tuning:
    """``tune`` in a given ``Context`` (the CLI's path)."""
    from openqa.pipeline import tune as run

    with shown(progress):
        record = run(ctx, method, source, request, calibrate_only, progress, limit)
    return Tuning(record.get("chosen"), record, record["files"])


# ------------------------------------------------------------------------------------ results


def browse_results(folder: str | Path, run: str | None = None) -> list[dict[str, Any]]:
    """The eval runs of a results folder, as ``openqa serve --results`` lists them (each with its
    dataset, split, method, questions, accuracy and interval, ECE, accuracy of the 20% most
    confident, date and openqa version, and its ``folder`` within ``folder``, such as ``runs/us``; an
    unreadable record with its reason); with ``run`` (a record's name), that run's first 20,000
    questions (prediction, answer, whether right, probabilities: ``openqa.evaluate.browse.MAX_QUESTIONS``,
    a listing of a bounded size).

    :param folder: the results folder (``openqa eval --output``'s, or a clone's ``eval/results``).
    :param run: a record's name (its file name, ``.json`` optional), or its folder and name
        (``runs/us/NAME``: that file alone); ``None`` lists the runs.
    :raises UsageError: on a run that is not there, or a name with ``..``, an absolute path or a hidden part.
    """
    from openqa.evaluate.browse import list_runs, run_questions

    where = arg.path("folder", folder)
    if where is None:
        raise UsageError("folder must name a results folder, not None")
    return list_runs(where) if run is None else run_questions(where, arg.text("run", run))


def result_curves(folder: str | Path, run: str) -> dict[str, Any]:
    """A run's risk-coverage curve (accuracy of the answered at 100 coverages, most confident first)
    and reliability diagram (10 equal-width bins of confidence), from its predictions file: what
    ``openqa serve --results`` draws.

    :param folder: the results folder holding the run.
    :param run: the record's name (its file name, ``.json`` optional), or its folder and name
        (``runs/us/NAME``); its predictions file must be beside it.
    :raises UsageError: on a run that is not there, or a name with ``..``, an absolute path or a hidden part.
    """
    from openqa.evaluate.browse import run_curves

    where = arg.path("folder", folder)
    if where is None:
        raise UsageError("folder must name a results folder, not None")
    return run_curves(where, arg.text("run", run))


# ------------------------------------------------------------------------ argument checks


