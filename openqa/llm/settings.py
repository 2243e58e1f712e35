"""What an ``--method llm`` run is asked to do, as plain values (no model library is imported here,
so the pipeline and the CLI stay light)."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from openqa import arguments as arg
from openqa.errors import OpenQAError, UsageError

EVIDENCE_MODES = ("none", "question", "options")
SCORINGS = ("letters", "generate")
PROMPTS = ("direct", "cot")

#: Paragraphs retrieved by default: for the whole question, or per option.
DEFAULT_TOP = {"question": 10, "options": 3}
#: Reply tokens allowed by default for a generated answer.
DEFAULT_MAX_TOKENS = {"direct": 48, "cot": 512}
#: Environment variables read, in order, for an endpoint's API key (the one way to give it).
KEY_VARIABLES = ("OPENQA_API_KEY", "OPENAI_API_KEY")


def check_endpoint(url: str) -> str:
    """``url`` (an ``--endpoint``), refused in one line where it carries a user or password
    (``http://user:pass@host/v1``), a query string (``?api_key=...``) or a fragment (``#token=...``):
    a credential there would be written into records and served to every client, and would replace
    the key of ``$OPENQA_API_KEY``; the client appends its paths to the URL, so a query string or
    fragment would also end up before them (``...?api_key=k/v1/models``). The message shows the
    URL without any of them."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        scheme, rest = "", url
    cut = min((i for i in (rest.find(c) for c in "/?#") if i >= 0), default=len(rest))
    authority, path = rest[:cut], rest[cut:]
    host = authority.rpartition("@")[2]
    plain = min((i for i in (path.find(c) for c in "?#") if i >= 0), default=len(path))
    shown = f"{scheme}{sep}{host}{path[:plain]}"
    if "@" in authority:
        raise OpenQAError(f"--endpoint {shown} must not carry a user or password: give the key in "
                          f"${KEY_VARIABLES[0]} (or ${KEY_VARIABLES[1]}) instead")
    if plain < len(path):
        raise OpenQAError(f"--endpoint {shown} must not carry a query string or fragment ('?...' or '#...'): give "
                          f"the server's base URL, and a key in ${KEY_VARIABLES[0]} (or ${KEY_VARIABLES[1]})")
    return url


#: The most solved questions ``--demonstrations`` shows: each is a whole question with its options and
#: answer in the prompt (an exam question takes some hundred tokens or more), so a larger K is refused up
#: front rather than after the bank was searched and a prompt no model's context holds was built.
MAX_DEMONSTRATIONS = 64

#: The settings that are whole numbers (None: the default), and those that are numbers, by field.
WHOLE = ("top_k", "evidence_tokens", "context", "permutations", "concurrency", "retries", "seed", "max_tokens", "threads",
         "batch_size", "demonstrations")
NUMBERS = ("timeout", "temperature")

#: Where a model runs (``LLMSettings.runs_in``), as messages name it.
RUNNERS = {"endpoint": "--endpoint (a server)", "llama.cpp": "a .gguf model (llama.cpp in process)",
           "transformers": "a transformers model in process"}
#: The flags that change how only some runners work, with those runners; given for another, a flag is
#: refused (it would change nothing): a transformers model answers one prompt at a time and batches
#: letters itself; llama.cpp answers one prompt at a time per copy of the model (``--concurrency``
#: copies), each reusing its previous prompt's rows; a server takes ``--concurrency`` requests at once.
ONLY_FOR: dict[str, tuple[str, ...]] = {"--concurrency": ("endpoint", "llama.cpp"), "--llm-batch-size": ("transformers",),
                                        "--no-prompt-reuse": ("llama.cpp",)}


@dataclass(frozen=True)
class LLMSettings:
    """What an LLM reader (``--method llm``) is asked to do: its model (a local folder, hub id or
    ``.gguf`` file, or a server's model name with ``endpoint``), the evidence it reads (``none``,
    ``question`` or ``options``), how it answers (``letters``: the letters' probabilities; ``generate``:
    a reply read for a letter), and its request settings; each field is the command line's flag of
    the same name (``top_k`` is ``--top-n``, ``batch_size`` ``--llm-batch-size``). Give it to
    ``Solver.open(..., llm=...)`` or ``run_eval(..., llm=...)``.

    :raises OpenQAError: on a missing model, an unknown mode or a number out of range (one line)."""

    model: str | None = None
    endpoint: str | None = None
    evidence: str = "question"
    scoring: str = "letters"
    prompt: str = "direct"
    retriever: str = "ir-custom"
    top_k: int | None = None
    evidence_tokens: int = 1024
    context: int | None = None
    permutations: int = 1
    concurrency: int = 1
    timeout: float = 120.0
    retries: int = 4
    temperature: float = 0.0
    seed: int = 0
    max_tokens: int | None = None
    threads: int = 1
    #: Prompts a forward pass of an in-process transformers model scores letters for (None: one at a time).
    batch_size: int | None = None
    #: With a GGUF file: reuse the previous prompt's rows where that gives a cold run's bits.
    prompt_reuse: bool = True
    cache_dir: Path | None = None
    #: Nearest solved questions shown with their answers before the question (few-shot, from the bank).
    demonstrations: int = 0

    def __post_init__(self) -> None:
        for name in ("model", "endpoint", "evidence", "scoring", "prompt", "retriever"):
            if getattr(self, name) is not None and not isinstance(getattr(self, name), str):
                raise UsageError(f"{name} must be text, not {type(getattr(self, name)).__name__}")
        for name in WHOLE:
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
                raise UsageError(f"{name} must be a whole number, not {type(value).__name__} {arg.shown(value)}")
        for name in NUMBERS:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise UsageError(f"{name} must be a number, not {type(value).__name__} {arg.shown(value)}")
        if not isinstance(self.prompt_reuse, bool):
            raise UsageError(f"prompt_reuse must be True or False, not {type(self.prompt_reuse).__name__}")
        if self.cache_dir is not None and not isinstance(self.cache_dir, (str, os.PathLike)):
            raise UsageError(f"cache_dir must be a path, not {type(self.cache_dir).__name__}")
        arg.path("cache_dir", self.cache_dir)
        if self.model and not self.endpoint:  # a file, folder or hub id: a name the file system can look up
            arg.checked_path("model", self.model)
        for name, value, known in (("--evidence", self.evidence, EVIDENCE_MODES), ("--scoring", self.scoring, SCORINGS),
                                   ("--prompt", self.prompt, PROMPTS)):
            if value not in known:
                raise UsageError(f"unknown {name} {value!r}: choose one of {', '.join(known)}")
        if not self.model:
            raise OpenQAError("--method llm needs --model: a local folder, hub id or .gguf file (or, with --endpoint, "
                              "the server's model name)")
        for name, count, low in (("--top-n", self.top_k, 1), ("--evidence-tokens", self.evidence_tokens, 0),
                                 ("--context", self.context, 64), ("--permutations", self.permutations, 1),
                                 ("--concurrency", self.concurrency, 1), ("--retries", self.retries, 0),
                                 ("--max-tokens", self.max_tokens, 1), ("--threads", self.threads, 1),
                                 ("--llm-batch-size", self.batch_size, 1),
                                 ("--demonstrations", self.demonstrations, 0)):
            if count is not None and count < low:
                raise OpenQAError(f"{name} must be at least {low}, not {count}")
        if self.demonstrations > MAX_DEMONSTRATIONS:
            raise OpenQAError(f"--demonstrations must be at most {MAX_DEMONSTRATIONS}, not {self.demonstrations}: "
                              "each is a whole solved question in the prompt")
        if not (math.isfinite(self.timeout) and self.timeout > 0):  # nan passes every comparison
            raise OpenQAError(f"--timeout must be a positive number of seconds, not {self.timeout}")
        if not (math.isfinite(self.temperature) and self.temperature >= 0):
            raise OpenQAError(f"--temperature must be a number, 0 or more, not {self.temperature}")
        if self.endpoint is not None:
            check_endpoint(self.endpoint)
        for flag, given in (("--concurrency", self.concurrency > 1), ("--llm-batch-size", (self.batch_size or 1) > 1),
                            ("--no-prompt-reuse", not self.prompt_reuse)):
            if given and self.runs_in not in ONLY_FOR[flag]:
                runners = " and ".join(RUNNERS[r] for r in ONLY_FOR[flag])
                raise OpenQAError(f"{flag} applies to {runners}, not to {RUNNERS[self.runs_in]}")

    @property
    def runs_in(self) -> str:
        """Where the model runs (a key of ``RUNNERS``), from ``--endpoint`` and ``--model``: decided here
        once, for the flags' checks and for ``openqa.llm.registry``, which opens its backend."""
        assert self.model is not None  # __post_init__ refuses a missing model
        if self.endpoint:
            return "endpoint"
        return "llama.cpp" if self.model.lower().endswith(".gguf") else "transformers"

    @property
    def top(self) -> int:
        """Paragraphs retrieved (for the question or per option)."""
        return self.top_k or DEFAULT_TOP.get(self.evidence, 0)

    @property
    def reply_tokens(self) -> int:
        """Tokens a reply may take: one letter, or a generated answer."""
        if self.scoring == "letters":
            return 1
        return self.max_tokens or DEFAULT_MAX_TOKENS[self.prompt]

    def given(self) -> dict[str, Any]:
        """The settings that differ from the defaults (what a result's file name and sources name)."""
        defaults = LLMSettings(model=self.model)
        return {f.name: getattr(self, f.name) for f in fields(self)
                if getattr(self, f.name) != getattr(defaults, f.name) and f.name != "model"}

    def variant(self) -> str:
        """What tells this run's result file from another LLM run's: model, evidence, scoring, prompt,
        K, and the context and reply length when given."""
        assert self.model is not None  # __post_init__ refuses a missing model
        name = Path(self.model).name if not self.endpoint else self.model.replace("/", "_")
        parts = [name.removesuffix(".gguf"), self.evidence, self.scoring]
        if self.scoring == "generate":
            parts.append(self.prompt)
        if self.evidence != "none":
            parts += [self.retriever, f"k{self.top}", f"t{self.evidence_tokens}"]
        if self.demonstrations:
            parts.append(f"demo{self.demonstrations}")
        if self.permutations > 1:
            parts.append(f"perm{self.permutations}")
        if self.temperature:
            parts.append(f"temp{self.temperature:g}-seed{self.seed}")
        if self.context:  # a context given cuts evidence where the model's own would not
            parts.append(f"ctx{self.context}")
        if self.max_tokens:
            parts.append(f"max{self.max_tokens}")
        return "-".join(parts)

    def model_name(self) -> str:
        """The model as a record names it: a local file or folder by its name (no machine path), a hub
        id or a server's model name as given."""
        assert self.model is not None  # __post_init__ refuses a missing model
        path = Path(self.model).expanduser()
        return path.name if not self.endpoint and path.exists() else self.model
