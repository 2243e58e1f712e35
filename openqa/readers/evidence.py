"""Evidence for readers: the top-N paragraphs a retriever finds for each (question, option),
concatenated in rank order, computed once per split and cached.

The cache file records the retriever, its settings, the corpus checksum and the question ids;
a cache built with anything else is refused rather than silently reused.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Sequence, cast

from openqa.data import Question
from openqa.errors import IndexMismatchError
from openqa.retrieval.base import Hit
from openqa.scorers.ir import IRScorer


def evidence_key(scorer: IRScorer, top_n: int, questions: Sequence[Question]) -> dict[str, Any]:
    """What identifies a split's evidence: retriever, settings, corpus and the questions."""
    qids = hashlib.sha256("\n".join(q.qid for q in questions).encode()).hexdigest()[:16]
    return {
        "retriever": scorer.engine.name,
        "scoring": scorer.engine.manifest.get("scoring"),
        "query": scorer.settings.query,
        "top_n": top_n,
        "corpus_checksum": scorer.engine.manifest.get("corpus_checksum"),
        "tokenizer": scorer.engine.manifest.get("tokenizer"),
        "questions": qids,
    }


def retrieve_evidence(
    scorer: IRScorer, questions: Sequence[Question], top_n: int, progress: bool = True
) -> tuple[dict[str, dict[str, str]], list[list[list[Hit]]]]:
    """qid -> option letter -> its top-``top_n`` paragraphs joined by spaces; and the hits themselves."""
    hits = scorer.retrieve(questions, top_n, progress)
    store = scorer.engine.paragraphs
    texts = {
        q.qid: {letter: " ".join(store[h.index].text for h in option_hits[:top_n]) for letter, option_hits in zip(q.options, per_q)}
        for q, per_q in zip(questions, hits)
    }
    return texts, hits


def load_or_compute(path: Path, scorer: IRScorer, questions: Sequence[Question], top_n: int) -> dict[str, dict[str, str]]:
    """The cached evidence at ``path`` when its key matches, else computed and cached there."""
    key = evidence_key(scorer, top_n, questions)
    if path.is_file():
        cached = json.loads(path.read_text(encoding="utf-8"))
        if cached.get("key") != key:
            raise IndexMismatchError(
                f"evidence cache {path} was built with other settings ({cached.get('key')}); delete it to rebuild"
            )
        return cast(dict[str, dict[str, str]], cached["evidence"])
    evidence, _ = retrieve_evidence(scorer, questions, top_n)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps({"key": key, "evidence": evidence}, ensure_ascii=False), encoding="utf-8")
    tmp.replace(path)
    return evidence
