"""The LLM reader (``--method llm``): a tiny random chat model built here, run in process and served
by a real ``transformers serve`` on loopback; a fake OpenAI-compatible server for the faults a real
one rarely shows (401, 429, 5xx, replies that are not JSON, overflowing contexts, timeouts). Tests
check behaviour (records, cache, errors), never accuracy: the model is random."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.request import urlopen

import pytest

from openqa.cli import main
from openqa.llm import endpoint, llamacpp
from openqa.llm.extract import cited_ids, extract_letter
from tests.helpers import QUESTIONS, free_port, make_data_dir, packaged_gguf, wait_until
from tests.llm_fixtures import make_tiny_llm
from tests.servers import call, running

pytest.importorskip("transformers")

#: Seconds a ``transformers serve`` process may take to answer /v1/models on a loaded machine.
SERVE_START = 240


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    """A data folder, its index folder and the tiny models (with and without a chat template)."""
    base = tmp_path_factory.mktemp("llm")
    make_data_dir(base)
    make_tiny_llm(base / "tiny")
    make_tiny_llm(base / "no-template", chat_template=False)
    return base


def one_line_error(err: str, message: str) -> bool:
    """Whether ``err`` ends with one ``openqa: error:`` line holding ``message``, with no traceback."""
    lines = err.strip().splitlines()
    return bool(lines) and lines[-1].startswith("openqa: error: ") and message in lines[-1] and "Traceback" not in err


def run(root: Path, capsys, *args: str, command: str = "eval") -> tuple[int, str, str]:
    """Run ``openqa COMMAND`` in this process over the test's data; exit code, stdout, stderr."""
    where = ["--data-dir", str(root / "data_clean"), "--index-dir", str(root / "indexes")]
    if command == "eval" and "--output" not in args:
        where += ["--output", str(root / "results")]
    code = main([command, *args, *where])
    out, err = capsys.readouterr()
    return code, out, err


def eval_llm(root: Path, capsys, *args: str, model: str | None = None) -> dict:
    """``openqa eval --dataset us --method llm --json``'s summary (the run must succeed)."""
    code, out, err = run(root, capsys, "--dataset", "us", "--method", "llm", "--model", model or str(root / "tiny"),
                         "--json", *args)
    assert code == 0, err
    return json.loads(out)


def predictions(summary: dict) -> list[dict]:
    path = Path(summary["files"]["summary"]).with_suffix(".predictions.jsonl")
    return [json.loads(line) for line in path.read_text().splitlines()]


# --- reading the letter out of a reply -------------------------------------------------------

REPLIES = [
    ("C. Ceftriaxone", "C"),
    ("(B)", "B"),
    ("B", "B"),
    ("The answer is D", "D"),
    ("The correct answer is **B**.", "B"),
    ("Answer: (C) Ceftriaxone blocks cell wall synthesis.", "C"),
    ('{"reasoning": "Option A is an aminoglycoside and (B) a quinolone.", "answer": "C", "cited": ["Micro:1"]}', "C"),
    ('```json\n{"answer": "B"}\n```', "B"),
    ('{"answer": "C. Ceftriaxone"}', "C"),
    ('{"answer": "B"', "B"),  # cut off before the closing brace
    ("Step by step: A is wrong, so the answer is A... no. Final answer: C", "C"),
    ("I do not know.", None),
    ("A or B", None),
    ("The correct answer is: **B**", "B"),
    ("The answer is: D", "D"),
    ("**Answer:** C", "C"),
    ("D is the correct answer.", "D"),
    ("Option B is correct.", "B"),
    ("The patient has sepsis. (C) is the best choice here.", "C"),
    ("The answer is A or B", None),  # two letters named: no answer
    ("Answer: B and C", None),
    ("Vitamin C is the correct answer", None),  # a letter inside a name is no option
    ("Both (A) and (C) could be right", None),
    ("A 45-year-old man comes to the physician", None),  # starts with the article, not a letter
    ("A. Gentamicin\nB. Ciprofloxacin\nC. Ceftriaxone", None),  # the options listed back
    ('{"answer": ""}', None),
    ("E", None),  # not an option of a 4-option question
    ("", None),
]


@pytest.mark.parametrize("reply, letter", REPLIES)
def test_letter_is_read_from_realistic_replies_or_none(reply, letter):
    assert extract_letter(reply, "ABCD") == letter


#: 20 real replies of SmolLM2-135M-Instruct (the offline model) to US dev questions, letters read by hand.
REAL_REPLIES = json.loads((Path(__file__).with_name("llm_replies.json")).read_text())["replies"]


@pytest.mark.parametrize("case", REAL_REPLIES, ids=lambda c: f"{c['prompt']}-{c['qid']}")
def test_letter_is_read_from_real_replies_of_an_offline_model(case):
    assert extract_letter(case["reply"], "ABCD") == case["letter"]


def test_cited_ids_come_from_the_json_reply():
    assert cited_ids('{"answer": "C", "cited": ["Micro:1", "Micro:0"]}') == ["Micro:1", "Micro:0"]
    assert cited_ids("C. Ceftriaxone") == []


# --- in process --------------------------------------------------------------------------------

@pytest.mark.parametrize("evidence", ["none", "question", "options"])
def test_in_process_letters_record_and_predictions(root, capsys, evidence):
    summary = eval_llm(root, capsys, "--evidence", evidence, "--cache-dir", str(root / f"cache-{evidence}"))
    assert summary["method"] == "llm" and summary["model"] == "tiny" and summary["n"] == len(QUESTIONS)
    assert summary["settings"]["evidence"] == evidence and summary["settings"]["scoring"] == "letters"
    assert summary["parse_failures"] == 0 and 0 <= summary["accuracy"] <= 100
    assert len(summary["prompt_template_hash"]) == 16 == len(summary["settings"]["template_hash"])
    assert summary["tokens"]["counted_by"] == "the model's own tokenizer"
    for row in predictions(summary):
        probs = row["letter_probabilities"]
        assert math.isclose(sum(probs.values()), 1.0, abs_tol=1e-3)  # exact next-token distribution over A-D
        assert row["prediction"] == max(probs, key=probs.get) and row["letter"] == row["prediction"]
        assert (row["evidence_ids"] == []) == (evidence == "none")
        assert all(pid.split(":")[0] in ("Micro", "Cardio") for pid in row["evidence_ids"])
    if evidence == "none":
        assert summary["corpus"].startswith("none (closed book)")


def test_letters_in_batches_through_eval(root, capsys):
    """``--llm-batch-size``: the eval's prompts go to the model in padded batches, with the letter
    probabilities of one at a time (tests/test_llm_batches.py checks them to 1e-4 unrounded)."""
    one = eval_llm(root, capsys, "--evidence", "options", "--cache-dir", str(root / "cache-one"))
    batched = eval_llm(root, capsys, "--evidence", "options", "--llm-batch-size", "2", "--cache-dir", str(root / "cache-batched"))
    assert batched["settings"]["runs_on"] == "transformers, cpu, float32, letters in batches of 2"
    assert one["settings"]["runs_on"] == "transformers, cpu, float32"
    assert batched["model_calls"] == one["model_calls"] == len(QUESTIONS)
    for alone, together in zip(predictions(one), predictions(batched)):
        assert all(abs(alone["letter_probabilities"][k] - together["letter_probabilities"][k]) <= 1e-4 for k in "ABCD")


def test_evidence_is_cut_to_the_token_budget_in_rank_order(root, capsys):
    full = predictions(eval_llm(root, capsys, "--evidence", "question", "--top-n", "5", "--cache-dir", str(root / "c1")))
    cut = eval_llm(root, capsys, "--evidence", "question", "--top-n", "5", "--evidence-tokens", "30",
                   "--cache-dir", str(root / "c1"))
    assert cut["evidence_cut"]["by_budget"] == len(QUESTIONS)
    for whole, part in zip(full, predictions(cut)):
        assert 1 <= len(part["evidence_ids"]) < len(whole["evidence_ids"])
        assert whole["evidence_ids"][: len(part["evidence_ids"])] == part["evidence_ids"]  # the best ones kept


def test_second_run_makes_no_model_calls_and_an_interrupted_run_resumes(root, capsys, monkeypatch):
    cache = ["--cache-dir", str(root / "cache-rerun"), "--scoring", "generate", "--max-tokens", "4"]
    first = eval_llm(root, capsys, *cache, "--limit", "1")  # as if stopped after the first question
    assert first["model_calls"] == 1
    resumed = eval_llm(root, capsys, *cache)
    assert resumed["model_calls"] == 1 and resumed["cached_replies"] == 1
    import transformers

    def no_weights(*args, **kwargs):
        raise AssertionError("a cached rerun loaded the weights")

    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", no_weights)
    again = eval_llm(root, capsys, *cache)
    assert again["model_calls"] == 0 and again["cached_replies"] == len(QUESTIONS)
    assert predictions(again) == predictions(resumed)


def test_generate_with_permutations_records_orders_and_parse_failures(root, capsys):
    summary = eval_llm(root, capsys, "--scoring", "generate", "--max-tokens", "3", "--permutations", "3",
                       "--evidence", "none", "--cache-dir", str(root / "cache-perm"))
    assert summary["permutations"]["k"] == 3 and "questions_orders_disagreed" in summary["permutations"]
    rows = predictions(summary)
    for row in rows:
        assert len(row["orders"]) == 3 and row["orders"][0] == "ABCD" and len(row["reply"]) == 3
        if row.get("abstained"):  # a random model rarely writes a letter: no answer is never an option
            assert row["prediction"] is None and not row["correct"]
    assert summary["parse_failures"] == sum(bool(r.get("abstained")) for r in rows)
    assert summary["correct"] == sum(r["correct"] for r in rows)
    report = Path(summary["files"]["summary"]).with_suffix(".md").read_text()
    assert (f"Parse failures (no letter read; counted wrong): {summary['parse_failures']}" in report
            and f"Model calls: {summary['model_calls']}" in report and f"Cached replies: {summary['cached_replies']}" in report)


def test_answer_json_shows_the_reply_probabilities_and_evidence(root, capsys):
    code, out, err = run(root, capsys, "--method", "llm", "--model", str(root / "tiny"), "--question",
                         QUESTIONS[0]["question"], *[f"--option={k}={v}" for k, v in QUESTIONS[0]["options"].items()],
                         "--json", "--evidence", "options", "--cache-dir", str(root / "cache-answer"), command="answer")
    assert code == 0, err
    record = json.loads(out)
    assert record["prediction"] in "ABCD" and set(record["details"]["letter_probabilities"]) == set("ABCD")
    assert record["details"]["evidence_ids"] and record["settings"]["evidence"] == "options"
    assert any(option["evidence"] for option in record["options"])  # each option's own paragraphs


def test_tune_fits_the_llm_letter_probabilities_that_eval_then_uses(root, capsys):
    llm = ["--dataset", "us", "--method", "llm", "--model", str(root / "tiny"), "--evidence", "none",
           "--cache-dir", str(root / "cache-tune"), "--settings-dir", str(root / "tuned-llm")]
    code, out, err = run(root, capsys, *llm, command="tune")
    assert code == 0, err
    files = list((root / "tuned-llm").glob("llm-*.calibration.json"))
    assert len(files) == 1 and files[0].name.endswith("-us.calibration.json")  # filed under the model and its settings
    calibration = json.loads(files[0].read_text())["calibration"]
    assert calibration["scale"] == "probability" and calibration["dataset"] == "us" and calibration["temperature"] > 0
    assert calibration["fitted_on"] == "the method's dev scores" and calibration["settings"]["evidence"] == "none"
    summary = eval_llm(root, capsys, *llm[6:])
    assert summary["settings"]["sources"]["probabilities"] == f"your openqa tune: tuned-llm/{files[0].name}"
    temperature = calibration["temperature"]
    for row in predictions(summary):  # the letter probabilities, recalibrated by the fitted temperature
        assert row["scale"] == "probability" and row["scores"] == pytest.approx(row["letter_probabilities"], abs=1e-4)
        logits = {k: math.log(max(v, 1e-6)) / temperature for k, v in row["letter_probabilities"].items()}
        top = max(logits.values())
        total = sum(math.exp(v - top) for v in logits.values())
        assert row["probabilities"] == pytest.approx({k: math.exp(v - top) / total for k, v in logits.items()}, abs=1e-3)


def test_an_ensemble_weighs_the_llm_letters_beside_an_index_method(root, capsys):
    args = ["--dataset", "us", "--method", "ensemble", "--model", str(root / "tiny"), "--evidence", "none",
            "--cache-dir", str(root / "cache-ensemble"), "--settings-dir", str(root / "tuned-ensemble")]
    code, out, err = run(root, capsys, *args, "--parts", "ir-custom,llm", command="tune")
    assert code == 0, err
    record = json.loads((root / "tuned-ensemble" / "ensemble-us.json").read_text())
    assert record["chosen"]["parts"] == ["ir-custom", "llm"] and all(w >= 0 for w in record["chosen"]["weights"])
    assert [row["part"] for row in record["grid"]] == ["ir-custom", "llm", "ensemble"]
    prior = record["chosen"]["letter_priors"]["llm"]  # the LLM's mean letter probabilities on dev; none for IR-Custom
    assert list(record["chosen"]["letter_priors"]) == ["llm"] and sorted(prior) == list("ABCD")
    assert sum(prior.values()) == pytest.approx(1.0, abs=1e-4)
    code, out, err = run(root, capsys, *args, "--json")  # the parts are the fitted ones
    assert code == 0, err
    summary = json.loads(out)
    assert set(summary["parts"]) == {"ir-custom", "llm"} and summary["settings"]["part_settings"]["llm"]["scoring"] == "letters"
    assert summary["settings"]["sources"]["probabilities"].endswith("tuned-ensemble/ensemble-us.calibration.json")
    assert summary["settings"]["letter_priors"] == record["chosen"]["letter_priors"]
    for row in predictions(summary):  # the LLM's letters enter as log-probabilities (the prior divided out)
        llm = row["part_logits"]["llm"]
        assert len(llm) == 4 and all(v + math.log(prior[k]) <= 1e-3 for k, v in zip("ABCD", llm))


def test_a_fitted_ensemble_refuses_another_model_or_other_llm_settings_for_its_llm_part(root, capsys):
    where = ["--settings-dir", str(root / "tuned-named"), "--cache-dir", str(root / "cache-named")]
    code, _, err = run(root, capsys, "--dataset", "us", "--method", "ensemble", "--parts", "ir-custom,llm", "--ensemble", "tiny",
                       "--model", str(root / "tiny"), "--evidence", "none", *where, command="tune")
    assert code == 0, err
    record = json.loads((root / "tuned-named" / "ensemble-tiny-us.json").read_text())
    assert record["chosen"]["llm"]["model"] == "tiny" and record["chosen"]["llm"]["evidence"] == "none"
    if not (root / "tiny-other").exists():
        make_tiny_llm(root / "tiny-other")
    question = ["--question", QUESTIONS[0]["question"], *[f"--option={k}={v}" for k, v in QUESTIONS[0]["options"].items()]]
    asked = ["--method", "ensemble", "--ensemble", "tiny", *question, *where]
    code, out, err = run(root, capsys, *asked, "--model", str(root / "tiny"), "--evidence", "none", command="answer")
    assert code == 0, err
    for other, said in [(["--model", str(root / "tiny-other"), "--evidence", "none"], "model 'tiny' (here 'tiny-other')"),
                        (["--model", str(root / "tiny"), "--evidence", "question"], "evidence 'none' (here 'question')")]:
        code, out, err = run(root, capsys, *asked, *other, command="answer")
        assert code == 2 and out == "" and one_line_error(err, f"the ensemble tiny was fitted with another llm part: {said}"), err


@pytest.mark.parametrize("args, message", [
    (["--model", "{root}/no-template"], "has no chat template"),
    (["--model", "{root}/missing-model"], "cannot load model"),
    (["--context", "64"], "more than the model's context of 64"),
    (["--scoring", "generate", "--concurrency", "2"], "--concurrency applies to --endpoint (a server) and a .gguf model "
                                                      "(llama.cpp in process), not to a transformers model in process"),
    (["--no-prompt-reuse"], "--no-prompt-reuse applies to a .gguf model (llama.cpp in process), not to a transformers model"),
    (["--model", "{root}/fake.gguf", "--llm-batch-size", "2"], "--llm-batch-size applies to a transformers model in process, "
                                                              "not to a .gguf model (llama.cpp in process)"),
    (["--evidence", "question", "--retriever", "pmi"], "does not retrieve paragraphs"),
    (["--model", "{root}/fake.gguf"], "GGUF file not found"),
    (["--temperature", "nan"], "--temperature must be a number, 0 or more, not nan"),
    (["--timeout", "inf"], "--timeout must be a positive number of seconds, not inf"),
    (["--timeout", "nan"], "--timeout must be a positive number of seconds, not nan"),
])
def test_in_process_faults_are_one_line_errors(root, capsys, args, message):
    args = [a.format(root=root) for a in args]
    code, out, err = run(root, capsys, "--dataset", "us", "--method", "llm", *(["--model", str(root / "tiny")]
                         if "--model" not in args else []), *args, "--cache-dir", str(root / "cache-faults"))
    assert code == 2 and one_line_error(err, message), err
    assert not list((root / "results").glob("*no-template*")) and "Traceback" not in err


# --- openqa serve ------------------------------------------------------------------------------

@pytest.mark.parametrize("evidence", ["question", "none"])
def test_serve_answers_with_the_llm_beside_an_index_method(root, evidence):
    from openqa.config import Settings
    from openqa.data.pasted import make_question
    from openqa.llm.settings import LLMSettings
    from openqa.methods import METHODS, Request
    from openqa.serve.app import create_app
    from openqa.serve.engines import Engines
    from openqa.workspace import Context

    settings = Settings.resolve(data_dir=root / "data_clean", index_dir=root / "indexes", settings_dir=root / "tuned")
    llm = LLMSettings(model=str(root / "tiny"), evidence=evidence, cache_dir=root / f"cache-serve-{evidence}")
    engines = Engines(Context(settings), ["en"], ["ir-custom", "llm"], Request(llm=llm))
    try:
        offered = {offer["method"]: offer for offer in engines.describe()}
        assert offered["llm"]["available"] and offered["llm"]["limits"]["seconds"] == 600
        assert offered["llm"]["settings"]["evidence"] == evidence
        assert engines.methods == ["ir-custom", "llm"]
        # weighed by its prompt tokens: 133 + 10 + 13 + 11 + 12 = 179 characters at 3 a token, 60 tokens, and
        # the evidence budget (1,024 tokens) when it reads evidence; heavy with or without
        first = make_question(QUESTIONS[0]["question"], QUESTIONS[0]["options"])
        assert METHODS["llm"].work_units(engines.offers["en", "llm"].opened, first, "en") == 60 + (1024 if evidence != "none" else 0)
        assert METHODS["llm"].estimate(engines.offers["en", "llm"].opened, first, "en").heavy
        with running(create_app(engines)) as url:
            asked = [{"question": q["question"], "options": q["options"], "method": "llm"} for q in QUESTIONS] * 2
            with ThreadPoolExecutor(6) as pool:  # the model's first replies, on several threads at once
                together = list(pool.map(lambda body: call(url, "/v1/answer", body), asked))
            assert all(status == 200 for status, _ in together), together
            assert [call(url, "/v1/answer", body) for body in asked] == together  # then each alone, from the cache
            question = {"question": QUESTIONS[0]["question"], "options": QUESTIONS[0]["options"]}
            status, data = call(url, "/v1/answer", {**question, "method": "llm"})
            assert status == 200, data
            assert data["method"] == "llm" and data["prediction"] in "ABCD"
            assert set(data["details"]["letter_probabilities"]) == set("ABCD")
            assert bool(data["details"]["evidence_ids"]) == (evidence != "none")
            assert call(url, "/v1/answer", {**question, "method": "llm"})[1] == data  # the cached reply, same answer
            status, refused = call(url, "/v1/answer", {**question, "method": "llm", "top_n": 2})
            assert status == 400 and "top_n does not apply to llm" in refused["error"]
            assert call(url, "/v1/answer", {**question, "method": "ir-custom", "top_n": 2})[0] == 200
    finally:
        engines.close()


def test_serve_opens_the_model_once_and_queues_its_requests_off_the_pool(root, monkeypatch):
    """Two languages share one model; requests to a model in process wait on a thread of their own,
    so a queue of them never holds the threads that the index methods score on."""
    from openqa.config import Settings
    from openqa.data.pasted import make_question
    from openqa.llm.scorer import LLMScorer
    from openqa.llm.settings import LLMSettings
    from openqa.methods import Request
    from openqa.serve.engines import WORKERS, Engines
    from openqa.workspace import Context

    settings = Settings.resolve(data_dir=root / "data_clean", index_dir=root / "indexes", settings_dir=root / "tuned")
    llm = LLMSettings(model=str(root / "tiny"), evidence="none", cache_dir=root / "cache-serve-queue")
    engines = Engines(Context(settings), ["en", "zh"], ["ir-custom", "llm"], Request(llm=llm))
    try:
        assert engines.offers["en", "llm"].opened.scorer.backend is engines.offers["zh", "llm"].opened.scorer.backend
        release, started, real = threading.Event(), threading.Event(), LLMScorer.score

        def held(self, questions, progress=True):
            started.set()
            release.wait(120)
            return real(self, questions, progress)

        monkeypatch.setattr(LLMScorer, "score", held)
        question = make_question(QUESTIONS[0]["question"], QUESTIONS[0]["options"])
        waiting = [engines.answer(question, "llm", "en") for _ in range(WORKERS + 2)]
        assert started.wait(120)
        assert engines.answer(question, "ir-custom", "en").result(timeout=120)["method"] == "ir-custom"
        release.set()
        assert [job.result(timeout=300)["method"] for job in waiting] == ["llm"] * len(waiting)
    finally:
        release.set()
        engines.close()


# --- a real OpenAI-compatible server: transformers serve ------------------------------------------

def wait_for_models(url: str, alive) -> bool:
    """Whether a server at ``url`` answers ``/v1/models`` before ``SERVE_START`` seconds pass (while ``alive()``)."""
    def answers() -> bool:
        try:
            with urlopen(f"{url}/v1/models", timeout=5) as response:
                return response.status == 200
        except OSError:
            return False

    try:
        wait_until(answers, "transformers serve answered /v1/models", seconds=SERVE_START, every=0.5, alive=alive)
    except AssertionError:
        return False
    return True


@pytest.fixture(scope="module")
def served(root):
    """``transformers serve`` of the tiny model on a free loopback port (stopped after the module)."""
    pytest.importorskip("accelerate")
    serve = Path(sys.executable).with_name("transformers")
    if not serve.exists():
        pytest.skip("no transformers console script")
    port = free_port()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(root / "hub")}
    log = open(root / "serve.log", "wb")
    proc = subprocess.Popen([str(serve), "serve", str(root / "tiny"), "--device", "cpu", "--host", "127.0.0.1",
                             "--port", str(port)], env=env, stdout=log, stderr=subprocess.STDOUT,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    url = f"http://127.0.0.1:{port}"
    if not wait_for_models(url, lambda: proc.poll() is None):
        proc.kill()
        pytest.fail(f"transformers serve did not start: {(root / 'serve.log').read_text()[-2000:]}")
    yield url
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    log.close()


@pytest.mark.spawns
def test_endpoint_generate_over_transformers_serve(root, capsys, served):
    args = ["--endpoint", served, "--scoring", "generate", "--max-tokens", "4", "--cache-dir", str(root / "cache-ep")]
    summary = eval_llm(root, capsys, *args, model=str(root / "tiny"))
    assert summary["backend"] == "endpoint" and summary["model_calls"] == len(QUESTIONS)
    assert summary["tokens"]["counted_by"].startswith("estimated")
    assert all(isinstance(row["reply"], str) for row in predictions(summary))
    assert eval_llm(root, capsys, *args, model=str(root / "tiny"))["model_calls"] == 0


@pytest.mark.spawns
def test_letters_against_a_server_without_logprobs_names_generate(root, capsys, served):
    code, _, err = run(root, capsys, "--dataset", "us", "--method", "llm", "--model", str(root / "tiny"),
                       "--endpoint", served, "--evidence", "none", "--cache-dir", str(root / "cache-ep2"))
    assert code == 2 and one_line_error(err, "returned no logprobs") and "--scoring generate" in err


@pytest.mark.spawns
def test_unknown_model_at_a_server(root, capsys, served):
    code, _, err = run(root, capsys, "--dataset", "us", "--method", "llm", "--model", "no-such-model",
                       "--endpoint", served, "--scoring", "generate", "--cache-dir", str(root / "cache-ep3"))
    assert code == 2 and one_line_error(err, "unknown model 'no-such-model'"), err


# --- a fake OpenAI-compatible server for the faults -----------------------------------------------

class FakeServer:
    """A loopback server answering /v1/models and /v1/chat/completions from a script of
    (status, body) replies (the last one repeats; a 200 with a string is a completion replying it,
    bytes are sent as they are), counting the completion requests."""

    def __init__(self) -> None:
        self.script: list[tuple[int, object]] = [(200, "C")]
        self.requests: list[dict] = []
        self.delay = 0.0
        self.tokenize = False  # whether it serves /tokenize (as vLLM and llama.cpp's server do)
        #: The /v1/models entry of its model (bytes: the whole /v1/models body as it is sent).
        self.model: dict | bytes = {"id": "fake-model", "object": "model"}
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def _send(self, status: int, body: object) -> None:
                data = body if isinstance(body, bytes) else body.encode() if isinstance(body, str) else json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                if self.path != "/v1/models":
                    return self._send(404, {"detail": "Not Found"})
                models = fake.model
                self._send(200, models if isinstance(models, bytes) else {"object": "list", "data": [models]})

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                if self.path == "/tokenize":  # one token per word
                    reply = {"tokens": list(range(len(body["prompt"].split()))), "max_model_len": 3000}
                    return self._send(200, reply) if fake.tokenize else self._send(404, {"detail": "Not Found"})
                fake.requests.append(body)
                status, reply = fake.script[min(len(fake.requests) - 1, len(fake.script) - 1)]
                time.sleep(fake.delay)
                if status == 200 and isinstance(reply, str):
                    reply = completion(reply, body)
                try:
                    self._send(status, reply)
                except OSError:
                    pass  # the client gave up (timeout test)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


def completion(text: str, request: dict) -> dict:
    """A chat completion replying ``text``; with logprobs when asked (the letters' log-probabilities)."""
    choice = {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}
    if request.get("logprobs"):
        top = [{"token": t, "logprob": math.log(p)} for t, p in (("C", 0.5), (" B", 0.2), ("A", 0.1), ("The", 0.1))]
        choice["logprobs"] = {"content": [{"token": "C", "logprob": math.log(0.5), "top_logprobs": top}]}
    return {"object": "chat.completion", "choices": [choice], "usage": {"prompt_tokens": 50, "completion_tokens": 1}}


@pytest.fixture
def fake(monkeypatch):
    monkeypatch.setattr(endpoint, "BACKOFF_SECONDS", 0.01)
    server = FakeServer()
    yield server
    server.server.shutdown()


def eval_fake(root, capsys, fake, tmp_path, *args: str) -> tuple[int, str, str]:
    return run(root, capsys, "--dataset", "us", "--method", "llm", "--model", "fake-model", "--endpoint", fake.url,
               "--evidence", "none", "--cache-dir", str(tmp_path / "cache"), "--output", str(tmp_path / "results"), *args)


def test_endpoint_letters_from_top_logprobs(root, capsys, fake, tmp_path):
    code, out, err = eval_fake(root, capsys, fake, tmp_path, "--json")
    assert code == 0, err
    summary = json.loads(out)
    assert summary["tokens"]["counted_by"].startswith("estimated") and summary["settings"]["context"] == 4096
    rows = predictions(summary)
    assert rows[0]["letter_probabilities"] == {"A": 0.125, "B": 0.25, "C": 0.625, "D": 0.0}  # " B" counts for B
    assert fake.requests[0]["logprobs"] is True and fake.requests[0]["temperature"] == 0


def test_tokens_counted_by_the_server_tokenizer(root, capsys, fake, tmp_path):
    fake.tokenize = True
    code, out, err = eval_fake(root, capsys, fake, tmp_path, "--json", "--evidence", "question", "--evidence-tokens", "15")
    assert code == 0, err
    summary = json.loads(out)
    assert summary["tokens"]["counted_by"].startswith("the server's /tokenize") and summary["settings"]["context"] == 3000
    assert summary["evidence_cut"]["by_budget"] == len(QUESTIONS)  # 15 words: one paragraph of about 15-20
    assert all(len(row["evidence_ids"]) == 1 for row in predictions(summary))


def test_retries_with_backoff_on_429_and_5xx(root, capsys, fake, tmp_path):
    fake.script = [(429, {"error": {"message": "slow down"}}), (503, "busy"), (200, "The answer is C")]
    code, out, err = eval_fake(root, capsys, fake, tmp_path, "--scoring", "generate", "--json")
    assert code == 0, err
    assert len(fake.requests) == 2 + len(QUESTIONS) and json.loads(out)["parse_failures"] == 0


def test_concurrent_requests_keep_question_order(root, capsys, fake, tmp_path):
    fake.script = [(200, '{"answer": "A"}')]
    code, out, err = eval_fake(root, capsys, fake, tmp_path, "--scoring", "generate", "--concurrency", "4",
                               "--permutations", "2", "--json")
    assert code == 0, err
    rows = predictions(json.loads(out))
    assert len(fake.requests) == 2 * len(QUESTIONS) and [r["qid"] for r in rows] == ["us-test-1", "us-test-2"]


@pytest.mark.parametrize("script, args, message", [
    ([(401, {"error": {"message": "invalid key"}})], [], "set the API key in $OPENQA_API_KEY"),
    ([(500, "boom")], ["--retries", "1"], "answered 500: boom (after 2 tries)"),
    ([(200, b"<html>not json</html>")], ["--scoring", "generate"], "not valid JSON"),
    ([(400, {"error": {"message": "This model's maximum context length is 2048 tokens"}})], ["--scoring", "generate"],
     "does not fit the model's context"),
    ([(200, {"object": "chat.completion", "choices": []})], ["--scoring", "generate"], "without choices[0].message"),
])
def test_server_faults_are_one_line_errors(root, capsys, fake, tmp_path, script, args, message):
    fake.script = script
    code, _, err = eval_fake(root, capsys, fake, tmp_path, *args)
    assert code == 2 and one_line_error(err, message), err


def test_a_llama_cpp_server_runs_without_its_prompt_cache_and_with_its_own_context(root, capsys, fake, tmp_path):
    fake.model = {"id": "fake-model", "object": "model", "owned_by": "llamacpp", "meta": {"n_ctx": 1024, "n_ctx_train": 8192}}
    code, out, err = eval_fake(root, capsys, fake, tmp_path, "--json")
    assert code == 0, err
    settings = json.loads(out)["settings"]
    assert settings["context"] == 1024 and settings["sources"]["context"] == "the server (meta.n_ctx)"
    assert settings["prompt_cache"].startswith("off") and all(r["cache_prompt"] is False for r in fake.requests)
    fake.model = {"id": "fake-model", "object": "model"}  # another server: nothing it may not know is sent
    code, out, err = eval_fake(root, capsys, fake, tmp_path / "other", "--json")
    assert code == 0, err
    assert "cache_prompt" not in fake.requests[-1] and json.loads(out)["settings"]["prompt_cache"].startswith("the server's own")


def test_replies_are_cached_under_the_server_and_the_weights_it_serves(root, capsys, fake, tmp_path):
    fake.model = {"id": "fake-model", "object": "model", "created": 1, "meta": {"size": 1000}}
    calls = lambda *args: json.loads(eval_fake(root, capsys, fake, tmp_path, "--json", *args)[1])["model_calls"]  # noqa: E731
    assert calls() == len(QUESTIONS)
    fake.model["created"] = 2  # restarted with the same weights: replayed
    assert calls() == 0
    fake.model["meta"] = {"size": 2000}  # other weights under the same name: asked again
    assert calls() == len(QUESTIONS)
    other_url = fake.url.replace("127.0.0.1", "localhost")  # another address: asked again
    assert calls("--endpoint", other_url) == len(QUESTIONS)


@pytest.mark.parametrize("change, message", [
    ({"model": b'{"object": "list", "data": ' + b"[" * 5_000_000 + b"]}"}, "not valid JSON (nested too deeply"),
    ({"script": [(200, {"object": "chat.completion", "choices": [{"message": {"content": "C"}, "logprobs": {
        "content": [{"token": "C", "logprob": None, "top_logprobs": [{"token": "C", "logprob": None}]}]}}]})]},
     "sent top_logprobs that are not token/logprob pairs"),
    ({"script": [(200, {"object": "chat.completion", "choices": [{"message": {"content": "C"}}],
                        "usage": {"prompt_tokens": "many"}})], "args": ["--scoring", "generate"]},
     "tokens_in is not a whole number"),
])
def test_a_broken_servers_reply_is_an_error_and_never_cached(root, capsys, fake, tmp_path, change, message):
    for name, value in change.items():
        setattr(fake, name, value)
    args = change.get("args", [])
    code, _, err = eval_fake(root, capsys, fake, tmp_path, *args)
    assert code == 2 and one_line_error(err, message), err
    fake.model, fake.script = {"id": "fake-model", "object": "model"}, [(200, "C")]
    code, out, err = eval_fake(root, capsys, fake, tmp_path, "--json", *args)
    assert code == 0 and json.loads(out)["model_calls"] == len(QUESTIONS), err  # nothing of the broken replies replayed


def test_timeout_and_unreachable_server(root, capsys, fake, tmp_path):
    fake.delay = 1.0
    code, _, err = eval_fake(root, capsys, fake, tmp_path, "--timeout", "0.2", "--retries", "1", "--scoring", "generate")
    assert code == 2 and one_line_error(err, "did not answer within --timeout 0.2 s (2 tries)"), err
    code, _, err = run(root, capsys, "--dataset", "us", "--method", "llm", "--model", "m", "--endpoint",
                       f"http://127.0.0.1:{free_port()}/v1", "--cache-dir", str(tmp_path / "c"))
    assert code == 2 and one_line_error(err, "cannot reach"), err


@pytest.mark.parametrize("userinfo", ["alice:s3cret@", "alice@", ":s3cret@", "al%40ice:s3cr@t@"])
def test_an_endpoint_with_credentials_is_refused_and_never_written(root, capsys, fake, tmp_path, monkeypatch, userinfo):
    monkeypatch.setenv("OPENQA_API_KEY", "the-key")
    before = sorted((root / "results").rglob("*")) if (root / "results").exists() else []
    url = fake.url.replace("http://", f"http://{userinfo}")
    code, out, err = eval_fake(root, capsys, fake, tmp_path, "--endpoint", url, "--json")
    assert code == 2 and one_line_error(err, f"--endpoint {fake.url} must not carry a user or password: give the key "
                                             "in $OPENQA_API_KEY"), err
    assert "s3cr" not in err + out and "alice" not in err + out and "al%40" not in err + out and not fake.requests
    assert (sorted((root / "results").rglob("*")) if (root / "results").exists() else []) == before
    code, out, err = run(root, capsys, "--method", "llm", "--model", "fake-model", "--endpoint", url, "--evidence", "none",
                         "--json", "--question", "Which drug?", "--option=A=a", "--option=B=b", command="answer")
    assert code == 2 and one_line_error(err, "must not carry a user or password") and "s3cr" not in err + out, err


@pytest.mark.parametrize("tail", ["?api_key=QSECRET", "/?api_key=QSECRET", "#token=QSECRET", "?a=1#token=QSECRET"])
def test_an_endpoint_with_a_query_string_or_fragment_is_refused_without_its_token(root, capsys, fake, tmp_path, tail):
    before = sorted((root / "results").rglob("*")) if (root / "results").exists() else []
    code, out, err = eval_fake(root, capsys, fake, tmp_path, "--endpoint", fake.url + tail, "--json")
    shown = fake.url + tail[:tail.index("/") + 1 if tail.startswith("/") else 0]
    assert code == 2 and one_line_error(err, f"--endpoint {shown} must not carry a query string or fragment"), err
    assert "QSECRET" not in err + out and not fake.requests
    assert (sorted((root / "results").rglob("*")) if (root / "results").exists() else []) == before
    code, out, err = run(root, capsys, "--method", "llm", "--model", "fake-model", "--endpoint", fake.url + tail,
                         "--evidence", "none", "--question", "Which drug?", "--option=A=a", "--option=B=b",
                         command="answer")
    assert code == 2 and one_line_error(err, "must not carry a query string or fragment") and "QSECRET" not in err + out


def test_no_result_file_is_written_when_a_run_fails(root, capsys, fake, tmp_path):
    fake.script = [(200, "A"), (401, "no")]
    before = set((root / "results").glob("*")) if (root / "results").exists() else set()
    code, _, _ = eval_fake(root, capsys, fake, tmp_path, "--scoring", "generate")
    assert code == 2 and set((root / "results").glob("*")) == before


# --- a GGUF file through llama.cpp (the optional llamacpp extra) ----------------------------------

@pytest.fixture(scope="module")
def llama_server(root):
    """llama.cpp's own HTTP server (``xllamacpp``) for the packaged GGUF on a free loopback port, with
    the parameters openqa uses in process and a context of 2048 (the model was trained with 8192);
    released after the module."""
    gguf = packaged_gguf()
    port = free_port()
    server = llamacpp.serve_gguf(gguf, port, context=2048, alias="smollm2")
    url = f"http://127.0.0.1:{port}"
    if not wait_for_models(url, lambda: True):
        pytest.fail("llama.cpp's server did not answer /v1/models")
    yield gguf, url
    del server


def agree(over_http: dict, in_process: dict) -> None:
    """Letters, replies and probabilities (within 0.001) of two runs of the same questions agree."""
    for a, b in zip(predictions(over_http), predictions(in_process), strict=True):
        assert a["letter"] == b["letter"] and a["reply"] == b["reply"] and a["evidence_ids"] == b["evidence_ids"]
        if a["letter_probabilities"] is not None or b["letter_probabilities"] is not None:
            assert max(abs(a["letter_probabilities"][k] - b["letter_probabilities"][k]) for k in "ABCD") <= 0.001


@pytest.mark.parametrize("scoring", [["--scoring", "letters"], ["--scoring", "generate", "--max-tokens", "8"]])
def test_llama_cpp_over_http_gives_the_in_process_numbers(root, capsys, llama_server, scoring):
    """The same GGUF in process and behind llama.cpp's real server: the same letters, replies and
    probabilities (the server's prompt cache is off), its running context, its model named by alias."""
    gguf, url = llama_server
    args = ["--evidence", "none", *scoring]  # short prompts: evidence is the same text in both (tested above)
    in_process = eval_llm(root, capsys, *args, "--cache-dir", str(root / "cache-gguf"), model=str(gguf))
    assert in_process["backend"] == "gguf" and in_process["tokens"]["counted_by"].startswith("the GGUF file's own tokenizer")
    assert in_process["settings"]["prompt_cache"].startswith("exact reuse")  # openqa's own, where it changes no bit
    over_http = eval_llm(root, capsys, *args, "--endpoint", url, "--cache-dir", str(root / "cache-gguf"), model="smollm2")
    assert over_http["backend"] == "endpoint" and over_http["model_calls"] == len(QUESTIONS) == in_process["model_calls"]
    assert over_http["settings"]["context"] == 2048 and over_http["settings"]["sources"]["context"] == "the server (meta.n_ctx)"
    assert over_http["settings"]["prompt_cache"].startswith("off") and over_http["parse_failures"] == in_process["parse_failures"]
    assert over_http["tokens"]["counted_by"].startswith("the server's /tokenize")  # llama.cpp's own tokenizer
    assert over_http["model_reported_seconds"] > 0 and in_process["model_reported_seconds"] > 0  # llama.cpp's timings
    agree(over_http, in_process)
    for row in predictions(over_http):
        assert row["letter_probabilities"] is None or math.isclose(sum(row["letter_probabilities"].values()), 1, abs_tol=1e-3)


@pytest.mark.slow
def test_llama_cpp_over_http_agrees_on_twenty_questions(root, capsys, llama_server, tmp_path):
    """Closed-book letters of 20 questions (the two of the test data, reworded) over HTTP and in process."""
    gguf, url = llama_server
    lines = [json.dumps({**q, "question": f"{q['question']} (variant {i})"}) for i in range(10) for q in QUESTIONS]
    questions = tmp_path / "twenty.jsonl"
    questions.write_text("\n".join(lines) + "\n")
    args = ["--questions", str(questions), "--method", "llm", "--evidence", "none", "--json", "--cache-dir", str(tmp_path / "c")]
    runs = []
    for where in (["--model", str(gguf)], ["--model", "smollm2", "--endpoint", url]):
        code, out, err = run(root, capsys, *args, *where)
        assert code == 0, err
        runs.append(json.loads(out))
    assert runs[0]["n"] == runs[1]["n"] == 20 and runs[1]["model_calls"] == 20
    agree(*runs)


@pytest.mark.spawns
def test_ctrl_c_keeps_the_replies_cached_so_far(root, capsys, fake, tmp_path):
    """Ctrl-C in the middle of a run: exit 130 and no result files; the replies already received stay
    in the cache, and the rerun asks the model only for the rest."""
    fake.script, fake.delay = [(200, '{"answer": "B"}')], 0.3
    out = tmp_path / "results"
    args = ["eval", "--dataset", "us", "--method", "llm", "--model", "fake-model", "--endpoint", fake.url,
            "--evidence", "none", "--scoring", "generate", "--permutations", "6", "--cache-dir", str(tmp_path / "cache"),
            "--data-dir", str(root / "data_clean"), "--index-dir", str(root / "indexes")]
    openqa = Path(sys.executable).with_name("openqa")
    proc = subprocess.Popen([str(openqa), *args, "--output", str(out)], stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": os.environ.get("PYTHONPATH", "")},
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    wait_until(lambda: len(fake.requests) >= 3, "three requests reached the fake model", alive=lambda: proc.poll() is None)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130 and err.strip().endswith("openqa: interrupted"), err
    assert not out.exists() or not list(out.glob("*.json"))
    asked = len(fake.requests)
    assert main([*args, "--output", str(out), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["cached_replies"] >= 2 and summary["model_calls"] + summary["cached_replies"] == 12
    assert len(fake.requests) - asked == summary["model_calls"]
