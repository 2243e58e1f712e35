"""``--method llm``: open an LLM reader with its retriever, backend and reply cache, as the pipeline
opens any method (``open_llm`` returns the pipeline's ``Opened``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from openqa.llm.settings import LLMSettings
from openqa.methods import Opened, open_retrieving

if TYPE_CHECKING:
    from openqa.workspace import Context, Exam

#: Flags of settings a user may give (their source in the record when they differ from the default).
FLAGS = {"evidence": "--evidence", "scoring": "--scoring", "prompt": "--prompt", "retriever": "--retriever",
         "top_k": "--top-n", "evidence_tokens": "--evidence-tokens", "context": "--context",
         "permutations": "--permutations", "temperature": "--temperature", "seed": "--seed",
         "reply_tokens": "--max-tokens", "endpoint": "--endpoint", "model": "--model"}


@dataclass
class ClosedBook:
    """What a closed-book run (``--evidence none``) reads instead of an index: nothing, said so."""

    lang: str
    paragraphs: tuple = ()
    manifest: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.manifest = {"lang": self.lang, "corpus": "none (closed book)", "corpus_kind": "no evidence",
                         "paragraphs": 0, "corpus_checksum": "none", "engine": "none"}

    def warm(self) -> None:
        """Nothing to load (``Index.warm``)."""


def open_llm(ctx: "Context", target: "Exam", llm: LLMSettings) -> "Opened":
    """An LLM reader over ``llm.retriever``'s evidence (none for a closed book), with its settings
    and their sources for the record."""
    from openqa.llm.backends import open_backend
    from openqa.llm.cache import ReplyCache
    from openqa.llm.scorer import LLMScorer

    retriever, query, retrieval = None, "full", {}
    if llm.evidence != "none":
        opened = open_retrieving(ctx, llm.retriever, target)
        retriever = opened.retriever
        query = retriever.settings.query
        query = "full" if query == "option" else query
        retrieval = {"retriever_settings": {k: v for k, v in opened.settings.items() if k != "sources"}}
    cache = ReplyCache(llm.cache_dir or ctx.settings.index_dir / "llm-cache")
    how = {"models_dir": ctx.settings.models_dir, "context": llm.context, "timeout": llm.timeout,
           "retries": llm.retries, "threads": llm.threads}
    backend = ctx.shared(("llm backend", llm.model, llm.endpoint, *how.items()),  # one model for every language served
                         lambda: open_backend(llm.model, llm.endpoint, **how))
    scorer = LLMScorer(backend, llm, cache, retriever, query, target.lang)
    record = {**scorer.settings_record(), "exam": target.exam, "cache": f"{cache.path.parent.name}/{cache.path.name}", **retrieval}
    given = llm.given()
    given = {*given, "model", *(("reply_tokens",) if "max_tokens" in given else ())}
    sources = {key: FLAGS[key] if key in FLAGS and key in given else "default" for key in record if key != "retriever_settings"}
    sources.update(exam=target.source, context=backend.context_source, token_count="backend",
                   template_version="openqa package", template_hash="openqa package", backend="--model/--endpoint", runs_on="backend",
                   **({"prompt_cache": "backend"} if "prompt_cache" in record else {}),
                   cache="--cache-dir" if llm.cache_dir else "default (beside the indexes)")
    if llm.evidence != "none":
        sources["query"] = f"{llm.retriever}: {opened.settings['sources'].get('query', 'default')}"
    index = retriever.engine if retriever is not None else ClosedBook(target.lang)
    return Opened(scorer, index, {**record, "sources": sources})
