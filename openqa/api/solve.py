"""Solving questions: a method opened once with its settings, answering with evidence and probabilities."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence, cast

from openqa import arguments as arg
from openqa.api.checks import bank_files, check_llm, lang_name, method_name, optional_engine, overrides_of
from openqa.api.workspace import Workspace
from openqa.errors import UsageError
from openqa.progress import shown
from openqa.retrieval.base import SearchEngine

if TYPE_CHECKING:
    from openqa.answer import AnswerRecord, EvidenceRecord
    from openqa.api.parts import ScoredQuestions
    from openqa.data import Question
    from openqa.llm.settings import LLMSettings
    from openqa.methods import Opened, Request
    from openqa.methods.base import Estimate
    from openqa.retrieval.base import Index
    from openqa.scorers.base import OptionScores
    from openqa.workspace import Context, Exam


@dataclass(frozen=True)
class Answer:
    """One solved question: the prediction (None when no word of it is in the index), every option's
    score and evidence, the settings used with their sources; ``record`` (an ``AnswerRecord``, the
    one shape of an answer) is the whole of what ``openqa answer --json`` prints and the HTTP API
    answers with, and ``to_dict()`` returns it."""

    record: AnswerRecord

    def __post_init__(self) -> None:
        """Refuse a record without the shape every property reads (one line), as a caller building
        an ``Answer`` by hand may give."""
        record: Any = self.record
        if not isinstance(record, dict):
            raise UsageError(f"record must be an answer record (a dict), not {type(record).__name__}")
        options = record.get("options")
        if not (isinstance(options, list) and all(
                isinstance(o, dict) and isinstance(o.get("letter"), str) and isinstance(o.get("evidence"), list)
                and (o.get("score") is None or arg.is_number(o["score"])) for o in options)):
            raise UsageError("record['options'] must be a list of options, each a dict with its letter, score and evidence")
        if record.get("prediction") is not None and not isinstance(record["prediction"], str):
            raise UsageError("record['prediction'] must be an option letter or None")
        if not isinstance(record.get("matched"), bool):
            raise UsageError("record['matched'] must be True or False")
        for key in ("settings", "confidence", "details"):
            if not isinstance(record.get(key, {}), dict):
                raise UsageError(f"record[{key!r}] must be a dict")
        if not isinstance(record.get("details", {}).get("solved_questions", []), list):
            raise UsageError("record['details']['solved_questions'] must be a list")

    @property
    def prediction(self) -> str | None:
        return self.record["prediction"]

    @property
    def scores(self) -> dict[str, float | None]:
        """Option letter -> score (None: no evidence), best first."""
        return {o["letter"]: o["score"] for o in self.record["options"]}

    @property
    def evidence(self) -> dict[str, list[EvidenceRecord]]:
        """Option letter -> its best evidence paragraphs (id, book, score, text, spans of matched words)."""
        return {o["letter"]: o["evidence"] for o in self.record["options"]}

    @property
    def settings(self) -> dict[str, Any]:
        """The settings used, with ``settings["sources"]`` saying where each came from."""
        return self.record.get("settings", {})

    @property
    def matched(self) -> bool:
        return self.record["matched"]

    @property
    def probabilities(self) -> dict[str, float | None]:
        """Option letter -> probability (calibrated on the exam's dev split where openqa tune fitted it)."""
        return {o["letter"]: o.get("probability") for o in self.record["options"]}

    @property
    def confidence(self) -> dict[str, Any]:
        """How sure the answer is: the prediction's ``probability``, its ``meaning`` in words, the
        calibration's source, and whether it ``abstained`` below a ``min_confidence``."""
        return dict(self.record.get("confidence", {}))

    @property
    def solved_questions(self) -> list[dict[str, Any]]:
        """The nearest solved questions a bank part showed (question, options, answer, similarity)."""
        return list(self.record.get("details", {}).get("solved_questions", []))

    def to_dict(self) -> dict[str, Any]:
        return dict(self.record)


class Solver:
    """A method ready to answer questions (as ``openqa answer`` opens it): its scorer, its index and
    its settings."""

    def __init__(self, opened: Opened, method: str, exam: Exam) -> None:
        from openqa.methods import Opened
        from openqa.workspace import Exam

        if not isinstance(opened, Opened) or not isinstance(exam, Exam):
            raise UsageError("a Solver is opened with Solver.open (or from_context), not built from "
                             f"{type(opened).__name__} and {type(exam).__name__}")
        self.opened = opened
        self.method = arg.text("method", method)
        self.exam = exam

    @classmethod
    def open(cls, method: str = "ir-custom", lang: str = "en", *, exam: str | None = None, top_n: int | None = None,
             aggregate: str | None = None, query: str | None = None, engine: str | None = None, model: str | None = None,
             llm: LLMSettings | None = None, corpus: str | None = None, workspace: Workspace | None = None,
             banks: Sequence[str | Path] = (), ensemble: str | None = None, **where: Any) -> Solver:
        """The method ``method`` for ``lang`` questions scored as ``exam`` (default: usmle for en,
        mcmle for zh), with its dev-tuned settings (yours, else shipped) replaced by ``top_n``,
        ``aggregate``, ``query`` where given; ``engine`` another index, ``model`` a reader's
        checkpoint, ``llm`` the LLM reader's settings (``LLMSettings(model=...)``).

        :param method: the method's name (``ir-custom``, ``pmi``, ``bank``, ``ensemble``, ``llm``...).
        :param lang: the corpus language, ``en`` or ``zh``.
        :param exam: ``usmle``, ``mcmle``, ``twmle`` or a dataset's name (default: by language).
        :param top_n: paragraphs per option (default: dev-tuned).
        :param aggregate: how top-N scores combine (default: dev-tuned).
        :param query: the question part of queries (default: dev-tuned).
        :param engine: another engine's index for the method.
        :param model: a reader's checkpoint, or the LLM's model.
        :param llm: the LLM reader's settings.
        :param corpus: a corpus indexed with ``build_index(corpus=..., name=...)``.
        :param workspace: where data, indexes, settings and results are (a ``Workspace``); its fields may
        also be given as keywords (``data_dir=...``, ``index_dir=...``), each defaulting to its
        environment variable.
        :param banks: files of solved questions added to the bank method's bank.
        :param ensemble: with ``ensemble``: a fitted ensemble's name (e.g. ``bank``; default: the exam's own).
        :returns: the opened method, ready to ``answer``.
        :raises OpenQAError: on bad arguments or a missing index, model or extra (one line)."""
        from openqa.methods import Request
        from openqa.workspace import Exam

        overrides = overrides_of(top_n, aggregate, query)
        method, engine, model = method_name(method), optional_engine(engine), arg.optional_text("model", model)
        exam = arg.optional_text("exam", exam)
        check_llm(llm)
        if llm is None and method == "llm" and model is not None:
            from openqa.llm.settings import LLMSettings

            llm = LLMSettings(model=model)
        ctx = Workspace.of(workspace, corpus=corpus, **where).context()
        request = Request(overrides, engine, model, llm, banks=bank_files(banks), ensemble=arg.optional_text("ensemble", ensemble))
        return cls.from_context(ctx, method, Exam.resolve(lang=lang_name(lang), exam=exam), request)

    @classmethod
    def from_context(cls, ctx: Context, method: str, exam: Exam, request: Request) -> Solver:
        """The method opened in ``ctx`` (what the CLI does with its flags)."""
        from openqa.methods import open_method

        return cls(open_method(ctx, method, exam, request), method, exam)

    @property
    def settings(self) -> dict[str, Any]:
        """The settings the method uses, with ``settings["sources"]``."""
        return self.opened.settings

    @property
    def index(self) -> Index:
        return self.opened.index

    def question(self, question: str, options: Mapping[str, str] | Sequence[str]) -> Question:
        """A question from its text and options (a letter -> text mapping, or texts lettered A, B, ...),
        checked as ``openqa answer`` checks it."""
        from openqa.data.pasted import make_question

        arg.text("question", question)
        if isinstance(options, (str, bytes)) or not isinstance(options, (Mapping, list, tuple)):
            raise UsageError(f"options must be a mapping of letters to texts or a list of texts, not {type(options).__name__}")
        if not isinstance(options, Mapping):
            options = {chr(ord("A") + i): text for i, text in enumerate(options)}
        return make_question(question, dict(options))

    def scores(self, question: Question) -> OptionScores:
        """The method's option scores of one ``Question`` (with the evidence of each option)."""
        from openqa.answer import solve

        return solve(self.opened.scorer, question)

    def score_all(self, questions: Sequence[Question], progress: bool = False) -> ScoredQuestions:
        """Every question's option scores (with each option's evidence) in one pass of the method's
        scorer, as ``openqa eval`` scores a split: all queries batched, no answer records made.

        :param questions: the questions (a list of ``Question``, e.g. from ``load_questions``).
        :param progress: show progress bars.
        :returns: their ``ScoredQuestions`` (``accuracy``, ``summary()``, ``calibration()``...).
        :raises OpenQAError: on questions that are not ``Question``s (one line)."""
        from openqa.api.parts import ScoredQuestions
        from openqa.data.questions import question_list

        questions = question_list("questions", questions)
        arg.flag("progress", progress)
        scorer = self.opened.scorer
        with shown(progress):
            return ScoredQuestions(scorer.score(questions, progress), scorer.scale)

    def answer(self, question: str | Question, options: Mapping[str, str] | Sequence[str] | None = None,
               evidence: int = 2, min_confidence: float | None = None) -> Answer:
        """Solve one question: ``options`` as letter -> text (or a list, lettered A, B, ...); or a
        ``Question`` alone. ``evidence`` paragraphs are kept per option (``--paragraphs``); below
        ``min_confidence`` (a probability) the answer abstains (``prediction`` None, with its best guess).

        :param question: the question's text, or a ``Question``.
        :param options: letter -> option text, or a list of texts.
        :param evidence: paragraphs kept per option.
        :param min_confidence: abstain below this probability of the chosen option.
        :returns: the ``Answer`` (its ``record`` is an ``AnswerRecord``)."""
        from openqa.pipeline import answer_record

        asked = self._asked(question, options, evidence)
        return Answer(answer_record(self.opened, asked, evidence, arg.probability("min_confidence", min_confidence)))

    def estimate(self, question: str | Question, options: Mapping[str, str] | Sequence[str] | None = None) -> Estimate:
        """What scoring one question is estimated to cost before it runs (an ``Estimate``: the
        method's work units and the seconds they take, and whether that is heavy), as ``openqa serve``
        weighs ``POST /v1/answer``: ``options`` as ``answer`` takes them, or a ``Question`` alone.

        :param question: the question's text, or a ``Question``.
        :param options: letter -> option text, or a list of texts.
        :returns: its ``Estimate``."""
        from openqa.methods import method

        asked = self._asked(question, options, 0)
        return method(self.method).estimate(self.opened, asked, self.exam.lang)

    def text(self, question: Question, show: int = 2, evidence: int = 2, color: bool = False,
             min_confidence: float | None = None) -> tuple[str, bool]:
        """One solved question as ``openqa answer`` prints it for a person (the prediction, how sure
        it is, each option's probability and score, and the evidence of the ``show`` best options),
        and whether any of its words is in the index."""
        from openqa.answer import assess, render

        question = self._asked(question, None, evidence)
        arg.whole("show", show, 0)
        arg.flag("color", color)
        arg.probability("min_confidence", min_confidence)
        result = self.scores(question)
        sure = assess(result, self.opened.probabilities(result), self.opened.calibration,
                      arg.probability("min_confidence", min_confidence))
        # evidence hits are rows of a search engine's paragraph store (an index without one gives none)
        return render(result, cast(SearchEngine, self.index), show, evidence, color, sure), result.matched

    def _asked(self, question: str | Question, options: Mapping[str, str] | Sequence[str] | None, evidence: int) -> Question:
        from openqa.data import Question

        arg.whole("evidence", evidence, 0)
        if not isinstance(question, Question):
            if options is None:
                raise UsageError("give the options with the question")
            question = self.question(question, options)
        return question


# --------------------------------------------------------------------------- index, eval, tune


