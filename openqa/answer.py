"""Solving one question: rank its options and show the evidence with the query terms marked
(the parsing of pasted questions is ``openqa.data.pasted``). The marked words are character spans
computed once (``term_spans``), for the terminal (``highlight``) and for JSON clients alike."""

from __future__ import annotations

import math
import re
from functools import lru_cache
from typing import Any, Sequence, TypedDict, cast

from openqa.data import Question
from openqa.errors import OpenQAError
from openqa.evaluate.calibration import Calibration
from openqa.languages import LANGUAGES, language
from openqa.retrieval.base import SearchEngine
from openqa.scorers.base import OptionScorer, OptionScores
from openqa.text.tokenize import Tokenizer
from openqa.text.unicode import printable

_WORD = re.compile(r"\w+", re.UNICODE)

#: A character span ``(start, end)`` of a text: ``text[start:end]`` is a matched word or term.
Span = tuple[int, int]


class EvidenceRecord(TypedDict):
    """An evidence paragraph of an answer: its id, book, retrieval score, text and matched spans."""

    id: str
    book: str
    score: float
    text: str
    spans: list[Span]


class _Option(TypedDict):
    letter: str
    text: str
    score: float | None
    evidence: list[EvidenceRecord]


class OptionRecord(_Option, total=False):
    """An option of an answer, best first: its score (None: no evidence), probability, evidence."""

    probability: float


class _Confidence(TypedDict):
    probability: float | None
    meaning: str
    calibration: str
    min_confidence: float | None
    abstained: bool


class ConfidenceRecord(_Confidence, total=False):
    """How sure an answer is (``assess`` without the per-option probabilities, which the options
    carry); ``best_guess`` when openqa abstains below ``min_confidence``."""

    best_guess: str | None


class _Answer(TypedDict):
    question: str
    prediction: str | None
    tied: list[str]
    matched: bool
    abstained: bool
    options: list[OptionRecord]


class AnswerRecord(_Answer, total=False):
    """One solved question, as the API's ``Answer``, ``openqa answer --json`` and the HTTP API's
    answer (which adds ``message``, ``method`` and ``lang``) all give it: the prediction (None when
    no word of the question is in the index, or when openqa abstains), the letters tied with it,
    whether no answer could be read from a model's reply (``abstained``; abstaining below a
    ``min_confidence`` is said in ``confidence``), what a scorer adds (``details``: an LLM's reply,
    the nearest solved questions), the options best first, and the settings with their sources."""

    details: dict[str, Any]
    confidence: ConfidenceRecord
    settings: dict[str, Any]


def no_match_message(lang: str, switch: str = "--lang {}", questions: Sequence[Question] = ()) -> str:
    """What to say of questions the ``lang`` index gave no evidence for; ``switch`` spells how to
    choose the other language where the message is read (a flag, a JSON field). When ``questions``
    are given and each looks written in ``lang``, another language is not the cause (PMI, say, finds
    no option word near a question word), and the message does not suggest it."""
    if questions and all(written_in(" ".join([q.question, *q.options.values()])) == lang for q in questions):
        return (f"the {lang} index holds no evidence for any option (no option word occurs there, "
                "or none near a word of the question): nothing to score")
    other = language(lang).other()
    hint = f" (use {switch.format(other)})" if other else ""
    return f"no word of the question or its options occurs in the {lang} index: is it in another language?{hint}"


#: Han characters (CJK unified ideographs and extension A): what tells Chinese text from English.
_HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff]")


def written_in(text: str) -> str:
    """The language ``text`` looks written in, by its letters: the unspaced one (Chinese) when at
    least a third of them are Han characters, else the spaced one (English)."""
    letters = sum(ch.isalpha() for ch in text)
    han = bool(letters) and len(_HAN.findall(text)) * 3 >= letters
    return next(code for code, lang in LANGUAGES.items() if lang.spaced != han)


def language_note(question: Question, lang: str, switch: str = "--lang {}") -> str:
    """A word when ``question`` looks written in another language than the index it was read with
    (a confident answer from the wrong corpus otherwise says nothing); empty when it does not.
    ``switch`` spells how to choose the other language where the note is read (a flag, a JSON field)."""
    looks = written_in(" ".join([question.question, *question.options.values()]))
    if looks == lang:
        return ""
    return f"the question looks {language(looks).name} but was read as {language(lang).name}: try {switch.format(looks)}"


def tie_message(result: OptionScores, lang: str) -> str:
    """What a tied prediction means and what was assumed to reach it: the evidence in the ``lang``
    index does not tell the tied options apart, the prediction is a fixed tie-break, and the question
    was read as ``lang`` text (with the other language named when it looks written in it)."""
    question = result.question
    tied = result.tied_best()
    text = " ".join([question.question, *question.options.values()])
    looks = written_in(text)
    assumed = f"the question was read as {language(lang).name} (--lang {lang})"
    if looks != lang:
        assumed += f", but it looks {language(looks).name}: try --lang {looks}"
    return (f"tied: {', '.join(tied)} score the same in the {lang} index, so {result.prediction()} is only "
            f"a fixed tie-break; {assumed}")


def solve(scorer: OptionScorer, question: Question) -> OptionScores:
    """Score one question's options (the whole batch is this one question)."""
    return scorer.score([question], progress=False)[0]


def query_terms(tokenizer: Tokenizer, question: str, option: str) -> frozenset[str]:
    """What the evidence of one option is marked with, from the whole question and the option:
    in a spaced language their index terms (``term_spans`` matches a paragraph's words by their own
    terms, stemmed); in Chinese their content words (``Tokenizer.words``: jieba's words of two or
    more characters), not the index's single characters and bigrams, which match everywhere."""
    text = tokenizer.prepare_query(f"{question} {option}")
    return frozenset(tokenizer.tokenize(text) if language(tokenizer.lang).spaced else tokenizer.words(text))


@lru_cache(maxsize=256)
def _term_pattern(terms: frozenset[str]) -> re.Pattern[str] | None:
    """One regular expression finding any of ``terms`` in Chinese text, longest first (compiled once
    per option's terms: every evidence paragraph of the option reuses it)."""
    words = sorted(terms, key=len, reverse=True)
    return re.compile("|".join(re.escape(w) for w in words), re.IGNORECASE) if words else None


@lru_cache(maxsize=1 << 16)
def _word_terms(tokenizer: Tokenizer, word: str) -> frozenset[str]:
    """The index terms of one word (cached: the same words recur in every paragraph)."""
    return frozenset(tokenizer.tokenize(word))


def term_spans(text: str, terms: frozenset[str], tokenizer: Tokenizer) -> list[Span]:
    """Where ``text`` holds the query ``terms``, as character spans in reading order.

    English: the words of ``text`` whose own index terms (stemmed) occur among ``terms``, so
    "infarctions" is marked for the query word "infarction". Chinese has no spaces between words:
    the query's words themselves are found in the text, longest first (as written, whatever words
    the paragraph's own segmentation would make of it).
    """
    if not language(tokenizer.lang).spaced:
        pattern = _term_pattern(terms)
        return [m.span() for m in pattern.finditer(text)] if pattern else []
    return [m.span() for m in _WORD.finditer(text) if not terms.isdisjoint(_word_terms(tokenizer, m.group(0)))]


def highlight(text: str, spans: list[Span], color: bool) -> str:
    """``text`` with each span marked: bold yellow on a terminal, else ``**word**``."""
    out, last = [], 0
    for start, end in spans:
        word = text[start:end]
        out += [text[last:start], f"\033[1;33m{word}\033[0m" if color else f"**{word}**"]
        last = end
    return "".join(out) + text[last:]


def check_min_confidence(min_confidence: float | None) -> None:
    """Refuse a confidence threshold that is not a probability."""
    from openqa.arguments import shown

    if min_confidence is not None and (isinstance(min_confidence, bool) or not isinstance(min_confidence, (int, float))
                                       or not (math.isfinite(min_confidence) and 0 <= min_confidence <= 1)):
        raise OpenQAError(f"--min-confidence must be a probability from 0 to 1, not {shown(min_confidence)}")


def assess(result: OptionScores, probabilities: dict[str, float], calibration: Calibration | None,
           min_confidence: float | None = None) -> dict[str, Any]:
    """How sure an answer is: every option's probability, the prediction's, what that meant on dev
    (``Calibration.meaning``) and, below ``min_confidence``, that openqa abstains (with its best guess)."""
    check_min_confidence(min_confidence)
    guess = result.prediction() if result.matched else None
    p = probabilities[guess] if guess is not None else None
    calibrated = calibration is not None and calibration.n > 0
    if p is None:
        meaning = "no answer to be sure of"
    elif calibrated:
        assert calibration is not None  # calibrated says so
        meaning = calibration.meaning(p, len(result.scores))
    else:
        meaning = "uncalibrated (temperature 1): no dev split says what this probability means"
    below = p is not None and min_confidence is not None and p < min_confidence
    return {
        "probabilities": {k: round(v, 4) for k, v in probabilities.items()},
        "probability": round(p, 4) if p is not None else None,
        "meaning": meaning,
        "calibration": calibration.source if calibration is not None else "",
        "min_confidence": min_confidence,
        "abstained": below,
        **({"best_guess": guess} if below else {}),
    }


def confidence_line(sure: dict[str, Any]) -> str:
    """One line for a person: the prediction's probability and what it means, or why openqa abstains."""
    if sure["probability"] is None:
        return ""
    said = f"probability {sure['probability']:.2f}: {sure['meaning']}"
    if sure["abstained"]:
        return (f"openqa abstains: its best guess {sure['best_guess']} has probability {sure['probability']:.2f}, "
                f"below --min-confidence {sure['min_confidence']:g} ({sure['meaning']})")
    return said


def as_dict(result: OptionScores, engine: SearchEngine, evidence: int, sure: dict[str, Any] | None = None) -> AnswerRecord:
    """The ranked options with their probabilities and best evidence paragraphs, for ``--json`` and
    the HTTP API; each paragraph has ``spans``, the character spans of the words matching the
    option's query. ``sure`` (``assess``) adds how sure the answer is: ``prediction`` is None when
    openqa abstains below the asked confidence."""
    ranked = sorted(result.scores.items(), key=lambda kv: -kv[1])
    question = result.question
    probabilities = sure["probabilities"] if sure else {}

    def paragraphs(letter: str) -> list[EvidenceRecord]:
        hits = result.evidence.get(letter, [])[:evidence]
        terms = query_terms(engine.tokenizer, question.question, question.options[letter]) if hits else frozenset()
        return [
            EvidenceRecord(id=p.pid, book=p.book, score=round(h.score, 4), text=p.text,
                           spans=term_spans(p.text, terms, engine.tokenizer))
            for h in hits
            for p in [engine.paragraphs[h.index]]
        ]

    return cast(AnswerRecord, {
        "question": question.question,
        "prediction": result.prediction() if result.matched and not (sure and sure["abstained"]) else None,
        "tied": result.tied_best() if len(result.tied_best()) > 1 and result.matched else [],
        "matched": result.matched,
        "abstained": result.abstained,
        **({"details": result.details} if result.details else {}),
        **({"confidence": {k: v for k, v in sure.items() if k != "probabilities"}} if sure else {}),
        "options": [
            {
                "letter": letter,
                "text": question.options[letter],
                "score": round(score, 4) if math.isfinite(score) else None,
                **({"probability": probabilities[letter]} if letter in probabilities else {}),
                "evidence": paragraphs(letter),
            }
            for letter, score in ranked
        ],
    })


#: Characters of each evidence paragraph printed by ``render``.
SHOWN_CHARS = 600


def render(result: OptionScores, engine: SearchEngine, top_options: int, evidence: int, color: bool,
           sure: dict[str, Any] | None = None) -> str:
    """Human-readable ranking, with each option's probability (``sure``, from ``assess``) and the
    evidence of the ``top_options`` best options; corpus and question text is made ``printable``
    (its escape sequences and newlines shown, not acted on)."""
    if not result.matched:
        return f"Prediction: none: {no_match_message(engine.manifest['lang'], questions=[result.question])}"
    data = as_dict(result, engine, evidence, sure)
    if result.abstained:
        lines = ["Prediction: none (no answer could be read from the reply; counted wrong)"]
    elif sure and sure["abstained"]:
        lines = [f"Prediction: none ({confidence_line(sure)})"]
    else:
        lang = engine.manifest["lang"]
        note = tie_message(result, lang) if data["tied"] else language_note(result.question, lang)
        lines = [f"Prediction: {data['prediction']}" + (f"  ({note})" if note else "")]
        if sure and sure["probability"] is not None:
            lines.append(f"  {confidence_line(sure)}")
    shown_apart = ("solved_questions", "part_logits")  # rendered below, or only in --json
    lines += [printable(f"  {key}: {value}") for key, value in result.details.items() if key not in shown_apart]  # a model's reply too
    for solved in result.details.get("solved_questions", []):
        lines.append(printable(f"  solved question {solved['qid']} (similarity {solved['similarity']:.2f}): "
                               f"{' '.join(solved['question'].split())[:SHOWN_CHARS]} -> {solved['answer_idx']}. {solved['answer']}"))
    for rank, opt in enumerate(data["options"]):
        score = "no evidence" if opt["score"] is None else f"score {opt['score']:.3f}"
        chance = f"p {opt['probability']:.2f}, " if "probability" in opt else ""
        lines.append(printable(f"  {opt['letter']}. {opt['text']}  ({chance}{score})"))
        if rank >= top_options:
            continue
        for ev in opt["evidence"]:
            shown = [(start, end) for start, end in ev["spans"] if end <= SHOWN_CHARS]
            text = highlight(printable(ev["text"][:SHOWN_CHARS]), shown, color)  # one for one: spans hold
            lines.append(printable(f"      [{ev['book']} {ev['id']}, {ev['score']:.2f}] ") + text)
    return "\n".join(lines)
