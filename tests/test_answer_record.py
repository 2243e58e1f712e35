"""One answer, one shape: the HTTP API's answer model is the answer record the Python API and
``openqa answer --json`` give (``openqa.answer.AnswerRecord``), plus the server's own three fields."""

from __future__ import annotations

import json

import pytest

from openqa.answer import AnswerRecord, ConfidenceRecord, EvidenceRecord, OptionRecord
from tests.helpers import QUESTIONS, make_data_dir

schemas = pytest.importorskip("openqa.serve.schemas")
#: What only the server adds to an answer.
SERVER_ONLY = {"message", "method", "lang"}


@pytest.mark.parametrize("model, record, extra", [
    ("Answer", AnswerRecord, SERVER_ONLY),
    ("RankedOption", OptionRecord, set()),
    ("Evidence", EvidenceRecord, set()),
    ("Confidence", ConfidenceRecord, set()),
])
def test_the_http_models_have_the_record_fields(model, record, extra):
    fields = getattr(schemas, model).model_fields
    assert set(fields) == set(record.__annotations__) | extra
    required = {name for name, field in fields.items() if field.is_required()}
    assert required - extra - {"settings"} == set(record.__required_keys__)  # the server always sends the settings


def test_a_real_answer_passes_through_the_http_model_unchanged(tmp_path):
    from openqa.api import Solver

    data = make_data_dir(tmp_path)
    solver = Solver.open("ir-custom", "en", data_dir=data, index_dir=tmp_path / "indexes")
    record = solver.answer(QUESTIONS[0]["question"], QUESTIONS[0]["options"], evidence=1).to_dict()
    served = {**record, "message": None, "method": "ir-custom", "lang": "en"}
    shown = schemas.Answer.model_validate(served).model_dump(mode="json", exclude_unset=True)
    assert json.loads(json.dumps(served)) == shown
    assert record["abstained"] is False and "confidence" in record
