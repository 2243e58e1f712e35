"""The models' sections of the GPU benchmark (issue 48): one reader training step on a checkpoint
stored in fp16 (``reader_step``), and letters scored in process, one question at a time against
padded batches (``letters``). Both build the real architectures with random weights from their
configs, so they run on a bare machine with nothing downloaded, and their figures are timings only:

- ``reader_step``: a multiple-choice BERT shaped as all-MiniLM-L6-v2 (its ``config.json`` and
  tokenizer from ``--model-config``, default the packaged model's folder; its weights are not
  read), saved in fp16 safetensors, loaded by openqa's ``MultipleChoiceReader`` (fp32 master
  weights) and trained by openqa's own ``train`` for two epochs: seconds per optimizer step in the
  second (warm) epoch, the precision used, and that the loss is finite and the weights moved.
- ``letters``: a causal LM shaped as Qwen2.5-1.5B (bf16 on a GPU), with a Qwen2 tokenizer and chat
  template built here (no Qwen tokenizer is at hand offline; letters A-D are single tokens as in
  Qwen's), saved and opened by openqa's ``TransformersBackend``; closed-book
  questions of about ``--prompt-tokens`` tokens go through openqa's LLM reader (prompt building,
  reply cache, backend) one at a time and in batches, each way of batching (``WAYS``: openqa's
  row-by-row attention, batches of one length, the masked padding of before issue 61) in each of
  ``--dtypes``: questions per second (median, min and max of ``--rounds`` alternating rounds, each
  on a fresh reply cache), the largest difference of a letter probability between the batched and
  the one-at-a-time replies of the same questions, and the share of them with the same letter.

``--small`` shrinks both shapes (and the work) so that the CPU runs them in seconds (the test).

    python scripts/benchmarks/gpu_models.py --sections reader,letters --device cuda --out DIR
    python scripts/benchmarks/gpu_models.py --sections reader,letters --device cpu --small --out DIR
"""

from __future__ import annotations

import argparse
import math
import statistics
import string
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # scripts/: benchlib

from benchlib import command_line, write_record
from openqa import (
    LLMScorer,
    LLMSettings,
    MultipleChoiceReader,
    Question,
    ReplyCache,
    TrainConfig,
    TransformersBackend,
    resolve_model,
    train_reader,
)

NOTE = "random weights built from the config: timing only"
#: Qwen2.5-1.5B-Instruct's shape (its config.json).
QWEN_1_5B = dict(hidden_size=1536, intermediate_size=8960, num_hidden_layers=28, num_attention_heads=12,
                 num_key_value_heads=2, vocab_size=151936, max_position_embeddings=32768, rope_theta=1000000.0,
                 tie_word_embeddings=True, rms_norm_eps=1e-6)
#: A shape the CPU runs in seconds; weights drawn 5x wider than transformers' default (0.02), so that
#: a model of 2 layers has letter probabilities far from a quarter each, where rounding shows.
SMALL_QWEN = {**QWEN_1_5B, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
              "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 4096, "initializer_range": 0.1}
SMALL_BERT = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64)
#: Qwen's chat template without its tool calls.
QWEN_TEMPLATE = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
                 "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


def device_name(device: str) -> str:
    """The GPU's name, or the CPU's cores."""
    import os

    import torch

    if device.startswith("cuda"):
        return str(torch.cuda.get_device_name(torch.device(device)))
    return f"CPU, {os.cpu_count()} cores, {torch.get_num_threads()} torch threads"


def words(rng: Any, n: int) -> str:
    """``n`` two-letter words drawn with ``rng`` (one token each for ``chat_tokenizer``)."""
    return " ".join(string.ascii_letters[a] + string.ascii_letters[b] for a, b in rng.integers(0, 52, (n, 2)))


# --- one reader training step ------------------------------------------------------------------

def reader_examples(n: int, seed: int) -> list[tuple[Question, dict[str, str]]]:
    """``n`` questions of about 60 words, four options, 300 words of evidence per option (more than
    the reader's 256 tokens: every input is full), answers drawn at random: each with its options' evidence."""
    import numpy as np

    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        options = {letter: words(rng, 3) for letter in "ABCD"}
        answer = "ABCD"[int(rng.integers(4))]
        question = Question(f"r{i}", words(rng, 60), options, answer, options[answer])
        out.append((question, {letter: words(rng, 300) for letter in "ABCD"}))
    return out


def reader_step(device: str, model_config: str | None = None, small: bool = False, steps: int = 16,
                batch_size: int = 2, max_length: int = 256) -> dict[str, Any]:
    """openqa's reader training on an fp16-stored MiniLM-shaped multiple-choice BERT on ``device``:
    ``steps`` optimizer steps (of ``batch_size`` questions) an epoch, two epochs; the figures of the second."""
    import torch
    from transformers import AutoTokenizer, BertConfig, BertForMultipleChoice

    source = model_config or resolve_model("all-MiniLM-L6-v2", None)
    config = BertConfig.from_pretrained(source)
    if small:
        config.update(SMALL_BERT)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "fp16-checkpoint"
        torch.manual_seed(0)
        BertForMultipleChoice(config).half().save_pretrained(folder)
        AutoTokenizer.from_pretrained(source).save_pretrained(folder)
        reader = MultipleChoiceReader("minilm-shaped", path=str(folder), max_length=max_length)
        reader.model.to(torch.device(device))
        weights = sorted({str(p.dtype).removeprefix("torch.") for p in reader.model.parameters()})
        before = {name: p.detach().clone() for name, p in reader.model.named_parameters()}
        settings = TrainConfig(epochs=2, lr=2e-5, batch_size=batch_size, effective_batch=batch_size, warmup=0.0)
        start = time.perf_counter()
        result = train_reader(reader, reader_examples(steps * batch_size, 0), reader_examples(batch_size, 1), settings,
                              Path(tmp) / "run")
        seconds = time.perf_counter() - start
        moved = sum(not torch.equal(p.detach(), before[name]) for name, p in reader.model.named_parameters())
        warm = result["epochs"][1]
    return {
        "dataset": "synthetic (random words)", "split": None, "method": "reader training step (bert, fp16-stored checkpoint)",
        "n": steps * batch_size, "accuracy": None, "note": NOTE, "device": device, "device_name": device_name(device),
        "shape": {k: getattr(config, k) for k in ("hidden_size", "num_hidden_layers", "num_attention_heads",
                                                  "intermediate_size", "vocab_size")},
        "stored_dtype": "float16", "master_weights": weights, "precision": reader.precision,
        "loss_scaling": reader.precision == "fp16", "batch_size": batch_size, "max_length": max_length,
        "steps_per_epoch": steps, "seconds_per_step": round(warm["seconds"] / steps, 4),
        "examples_per_second": warm["examples_per_second"], "first_epoch_seconds": result["epochs"][0]["seconds"],
        "seconds_in_all": round(seconds, 2), "losses": [e["loss"] for e in result["epochs"]],
        "loss_finite": all(math.isfinite(e["loss"]) for e in result["epochs"]),
        "parameters_moved": f"{moved} of {len(before)}",
        "what": "seconds per optimizer step of openqa's train() in its second epoch (the first warms up), "
                "its selection pass of one batch included",
    }


# --- letters one at a time and in batches ---------------------------------------------------------

def chat_tokenizer() -> Any:
    """A Qwen2 tokenizer (byte-level BPE, the class transformers opens for a qwen2 model) built here:
    the 256 byte symbols, and merges that make every space + two ASCII letters one token (" Ab": the
    words of the questions) and every space + letter one (" A": the letters, single tokens as in
    Qwen's own); Qwen's special tokens and a Qwen-style chat template."""
    from tokenizers import AddedToken, pre_tokenizers
    from transformers import Qwen2Tokenizer

    vocab = {symbol: i for i, symbol in enumerate(sorted(pre_tokenizers.ByteLevel.alphabet()))}
    merges = [("Ġ", a) for a in string.ascii_letters] + [("Ġ" + a, b) for a in string.ascii_letters for b in string.ascii_letters]
    for left, right in merges:
        vocab[left + right] = len(vocab)
    tokenizer = Qwen2Tokenizer(vocab=vocab, merges=merges, eos_token="<|im_end|>", pad_token="<|endoftext|>")
    tokenizer.add_tokens([AddedToken(token, special=True) for token in ("<|im_start|>", "<|im_end|>")])
    tokenizer.chat_template = QWEN_TEMPLATE
    return tokenizer


def save_chat_model(folder: Path, shape: dict[str, Any], device: str) -> None:
    """A Qwen2 causal LM of ``shape`` with random weights (bf16 on a GPU) and ``chat_tokenizer``
    (its ids are a few thousand of the config's vocabulary; the model computes logits over all),
    saved in ``folder``."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    tokenizer = chat_tokenizer()
    tokenizer.save_pretrained(folder)
    config = Qwen2Config(**shape, eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id)
    torch.manual_seed(0)
    with torch.device(device):
        model = Qwen2ForCausalLM(config)
    model.to(torch.bfloat16 if device.startswith("cuda") else torch.float32).save_pretrained(folder)
    del model
    if device.startswith("cuda"):
        torch.cuda.empty_cache()


def chat_questions(n: int, words_each: int) -> list[Question]:
    """``n`` questions of about ``words_each`` words (each within -15%/+15% of it, one token a word:
    a batch pads to its longest), four options of four words."""
    import numpy as np

    rng = np.random.default_rng(0)
    out = []
    for i in range(n):
        options = {letter: words(rng, 4) for letter in "ABCD"}
        answer = "ABCD"[int(rng.integers(4))]
        length = max(1, int(words_each * rng.uniform(0.85, 1.15)))
        out.append(Question(f"g{i}", words(rng, length), options, answer, options[answer]))
    return out


def score(backend: TransformersBackend, folder: Path, questions: list[Question], cache: Path,
          ) -> tuple[float, list[dict[str, float]], dict[str, Any]]:
    """Seconds openqa's LLM reader takes to score ``questions`` closed book (a fresh reply cache in
    ``cache``: every prompt goes to the model), each question's letter probabilities, and its counts."""
    import torch

    scorer = LLMScorer(backend, LLMSettings(model=str(folder), evidence="none"), ReplyCache(cache))
    start = time.perf_counter()
    results = scorer.score(questions, progress=False)
    if backend.device.startswith("cuda"):
        torch.cuda.synchronize()
    return time.perf_counter() - start, [r.scores for r in results], scorer.stats


def spread(values: list[float]) -> dict[str, float]:
    return {"median": round(statistics.median(values), 2), "min": round(min(values), 2), "max": round(max(values), 2)}


class MaskedPadding(TransformersBackend):
    """openqa's batched letters before issue 61, the baseline the ``padded`` way measures: the rows
    padded on the right and masked, one attention over the batch's width for all of them."""

    def _last_logits(self, rows: list[Any]) -> Any:
        import torch

        width = max(map(len, rows))
        ids = torch.zeros((len(rows), width), dtype=torch.long)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        for r, row in enumerate(rows):
            ids[r, : len(row)] = torch.tensor(row)
            mask[r, : len(row)] = 1
        last = torch.tensor([len(row) - 1 for row in rows])
        ends = torch.unique(last)
        with torch.inference_mode():
            logits = self.model(input_ids=ids.to(self.device), attention_mask=mask.to(self.device),
                                logits_to_keep=ends.to(self.device)).logits
        return logits[torch.arange(len(rows), device=logits.device), torch.searchsorted(ends, last).to(logits.device)]


#: How letters can be batched: openqa's default (padded rows, attention row by row), batches of one
#: prompt length (no padding), and the masked padded batches of before issue 61.
WAYS = {"rows": "padded on the right, attention row by row (openqa's default)",
        "lengths": "batches of one prompt length, no padding",
        "padded": "padded and masked, one attention over the batch (before issue 61)"}


def differences(batched: list[dict[str, float]], alone: list[dict[str, float]]) -> dict[str, Any]:
    """The largest difference of a letter probability between ``batched`` and ``alone`` (the same
    questions' one-at-a-time probabilities, which come first in ``batched``), the non-finite ones,
    and the share of questions whose most likely letter is the same."""
    found = [abs(b[k] - a[k]) for b, a in zip(batched, alone) for k in a]
    finite = [d for d in found if math.isfinite(d)]
    same = [max(b, key=b.__getitem__) == max(a, key=a.__getitem__) for b, a in zip(batched, alone) if a and b]
    return {"max_abs_difference": max(finite) if finite else None, "non_finite": len(found) - len(finite),
            "identical_letters": round(statistics.mean(same), 4) if same else None}


def letters(device: str, small: bool = False, questions: int = 512, alone: int = 64, batch_sizes: tuple[int, ...] = (8, 16, 32, 64),
            prompt_tokens: int = 400, rounds: int = 3, ways: tuple[str, ...] = tuple(WAYS),
            dtypes: tuple[str, ...] | None = None, shape: dict[str, Any] | None = None) -> dict[str, Any]:
    """Questions per second of openqa's LLM reader over a Qwen2.5-1.5B-shaped model (or ``shape``) on
    ``device``: ``alone`` questions one at a time, ``questions`` in batches of each of
    ``batch_sizes`` batched each of the ``ways`` (``WAYS``), in each of ``dtypes`` (default: the
    device's own), in ``rounds`` alternating rounds; and how far the batched letter probabilities
    are from one at a time. The top-level figures are the device's own dtype (else the first)
    batched openqa's way (``rows``)."""
    shape = shape or (SMALL_QWEN if small else QWEN_1_5B)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "qwen2.5-1.5b-shaped"
        start = time.perf_counter()
        save_chat_model(folder, shape, device)
        built = time.perf_counter() - start
        default = TransformersBackend(str(folder), device=device, batch_size=1)
        own = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}[str(default.dtype).removeprefix("torch.")]
        dtypes = dtypes or (own,)
        probe = chat_questions(2, prompt_tokens)
        start = time.perf_counter()
        _, _, counts = score(default, folder, probe, Path(tmp) / "load")  # the weights load at the first prompt
        loaded = time.perf_counter() - start
        around = counts["tokens_in"] / len(probe) - statistics.mean(len(q.question.split()) for q in probe)
        asked = chat_questions(max(questions, alone), round(prompt_tokens - around))  # prompts of ~prompt_tokens
        backends: dict[tuple[str, str], TransformersBackend] = {}
        for dtype in dtypes:
            weights = None
            for way in ("one", *ways):
                backend = (MaskedPadding if way == "padded" else TransformersBackend)(str(folder), device=device, batch_size=1, dtype=dtype)
                backend.letters_batching = "lengths" if way == "lengths" else "rows"
                if weights is not None:
                    backend._model = weights  # the same weights, loaded once a dtype
                weights = backend.model
                backends[dtype, way] = backend
        runs = {(dtype, way, 1 if way == "one" else size): asked[:alone] if way == "one" else asked[:questions]
                for dtype, way in backends for size in ((1,) if way == "one" else batch_sizes)}
        for (dtype, way, size), chosen in runs.items():  # each batch shape once before the rounds
            backends[dtype, way].batch_size = size
            score(backends[dtype, way], folder, chosen[: 2 * size], Path(tmp) / f"warm-{dtype}-{way}-{size}")
        per_second: dict[tuple[str, str, int], list[float]] = {run: [] for run in runs}
        probabilities: dict[tuple[str, str, int], list[dict[str, float]]] = {}
        for round_ in range(rounds):
            for (dtype, way, size), chosen in runs.items():
                backends[dtype, way].batch_size = size
                seconds, probabilities[dtype, way, size], counts = score(
                    backends[dtype, way], folder, chosen, Path(tmp) / f"round{round_}-{dtype}-{way}-{size}")
                per_second[dtype, way, size].append(len(chosen) / seconds)
                if way == "one":
                    tokens = counts["tokens_in"] / len(chosen)
    by_dtype: dict[str, Any] = {}
    for dtype in dtypes:
        reference = probabilities[dtype, "one", 1]
        found = {way: {size: differences(probabilities[dtype, way, size], reference) for size in batch_sizes} for way in ways}
        by_dtype[dtype] = {"one_at_a_time": {"questions": alone, "questions_per_second": spread(per_second[dtype, "one", 1])}, "ways": {
            way: {"batched": {str(size): {"questions": questions, "questions_per_second": spread(per_second[dtype, way, size]),
                                          **found[way][size]} for size in batch_sizes},
                  "max_abs_difference_any_batch": max((f["max_abs_difference"] for f in found[way].values() if f["max_abs_difference"] is not None), default=None),
                  "identical_letters_any_batch": min((f["identical_letters"] for f in found[way].values() if f["identical_letters"] is not None), default=None)}
            for way in ways}}
    main_way = "rows" if "rows" in ways else ways[0]
    top = by_dtype[own if own in by_dtype else dtypes[0]]
    batched = top["ways"][main_way]["batched"]
    best = max(batch_sizes, key=lambda size: batched[str(size)]["questions_per_second"]["median"])
    return {
        "dataset": "synthetic (random words, closed book)", "split": None, "method": "llm letters in process (transformers)",
        "n": questions, "accuracy": None, "note": NOTE, "device": device, "device_name": device_name(device),
        "runs_on": default.runs_on, "shape": {"model_type": "qwen2", **shape},
        "tokenizer": "a Qwen2 byte-level BPE built here (a few thousand tokens; the model's logits span its whole vocabulary)",
        "prompt_tokens_mean": round(tokens, 1), "prompt_tokens_spread": "each question's words within -15%/+15%",
        "build_seconds": round(built, 2), "load_seconds": round(loaded, 2), "rounds": rounds,
        "one_at_a_time": top["one_at_a_time"],
        "batched": {size: {"questions": row["questions"], "questions_per_second": row["questions_per_second"]} for size, row in batched.items()},
        "best_batch_size": best,
        "speedup_best_batch": round(batched[str(best)]["questions_per_second"]["median"] / top["one_at_a_time"]["questions_per_second"]["median"], 2),
        "max_abs_difference_batched_vs_one_at_a_time": top["ways"][main_way]["max_abs_difference_any_batch"],
        "non_finite_differences": sum(row["non_finite"] for row in batched.values()),
        "identical_letters_batched_vs_one_at_a_time": top["ways"][main_way]["identical_letters_any_batch"],
        "batched_way": WAYS[main_way], "ways": {way: WAYS[way] for way in ways}, "by_dtype": by_dtype,
        "compared": f"the letter probabilities of the first {alone} questions, every batch size and way against one at a "
                    "time in the same dtype",
        "target": ">= 300 questions/s batched on an H100 or H200 (issue 48), the largest difference against one at a time "
                  "<= 1e-4 (issue 61)",
    }


#: Each section and its function; its record is ``bench-gpu-<section>-<cuda|cpu>.json``, as bench_gpu.py names its own.
SECTIONS = {"reader": reader_step, "letters": letters}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sections", default="reader,letters", help="comma-separated: reader, letters (default: both)")
    parser.add_argument("--device", default="cuda", help="cuda (default), cuda:N or cpu")
    parser.add_argument("--out", type=Path, help="folder of the records (default: eval/results/ where their names belong)")
    parser.add_argument("--small", action="store_true", help="much smaller shapes and work: the CPU runs both in seconds")
    parser.add_argument("--model-config", help="reader: a folder with MiniLM's config.json and tokenizer "
                        "(default: the packaged all-MiniLM-L6-v2; its weights are not read)")
    parser.add_argument("--rounds", type=int, default=3, help="letters: alternating rounds (default: 3)")
    parser.add_argument("--dtypes", help="letters: comma-separated, of fp32, bf16, fp16 (default: the device's own)")
    parser.add_argument("--ways", help=f"letters: comma-separated ways of batching, of {', '.join(WAYS)} (default: all)")
    parser.add_argument("--batch-sizes", help="letters: comma-separated batch sizes (default: 8,16,32,64; --small: 2,4)")
    parser.add_argument("--questions", type=int, help="letters: questions batched (default: 512; --small: 12)")
    parser.add_argument("--alone", type=int, help="letters: questions one at a time, compared (default: 64; --small: 6)")
    parser.add_argument("--prompt-tokens", type=int, help="letters: about this many tokens a prompt (default: 400; --small: 300)")
    args = parser.parse_args(argv)
    chosen = [s.strip() for s in args.sections.split(",") if s.strip()]
    unknown = sorted(set(chosen) - set(SECTIONS))
    if unknown:
        parser.error(f"unknown sections {unknown}: choose among {sorted(SECTIONS)}")
    command = command_line("scripts/benchmarks/gpu_models.py", sys.argv[1:] if argv is None else argv, folders=("--out", "--model-config"))
    small_work: dict[str, dict[str, Any]] = {
        "reader": {"steps": 2, "max_length": 64},
        "letters": {"questions": 12, "alone": 6, "batch_sizes": (2, 4), "prompt_tokens": 300},
    }
    for name in chosen:
        run = SECTIONS[name]
        record_name = f"bench-gpu-{name}-{'cuda' if args.device.startswith('cuda') else 'cpu'}.json"
        kwargs: dict[str, Any] = {"small": args.small, **(small_work[name] if args.small else {})}
        if name == "reader":
            kwargs["model_config"] = args.model_config
        else:
            kwargs["rounds"] = args.rounds
            given = {"dtypes": args.dtypes, "ways": args.ways, "batch_sizes": args.batch_sizes}
            kwargs.update({key: tuple(int(v) if key == "batch_sizes" else v for v in value.split(",")) for key, value in given.items() if value})
            kwargs.update({key: value for key, value in (("questions", args.questions), ("alone", args.alone),
                                                                          ("prompt_tokens", args.prompt_tokens)) if value})
        record = run(args.device, **kwargs)
        path = write_record(record_name, record, command, folder=args.out)
        print(f"{name}: wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
