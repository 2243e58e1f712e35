"""The repository's scripts use openqa's public API only: every ``openqa`` name a script under
``scripts/`` imports (anywhere in it, functions included) is one of ``openqa.__all__`` imported from
``openqa`` itself, never a name starting with ``_`` and never a module of the package
(``from openqa.x import y`` / ``import openqa.x``). A script that needs more asks the API for it (a
small, typed, documented addition to ``openqa.__all__``) rather than reaching into the package.

TODO: the scripts in ``REACHING_IN`` still import the internals they list (engine kernels, the
method registry, the pipeline's requests, calibration helpers, the server's limits). The list may
only shrink: a script that reaches in further, or a new script that reaches in at all, fails, and so
does an entry that is no longer needed (remove it). Moving one of them to the public API: add what
it needs to ``openqa.__all__`` (re-exports of stable concepts first), then drop its entry here.
"""

from __future__ import annotations

import ast
from pathlib import Path

import openqa

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = ROOT / "scripts"

#: Scripts that still import openqa internals, and which (``module.name``): the list to empty.
REACHING_IN: dict[str, set[str]] = {
    "scripts/benchmarks/bench_bank.py": {'openqa.methods.bank.BANK_K', 'openqa.methods.bank.BANK_MATCH', 'openqa.scorers.bank.BankScorer', 'openqa.scorers.bank.QuestionBank'},
    "scripts/benchmarks/bench_dense.py": {'openqa.retrieval.dense.make_faiss', 'openqa.retrieval.registry.open_index', 'openqa.scorers.ir.option_queries'},
    "scripts/benchmarks/bench_encoder.py": {'openqa.retrieval.encoders.SentenceTransformerEncoder', 'openqa.scorers.ir.question_query'},
    "scripts/benchmarks/bench_engines.py": {'openqa.evaluate.metrics.summarise', 'openqa.retrieval.custom_bm25.CustomBM25', 'openqa.retrieval.custom_bm25.QueryTerms', 'openqa.retrieval.base.Ranking', 'openqa.retrieval.registry.open_index', 'openqa.scorers.ir.option_queries', 'openqa.scorers.ir.scores_from_hits'},
    "scripts/benchmarks/bench_formats.py": {'openqa.config.Settings', 'openqa.data.formats.write_questions', 'openqa.pipeline.EvalRequest', 'openqa.pipeline.evaluate', 'openqa.workspace.Context'},
    "scripts/benchmarks/bench_highlights.py": {'openqa.answer.Span', 'openqa.answer.term_spans', 'openqa.text.tokenize.Tokenizer'},
    "scripts/benchmarks/bench_llm.py": {'openqa.config.Settings', 'openqa.llm.settings.LLMSettings', 'openqa.pipeline.EvalRequest', 'openqa.pipeline.evaluate', 'openqa.workspace.Context'},
    "scripts/benchmarks/bench_llm_http.py": {'openqa.config.Settings', 'openqa.llm.endpoint', 'openqa.llm.llamacpp.serve_gguf', 'openqa.llm.settings.LLMSettings', 'openqa.pipeline.EvalRequest', 'openqa.pipeline.evaluate', 'openqa.workspace.Context'},
    "scripts/benchmarks/bench_scale.py": {'openqa.config.Settings', 'openqa.corpus.paragraphs.read_paragraphs', 'openqa.evaluate.metrics.summarise', 'openqa.languages.language', 'openqa.methods.Request', 'openqa.methods.open_method', 'openqa.pipeline.answer_record', 'openqa.workspace.Context', 'openqa.workspace.Exam'},
    "scripts/benchmarks/bench_search.py": {'openqa.scorers.ir.option_queries'},
    "scripts/benchmarks/bench_serve_faults.py": {'openqa.serve.guard.BODY_SECONDS', 'openqa.serve.transport.HEADER_SECONDS', 'openqa.serve.guard.MAX_BODY'},
    "scripts/benchmarks/faultsuite/interruptions.py": {'openqa.config.Settings', 'openqa.evaluate.results.read_result_set', 'openqa.methods.Request', 'openqa.methods.open_method', 'openqa.retrieval.registry.open_index', 'openqa.workspace.Context', 'openqa.workspace.Exam'},
    "scripts/benchmarks/gpu_models.py": {'openqa.llm.cache.ReplyCache', 'openqa.llm.scorer.LLMScorer', 'openqa.llm.settings.LLMSettings', 'openqa.llm.transformers_backend.TransformersBackend', 'openqa.readers.base.Example', 'openqa.readers.bert.MultipleChoiceReader', 'openqa.readers.registry.load_reader', 'openqa.readers.train.TrainConfig', 'openqa.readers.train.train', 'openqa.retrieval.encoders.resolve_model'},
    "scripts/maintenance/results_md.py": {'openqa.languages.LANGUAGES'},
    "scripts/studies/bank_choice.py": {'openqa.config.Settings', 'openqa.methods.DEFAULT_PARTS', 'openqa.methods.ENSEMBLE_L2', 'openqa.methods.Part', 'openqa.methods.Request', 'openqa.methods.bank.load_bank', 'openqa.methods.ensemble_features', 'openqa.methods.open_method', 'openqa.scorers.bank.BankScorer', 'openqa.scorers.bank.MATCHES', 'openqa.scorers.ensemble.EnsembleScorer', 'openqa.scorers.ensemble.letter_priors', 'openqa.scorers.precomputed.PrecomputedScorer', 'openqa.workspace.Context', 'openqa.workspace.Exam'},
    "scripts/studies/ensemble_parts.py": {'openqa.config.Settings', 'openqa.evaluate.calibration.CROSS_FIT_FOLDS', 'openqa.evaluate.calibration.CROSS_FIT_SEED', 'openqa.evaluate.calibration.cross_fitted_logits', 'openqa.evaluate.calibration.softmax', 'openqa.methods.Part', 'openqa.methods.Request', 'openqa.methods.ensemble_features', 'openqa.methods.open_method', 'openqa.scorers.ensemble.EnsembleScorer', 'openqa.workspace.Context', 'openqa.workspace.Exam'},
    "scripts/studies/llm_evidence_choice.py": {'openqa.config.Settings', 'openqa.evaluate.metrics.summarise', 'openqa.methods.DEFAULT_PARTS', 'openqa.methods.ENSEMBLE_L2', 'openqa.methods.Part', 'openqa.methods.Request', 'openqa.methods.ensemble_features', 'openqa.methods.open_method', 'openqa.scorers.base.OptionScores', 'openqa.scorers.ensemble.EnsembleScorer', 'openqa.scorers.ensemble.letter_prior', 'openqa.scorers.ensemble.letter_priors', 'openqa.scorers.precomputed.PrecomputedScorer', 'openqa.workspace.Context', 'openqa.workspace.Exam'},
    "scripts/studies/logit_scales.py": {'openqa.config.Settings', 'openqa.evaluate.calibration.Calibration', 'openqa.evaluate.calibration.confidence_report', 'openqa.methods.open_method', 'openqa.scorers.base.OptionScores', 'openqa.scorers.logits.SCALES', 'openqa.workspace.Context', 'openqa.workspace.Exam'},
    "scripts/studies/routes.py": {'openqa.config.Settings', 'openqa.data.dataset_spec', 'openqa.data.read_question_file'},
}


def reaching_in(path: Path) -> set[str]:
    """The ``openqa`` names ``path`` imports that are not public: ``module.name`` for each."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if alias.name.startswith("openqa.")}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] == "openqa":
            for alias in node.names:
                if node.module != "openqa" or alias.name.startswith("_") or alias.name not in openqa.__all__:
                    found.add(f"{node.module}.{alias.name}")
    return found


def test_the_check_sees_what_reaches_in(tmp_path):
    script = tmp_path / "script.py"
    script.write_text("import openqa\nimport openqa.api\nfrom openqa import Solver, _EXPORTS, nope\n"
                      "def f():\n    from openqa.data import load_questions\n")
    assert reaching_in(script) == {"openqa.api", "openqa._EXPORTS", "openqa.nope", "openqa.data.load_questions"}


def test_scripts_use_only_the_public_api():
    scripts = {path.relative_to(ROOT).as_posix(): reaching_in(path) for path in sorted(SCRIPTS.rglob("*.py"))}
    assert scripts, "no scripts found"
    new = {name: sorted(used - REACHING_IN.get(name, set())) for name, used in scripts.items() if used - REACHING_IN.get(name, set())}
    assert not new, f"scripts import openqa names outside openqa.__all__ (use the public API, or add to it): {new}"
    stale = {name: sorted(listed - scripts.get(name, set())) for name, listed in REACHING_IN.items() if listed - scripts.get(name, set())}
    assert not stale, f"REACHING_IN lists imports the scripts no longer make: remove them: {stale}"


def test_the_public_names_scripts_use_exist():
    for name in openqa.__all__:
        assert getattr(openqa, name) is not None
