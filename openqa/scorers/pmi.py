"""The paper's PMI baseline: how strongly the question's n-grams co-occur with each option's.

For every pair (x from the question, y from the option) of unigrams, bigrams, trigrams and
skip-bigrams, PMI(x, y) = log p(x, y) / (p(x) p(y)), with p(x) = count(x) / N and p(x, y) =
(occurrence pairs of x and y within ``window`` terms) / N over the positional index's stream.
An option's score is the mean PMI over its pairs where PMI is defined: pairs with an n-gram
absent from the corpus, or that never co-occur (PMI of minus infinity), are left out. On US dev
this beat flooring zero counts (0.5, 0.1, 0.01 co-occurrences) by 5 points. An option without
any defined pair scores minus infinity.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from openqa.cancel import checkpoint
from openqa.data import Question
from openqa.progress import tqdm
from openqa.retrieval.positional import Gram, PositionalIndex
from openqa.scorers.base import OptionScorer, OptionScores
from openqa.scorers.ir import IRSettings, question_query

#: The score of an option that shares no co-occurring n-gram pair with the question.
NO_EVIDENCE = float("-inf")


def ngrams(terms: list[str]) -> list[Gram]:
    """Distinct unigrams, bigrams, trigrams and skip-bigrams (a, _, c) of a term sequence."""
    grams: list[Gram] = [(t,) for t in terms]
    grams += [tuple(terms[i : i + 2]) for i in range(len(terms) - 1)]
    grams += [tuple(terms[i : i + 3]) for i in range(len(terms) - 2)]
    grams += [(terms[i], "", terms[i + 2]) for i in range(len(terms) - 2)]
    return list(dict.fromkeys(grams))


class PMIScorer(OptionScorer):
    """Scores options by mean PMI between question and option n-grams."""

    def __init__(self, index: PositionalIndex, settings: IRSettings = IRSettings(), window: int = 10) -> None:
        self.index = index
        self.settings = settings
        self.window = window
        self.lang = index.manifest["lang"]

    def grams(self, text: str) -> list[Gram]:
        """The distinct n-grams of ``text``'s index terms."""
        tok = self.index.tokenizer
        return ngrams(tok.tokenize(tok.prepare_query(text)))

    def pairs(self, question: Question) -> int:
        """The (question n-gram, option n-gram) pairs of ``question``, summed over its options: what
        scoring it costs, since ``pair_counts`` counts each pair whose n-grams occur in the corpus
        (found before any index is read: every n-gram is counted as if it occurred)."""
        asked = len(self.grams(question_query(question, self.settings.query, self.lang)))
        return asked * sum(len(self.grams(text)) for text in question.options.values())

    def _present(self, text: str) -> list[tuple[Gram, int]]:
        """The n-grams of ``text`` that occur in the corpus, with their counts."""
        checkpoint()
        counted = ((g, len(self.index.grams(g))) for g in self.grams(text))
        return [(g, c) for g, c in counted if c > 0]

    def option_pmi(self, asked: list[tuple[Gram, int]], option: list[tuple[Gram, int]]) -> float:
        """Mean PMI over the co-occurring (question n-gram, option n-gram) pairs of distinct n-grams."""
        checkpoint()
        if not asked or not option:
            return NO_EVIDENCE
        xs, cx = zip(*asked)
        ys, cy = zip(*option)
        together = self.index.pair_counts(xs, ys, self.window)
        defined = (together > 0) & np.array([[x != y for x in xs] for y in ys])
        if not defined.any():
            return NO_EVIDENCE
        return float(np.log(together[defined] * self.index.total / np.outer(cy, cx)[defined]).mean())

    def score(self, questions: Sequence[Question], progress: bool = True) -> list[OptionScores]:
        out = []
        for q in tqdm(questions, desc="scoring (pmi)", unit="q", disable=not progress):
            asked = self._present(question_query(q, self.settings.query, self.lang))
            scores = {letter: self.option_pmi(asked, self._present(text)) for letter, text in q.options.items()}
            out.append(OptionScores(q, scores, matched=any(s != NO_EVIDENCE for s in scores.values())))
        return out
