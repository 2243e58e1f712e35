"""The Python API keeps its contract whatever it is handed: generated careless calls (wrong types,
impossible numbers, unknown names, odd option letters, paths that are not there) either work or
raise an ``OpenQAError`` in one line, and nothing is printed."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from openqa import (
    BankScorer,
    CrossValidation,
    LLMSettings,
    OpenQAError,
    Question,
    QuestionBank,
    ScoredQuestions,
    Searcher,
    Solver,
    Workspace,
    browse_results,
    build_index,
    corpus_fingerprint,
    corpus_paragraphs,
    cross_fit_reader,
    dataset_spec,
    exam_bank,
    language,
    load_questions,
    option_queries,
    question_query,
    read_question_file,
    read_result_set,
    record_folder,
    resolve_model,
    result_curves,
    run_eval,
    run_record,
    score_parts,
    serve_gguf,
    train_reader,
    tune,
    write_questions,
)
from tests.helpers import QUESTIONS, make_data_dir

EN = QUESTIONS[0]

#: Values a careless caller passes: of every type, in and out of range, and some that are valid.
CARELESS = st.one_of(
    st.none(), st.booleans(), st.integers(-3, 12), st.integers(), st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12), st.binary(max_size=4), st.lists(st.text(max_size=6), max_size=3),
    st.sampled_from(["en", "zh", "xx", "EN", "ir-custom", "pmi", "ensemble", "llm", "custom", "lucene", "dense", "us",
                     "mainland", "dev", "test", "sum", "decay", "full", "filter", "usmle", "A", "", " ", "/typo/dir"]),
    st.builds(Path, st.sampled_from(["/typo/dir", ".", "/dev/null", "nowhere"])),
)
LETTERS = st.one_of(st.sampled_from(list("ABCDEFGHIJKZ") + ["a", "", "Ä", "AB"]), st.integers(0, 3), st.none())
OPTIONS = st.one_of(
    st.dictionaries(LETTERS, st.one_of(st.text(max_size=10), st.none(), st.integers(), st.just(EN["options"]["A"])), max_size=12),
    st.lists(st.one_of(st.text(max_size=10), st.none(), st.integers()), max_size=12),
    CARELESS,
    st.just(EN["options"]),
)
QUESTION = st.one_of(st.just(EN["question"]), CARELESS)


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    root = tmp_path_factory.mktemp("contract")
    data = make_data_dir(root)
    where = {"data_dir": data, "index_dir": root / "indexes", "results_dir": root / "results", "settings_dir": root / "tuned"}
    (root / "tuned").mkdir()
    build_index("en", "custom", **where)
    build_index("en", "pmi", **where)
    return where, Solver.open("ir-custom", **where), Searcher.open("en", "custom", **where)


def calls(where: dict[str, Any], solver: Solver, searcher: Searcher) -> st.SearchStrategy[Callable[[], Any]]:
    """Calls of every public function with careless arguments (the workspace's folders kept, so
    that a call that is valid runs on the tiny fixture)."""
    kw = st.dictionaries(st.sampled_from(["top_n", "aggregate", "query", "exam", "engine", "model", "corpus", "llm",
                                          "ngram", "zh_mode", "encoder", "es_url", "nonsense"]), CARELESS, max_size=3)
    valid_text = st.one_of(st.just(EN["question"]), st.text(min_size=1, max_size=40))
    return st.one_of(
        # mostly valid calls, with one argument careless now and then
        st.builds(lambda q, o, e, m: lambda: solver.answer(q, o, evidence=e, min_confidence=m), valid_text,
                  st.one_of(st.just(EN["options"]), st.lists(st.text(min_size=1, max_size=8), min_size=2, max_size=10)),
                  st.integers(0, 3), st.one_of(st.none(), st.floats(0, 1))),
        st.builds(lambda q, k, t: lambda: searcher.batch_search(q, k=k, threads=t), st.lists(valid_text, max_size=4),
                  st.integers(1, 20), st.integers(1, 3)),
        st.builds(lambda q, k: lambda: searcher.search(q, k), valid_text, st.integers(1, 20)),
        st.builds(lambda q, o, e, m: lambda: solver.answer(q, o, evidence=e, min_confidence=m),
                  QUESTION, OPTIONS, st.one_of(st.integers(-1, 3), CARELESS), st.one_of(st.floats(0, 1), CARELESS)),
        st.builds(lambda q, o: lambda: solver.question(q, o), QUESTION, OPTIONS),
        st.builds(lambda q, k: lambda: searcher.search(q, k), st.one_of(QUESTION, st.lists(QUESTION, max_size=3)),
                  st.one_of(st.integers(-1, 20), CARELESS)),
        st.builds(lambda q, k: lambda: searcher.batch_search(q, k), st.one_of(st.lists(QUESTION, max_size=3), CARELESS),
                  st.one_of(st.integers(-1, 20), CARELESS)),
        st.builds(lambda m, lang, extra: lambda: Solver.open(m, lang, **{**where, **extra}),
                  st.one_of(st.sampled_from(["ir-custom", "pmi"]), CARELESS), st.one_of(st.just("en"), CARELESS), kw),
        st.builds(lambda lang, e, extra: lambda: Searcher.open(lang, e, **{**where, **{k: v for k, v in extra.items() if k != "engine"}}),
                  st.one_of(st.just("en"), CARELESS), st.one_of(st.just("custom"), CARELESS), kw),
        st.builds(lambda extra: lambda: Workspace.of(None, **extra), kw),
        st.builds(lambda d, s, lim, extra: lambda: run_eval("ir-custom", d, split=s, limit=lim, **{**where, **extra}),
                  st.one_of(st.just("us"), CARELESS), st.one_of(st.just("dev"), CARELESS), st.one_of(st.just(1), CARELESS), kw),
        st.builds(lambda m, d, p: lambda: tune(m, d, parts=p, calibrate_only=True, **where),
                  st.one_of(st.sampled_from(["ir-custom", "pmi"]), CARELESS), CARELESS, st.one_of(st.none(), CARELESS)),
        st.builds(lambda f, r: lambda: browse_results(f, r), st.one_of(st.just(where["results_dir"]), CARELESS),
                  st.one_of(st.none(), st.just("us-dev-ir-custom-limit1.json"), CARELESS)),
        st.builds(lambda f, r: lambda: result_curves(f, r), st.one_of(st.just(where["results_dir"]), CARELESS),
                  st.one_of(st.just("us-dev-ir-custom-limit1.json"), CARELESS)),
        st.builds(lambda lang, e, c: lambda: build_index(lang, e, corpus=c, **{**where, "index_dir": where["index_dir"] / "other"}),
                  CARELESS, st.one_of(st.just("custom"), CARELESS), CARELESS),
        st.builds(lambda i, q, o, a: lambda: solver.answer(Question(i, q, o, a, "")), st.one_of(st.just("q-1"), CARELESS),
                  QUESTION, OPTIONS, st.one_of(st.just("A"), CARELESS)),
        st.builds(lambda d, s, f: lambda: load_questions(d, s, f), st.one_of(st.just("us"), CARELESS),
                  st.one_of(st.just("dev"), CARELESS), st.one_of(st.just(where["data_dir"]), CARELESS)),
        st.builds(lambda n: lambda: record_folder(n), st.one_of(st.just("us-dev-ir-custom.json"), CARELESS)),
        st.builds(lambda lang, c: lambda: corpus_fingerprint(lang, corpus=c, data_dir=where["data_dir"]), CARELESS,
                  st.one_of(st.none(), CARELESS)),
        st.builds(lambda c: lambda: run_record(c), st.one_of(st.none(), CARELESS)),
        st.builds(lambda p: lambda: read_result_set(p), st.one_of(st.just(where["results_dir"] / "us-dev-ir-custom-limit1.json"), CARELESS)),
        st.builds(lambda name, folder: lambda: resolve_model(name, folder), CARELESS, st.one_of(st.none(), CARELESS)),
    )


def test_careless_calls_raise_only_openqa_errors_and_print_nothing(site, capfd):
    where, solver, searcher = site
    outcomes = {"ok": 0, "refused": 0}

    @settings(max_examples=2000, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
    @given(calls(where, solver, searcher))
    def careless(call: Callable[[], Any]) -> None:
        try:
            call()
            outcomes["ok"] += 1
        except OpenQAError as exc:  # anything else fails the test, with the call that raised it
            message = str(exc)
            assert message and "\n" not in message and "Traceback" not in message
            outcomes["refused"] += 1
        out, err = capfd.readouterr()
        assert out == "" and err == "", (out, err)

    careless()
    assert sum(outcomes.values()) >= 2000 and outcomes["ok"] > 100 and outcomes["refused"] > 300, outcomes  # both kinds of call were made


def test_careless_estimates_raise_only_openqa_errors(site, capfd):
    """``Solver.estimate`` and ``Searcher.estimate`` (what a server weighs a request by) keep the same contract."""
    _, solver, searcher = site
    outcomes = {"ok": 0, "refused": 0}

    @settings(max_examples=300, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
    @given(st.one_of(st.builds(lambda q, o: lambda: solver.estimate(q, o), QUESTION, OPTIONS),
                     st.builds(lambda q: lambda: searcher.estimate(q), st.one_of(QUESTION, st.lists(QUESTION, max_size=3)))))
    def careless(call: Callable[[], Any]) -> None:
        try:
            estimate = call()
            assert estimate.units >= 0 and estimate.seconds > 0 and estimate.heavy == (estimate.seconds > estimate.heavy_seconds)
            outcomes["ok"] += 1
        except OpenQAError as exc:
            assert str(exc) and "\n" not in str(exc)
            outcomes["refused"] += 1
        out, err = capfd.readouterr()
        assert out == "" and err == "", (out, err)

    careless()
    assert outcomes["ok"] > 20 and outcomes["refused"] > 30, outcomes  # both kinds of call were made


def scripts_calls(where: dict[str, Any], solver: Solver, folder: Path) -> st.SearchStrategy[Callable[[], Any]]:
    """Calls of the names the scripts use beside the commands' (many questions scored, an ensemble's
    parts judged, the bank, question files and queries, the LLM's settings and parts) with careless
    arguments; files are written only under ``folder``."""
    questions = load_questions("us", "dev", where["data_dir"])
    scored = solver.score_all(questions)
    bank = exam_bank("us", **where)
    asked = st.one_of(st.just(questions), st.just(questions[:1]), CARELESS,
                      st.lists(st.one_of(st.just(questions[0]), CARELESS), max_size=3))
    parts = st.one_of(st.none(), st.just(["ir-custom", "pmi"]), CARELESS,
                      st.lists(st.sampled_from(["ir-custom", "ir-custom:top_n=1", "pmi", "llm", "nope", "ir-custom:top_n=x",
                                                "ir-custom:avg=1", "ensemble", "bank"]), max_size=3))
    places = st.one_of(st.just(folder / "q.jsonl"), st.just(folder / "missing" / "q.jsonl"), st.just(folder), st.none(),
                       st.integers(), st.binary(max_size=4))
    fields = ["model", "endpoint", "evidence", "scoring", "top_k", "context", "timeout", "temperature", "seed", "batch_size",
              "cache_dir", "concurrency"]
    hits = st.one_of(CARELESS, st.just([[[]] * 4] * len(questions)), st.lists(st.lists(st.lists(CARELESS, max_size=2), max_size=4), max_size=2))
    return st.one_of(
        # mostly valid calls, one argument careless now and then
        st.builds(lambda p, l2: lambda: CrossValidation(l2=l2).held_out(score_parts(questions, "us", p, **where)),
                  st.lists(st.sampled_from(["ir-custom", "ir-custom:top_n=1", "pmi"]), min_size=1, max_size=3, unique=True),
                  st.one_of(st.floats(0, 10), st.none())),
        st.builds(lambda file: lambda: read_question_file(write_questions(questions, folder / file[1], file[0])),
                  st.sampled_from([("medqa", "q.jsonl"), ("mirage", "benchmark.json"), ("medmcqa", "medmcqa_dev.json"),
                                   ("mmlu", "clinical_test.csv")])),
        st.builds(lambda m, lang: lambda: option_queries(questions[0], m, lang), st.sampled_from(["phrases", "filter", "full", "option"]),
                  st.sampled_from(["en", "zh"])),
        st.builds(lambda k, m: lambda: BankScorer(bank, k, m).score(questions, progress=False), st.integers(1, 5),
                  st.sampled_from(BankScorer.matches)),
        # careless ones
        st.builds(lambda q: lambda: solver.score_all(q), asked),
        st.builds(lambda q, d, p: lambda: score_parts(q, d, p, **where), asked, st.one_of(st.just("us"), CARELESS), parts),
        st.builds(lambda p, f: lambda: score_parts(questions, "us", p, predictions=f, **where), parts,
                  st.one_of(st.none(), CARELESS, st.dictionaries(st.sampled_from(["llm", "pmi"]), CARELESS, max_size=2))),
        st.builds(lambda d, b: lambda: exam_bank(d, banks=b, **where), st.one_of(st.just("us"), CARELESS),
                  st.one_of(st.just(()), CARELESS)),
        st.builds(lambda lang, c: lambda: next(iter(corpus_paragraphs(lang, corpus=c, data_dir=where["data_dir"]))),
                  st.one_of(st.just("en"), CARELESS), st.one_of(st.none(), CARELESS)),
        st.builds(lambda r, s: lambda: ScoredQuestions(r, s), st.one_of(st.just(scored.results), CARELESS),
                  st.one_of(st.just("logits"), CARELESS)),
        st.builds(lambda h, n, a: lambda: ScoredQuestions.from_hits(questions, h, n, a), hits,
                  st.one_of(st.just(10), CARELESS), st.one_of(st.just("sum"), CARELESS)),
        st.builds(lambda z: lambda: scored.with_logits(z), st.one_of(st.just(scored.logits()), CARELESS)),
        st.builds(lambda d: lambda: scored.calibration(d), st.one_of(st.just("us"), CARELESS)),
        st.builds(lambda f, s, l2, p, prior: lambda: CrossValidation(f, s, l2).held_out(p, prior),
                  st.one_of(st.none(), CARELESS), st.one_of(st.none(), CARELESS), st.one_of(st.none(), CARELESS),
                  st.one_of(st.just({"a": scored}), st.just({"a": scored, "b": scored}), CARELESS), st.one_of(st.just(True), CARELESS)),
        st.builds(lambda q, lang, s: lambda: QuestionBank(q, lang, s), asked, st.one_of(st.just("en"), CARELESS),
                  st.one_of(st.just(()), CARELESS)),
        st.builds(lambda b, k, m, q: lambda: BankScorer(b, k, m).score(q, progress=False), st.one_of(st.just(bank), CARELESS),
                  st.one_of(st.just(1), CARELESS), st.one_of(st.sampled_from(BankScorer.matches), CARELESS), asked),
        st.builds(lambda q, m, lang: lambda: option_queries(q, m, lang), st.one_of(st.just(questions[0]), CARELESS), CARELESS, CARELESS),
        st.builds(lambda q, m, lang: lambda: question_query(q, m, lang), st.one_of(st.just(questions[0]), CARELESS), CARELESS, CARELESS),
        st.builds(lambda c: lambda: language(c), CARELESS),
        st.builds(lambda d: lambda: dataset_spec(d), CARELESS),
        st.builds(lambda q, p, f, s: lambda: write_questions(q, p, f, s), asked, places,
                  st.one_of(st.sampled_from(["medqa", "mirage", "medmcqa", "mmlu"]), CARELESS), st.one_of(st.just("medqa"), CARELESS)),
        st.builds(lambda p, prefix, n, s: lambda: read_question_file(p, prefix, n, s), st.one_of(places, CARELESS),
                  st.one_of(st.none(), CARELESS), st.one_of(st.none(), CARELESS), st.one_of(st.none(), CARELESS)),
        st.builds(lambda kw: lambda: LLMSettings(**kw), st.dictionaries(st.sampled_from(fields), st.one_of(st.just("m"), CARELESS), max_size=4)),
        st.builds(lambda c: lambda: run_eval("ir-custom", "us", split="dev", limit=1, command=c, **where), CARELESS),
        st.builds(lambda p, port, c: lambda: serve_gguf(p, port, c), CARELESS, CARELESS, CARELESS),
        st.builds(lambda r, c: lambda: train_reader(r, [], [], c, folder / "run"), CARELESS, CARELESS),
        st.builds(lambda d, r, k, n: lambda: cross_fit_reader(d, r, folds=k, output=folder / "fits", train_limit=n, final=False,
                                                              write=False, **where), CARELESS, CARELESS, CARELESS, CARELESS),
    )


def test_careless_calls_of_the_scripts_names_raise_only_openqa_errors(site, capfd, tmp_path):
    """The names the scripts use beside the commands' keep the same contract."""
    where, solver, _ = site
    outcomes = {"ok": 0, "refused": 0}

    @settings(max_examples=1500, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
    @given(scripts_calls(where, solver, tmp_path))
    def careless(call: Callable[[], Any]) -> None:
        try:
            call()
            outcomes["ok"] += 1
        except OpenQAError as exc:
            assert str(exc) and "\n" not in str(exc), str(exc)
            outcomes["refused"] += 1
        out, err = capfd.readouterr()
        assert out == "" and err == "", (out, err)

    careless()
    assert outcomes["ok"] > 50 and outcomes["refused"] > 300, outcomes  # both kinds of call were made
