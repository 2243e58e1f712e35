"""Solved questions as evidence: a bank of questions with their answers, and an option scorer
whose votes come from a question's nearest solved questions.

Exams repeat themselves: a new question often has a near twin among the questions a user already
holds with their answers (an exam's dev and train splits, a course's question bank). The bank finds
a question's ``k`` nearest solved questions by the cosine of their TF-IDF vectors over the
language's index terms (English: stemmed words; Chinese: characters and character bigrams), and each
neighbour votes, with its similarity as weight, for the option whose text matches its answer
(``MATCHES``: exactly, after normalizing case, spaces and punctuation, or fuzzily). An option's
score is the sum of its votes: a logit-scale part that an ensemble weighs like any other (0 for
every option when no neighbour's answer is among them).

A question never finds itself: every copy of the question asked in the bank (a row with the same
text whose answer is among its options: the same question, whatever its id, file, line, split, or
options added, dropped or reordered; ``QuestionBank.copies``) is left out, so dev scores against
a bank that holds dev are leave-one-out, what a fit sees on dev is what a test question sees,
and a question's answer depends on its content alone, never on the name or order of the file
that carries it. Near-duplicates (another wording, other options) still count,
and records disclose how close each question's nearest neighbour was (``disclosure``); how many
questions asked the bank holds copies of is counted before any work (``QuestionBank.verbatim``).
"""

from __future__ import annotations

import math
import re
import unicodedata
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from openqa import arguments as arg
from openqa.data import Question
from openqa.data.questions import question_list
from openqa.errors import DataError, OpenQAError, UsageError
from openqa.languages import language
from openqa.progress import tqdm
from openqa.scorers.base import OptionScorer, OptionScores
from openqa.text.tokenize import ChineseTokenizer, EnglishTokenizer, Tokenizer

#: The similarity thresholds a record discloses (how many questions had a neighbour this close, and
#: the accuracy on them and on the rest).
DISCLOSED_SIMILARITIES = (0.3, 0.5, 0.7, 0.9)
#: The least character-bigram Dice coefficient at which ``fuzzy`` matching takes an answer for an option.
FUZZY_DICE = 0.8
#: Details key under which a scored question keeps its nearest solved questions.
DETAILS_KEY = "solved_questions"


def _squeezed(text: str) -> str:
    """Case-folded, with spaces, punctuation and symbols removed (full-width forms folded first)."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    return "".join(ch for ch in folded if not unicodedata.category(ch).startswith(("P", "S", "Z", "C")))


def _bigrams(text: str) -> set[str]:
    return {text[i : i + 2] for i in range(len(text) - 1)} or {text}


def _dice(a: str, b: str) -> float:
    x, y = _bigrams(a), _bigrams(b)
    return 2 * len(x & y) / (len(x) + len(y))


#: Neighbours that vote, and how an answer is matched to an option, unless a part says otherwise:
#: chosen on MCMLE dev by the ensemble's 5-fold cross-validated log-likelihood
#: (``python scripts/studies/bank_choice.py --dataset mainland --limit 1000`` -> eval/results/studies/bank-choice-mainland-dev.json).
BANK_K = 1
BANK_MATCH = "normalized"
#: How a neighbour's answer text is matched to an option's text, by name (strictest first).
MATCHES: dict[str, Callable[[str, str], bool]] = {
    "exact": lambda answer, option: answer.strip() == option.strip(),
    "normalized": lambda answer, option: bool(_squeezed(answer)) and _squeezed(answer) == _squeezed(option),
    "fuzzy": lambda answer, option: bool(_squeezed(answer)) and bool(_squeezed(option))
    and _dice(_squeezed(answer), _squeezed(option)) >= FUZZY_DICE,
}


def bank_tokenizer(lang: str) -> Tokenizer:
    """The index terms bank questions are compared by: the language's default terms."""
    return ChineseTokenizer() if lang == "zh" else EnglishTokenizer()


_CJK = re.compile(r"[\u3400-\u9fff]")


@dataclass(frozen=True)
class Neighbour:
    """A solved question near the one asked, with its similarity (TF-IDF cosine, 0 to 1)."""

    question: Question
    similarity: float

    def to_dict(self) -> dict[str, Any]:
        q = self.question
        return {"qid": q.qid, "question": q.question, "options": dict(q.options), "answer_idx": q.answer_idx,
                "answer": q.options.get(q.answer_idx, q.answer), "similarity": round(self.similarity, 4)}


def answer_text(question: Question) -> str:
    """The text of a solved question's answer (its answer option's, else its answer field)."""
    return question.options.get(question.answer_idx, question.answer)


def chinese_share(questions: Sequence[Question]) -> float:
    """The share of ``questions`` whose text holds a Chinese character: a bank of them is Chinese
    from one half up (``require_language``)."""
    return sum(bool(_CJK.search(q.question)) for q in questions) / max(len(questions), 1)


def require_language(questions: Sequence[Question], lang: str, what: str) -> None:
    """Refuse solved questions of the other language: most of a Chinese bank's questions hold
    Chinese characters, few of an English one's. Checked for the whole bank and for each ``--bank``
    file alone, so one file of the other language is not outvoted by a large default bank."""
    cjk = chinese_share(questions)
    if (lang == "zh") != (cjk >= 0.5):
        raise DataError(f"{what} is not in the language asked for ({lang}): "
                        f"{cjk:.0%} of its questions hold Chinese characters; give a bank of {lang} questions")


class QuestionBank:
    """Solved questions indexed for nearest-neighbour search (TF-IDF cosine of their texts), fixed
    once built (safe to share across threads): what the bank method votes from (``BankScorer``).

    :param questions: the solved questions (each with its answer among its options).
    :param lang: their language, ``en`` or ``zh`` (most questions of a Chinese bank hold Chinese characters).
    :param sources: where the questions came from (file names and counts), as records disclose it.
    :raises OpenQAError: on an empty bank, a question without its answer, or another language (one line)."""

    def __init__(self, questions: Sequence[Question], lang: str, sources: Sequence[dict[str, Any]] = ()) -> None:
        questions = question_list("questions", questions)
        language(lang)
        if not isinstance(sources, (list, tuple)) or not all(isinstance(s, dict) for s in sources):
            raise UsageError("sources must be a list of dicts (where the questions came from)")
        if not questions:
            raise DataError("the question bank is empty: give solved questions (with their answers)")
        for q in questions:
            if not q.answer_idx or q.answer_idx not in q.options:
                raise DataError(f"bank question {q.qid}: its answer {q.answer_idx!r} is not among its options "
                                f"({', '.join(q.options)}): a bank holds solved questions")
        require_language(questions, lang, "the question bank")
        self.questions = list(questions)
        self.lang = lang
        self.sources = list(sources)
        self.tokenizer = bank_tokenizer(lang)
        counts = [self._counts(q.question) for q in self.questions]
        vocab: dict[str, int] = {}
        for c in counts:
            for term in c:
                vocab.setdefault(term, len(vocab))
        df = np.zeros(len(vocab))
        for c in counts:
            for term in c:
                df[vocab[term]] += 1
        self.vocab = vocab
        self.idf = np.log((1 + len(counts)) / (1 + df)) + 1.0
        rows: list[list[int]] = [[] for _ in vocab]
        weights: list[list[float]] = [[] for _ in vocab]
        for row, c in enumerate(counts):
            for term_id, w in self._unit_vector(c).items():
                rows[term_id].append(row)
                weights[term_id].append(w)
        self.postings = [(np.asarray(r, dtype=np.int32), np.asarray(w)) for r, w in zip(rows, weights)]
        self.by_text: dict[str, list[int]] = {}
        for row, q in enumerate(self.questions):
            self.by_text.setdefault(q.content_digest(), []).append(row)
        # each row's source (an index into sources), where the sources' counts add up to the bank
        sizes: list[Any] = [source.get("questions") for source in self.sources]
        whole = all(isinstance(n, int) and n >= 0 for n in sizes) and sum(sizes) == len(self.questions)
        self.row_source: list[int | None] = ([i for i, n in enumerate(sizes) for _ in range(n)] if whole
                                             else [None] * len(self.questions))

    def _unit_vector(self, counts: dict[str, int]) -> dict[int, float]:
        """The TF-IDF vector (log-scaled counts) of the known terms of ``counts``, of unit length (empty without any)."""
        vector = {self.vocab[t]: (1 + math.log(n)) * self.idf[self.vocab[t]] for t, n in counts.items() if t in self.vocab}
        norm = math.sqrt(sum(w * w for w in vector.values()))
        return {term_id: w / norm for term_id, w in vector.items()} if norm else {}

    def _counts(self, text: str) -> dict[str, int]:
        counts: dict[str, int] = {}
        for term in self.tokenizer.tokenize(text):
            counts[term] = counts.get(term, 0) + 1
        return counts

    def __len__(self) -> int:
        return len(self.questions)

    def nearest(self, question: Question, k: int) -> list[Neighbour]:
        """The ``k`` bank questions most similar to ``question`` (best first; ties by bank order),
        never a copy of it (``copies``: its text, its answer among the options, whatever its id or source).

        :param question: the question asked (a ``Question``).
        :param k: how many neighbours at most (1 or more).
        :raises OpenQAError: on a question that is not a ``Question`` or a k under 1 (one line)."""
        if not isinstance(question, Question):
            raise UsageError(f"question must be a Question, not {type(question).__name__}")
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise UsageError(f"k must be a whole number of at least 1, not {arg.shown(k)}")
        vector = self._unit_vector(self._counts(question.question))
        if not vector:
            return []
        sims = np.zeros(len(self.questions))
        for term, w in vector.items():
            rows, weights = self.postings[term]
            sims[rows] += weights * w
        sims[self.copies(question)] = -1.0
        take = min(k, len(sims))
        top = np.argpartition(-sims, take - 1)[:take]
        top = top[np.lexsort((top, -sims[top]))]
        return [Neighbour(self.questions[i], float(min(sims[i], 1.0))) for i in top if sims[i] > 0]

    def copies(self, question: Question) -> list[int]:
        """The rows that are copies of ``question``: the same text (``Question.content_digest``), with
        their answer among its options (matched as ``normalized``), so that the same question with
        an option more, fewer or reordered is a copy, and a short stem shared by different
        questions ("Which of the following is true?") is not."""
        if not isinstance(question, Question):
            raise UsageError(f"question must be a Question, not {type(question).__name__}")
        same = MATCHES["normalized"]
        return [row for row in self.by_text.get(question.content_digest(), [])
                if any(same(answer_text(self.questions[row]), option) for option in question.options.values())]

    def verbatim(self, questions: Sequence[Question]) -> dict[str, Any]:
        """How many of ``questions`` the bank holds copies of (``copies``), in all and by
        source (each ``sources`` entry with the count of its own): what a run counts before any
        work, refusing a ``--bank`` file that holds questions it scores (``checked_overlap``).
        Those copies are never a question's evidence (``nearest``); the count says how many
        questions lost their copy.

        :param questions: the questions about to be scored.
        :returns: ``{"questions": n, "of": len(questions), "by_source": [{**source, "holds": k}, ...]}``."""
        questions = question_list("questions", questions)
        held = {i: rows for i, q in enumerate(questions) if (rows := self.copies(q))}
        per_source = [0] * len(self.sources)
        for rows in held.values():
            for i in {self.row_source[row] for row in rows}:
                if i is not None:
                    per_source[i] += 1
        return {"questions": len(held), "of": len(questions),
                "by_source": [{**source, "holds": n} for source, n in zip(self.sources, per_source) if n]}

    def describe(self) -> dict[str, Any]:
        """Where the bank's questions came from and how many there are (what records disclose)."""
        return {"size": len(self.questions), "sources": self.sources, "similarity": "TF-IDF cosine over "
                f"{'characters and character bigrams' if self.lang == 'zh' else 'stemmed words'} of the question text"}


def votes(question: Question, neighbours: Sequence[Neighbour], match: str) -> dict[str, float]:
    """Each option's summed similarity of the neighbours whose answer matches it (one option per
    neighbour: the first in letter order that matches)."""
    if match not in MATCHES:
        raise OpenQAError(f"unknown answer matching {match!r}: choose one of {', '.join(MATCHES)}")
    same = MATCHES[match]
    scores = dict.fromkeys(question.options, 0.0)
    for n in neighbours:
        answer = answer_text(n.question)
        letter = next((letter for letter, text in question.options.items() if same(answer, text)), None)
        if letter is not None:
            scores[letter] += n.similarity
    return scores


class BankScorer(OptionScorer):
    """Scores each option by the votes of a question's ``k`` nearest solved questions of ``bank``,
    each weighted by its similarity, for the option its answer matches (see the module's docstring):
    the bank method's scorer, and a part an ensemble weighs (``score_parts``).

    :param bank: the ``QuestionBank`` voted from.
    :param k: neighbours that vote (default: the bank method's, chosen on MCMLE dev).
    :param match: how an answer is matched to an option: one of ``matches`` (default: the bank method's).
    :raises OpenQAError: on a bank that is not a ``QuestionBank``, k under 1 or an unknown matching (one line)."""

    #: Vote sums are used as they are: an ensemble weighs them, a calibration scales them.
    scale = "logits"
    #: The ways of matching an answer to an option, strictest first.
    matches: tuple[str, ...] = tuple(MATCHES)

    def __init__(self, bank: QuestionBank, k: int = BANK_K, match: str = BANK_MATCH) -> None:
        if not isinstance(bank, QuestionBank):
            raise UsageError(f"bank must be a QuestionBank, not {type(bank).__name__}")
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise OpenQAError(f"the bank's k must be at least 1, not {arg.shown(k)}")
        if not isinstance(match, str) or match not in MATCHES:
            raise OpenQAError(f"unknown answer matching {arg.shown(match)}: choose one of {', '.join(MATCHES)}")
        self.bank, self.k, self.match = bank, k, match

    def banks(self) -> list[QuestionBank]:
        return [self.bank]

    def score_one(self, question: Question) -> OptionScores:
        neighbours = self.bank.nearest(question, self.k)
        scores = votes(question, neighbours, self.match)
        return OptionScores(question, scores, details={DETAILS_KEY: [n.to_dict() for n in neighbours]})

    def score(self, questions: Sequence[Question], progress: bool = True) -> list[OptionScores]:
        """Each question's option scores, in order (its neighbours in ``details``).

        :param questions: the questions (a list of ``Question``).
        :param progress: show a progress bar.
        :returns: one ``OptionScores`` a question."""
        questions = question_list("questions", questions)
        return [self.score_one(q) for q in tqdm(questions, desc="bank", unit="q", disable=not arg.flag("progress", progress))]

    def report(self, results: Sequence[OptionScores]) -> dict[str, Any]:
        """What the record says of the bank and of how ``results`` (what ``score`` gave) used it."""
        if not isinstance(results, (list, tuple)) or not all(isinstance(r, OptionScores) for r in results):
            raise UsageError("results must be a list of OptionScores (what score gave)")
        return {"bank": {**self.bank.describe(), "k": self.k, "match": self.match, **disclosure(results)}}

    def report_as_part(self, results: Sequence[OptionScores]) -> dict[str, Any]:
        return self.report(results)


#: The flag that lets a ``--bank`` file hold questions being scored (their copies are left out all the same).
ALLOW_OVERLAP = "--allow-bank-overlap"


def checked_overlap(banks: Sequence[QuestionBank], questions: Sequence[Question], allowed: bool = False) -> dict[str, Any]:
    """What a run's record says of the questions its ``banks`` hold verbatim (``QuestionBank.verbatim``),
    counted before any work; refused in one line when a file the user added (a ``--bank`` file)
    holds any of them, unless ``allowed``: a bank that holds the questions scored would give their
    answers (each copy is left out of its question's evidence, but a near copy would not be). The
    exam's own splits may hold a few (a question's own row in dev when dev is scored, a test
    question's twin in dev): left out and counted, not refused.

    :returns: ``{"bank_overlap": {...}}``, or nothing for a run without a bank."""
    found = [bank.verbatim(questions) for bank in {id(b): b for b in banks}.values()]
    if not found:
        return {}
    overlap = max(found, key=lambda o: o["questions"])
    files = [source for o in found for source in o["by_source"] if "file" in source]
    if files and not allowed:
        first = files[0]
        raise DataError(f"--bank {first['file']} holds {first['holds']:,} of the {overlap['of']:,} questions scored "
                        f"(the same text, the answer among the options): a bank must not hold the questions it is scored on; remove them "
                        f"from the file, or give {ALLOW_OVERLAP} (each question's copy is then left out of its evidence, and counted)")
    return {"bank_overlap": {**overlap, "rule": "each question's copies in the bank (the same text, with the answer among its options) are "
                             "left out of its evidence; a --bank file holding questions scored is refused unless "
                             f"{ALLOW_OVERLAP} is given" + (" (it was)" if files else "")}}


def disclosure(results: Sequence[OptionScores]) -> dict[str, Any]:
    """How many questions had a solved neighbour at each of ``DISCLOSED_SIMILARITIES`` or closer,
    and the accuracy on those and on the rest: where a gain from the bank comes from."""
    top = [max((n["similarity"] for n in r.details.get(DETAILS_KEY, [])), default=0.0) for r in results]
    right = [r.prediction() == r.question.answer_idx for r in results]

    def accuracy(flags: list[bool]) -> float | None:
        return round(100 * sum(flags) / len(flags), 2) if flags else None

    rows = {}
    for threshold in DISCLOSED_SIMILARITIES:
        near = [ok for s, ok in zip(top, right) if s >= threshold]
        rest = [ok for s, ok in zip(top, right) if s < threshold]
        rows[f"{threshold:.1f}"] = {"questions": len(near), "accuracy": accuracy(near),
                                    "rest": len(rest), "rest_accuracy": accuracy(rest)}
    return {"nearest_similarity_at_least": rows}
