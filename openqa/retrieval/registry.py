"""Engines by name, where their indexes live, and the one way to build or open an index."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from openqa.corpus.paragraphs import book_files, corpus_checksum, read_paragraphs, SEGMENTATION_VERSION
from openqa.errors import OpenQAError
from openqa.retrieval.base import EngineOptions, Index
from openqa.retrieval.custom_bm25 import CustomBM25
from openqa.retrieval.dense import DenseIndex
from openqa.retrieval.elastic import ElasticBM25
from openqa.retrieval.hybrid import FusedEngine
from openqa.retrieval.lucene import LuceneBM25
from openqa.retrieval.positional import PositionalIndex
from openqa.retrieval.word2vec import WordVectors
from openqa.text.tokenize import make_tokenizer

ENGINES: dict[str, type[Index]] = {engine.name: engine for engine in (CustomBM25, LuceneBM25, ElasticBM25, DenseIndex, PositionalIndex, WordVectors)}

#: Engines made of two built indexes, fused at search time.
COMPOSITES: dict[str, tuple[str, str]] = {FusedEngine.name: ("custom", "dense")}


def engine_class(name: str) -> type[Index]:
    """The engine registered under ``name``, or an error listing the known ones."""
    if name not in ENGINES:
        raise OpenQAError(f"unknown engine {name!r}: choose one of {sorted(ENGINES)} (or {sorted(COMPOSITES)} to search)")
    return ENGINES[name]


def index_folder(index_dir: Path, lang: str, engine: str) -> Path:
    """Default home of an index: ``<index_dir>/<lang>-<engine>``."""
    return Path(index_dir) / f"{lang}-{engine}"


def tokenizer_config(lang: str, engine: str = "custom", **overrides: Any) -> dict[str, Any]:
    """The engine's default tokenizer settings for ``lang`` with the given (non-None) overrides.

    A composite engine takes its first part's (the one whose tokenizer it searches with).
    """
    defaults = engine_class(COMPOSITES.get(engine, (engine,))[0]).tokenizers
    if lang not in defaults:
        raise OpenQAError(f"unknown language {lang!r}: choose one of {sorted(defaults)}")
    return {**defaults[lang], **{k: v for k, v in overrides.items() if v is not None}}


def corpus_identity(data_dir: Path, lang: str) -> dict[str, Any]:
    """What identifies a corpus in a manifest: language, books and checksum."""
    files = book_files(data_dir, lang)
    return {
        "lang": lang,
        "books": [f.stem for f in files],
        "corpus_checksum": corpus_checksum(files),
        "segmentation": SEGMENTATION_VERSION,
    }


def build_hint(lang: str, engine: str, tokenizer: dict[str, Any]) -> str:
    """The command that builds the index these settings need (shown in errors)."""
    defaults = engine_class(engine).tokenizers[lang]
    extra = "".join(f" --{k.replace('mode', 'zh-mode')} {v}" for k, v in tokenizer.items() if defaults.get(k) != v)
    return f"openqa index --lang {lang} --engine {engine}{extra}"


def build_index(
    data_dir: Path, index_dir: Path, lang: str, engine: str = "custom", tokenizer: dict[str, Any] | None = None,
    options: EngineOptions = EngineOptions(),
) -> Path:
    """Read, clean and segment the ``lang`` textbooks and index them with ``engine``."""
    cls = engine_class(engine)
    cls.check_options(options)
    tok_config = tokenizer or tokenizer_config(lang, engine)
    corpus = corpus_identity(data_dir, lang)
    paragraphs = list(read_paragraphs(data_dir, lang))
    if not paragraphs:
        raise OpenQAError(f"no paragraphs found in the {lang} textbooks under {data_dir}")
    folder = index_folder(index_dir, lang, engine)
    cls.build(folder, paragraphs, make_tokenizer(tok_config), corpus, options)
    return folder


def open_index(
    index_dir: Path, lang: str, engine: str = "custom", tokenizer: dict[str, Any] | None = None,
    data_dir: Path | None = None, options: EngineOptions = EngineOptions(),
) -> Index:
    """Open the ``lang``/``engine`` index, refusing one built with other settings or corpus.

    The corpus checksum is compared when ``data_dir`` holds the textbooks; without them (a
    machine with only the index) the recorded settings are still checked.
    """
    if engine in COMPOSITES:
        first, second = (open_index(index_dir, lang, part, None, data_dir, options) for part in COMPOSITES[engine])
        return FusedEngine(first, second)
    cls = engine_class(engine)
    tok_config = tokenizer or tokenizer_config(lang, engine)
    expected: dict[str, Any] = {
        "lang": lang,
        "tokenizer": make_tokenizer(tok_config).config(),
        "segmentation": SEGMENTATION_VERSION,
    }
    if data_dir is not None and (Path(data_dir) / "textbooks").is_dir():
        expected["corpus_checksum"] = corpus_identity(data_dir, lang)["corpus_checksum"]
    return cls.load(index_folder(index_dir, lang, engine), expected, build_hint(lang, engine, tok_config), options)
