"""A user's script that uses every public name of openqa; ``mypy --strict`` must accept it
(tests/test_typing.py). It is type-checked, never run."""

from __future__ import annotations

from pathlib import Path

import openqa
from openqa import (
    Answer,
    BankScorer,
    BatchHits,
    Built,
    CrossValidation,
    DataError,
    Estimate,
    Evaluation,
    HeldOut,
    LLMScorer,
    LLMSettings,
    MissingExtraError,
    MultipleChoiceReader,
    OpenQAError,
    Question,
    QuestionBank,
    ReplyCache,
    ScoredQuestions,
    Searcher,
    SearchHit,
    Solver,
    TorchExactSearch,
    TrainConfig,
    TransformersBackend,
    Tuning,
    UsageError,
    Workspace,
    browse_results,
    build_index,
    corpus_fingerprint,
    corpus_paragraphs,
    cross_fit_reader,
    dataset_spec,
    exam_bank,
    known_languages,
    language,
    load_questions,
    make_encoder,
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


def main(data: Path) -> str:
    where = Workspace(data_dir=data, index_dir=data / "indexes")
    built: Built = build_index("en", "custom", workspace=where)
    fingerprint: dict[str, object] = corpus_fingerprint("en", workspace=where)
    searcher = Searcher.open("en", "custom", workspace=where)
    searcher.set_params(avg_ql=20.0)
    hits: list[SearchHit] = searcher.search("aspirin", k=3)
    many: list[list[SearchHit]] = searcher.search(["aspirin", "ceftriaxone"], 3)
    batch: BatchHits = searcher.batch_search(["aspirin"], ["q1"], k=3, threads=1)
    run: dict[str, dict[str, float]] = batch.run()
    batch.write_trec(data / "run.trec", tag="mine")
    solver = Solver.open("ir-custom", "en", workspace=where, top_n=5)
    answer: Answer = solver.answer("Which drug inhibits cyclooxygenase?", {"A": "Aspirin", "B": "Gentamicin"})
    prediction: str | None = answer.prediction
    cost: Estimate = solver.estimate("Which drug inhibits cyclooxygenase?", ["Aspirin", "Gentamicin"])
    heavy: bool = cost.heavy or searcher.estimate("aspirin").seconds > cost.heavy_seconds
    probabilities: dict[str, float | None] = answer.probabilities
    evaluation: Evaluation = run_eval("ir-custom", "us", split="dev", limit=10, workspace=where)
    low, high = evaluation.ci95
    tuned: Tuning = tune("ir-custom", "us", workspace=where)
    mine: Tuning = tune("ir-custom", questions=data / "solved.jsonl", lang="en", exam="usmle", limit=100, workspace=where)
    runs: list[dict[str, object]] = browse_results(data / "results")
    curves: dict[str, object] = result_curves(data / "results", "us-dev-ir-custom.json")
    errors: tuple[type[OpenQAError], ...] = (DataError, MissingExtraError, UsageError)
    questions: list[Question] = load_questions("us", "dev", data)
    options: dict[str, str] = questions[0].options
    folder: str = record_folder("us-test-ir-custom.json")
    provenance: dict[str, object] = run_record("python my_script.py")
    summary: dict[str, object] = read_result_set(data / "results" / "us-dev-ir-custom.json")
    encoder = make_encoder(resolve_model("all-MiniLM-L6-v2", None), precision="fp32", device="cpu", batch_size=64)
    nearest = TorchExactSearch(encoder.encode_passages(["aspirin", "the knee"]), device="cpu")
    scores, ids = nearest.search(encoder.encode_queries(["cyclooxygenase"]), 1)
    try:
        Solver.open("nope")
    except errors as exc:
        return (f"{openqa.__version__} {exc} {built.seconds} {hits} {many} {run} {prediction} {probabilities} {low} {high} "
                f"{tuned.chosen} {mine.files} {heavy} {cost.units} {runs} {curves} {options} {folder} {provenance} {summary.get('accuracy')} {fingerprint['checksum']} "
                f"{scores[0, 0]} {ids[0, 0]}")
    return str(evaluation.accuracy)


def many_questions(data: Path, where: Workspace) -> dict[str, object]:
    """The names the repository's scripts use: many questions scored at once, an ensemble's parts
    judged, the bank, question files, queries and languages, the LLM's settings and the models' parts."""
    questions = load_questions("us", "dev", data)
    copy: list[Question] = read_question_file(write_questions(questions, data / "copy.csv", "mmlu"))
    lang: str = dataset_spec("us").lang
    sentences = language(lang).sentence_end.split(next(corpus_paragraphs(lang, workspace=where)).text)
    codes = [each.code for each in known_languages()]
    queries: list[str] = option_queries(copy[0], "full", lang) + [question_query(copy[0], "filter", lang)]
    scored: ScoredQuestions = Solver.open("ir-custom", workspace=where).score_all(questions)
    rescaled = scored.with_logits([2 * z for z in scored.logits()])
    parts: dict[str, ScoredQuestions] = score_parts(questions, "us", ["ir-custom", "pmi"], workspace=where)
    bank: QuestionBank = exam_bank("us", workspace=where)
    parts["bank"] = ScoredQuestions(BankScorer(bank, 1, "exact").score(questions, progress=False), BankScorer.scale)
    held: HeldOut = CrossValidation(l2=1.0).held_out(parts)
    hits = ScoredQuestions.from_hits(questions, [[[] for _ in q.options] for q in questions], top_n=10, aggregate="sum")
    llm = LLMSettings(model="model-folder", evidence="none", batch_size=8, cache_dir=data / "cache")
    backend = TransformersBackend("model-folder", device="cpu", batch_size=8)
    letters = LLMScorer(backend, llm, ReplyCache(data / "cache")).score(questions, progress=False)
    reader = MultipleChoiceReader("all-MiniLM-L6-v2", max_length=64)
    trained: dict[str, object] = train_reader(reader, [(q, dict(q.options)) for q in questions], [(questions[0], {})],
                                              TrainConfig(epochs=1), data / "run")
    fitted: dict[str, object] = cross_fit_reader("us", "maxout", folds=5, output=data / "crossfit", train_limit=250,
                                                 folds_run=[1], final=False, write=False, workspace=where)
    server: object = serve_gguf(data / "model.gguf", 8080, context=2048)
    return {"sentences": sentences, "codes": codes, "queries": queries, "accuracy": scored.accuracy,
            "prior": scored.letter_prior, "calibration": rescaled.calibration("us"), "held": held.summary(),
            "likelihoods": held.log_likelihood.tolist(), "hits": hits.summary(), "letters": letters, "trained": trained, "fitted": fitted,
            "server": server, "bank": bank.describe()}
