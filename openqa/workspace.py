"""Where a command works: the folders and index settings the user gave (``Context``), which opens
indexes, and what questions are scored as (``Exam``)."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Callable, Hashable, TypeVar

from openqa.config import OptionSource, Settings
from openqa.data import DATASETS, DEFAULT_EXAMS, dataset_spec, exam_dataset
from openqa.errors import IndexMissingError
from openqa.languages import DEFAULT_LANG
from openqa.retrieval.base import EngineOptions, Index
from openqa.retrieval.registry import build_index, engine_class, open_index, tokenizer_config

T = TypeVar("T")


def _silent(message: str) -> None:
    """The default ``Context.notify``: say nothing."""


#: One lock per index folder that a thread of this process is building on demand (``Context.open``).
_BUILD_LOCKS: dict[Path, threading.Lock] = {}
_BUILD_LOCKS_GUARD = threading.Lock()


def _building(folder: Path) -> threading.Lock:
    """The lock threads hold while one of them builds ``folder`` on demand, so that threads opening
    one empty index folder together build it once, not once each."""
    with _BUILD_LOCKS_GUARD:
        return _BUILD_LOCKS.setdefault(folder, threading.Lock())


@dataclass(frozen=True)
class Context:
    """Where things are and how indexes were built, as the user gave them; ``notify`` receives
    one-line notes about work done on the user's behalf (a missing quick index being built) or
    what the user should know (settings tuned on another corpus);
    ``corpus`` names the corpus whose indexes every command opens (None: the MedQA textbooks)."""

    settings: Settings
    options: EngineOptions = EngineOptions()
    ngram: int | None = None
    zh_mode: str | None = None
    notify: Callable[[str], None] = _silent
    corpus: str | None = None
    #: The notes said once (``notify_once``), shared by the contexts ``sharing`` makes.
    said: set[str] = field(default_factory=set, compare=False, repr=False)

    def notify_once(self, message: str) -> None:
        """``notify`` a note not yet said through this context (a command opening several
        methods, or one twice, says it once)."""
        if message not in self.said:
            self.said.add(message)
            self.notify(message)

    def tokenizer(self, lang: str, engine: str) -> dict[str, Any]:
        """Index terms for ``lang``/``engine`` with this command's tokenizer flags (``--zh-mode``
        applies to the tokenizers that have a mode)."""
        has_mode = "mode" in tokenizer_config(lang, engine)
        return tokenizer_config(lang, engine, ngram=self.ngram, mode=self.zh_mode if has_mode else None)

    def shared(self, key: Hashable, make: Callable[[], T]) -> T:
        """What ``make`` makes (a model backend): a new one per call here; a server's context, which
        opens everything once, hands the first one made under ``key`` to every later caller."""
        return make()

    def open(self, lang: str, engine: str) -> Index:
        """The ``lang``/``engine`` index, refused if built with other settings or corpus.

        A missing index that builds in seconds (custom, pmi) is built first when the textbooks are
        at hand; a slow one, and any of a named corpus (whose source only ``openqa index --corpus``
        is given), keeps the error that names the command building it.
        """
        tokenizer = self.tokenizer(lang, engine)
        s = self.settings
        try:
            return open_index(s.index_dir, lang, engine, tokenizer, s.data_dir, self.options, self.corpus)
        except IndexMissingError:
            if self.corpus or not engine_class(engine).quick_build or s.data_dir is None:
                raise
        with _building(Path(s.index_dir).resolve() / f"{lang}-{engine}"):
            try:  # another thread may have built it while this one waited: opened, not built again
                return open_index(s.index_dir, lang, engine, tokenizer, s.data_dir, self.options)
            except IndexMissingError:
                pass
            self.notify(f"no {lang} {engine} index in {s.index_dir}: building it first (once: later runs open it; a Chinese PMI index takes a minute or more)")
            build_index(s.require_data_dir(), s.index_dir, lang, engine, tokenizer, self.options)
        return open_index(s.index_dir, lang, engine, tokenizer, s.data_dir, self.options)

    def sharing(self) -> "Context":
        """This context, opening each index once for everything opened through it (the parts of an
        ensemble share one copy of an index)."""
        return OpenOnce(**{f.name: getattr(self, f.name) for f in fields(Context)})


@dataclass(frozen=True)
class OpenOnce(Context):
    """A context that opens each index once and hands the same open index to every later opener."""

    opened: dict[tuple[str, str], Index] = field(default_factory=dict, compare=False)

    def open(self, lang: str, engine: str) -> Index:
        if (lang, engine) not in self.opened:
            self.opened[lang, engine] = super().open(lang, engine)
        return self.opened[lang, engine]

    def sharing(self) -> "Context":
        return self


@dataclass(frozen=True)
class Exam:
    """What questions are scored as: corpus language, exam (the paper's per-exam parameters) and
    the dataset whose dev-tuned settings apply; ``source`` says how the exam was chosen."""

    lang: str
    exam: str
    dataset: str
    source: str

    @classmethod
    def resolve(cls, dataset: str | None = None, lang: str | None = None, exam: str | None = None) -> "Exam":
        """A named dataset's own exam; else ``exam`` (default by language: usmle for en, mcmle for zh),
        which may also be a dataset's name (``mainland``: mcmle, with mainland's dev-tuned settings)."""
        if dataset:
            spec = dataset_spec(dataset)
            named = DATASETS[exam].exam if exam in DATASETS else exam  # --exam mainland: mcmle
            return cls(spec.lang, named or spec.exam, dataset, OptionSource("exam") if exam else f"dataset {dataset}")
        lang = lang or DEFAULT_LANG
        if exam in DATASETS and DATASETS[exam].lang == lang:  # a dataset's name: its exam, with that dataset's settings
            return cls(lang, DATASETS[exam].exam, exam, OptionSource("exam", after=f" {exam}"))
        chosen = exam or DEFAULT_EXAMS[lang]
        return cls(lang, chosen, exam_dataset(lang, chosen), OptionSource("exam") if exam else OptionSource("lang", "default for ", f" {lang}"))
