"""``--method llm``: open an LLM reader with its retriever, backend and reply cache (``open_llm``;
``openqa.methods.LLMMethod`` opens the retriever and makes the pipeline's ``Opened`` of what this
returns, so this module imports nothing from the methods above it)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from openqa.config import OptionSource, prefixed
from openqa.llm.settings import LLMSettings

if TYPE_CHECKING:
    from openqa.corpus.paragraphs import Paragraph
    from openqa.llm.scorer import LLMScorer
    from openqa.scorers.ir import IRScorer
    from openqa.workspace import Context, Exam

#: The sources of settings a user may give (in the record when they differ from the default), by
#: setting: the option that gives each (``top_k`` is ``--top-n``, ``reply_tokens`` ``--max-tokens``).
FLAGS = {key: OptionSource(option) for key, option in (
    ("evidence", "evidence"), ("scoring", "scoring"), ("prompt", "prompt"), ("retriever", "retriever"), ("top_k", "top_n"),
    ("evidence_tokens", "evidence_tokens"), ("context", "context"), ("permutations", "permutations"),
    ("temperature", "temperature"), ("seed", "seed"), ("reply_tokens", "max_tokens"), ("endpoint", "endpoint"),
    ("model", "model"), ("demonstrations", "demonstrations"))}


@dataclass
class ClosedBook:
    """What a closed-book run (``--evidence none``) reads instead of an index: nothing, said so."""

    lang: str
    paragraphs: tuple[Paragraph, ...] = ()
    manifest: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.manifest = {"lang": self.lang, "corpus": "none (closed book)", "corpus_kind": "no evidence",
                         "paragraphs": 0, "corpus_checksum": "none", "engine": "none"}

    def warm(self) -> None:
        """Nothing to load (``Index.warm``)."""


def open_llm(ctx: "Context", target: "Exam", llm: LLMSettings, retriever: "IRScorer | None" = None,
             retriever_settings: dict[str, Any] | None = None, banks: tuple[str, ...] = (),
             ) -> tuple["LLMScorer", Any, dict[str, Any]]:
    """An LLM reader over the evidence of ``retriever`` (opened with ``retriever_settings``, their
    sources included; none for a closed book), shown ``llm.demonstrations`` solved questions of the
    exam's bank (and ``banks``) first: its scorer, the index it reads, and its settings with their
    sources for the record."""
    from openqa.llm.cache import ReplyCache
    from openqa.llm.registry import OPENED_WITH, open_backend
    from openqa.llm.scorer import LLMScorer

    query, retrieval = "full", {}
    if retriever is not None:
        query = retriever.settings.query
        query = "full" if query == "option" else query
        retrieval = {"retriever_settings": {k: v for k, v in (retriever_settings or {}).items() if k != "sources"}}
    cache = ReplyCache(llm.cache_dir or ctx.settings.index_dir / "llm-cache")
    models_dir = ctx.settings.models_dir
    backend = ctx.shared(("llm backend", models_dir, *(getattr(llm, name) for name in OPENED_WITH)),  # one model for every language served
                         lambda: open_backend(llm, models_dir))
    bank = None
    if llm.demonstrations:
        from openqa.methods.bank import exam_bank

        bank = exam_bank(ctx, target, banks)
    scorer = LLMScorer(backend, llm, cache, retriever, query, target.lang, bank)
    record = {**scorer.settings_record(), "exam": target.exam, "cache": f"{cache.path.parent.name}/{cache.path.name}", **retrieval}
    named = llm.given()
    given = {*named, "model", *(("reply_tokens",) if "max_tokens" in named else ())}
    sources = {key: FLAGS[key] if key in FLAGS and key in given else "default" for key in record if key != "retriever_settings"}
    sources.update(exam=target.source, context=backend.context_source, token_count="backend",
                   template_version="openqa package", template_hash="openqa package", backend="--model/--endpoint", runs_on="backend",
                   **({"prompt_cache": "backend"} if "prompt_cache" in record else {}),
                   cache=OptionSource("cache_dir") if llm.cache_dir else "default (beside the indexes)")
    if retriever is not None:
        sources["query"] = prefixed(f"{llm.retriever}: ", (retriever_settings or {}).get("sources", {}).get("query", "default"))
    index = retriever.engine if retriever is not None else ClosedBook(target.lang)
    return scorer, index, {**record, "sources": sources}
