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
  reply cache, backend) one at a time and in batches: questions per second (median, min and max
  of ``--rounds`` alternating rounds, each on a fresh reply cache) and the largest difference of a
  letter probability between the batched and the one-at-a-time replies of the same questions.

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
SMALL_QWEN = {**QWEN_1_5B, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
              "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 4096}
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


def letters(device: str, small: bool = False, questions: int = 512, alone: int = 64, batch_sizes: tuple[int, ...] = (8, 16, 32, 64),
            prompt_tokens: int = 400, rounds: int = 3) -> dict[str, Any]:
    """Questions per second of openqa's LLM reader over a Qwen2.5-1.5B-shaped model on ``device``:
    ``alone`` questions one at a time, ``questions`` in batches of each of ``batch_sizes``, in
    ``rounds`` alternating rounds; and how far the batched letter probabilities are from one at a time."""
    shape = SMALL_QWEN if small else QWEN_1_5B
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "qwen2.5-1.5b-shaped"
        start = time.perf_counter()
        save_chat_model(folder, shape, device)
        built = time.perf_counter() - start
        backend = TransformersBackend(str(folder), device=device, batch_size=1)
        probe = chat_questions(2, prompt_tokens)
        start = time.perf_counter()
        _, _, counts = score(backend, folder, probe, Path(tmp) / "load")  # the weights load at the first prompt
        loaded = time.perf_counter() - start
        around = counts["tokens_in"] / len(probe) - statistics.mean(len(q.question.split()) for q in probe)
        asked = chat_questions(max(questions, alone), round(prompt_tokens - around))  # prompts of ~prompt_tokens
        runs = {1: asked[:alone], **{size: asked[:questions] for size in batch_sizes}}
        for size, chosen in runs.items():  # each batch shape once before the rounds
            backend.batch_size = size
            score(backend, folder, chosen[: 2 * size], Path(tmp) / f"warm-{size}")
        per_second: dict[int, list[float]] = {size: [] for size in runs}
        probabilities: dict[int, list[dict[str, float]]] = {}
        for round_ in range(rounds):
            for size, chosen in runs.items():
                backend.batch_size = size
                seconds, probabilities[size], counts = score(backend, folder, chosen, Path(tmp) / f"round{round_}-{size}")
                per_second[size].append(len(chosen) / seconds)
                if size == 1:
                    tokens = counts["tokens_in"] / len(chosen)
    reference = probabilities[1]
    differences = [abs(batched[i][k] - reference[i][k]) for size, batched in probabilities.items() if size != 1
                   for i in range(len(reference)) for k in reference[i]]
    finite = [d for d in differences if math.isfinite(d)]
    best = max(batch_sizes, key=lambda size: statistics.median(per_second[size]))
    return {
        "dataset": "synthetic (random words, closed book)", "split": None, "method": "llm letters in process (transformers)",
        "n": questions, "accuracy": None, "note": NOTE, "device": device, "device_name": device_name(device),
        "runs_on": backend.runs_on, "shape": {"model_type": "qwen2", **shape},
        "tokenizer": "a Qwen2 byte-level BPE built here (a few thousand tokens; the model's logits span its whole vocabulary)",
        "prompt_tokens_mean": round(tokens, 1), "prompt_tokens_spread": "each question's words within -15%/+15%",
        "build_seconds": round(built, 2), "load_seconds": round(loaded, 2), "rounds": rounds,
        "one_at_a_time": {"questions": alone, "questions_per_second": spread(per_second[1])},
        "batched": {str(size): {"questions": questions, "questions_per_second": spread(per_second[size])} for size in batch_sizes},
        "best_batch_size": best,
        "speedup_best_batch": round(statistics.median(per_second[best]) / statistics.median(per_second[1]), 2),
        "max_abs_difference_batched_vs_one_at_a_time": max(finite) if finite else None,
        "non_finite_differences": len(differences) - len(finite),
        "compared": f"the letter probabilities of the first {alone} questions, every batch size against one at a time",
        "target": ">= 300 questions/s batched on an H100 or H200 (issue 48)",
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
        record = run(args.device, **kwargs)
        path = write_record(record_name, record, command, folder=args.out)
        print(f"{name}: wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
