"""``--exam`` takes a dataset's name as well (its exam, with that dataset's settings); one of the
other language is told apart in the one-line error."""

from __future__ import annotations

import pytest

from openqa.data.questions import exam_dataset
from openqa.errors import UsageError


def test_a_dataset_given_as_the_exam_names_its_exam():
    with pytest.raises(UsageError, match=r"^no zh dataset for exam 'mainland' \(--exam names an exam; dataset mainland "
                                         r"is scored as mcmle\): choose one of mcmle \(zh\)"):
        exam_dataset("zh", "mainland")
    with pytest.raises(UsageError, match=r"^no en dataset for exam 'boards': choose one of "):
        exam_dataset("en", "boards")
    assert exam_dataset("zh", "mcmle") == "mainland"


def test_a_dataset_name_is_taken_as_its_exam():
    from openqa.workspace import Exam

    exam = Exam.resolve(lang="zh", exam="mainland")
    assert (exam.exam, exam.dataset, exam.source) == ("mcmle", "mainland", "--exam mainland")
    tw = Exam.resolve(lang="en", exam="tw-en")
    assert (tw.exam, tw.dataset) == ("twmle", "tw-en")
    with pytest.raises(UsageError, match="dataset mainland is scored as mcmle"):
        Exam.resolve(lang="en", exam="mainland")
