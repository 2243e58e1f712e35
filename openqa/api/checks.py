"""The API's arguments checked by name against the registries (languages, engines, methods), in one line each."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from openqa import arguments as arg
from openqa.errors import UsageError

if TYPE_CHECKING:

    pass

#: Paragraphs per query ``search`` returns when no ``k`` is given, and the most it may ask for.
DEFAULT_K = 10
MAX_K = 10_000


def lang_name(lang: Any) -> str:
    from openqa.languages import LANGS

    return arg.one_of("language", lang, LANGS)


def engine_name(engine: Any) -> str:
    from openqa.retrieval.registry import ENGINES

    return arg.one_of("engine", engine, ENGINES)


def optional_engine(engine: Any) -> str | None:
    return None if engine is None else engine_name(engine)


def method_name(name: Any) -> str:
    from openqa.methods import METHODS

    return arg.one_of("method", name, METHODS)


def check_llm(llm: Any) -> None:
    from openqa.llm.settings import LLMSettings

    if llm is not None and not isinstance(llm, LLMSettings):
        raise UsageError(f"llm must be an LLMSettings, not {type(llm).__name__}")


def overrides_of(top_n: Any, aggregate: Any, query: Any) -> Any:
    """The settings a call replaces, checked (``openqa.methods.Overrides``)."""
    from openqa.methods import Overrides
    from openqa.scorers.ir import AGGREGATES
    from openqa.scorers.query import QUERY_MODES

    return Overrides(top_n=arg.optional_whole("top_n", top_n, 1, MAX_K), aggregate=arg.optional_one_of("aggregate", aggregate, AGGREGATES),
                     query=arg.optional_one_of("query", query, QUERY_MODES))


def bank_files(banks: Any) -> tuple[str, ...]:
    """``banks`` (files of solved questions) as the request carries them, each checked to be a path."""
    if isinstance(banks, (str, Path)) or not isinstance(banks, (list, tuple)):
        raise UsageError(f"banks must be a list of files, not {type(banks).__name__}")
    return tuple(str(arg.path("banks", b)) for b in banks)
