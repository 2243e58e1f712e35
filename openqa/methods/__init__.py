"""Methods by name, each carrying everything that is special about it.

A method is what ``--method`` names: how its scorer is opened (over which index, with which
settings and where each comes from), how ``openqa tune`` searches its settings on dev, whether it
retrieves paragraphs (and so can feed a reader), and what distinguishes its result files. The
commands in ``openqa.pipeline`` ask the method for each of these and name none; adding a method is
one module with its scorer plus one entry in ``METHODS``.
"""

from __future__ import annotations

from openqa.config import DEFAULT_METHOD as DEFAULT_METHOD  # the default method, named beside the registry
from openqa.methods.bank import BankMethod
from openqa.methods.base import (
    FIRST_PART_KEYS,
    PMI_COST,
    PMI_LIMITS,
    Cost,
    Limits,
    Method,
    Opened,
    Overrides,
    Rate,
    Request,
)
from openqa.methods.ensemble import (
    DEFAULT_PARTS,
    ENSEMBLE_L2,
    EnsembleMethod,
    EnsembleSettings,
    Part,
    ensemble_features,
)
from openqa.methods.index import (
    FusedMethod,
    IndexMethod,
    LLMMethod,
    ReaderMethod,
    dense_scorer,
    ir_custom_scorer,
    ir_es_scorer,
    paper_query_params,
    pmi_pairs,
    pmi_scorer,
)
from openqa.methods.registry import (
    METHODS,
    calibration_key,
    method,
    open_method,
    open_retriever,
    open_retrieving,
    register,
)
from openqa.tuning import tune_ir, tune_query_mode

register(
    IndexMethod(name="ir-custom", summary="the paper's re-weighted BM25 (Appendix B)", engine="custom",
                make=ir_custom_scorer, tuner=tune_ir, fixed=paper_query_params, uses=("top_n", "aggregate", "query", "avg_ql"),
                display_name="IR-Custom"),
    IndexMethod(name="ir-es", summary="off-the-shelf BM25 (Lucene, or --engine elasticsearch)", engine="lucene",
                make=ir_es_scorer, tuner=tune_ir, display_name="IR-ES"),
    IndexMethod(name="pmi", summary="PMI of question and option n-grams", engine="pmi",
                make=pmi_scorer, tuner=tune_query_mode, retrieves=False, uses=("query",), limits=PMI_LIMITS,
                cost=PMI_COST, work=pmi_pairs, display_name="PMI"),
    IndexMethod(name="dense", summary="sentence-embedding search (FAISS)", engine="dense", make=dense_scorer, tuner=tune_ir,
                display_name="Dense"),
    FusedMethod(name="hybrid", summary="ir-custom and dense option scores fused", parts=("ir-custom", "dense"), extra="dense",
                display_name="Hybrid"),
    ReaderMethod(name="reader", summary="a reader trained by openqa train (with --model CHECKPOINT)", extra="readers"),
    LLMMethod(name="llm", summary="an instruction model reading the evidence (with --model; see --evidence, --scoring)",
              extra="llm"),
    BankMethod(name="bank", summary="the nearest solved questions (dev, train, --bank) vote for their answers"),
    EnsembleMethod(name="ensemble", summary="training-free methods (or --parts) combined by weights fitted on dev"),
)

__all__ = ["DEFAULT_METHOD", "DEFAULT_PARTS", "ENSEMBLE_L2", "FIRST_PART_KEYS", "METHODS", "Cost", "Limits", "Rate", "EnsembleMethod", "EnsembleSettings",
           "BankMethod", "FusedMethod", "IndexMethod", "LLMMethod", "Method", "Opened", "Overrides", "Part", "ReaderMethod", "Request",
           "calibration_key", "ensemble_features", "method", "open_method", "open_retriever", "open_retrieving"]
