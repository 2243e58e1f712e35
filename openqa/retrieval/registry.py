"""Engines by name, where their indexes live, and the one way to build or open an index."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

from openqa.corpus.paragraphs import SEGMENTATION_VERSION, Paragraph
from openqa.corpus.sources import Corpus, check_name, textbooks
from openqa.errors import OpenQAError, UsageError
from openqa.extras import needs
from openqa.jsonl import decode
from openqa.retrieval.base import EngineOptions, Index
from openqa.retrieval.custom_bm25 import CustomBM25
from openqa.retrieval.dense import DenseIndex
from openqa.retrieval.elastic import ElasticBM25
from openqa.retrieval.lucene import LuceneBM25
from openqa.retrieval.manifest import MANIFEST
from openqa.retrieval.positional import PositionalIndex
from openqa.retrieval.word2vec import WordVectors
from openqa.text.tokenize import make_tokenizer

ENGINES: dict[str, type[Index]] = {engine.name: engine for engine in (CustomBM25, LuceneBM25, ElasticBM25, DenseIndex, PositionalIndex, WordVectors)}


def engine_class(name: str) -> type[Index]:
    """The engine registered under ``name``, or an error listing the known ones."""
    if name not in ENGINES:
        raise UsageError(f"unknown engine {name!r}: choose one of {', '.join(ENGINES)}")
    return ENGINES[name]


def index_folder(index_dir: Path, lang: str, engine: str, corpus: str | None = None) -> Path:
    """Home of an index: ``<index_dir>/<lang>-<engine>`` for the MedQA textbooks, and
    ``<index_dir>/<corpus>-<lang>-<engine>`` for a named corpus."""
    return Path(index_dir) / (f"{check_name(corpus)}-{lang}-{engine}" if corpus else f"{lang}-{engine}")


def tokenizer_config(lang: str, engine: str = "custom", **overrides: Any) -> dict[str, Any]:
    """The engine's default tokenizer settings for ``lang`` with the given (non-None) overrides."""
    defaults = engine_class(engine).tokenizers
    if lang not in defaults:
        raise UsageError(f"unknown language {lang!r}: choose one of {sorted(defaults)}")
    return {**defaults[lang], **{k: v for k, v in overrides.items() if v is not None}}


def recorded_source(index_dir: Path, corpus: str) -> str | None:
    """The path a named corpus was indexed from, as any of its indexes' manifests records it."""
    for manifest in sorted(Path(index_dir).glob(f"{check_name(corpus)}-*/{MANIFEST}")):
        try:
            recorded = decode(manifest.read_text(encoding="utf-8"))
        except (OSError, ValueError):  # nesting too deep included
            continue
        if isinstance(recorded, dict) and recorded.get("corpus") == corpus and recorded.get("corpus_source"):
            return str(recorded["corpus_source"])
    return None


def build_hint(lang: str, engine: str, tokenizer: dict[str, Any], corpus: str | None = None, source: str | None = None) -> str:
    """The command that builds the index these settings need (shown in errors); a named corpus'
    needs its path (``source``, else a placeholder)."""
    defaults = engine_class(engine).tokenizers[lang]
    extra = "".join(f" --{k.replace('mode', 'zh-mode')} {v}" for k, v in tokenizer.items() if defaults.get(k) != v)
    named = f" --corpus {source or 'PATH'} --name {corpus}" if corpus else ""
    return f"openqa index --lang {lang} --engine {engine}{extra}{named}"


def build_index(
    data_dir: Path | None, index_dir: Path, lang: str, engine: str = "custom", tokenizer: dict[str, Any] | None = None,
    options: EngineOptions = EngineOptions(), corpus: Corpus | None = None,
) -> Path:
    """Index a corpus with ``engine``: the ``lang`` textbooks of ``data_dir``, or ``corpus`` (a named
    folder or JSONL file). Its paragraphs stream into the engine: none is held here."""
    cls = engine_class(engine)
    cls.check_options(options)
    tok_config = tokenizer or tokenizer_config(lang, engine)
    if corpus is None:
        assert data_dir is not None  # callers give the data folder when they give no corpus
        corpus = textbooks(data_dir, lang)
    identity = corpus.identity()
    folder = index_folder(index_dir, lang, engine, corpus.name)
    with needs(f"engine {engine}", cls.extra):
        cls.build(folder, nonempty(corpus.paragraphs(), corpus), make_tokenizer(tok_config), identity, options)
    return folder


def nonempty(paragraphs: Iterator[Paragraph], corpus: Corpus) -> Iterator[Paragraph]:
    """``paragraphs``, or an error before anything is indexed if there are none."""
    first = next(paragraphs, None)
    if first is None:
        what = f"the {corpus.lang} textbooks under" if corpus.name is None else f"corpus {corpus.name!r} at"
        raise OpenQAError(f"no paragraphs found in {what} {corpus.path}")
    yield first
    yield from paragraphs


def open_index(
    index_dir: Path, lang: str, engine: str = "custom", tokenizer: dict[str, Any] | None = None,
    data_dir: Path | None = None, options: EngineOptions = EngineOptions(), corpus: str | None = None,
) -> Index:
    """Open the ``lang``/``engine`` index of the textbooks or of the named ``corpus``, refusing one
    built with other settings or from another corpus.

    For the textbooks, the corpus checksum is compared when ``data_dir`` holds them; without them
    (a machine with only the index) the recorded settings are still checked. A named corpus is
    checked by name (its source may be elsewhere or gone); its manifest keeps the checksum.
    """
    cls = engine_class(engine)
    tok_config = tokenizer or tokenizer_config(lang, engine)
    expected: dict[str, Any] = {
        "lang": lang,
        "corpus": corpus,
        "tokenizer": make_tokenizer(tok_config).config(),
        "segmentation": SEGMENTATION_VERSION,
    }
    if corpus is None and data_dir is not None and (Path(data_dir) / "textbooks").is_dir():
        expected["corpus_checksum"] = textbooks(data_dir, lang).identity()["corpus_checksum"]
    hint = build_hint(lang, engine, tok_config, corpus, corpus and recorded_source(index_dir, corpus))
    with needs(f"engine {engine}", cls.extra):
        return cls.load(index_folder(index_dir, lang, engine, corpus), expected, hint, options)
