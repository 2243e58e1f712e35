"""What ``openqa serve`` opens for each method and language: a named ensemble (``--ensemble``, its
bank part included), a model never dropped without a word by an ensemble fitted without an LLM,
``--bank`` files added to the bank of their own language alone, and the files it was given named to
clients by their names, never by absolute paths."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from openqa.api import tune
from openqa.cli import main
from openqa.config import Settings
from openqa.errors import OpenQAError
from openqa.llm.settings import LLMSettings
from openqa.methods import Request, open_method
from openqa.pipeline import Context
from openqa.serve import app as app_module
from openqa.serve.app import create_app
from openqa.serve.engines import Engines
from openqa.workspace import Exam
from tests.helpers import QUESTIONS
from tests.servers import call, running, tiny_site

#: Solved Chinese questions: a mainland dev split for the tiny site.
ZH_SOLVED = [{"question": "哪种药物抑制细菌细胞壁合成？", "options": {"A": "阿司匹林", "B": "头孢曲松", "C": "庆大霉素", "D": "华法林"},
              "answer_idx": "B", "answer": "头孢曲松"}]


@pytest.fixture()
def where(tmp_path) -> dict[str, Any]:
    """The tiny site (English and Chinese indexes, US dev and Mainland dev questions) and a settings
    folder of its own, as the API takes them."""
    data, indexes = tiny_site(tmp_path)
    mainland = data / "questions" / "Mainland" / "4_options"
    mainland.mkdir(parents=True)
    (mainland / "dev.jsonl").write_text("".join(json.dumps(q, ensure_ascii=False) + "\n" for q in ZH_SOLVED), encoding="utf-8")
    return {"data_dir": data, "index_dir": indexes, "settings_dir": tmp_path / "tuned"}


def context(where: dict[str, Any]) -> Context:
    return Context(Settings.resolve(**where))


def served(monkeypatch, where: dict[str, Any], *args: str) -> tuple[list[str], list[str], Request]:
    """The languages, methods and request ``openqa serve ARGS`` would open (the server is not started)."""
    seen: dict[str, Any] = {}
    monkeypatch.setattr(app_module, "serve", lambda ctx, langs, methods, host, port, allow, request, *rest: seen.update(
        langs=langs, methods=methods, request=request))
    flags = ["--data-dir", str(where["data_dir"]), "--index-dir", str(where["index_dir"]), "--settings-dir", str(where["settings_dir"])]
    assert main(["serve", *args, *flags]) == 0
    return seen["langs"], seen["methods"], seen["request"]


def test_serve_offers_a_named_ensemble_with_its_bank_part(where, monkeypatch):
    tune("ensemble", "us", parts=["ir-custom", "bank"], ensemble="bank", **where)
    langs, methods, request = served(monkeypatch, where, "--lang", "en", "--method", "ir-custom,ensemble", "--ensemble", "bank")
    assert request.ensemble == "bank"
    engines = Engines(context(where), langs, methods, request)
    try:
        offers = {offer["method"]: offer for offer in engines.describe()}
        assert offers["ir-custom"]["available"] and offers["ensemble"]["available"], offers
        assert offers["ensemble"]["settings"]["parts"] == ["ir-custom", "bank"]
        with running(create_app(engines)) as url:
            status, answer = call(url, "/v1/answer", {"question": QUESTIONS[1]["question"] + " (asked again)",
                                                      "options": QUESTIONS[1]["options"], "method": "ensemble"})
        assert status == 200, answer
        assert answer["details"]["solved_questions"][0]["answer"] == "Aspirin"
    finally:
        engines.close(0)


def test_ensemble_names_a_fitted_ensemble_only_beside_the_ensemble_method(where):
    with pytest.raises(OpenQAError, match="serve it with --method ensemble"):
        Engines(context(where), ["en"], ["ir-custom"], Request(ensemble="bank"))


def test_an_ensemble_fitted_without_an_llm_refuses_a_model_rather_than_dropping_it(where):
    llm = LLMSettings(model="some-model", endpoint="http://127.0.0.1:9/v1")
    with pytest.raises(OpenQAError, match="--model and the LLM flags apply to an ensemble with an llm part; the us ensemble "
                                          "combines ir-custom, ir-custom:top_n=1"):
        open_method(context(where), "ensemble", Exam.resolve(dataset="us"), Request(llm=llm))
    engines = Engines(context(where), ["en"], ["ir-custom", "ensemble"], Request(llm=llm))  # as serve --model would
    try:
        offers = {offer["method"]: offer for offer in engines.describe()}
        assert offers["ir-custom"]["available"] and not offers["ensemble"]["available"]
        assert "--model and the LLM flags apply to an ensemble with an llm part" in offers["ensemble"]["error"]
    finally:
        engines.close(0)


def bank_file(folder: Path, name: str, questions: list[dict[str, Any]]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text("".join(json.dumps(q, ensure_ascii=False) + "\n" for q in questions), encoding="utf-8")
    return path.absolute()


def test_a_bank_file_joins_the_bank_of_its_own_language_alone(where, tmp_path):
    english = bank_file(tmp_path / "secret" / "place", "course.jsonl", [dict(QUESTIONS[0], question="A solved course question about aspirin?")])
    engines = Engines(context(where), ["en", "zh"], ["bank"], Request(banks=(str(english),)))
    try:
        offers = {offer["lang"]: offer for offer in engines.describe()}
        assert offers["en"]["available"] and offers["zh"]["available"], offers
        assert [s.get("file") for s in offers["en"]["settings"]["bank_sources"]] == [None, "course.jsonl"]
        assert [s.get("file") for s in offers["zh"]["settings"]["bank_sources"]] == [None]
    finally:
        engines.close(0)


def test_bank_and_model_files_that_fail_reach_clients_by_name_alone(where, tmp_path):
    secret = tmp_path / "secret" / "place"
    broken = bank_file(secret, "broken.jsonl", [])
    broken.write_text("{not json\n")
    model = secret / "fake.gguf"
    model.write_bytes(b"not a gguf file at all")
    engines = Engines(context(where), ["en", "zh"], ["ir-custom", "bank", "llm"],
                      Request(banks=(str(broken),), llm=LLMSettings(model=str(model), evidence="question")))
    try:
        with running(create_app(engines)) as url:
            _, methods = call(url, "/v1/methods")
            _, refused = call(url, "/v1/answer", {"question": QUESTIONS[0]["question"], "options": QUESTIONS[0]["options"],
                                                  "method": "bank"})
        errors = {(o["method"], o["lang"]): o.get("error") for o in methods["served"]}
        assert "broken.jsonl" in errors["bank", "en"] and "fake.gguf" in errors["llm", "en"], errors
        assert str(secret) not in json.dumps(methods) and str(secret) not in json.dumps(refused)
        assert "broken.jsonl" in refused["error"]
    finally:
        engines.close(0)
