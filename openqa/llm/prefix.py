"""Reusing the rows of the previous prompt that llama.cpp keeps in its KV cache, only where the
letter probabilities stay bit-identical to evaluating the prompt from an empty cache (a "cold" run).

llama.cpp's CPU kernels give a prompt row (one token's hidden states) different low bits
depending on the batch it was computed in, and the int8 rounding of activations carries those
bits up to the letters (0.01-0.03 on Qwen2.5-1.5B when the shared system prompt is reused at an
arbitrary cut). Two things about the batch matter, measured on xllamacpp 2026.10.11549 (AVX2):

- the repacked quantized matrix products take rows in groups of ``ROW_GROUP`` counted from the
  start of each micro-batch (``n_ubatch`` rows), and the rows left over at its end go through
  another kernel;
- flash attention takes its tiled kernel for micro-batches of at least ``TILED_ROWS`` rows and its
  row-by-row kernel below that.

Everything else is row by row (norms, RoPE, attention over the cache's cells in order, the
letters' logits from the last row). So a row gives the same bits as in a cold run when it is in a
full group and in a micro-batch on the same side of ``TILED_ROWS`` in both. ``plan`` picks the
longest such reuse: a multiple of ``ROW_GROUP`` rows, all computed exactly (``exact_rows``), after
which the rest of the prompt is cut into micro-batches whose rows are of the same kinds as the cold
run's. Where none fits (a prompt too short to leave ``TILED_ROWS`` rows), the prompt is run cold.
``tests/test_llamacpp_prefix.py`` checks the rule and, on a real GGUF file, the equality."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

#: Rows the repacked matrix products quantize and multiply together, counted from a micro-batch's start.
ROW_GROUP = 4
#: Rows from which a micro-batch takes the tiled flash-attention kernel.
TILED_ROWS = 64
#: llama.cpp's micro-batch (``n_ubatch``) as openqa runs it: the default, which cold runs use.
UBATCH = 512


def row_kinds(start: int, end: int, ubatch: int = UBATCH) -> list[tuple[bool, bool]]:
    """For each row of ``start..end-1`` evaluated in one request (micro-batches of ``ubatch`` rows
    from ``start``): whether it is in a full group of the matrix products, and whether its
    micro-batch takes the tiled attention kernel."""
    kinds = []
    for first in range(start, end, ubatch):
        size = min(ubatch, end - first)
        full = size - size % ROW_GROUP
        kinds += [(i < full, size >= TILED_ROWS) for i in range(size)]
    return kinds


def exact_rows(kinds: Sequence[tuple[bool, bool]], reused: int) -> int:
    """How many leading rows of a prompt, after ``reused`` reused exact rows and rows of ``kinds``
    evaluated, another prompt with the same tokens may reuse: rows in full groups of tiled
    micro-batches, up to the first that is not, in whole groups."""
    n = reused
    for full, tiled in kinds:
        if not (full and tiled):
            break
        n += 1
    return n - n % ROW_GROUP


def common_length(a: Sequence[int], b: Sequence[int]) -> int:
    """Length of the common start of two token sequences."""
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def plan(cached: Sequence[int], exact: int, prompt: Sequence[int], ubatch: int = UBATCH) -> int:
    """Rows of ``prompt`` to reuse from a cache holding ``cached`` (its first ``exact`` rows
    computed exactly) so that every row gives the cold run's bits: the longest whole-group common
    start such that the rows left are of the same kinds as in a cold run; 0 for a cold run."""
    reuse = min(common_length(cached, prompt), exact, len(prompt) - 1)
    reuse -= reuse % ROW_GROUP
    cold = row_kinds(0, len(prompt), ubatch)
    while reuse > 0:
        # reused rows were computed in full groups of tiled micro-batches: the cold run must agree
        if all(kind == (True, True) for kind in cold[:reuse]) and cold[reuse:] == row_kinds(reuse, len(prompt), ubatch):
            return reuse
        reuse -= ROW_GROUP
    return 0


class Reuse:
    """What llama.cpp's one sequence holds (``cached``: the last prompt's tokens; ``exact``: how
    many lead them computed as a cold run computes them), and asking with it (``ask``). ``on``
    turns false for good when llama.cpp's own tokens turn out not to be the tokenizer's."""

    def __init__(self) -> None:
        self.on = True
        self.cached: list[int] = []
        self.exact = 0

    def ask(self, server: Any, body: dict[str, Any], prompt: list[int]) -> Any:
        """llama.cpp's (``server``: an ``xllamacpp.Server``) reply to the chat completion ``body``
        (sent with ``cache_prompt`` false) whose prompt has the tokens ``prompt``, reusing the rows
        ``plan`` allows. llama.cpp reuses the longest common start it holds, so where more matches
        than the plan allows, a request of the planned rows and one other token cuts it there first
        (its time is counted with the reply's). llama.cpp's own counts of reused and prompt tokens
        must then be the plan's; where they are not, its tokens are not the tokenizer's: the
        prompt is asked again from an empty cache, and reuse stops."""
        reuse = plan(self.cached, self.exact, prompt)
        spent = 0.0
        data = None
        if reuse and common_length(self.cached, prompt) > reuse:
            other = next(t for t in range(3) if t not in (self.cached[reuse], prompt[reuse]))
            cut = server.handle_completions({"prompt": [*prompt[:reuse], other], "n_predict": 0, "cache_prompt": True})
            spent += model_ms(cut)
            if counts(cut)[0] != reuse:
                self.on = self.on and failed(cut)  # an error says nothing of the tokens
                reuse = 0
        if reuse:
            data = server.handle_chat_completions({**body, "cache_prompt": True})
            if counts(data) != (reuse, len(prompt)):
                spent += model_ms(data)
                self.on = self.on and failed(data)
                reuse, data = 0, None
        if data is None:
            data = server.handle_chat_completions(body)
            if counts(data)[1] not in (None, len(prompt)):
                self.on = False
        held = counts(data) == (reuse, len(prompt))
        self.cached, self.exact = (prompt, exact_rows(row_kinds(reuse, len(prompt)), reuse)) if held else ([], 0)
        if spent and isinstance(data, dict) and isinstance(data.get("timings"), dict):
            data["timings"]["prompt_ms"] = data["timings"].get("prompt_ms", 0.0) + spent
        return data


def failed(data: Any) -> bool:
    """Whether a reply of llama.cpp is an error."""
    return isinstance(data, dict) and bool(data.get("error"))


def counts(data: Any) -> tuple[int | None, int | None]:
    """llama.cpp's counts in a reply: prompt tokens reused from its cache, and the prompt's tokens (None: not said)."""
    if not isinstance(data, dict):
        return None, None
    timings, usage = data.get("timings"), data.get("usage")
    reused = timings.get("cache_n") if isinstance(timings, dict) else None
    total = usage.get("prompt_tokens") if isinstance(usage, dict) else None
    return reused if isinstance(reused, int) else None, total if isinstance(total, int) else None


def model_ms(data: Any) -> float:
    """llama.cpp's own milliseconds for a request's prompt and reply (0 where it does not say)."""
    timings = data.get("timings") if isinstance(data, dict) else None
    if not isinstance(timings, dict):
        return 0.0
    return float(sum(v for v in (timings.get("prompt_ms"), timings.get("predicted_ms")) if isinstance(v, (int, float))))
