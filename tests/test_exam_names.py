"""A dataset name given where an exam is asked for is told apart in the one-line error."""

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
