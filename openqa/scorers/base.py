"""What every option scorer returns, and the position-free rule that breaks ties."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Sequence

from openqa.data import Question
from openqa.retrieval.base import Hit

if TYPE_CHECKING:
    from openqa.scorers.bank import QuestionBank

#: Scores closer than this (relative) count as tied.
TIE_TOLERANCE = 1e-6


@dataclass
class OptionScores:
    """Scores of one question's options and the evidence behind each (best first).

    ``matched`` is False when no term of the question or its options occurs in the index (a
    question in another language than the corpus, say): its scores are all equal and mean nothing.
    ``abstained`` is True when the scorer gave no answer (an LLM reply from which no letter could be
    read): the prediction is None and the question counts as wrong, never as a tie-break.
    ``details`` holds what a scorer records per question beyond scores (an LLM's raw reply, letter
    probabilities, cited paragraph ids); it goes into the predictions file and answer's JSON.
    """

    question: Question
    scores: dict[str, float]
    evidence: dict[str, list[Hit]] = field(default_factory=dict)
    matched: bool = True
    abstained: bool = False
    details: dict[str, Any] = field(default_factory=dict)

    def tied_best(self) -> list[str]:
        """The letters whose score equals the best score (within ``TIE_TOLERANCE``); none when abstained."""
        if self.abstained:
            return []
        best = max(self.scores.values())
        slack = TIE_TOLERANCE * max(abs(best), 1.0)
        return [letter for letter, s in self.scores.items() if s >= best - slack]

    def prediction(self) -> str | None:
        """The best option (None when abstained); ties go to the option whose text hashes lowest with
        the question's text (``Question.content_digest``).

        The hash depends on the question's and the option's text only, not on the option's letter or
        position (no position is favoured) nor on the question's id, file, format or line, so one
        question gets one prediction on every run and whatever file carries it.
        """
        tied = self.tied_best()
        if not tied:
            return None
        if len(tied) == 1:
            return tied[0]
        return min(tied, key=lambda letter: self.question.content_digest(self.question.options[letter]))


class OptionScorer(ABC):
    """Scores every option of every question; higher is better. A scorer changes nothing while
    scoring (its settings are fixed when it is made), so one can serve many threads at once."""

    #: The scale of its scores, which turns them into logits for probabilities and ensembles
    #: (``openqa.scorers.logits.SCALES``): evidence scores are standardized within each question.
    scale: str = "standardized"

    @abstractmethod
    def score(self, questions: Sequence[Question], progress: bool = True) -> list[OptionScores]:
        """One ``OptionScores`` per question, in order (a progress bar unless ``progress`` is False)."""

    def score_with_parts(self, questions: Sequence[Question], progress: bool = True,
                         ) -> tuple[list[OptionScores], dict[str, list[OptionScores]]]:
        """``score``, and the option scores of each named part it combines (none unless it combines
        other scorers' scores), so an evaluation can compare it with its parts without scoring twice."""
        return self.score(questions, progress), {}

    def banks(self) -> list[QuestionBank]:
        """The banks of solved questions whose rows it shows or votes from (none by default), which a
        run checks for copies of the questions it scores before any work (``QuestionBank.verbatim``)."""
        return []

    def report(self, results: Sequence[OptionScores]) -> dict[str, Any]:
        """What a result record adds about this scorer's run beyond accuracy (none by default)."""
        return {}

    def report_as_part(self, results: Sequence[OptionScores]) -> dict[str, Any]:
        """What a record of an ensemble with this scorer as a part adds about it, over the
        ensemble's ``results`` (none by default; a bank part discloses where its gain comes from)."""
        return {}
