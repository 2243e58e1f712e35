"""Where things are (data, indexes, your tuned settings), and building an index there."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator

from openqa import arguments as arg
from openqa.api.checks import engine_name, lang_name
from openqa.corpus.sources import user_corpus
from openqa.errors import UsageError
from openqa.progress import shown

if TYPE_CHECKING:
    from openqa.corpus.paragraphs import Paragraph
    from openqa.workspace import Context


@dataclass(frozen=True)
class Workspace:
    """Where openqa works and how its indexes were built: each field as the flag of the same name
    (None: its environment variable, else the default; see ``openqa.config.Settings``)."""

    data_dir: str | Path | None = None
    index_dir: str | Path | None = None
    models_dir: str | Path | None = None
    settings_dir: str | Path | None = None
    results_dir: str | Path | None = None
    es_url: str | None = None
    encoder: str | None = None
    faiss_index: str | None = None
    ngram: int | None = None
    zh_mode: str | None = None
    corpus: str | None = None

    def __post_init__(self) -> None:
        for name in ("data_dir", "index_dir", "models_dir", "settings_dir", "results_dir"):
            arg.path(name, getattr(self, name))
        for name in ("es_url", "encoder", "faiss_index", "corpus"):
            arg.optional_text(name, getattr(self, name))
        arg.optional_whole("ngram", self.ngram, 1, 2)
        arg.optional_one_of("zh_mode", self.zh_mode, ("word", "char"))

    def context(self, notify: Callable[[str], None] | None = None, check_settings: bool = True) -> Context:
        """The ``Context`` the layers below take; ``notify`` receives one-line notes (of work done on
        the caller's behalf, such as a quick index built first; default: logged at INFO level to the
        ``openqa`` logger, so a program that turns logging on hears of them and one that does not
        sees nothing printed);
        ``check_settings``: a settings folder asked for (by field or environment) must exist when
        read, as on the command line (a typo would silently fall back to the shipped settings)."""
        from openqa.config import Settings
        from openqa.retrieval.base import EngineOptions
        from openqa.workspace import Context

        s = Settings.resolve(self.data_dir, self.index_dir, self.models_dir, self.es_url, self.settings_dir, self.results_dir,
                             check_settings=check_settings)
        options = EngineOptions(connection=s.es_url, encoder=self.encoder, models_dir=s.models_dir,
                                faiss_index=self.faiss_index or "flat")
        if notify is None:
            notify = logging.getLogger("openqa").info
        return Context(s, options, self.ngram, self.zh_mode, notify, corpus=self.corpus)

    @classmethod
    def of(cls, workspace: Workspace | None = None, **given: Any) -> Workspace:
        """``workspace`` (default: all from the environment) with the non-None ``given`` fields replaced."""
        if workspace is not None and not isinstance(workspace, Workspace):
            raise UsageError(f"workspace must be a Workspace, not {type(workspace).__name__}")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(given) - known)
        if unknown:
            raise UsageError(f"unknown setting {unknown[0]!r}: choose from {', '.join(sorted(known))}")
        base = workspace or cls()
        return cls(**{**{f.name: getattr(base, f.name) for f in fields(cls)},
                      **{k: v for k, v in given.items() if v is not None}})


# --------------------------------------------------------------------------------------- search



@dataclass(frozen=True)
class Built:
    """An index ``build_index`` wrote: its folder, the seconds it took and its manifest."""

    folder: Path
    seconds: float
    manifest: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"folder": str(self.folder), "seconds": self.seconds, "manifest": self.manifest}


def build_index(lang: str = "en", engine: str = "custom", *, corpus: str | Path | None = None, name: str | None = None,
                progress: bool = False, workspace: Workspace | None = None, **where: Any) -> Built:
    """Index the ``lang`` MedQA textbooks of ``data_dir`` with ``engine`` (``openqa index``), or your
    own ``corpus`` (a folder of .txt/.md books, or a JSON-lines file of passages in openqa's, MedRAG's,
    BEIR's or Pyserini's format), which other calls then open by ``name`` (default: its file name).

    :param lang: the corpus language, ``en`` or ``zh``.
    :param engine: what to build: ``custom`` (IR-Custom), ``pmi``, ``lucene``, ``elasticsearch`` or ``dense``.
    :param corpus: your own corpus instead of the textbooks (a folder or a JSON-lines file).
    :param name: the name other calls open ``corpus`` by.
    :param progress: show progress bars.
    :param workspace: where data, indexes, settings and results are (a ``Workspace``); its fields may
    also be given as keywords (``data_dir=...``, ``index_dir=...``), each defaulting to its
    environment variable.
    :returns: the index folder, how long the build took and its manifest.
    :raises OpenQAError: on a missing data folder, a bad corpus or a missing extra (one line)."""
    from openqa.retrieval.manifest import read_manifest
    from openqa.retrieval.registry import build_index as build

    lang, engine, corpus, name = lang_name(lang), engine_name(engine), arg.path("corpus", corpus), arg.optional_text("name", name)
    arg.flag("progress", progress)
    if name is not None and corpus is None:
        raise UsageError("name names a corpus given with corpus=PATH")
    ctx = Workspace.of(workspace, **where).context()
    source = user_corpus(corpus, lang, name) if corpus is not None else None
    start = time.perf_counter()
    with shown(progress):
        folder = build(None if source else ctx.settings.require_data_dir(), ctx.settings.index_dir, lang, engine,
                       ctx.tokenizer(lang, engine), ctx.options, source)
    return Built(folder, round(time.perf_counter() - start, 3), read_manifest(folder, "openqa index"))



def corpus_fingerprint(lang: str = "en", *, corpus: str | Path | None = None, workspace: Workspace | None = None,
                       **where: Any) -> dict[str, Any]:
    """The fingerprint of the ``lang`` MedQA textbooks of ``data_dir`` (or of your own ``corpus``, a
    folder of books or a JSON-lines file): its language, books (name -> SHA-256; None for passages)
    and whole-corpus checksum, exactly as an index built from it, and the settings, calibrations and
    results made over that index, record it (``corpus_fingerprint``)."""
    from openqa.corpus.sources import textbooks
    from openqa.retrieval.manifest import corpus_fingerprint as fingerprint

    lang, corpus = lang_name(lang), arg.path("corpus", corpus)
    ctx = Workspace.of(workspace, **where).context()
    source = user_corpus(corpus, lang) if corpus is not None else textbooks(ctx.settings.require_data_dir(), lang)
    found = fingerprint(source.identity())
    assert found is not None  # a corpus always has a checksum
    return found


def corpus_paragraphs(lang: str = "en", *, corpus: str | Path | None = None, workspace: Workspace | None = None,
                      **where: Any) -> Iterator[Paragraph]:
    """The paragraphs of the ``lang`` MedQA textbooks of ``data_dir`` (or of your own ``corpus``, a
    folder of books or a JSON-lines file), in the order an index built from it numbers them, read as
    they are needed: what ``build_index`` indexes.

    :param lang: the corpus language, ``en`` or ``zh``.
    :param corpus: your own corpus instead of the textbooks (a folder or a JSON-lines file).
    :param workspace: where the data is (a ``Workspace``); its fields may also be given as keywords
        (``data_dir=...``), each defaulting to its environment variable.
    :returns: an iterator of paragraphs (``pid``, ``book``, ``text``).
    :raises OpenQAError: on a missing data folder or corpus (one line)."""
    from openqa.corpus.sources import textbooks

    lang, corpus = lang_name(lang), arg.path("corpus", corpus)
    ctx = Workspace.of(workspace, **where).context()
    source = user_corpus(corpus, lang) if corpus is not None else textbooks(ctx.settings.require_data_dir(), lang)
    return source.paragraphs()
