"""The read-only results page (``/results``) and its JSON over a folder of eval records."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi import FastAPI
from fastapi.responses import FileResponse

from openqa.errors import OpenQAError
from openqa.serve.engines import Engines

#: The results page (beside the main page in ``static/``).
PAGE = Path(__file__).parent / "static" / "results.html"


def add_results(app: FastAPI, folder: Path, engines: Engines) -> None:
    """The results page (``/results``) and its JSON: the runs of ``folder``, a run's questions (with
    their text where the data folder has the run's dataset), and the comparison of runs."""
    from openqa.evaluate.browse import inside, list_runs, run_curves, run_questions, run_row
    from openqa.evaluate.compare import compare_runs
    from openqa.pipeline import compare_lookup

    lookup = compare_lookup(engines.ctx.settings)

    @app.get("/results", include_in_schema=False)
    async def results_page() -> FileResponse:
        return FileResponse(PAGE)

    @app.get("/v1/results", summary="Every eval run of the results folder (unreadable ones with their reason)")
    def runs() -> dict[str, Any]:
        return {"folder": folder.name, "runs": list_runs(folder)}

    @app.get("/v1/results/{run}", summary="A run's questions: prediction, answer, probabilities, and the question's text where known")
    def questions(run: str) -> dict[str, Any]:
        rows = run_questions(folder, run)  # the name is checked there: a plain file of the folder or its subfolders
        try:
            summary: Path | None = inside(folder, run, ".json")
        except OpenQAError:
            summary = None
        record = run_row(summary) if summary is not None else None  # that run's record alone, not the whole folder's
        texts = engines.question_texts(record["dataset"], record["split"]) if record and "dataset" in record else {}
        return {"run": run, "questions": [{**row, **texts.get(str(row["qid"]), {})} for row in rows]}

    @app.get("/v1/results/{run}/curves", summary="A run's risk-coverage curve and reliability diagram, from its predictions")
    def run_curve(run: str) -> dict[str, Any]:
        return run_curves(folder, run)

    @app.get("/v1/compare", summary="Runs compared question by question (as openqa compare): ?runs=A,B[,C...]")
    def compare(runs: str) -> dict[str, Any]:
        return compare_runs([inside(folder, name, ".json") for name in runs.split(",")], lookup)
