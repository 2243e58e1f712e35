"""A user's script that uses every public name of openqa; ``mypy --strict`` must accept it
(tests/test_typing.py). It is type-checked, never run."""

from __future__ import annotations

from pathlib import Path

import openqa
from openqa import (
    Answer,
    BatchHits,
    Built,
    DataError,
    Estimate,
    Evaluation,
    MissingExtraError,
    OpenQAError,
    Question,
    Searcher,
    SearchHit,
    Solver,
    TorchExactSearch,
    Tuning,
    UsageError,
    Workspace,
    browse_results,
    build_index,
    corpus_fingerprint,
    load_questions,
    make_encoder,
    record_folder,
    resolve_model,
    result_curves,
    run_eval,
    run_record,
    tune,
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
    runs: list[dict[str, object]] = browse_results(data / "results")
    curves: dict[str, object] = result_curves(data / "results", "us-dev-ir-custom.json")
    errors: tuple[type[OpenQAError], ...] = (DataError, MissingExtraError, UsageError)
    questions: list[Question] = load_questions("us", "dev", data)
    options: dict[str, str] = questions[0].options
    folder: str = record_folder("us-test-ir-custom.json")
    provenance: dict[str, object] = run_record("python my_script.py")
    encoder = make_encoder(resolve_model("all-MiniLM-L6-v2", None), precision="fp32", device="cpu", batch_size=64)
    nearest = TorchExactSearch(encoder.encode_passages(["aspirin", "the knee"]), device="cpu")
    scores, ids = nearest.search(encoder.encode_queries(["cyclooxygenase"]), 1)
    try:
        Solver.open("nope")
    except errors as exc:
        return (f"{openqa.__version__} {exc} {built.seconds} {hits} {many} {run} {prediction} {probabilities} {low} {high} "
                f"{tuned.chosen} {heavy} {cost.units} {runs} {curves} {options} {folder} {provenance} {fingerprint['checksum']} "
                f"{scores[0, 0]} {ids[0, 0]}")
    return str(evaluation.accuracy)
