"""The custom BM25 engine: scores checked against the Appendix B formula computed by hand, and
the compiled search against the sparse matrix product and full sort it replaced (same hits, same
order, same scores), on fixtures and on the real English index."""

import json
import math

import numpy as np
import pytest
import scipy.sparse as sp

from openqa.corpus.paragraphs import Paragraph
from openqa.data import load_questions
from openqa.errors import IndexMismatchError, OpenQAError
from openqa.retrieval.custom_bm25 import (
    QUERY_PRESETS,
    CustomBM25,
    DocParams,
    QueryParams,
    common_prefix_length,
    shared_runs,
    splits_at_spaces,
)
from openqa.retrieval.custom_kernel import LANES
from openqa.retrieval.manifest import atomic_folder
from openqa.retrieval.registry import build_index, open_index
from openqa.scorers.ir import option_queries
from openqa.text.tokenize import EnglishTokenizer, Tokenizer, make_tokenizer

DOCS = ["fever fever cough", "fever rash", "cough cough cough rash headache"]


#: The tokenizer of the hand-worked examples: English words, unstemmed.
PLAIN = EnglishTokenizer(stem=False)


def build(tmp_path, docs=DOCS, tokenizer: Tokenizer = PLAIN):
    folder = tmp_path / "idx"
    paragraphs = [Paragraph(f"B:{i}", "B", t) for i, t in enumerate(docs)]
    CustomBM25.build(folder, paragraphs, tokenizer, {"lang": tokenizer.lang, "corpus_checksum": "x"}, params=DocParams(0.9, 0.35))
    return folder


def dense_scores(engine: CustomBM25, text: str, params: QueryParams) -> np.ndarray:
    """Every paragraph's score for one query (0 where it has none of the query's terms)."""
    ranking = engine.rank(engine.encode([text]), engine.weights.shape[1], params)
    scores = np.zeros(engine.weights.shape[1])
    scores[ranking.rows[0, : ranking.counts[0]]] = ranking.scores[0, : ranking.counts[0]]
    return scores


def sparse_product_hits(engine: CustomBM25, queries: list[str], k: int, params: QueryParams) -> list[list[tuple[int, float]]]:
    """The engine before the compiled kernel: the queries searched together as one sparse product
    ``weights[rows].T @ query_weights`` (query weights from float32 counts), then each row fully
    sorted, higher score first, then lower paragraph row, positive scores only."""
    tok = engine.tokenizer
    term_lists = [tok.tokenize(tok.prepare_query(q)) for q in queries]
    lengths = np.array([len(t) for t in term_lists], dtype=np.float64)
    relative = lengths / params.avg_len if params.avg_len else np.ones(len(lengths))  # None: each query's own length
    ids = [[engine.vocab[t] for t in terms if t in engine.vocab] for terms in term_lists]
    rows = np.unique(np.concatenate([np.asarray(i, dtype=np.int64) for i in ids]))
    if len(rows) == 0:
        return [[] for _ in queries]
    counts = np.zeros((len(queries), len(rows)), np.float32)
    for q, qids in enumerate(ids):
        np.add.at(counts[q], np.searchsorted(rows, qids), 1.0)
    norm = params.kq * (1 - params.bq + params.bq * relative[:, None])
    weights = (counts * (params.kq + 1) / (counts + norm)).astype(np.float32)
    w = engine.weights
    matrix = sp.csr_matrix((w.data, w.indices, w.indptr), shape=w.shape)  # scipy checks the engine's own arrays
    scores = np.asarray((matrix[rows].T @ weights.T).T)
    order = [np.lexsort((np.arange(len(row)), -row))[:k] for row in scores]
    return [[(int(i), float(row[i])) for i in best if row[i] > 0] for row, best in zip(scores, order)]


def fitted(engine: CustomBM25, queries: list[str], params: QueryParams = QueryParams()) -> QueryParams:
    """``params`` with avgQL, the paper's average query length, over ``queries``."""
    return QueryParams(params.kq, params.bq, float(engine.encode(queries).lengths.mean()))


def assert_same_hits(engine: CustomBM25, groups: list[list[str]], k: int, params: QueryParams) -> None:
    """The engine's hits for all ``groups`` searched at once equal, per group, the sparse product's:
    same rows in the same order, scores equal within float32 rounding."""
    hits = iter(engine.search([q for g in groups for q in g], k, params))
    for group in groups:
        for expected in sparse_product_hits(engine, group, k, params):
            got = next(hits)
            assert [h.index for h in got] == [i for i, _ in expected]
            np.testing.assert_allclose([h.score for h in got], [s for _, s in expected], rtol=1e-6)


def test_scores_match_the_papers_formula_worked_by_hand(tmp_path):
    """Appendix B: s(Q,D) = sum BM25(q,D) * IDF(q) * query saturation, BM25 itself holding IDF(q).

    Corpus DOCS: N = 3, lengths 3, 2, 5, avgDL = 10/3; df(fever) = 2, df(headache) = 1.
      IDF(fever)    = ln(1 + (3 - 2 + .5) / (2 + .5)) = ln 1.6    = 0.470004
      IDF(headache) = ln(1 + (3 - 1 + .5) / (1 + .5)) = ln 2.6667 = 0.980829
    Document side f(kD+1) / (f + kD(1 - bD + bD dl/avgDL)), kD 0.9, bD 0.35:
      fever in D0 (f 2, dl 3):    3.8 / (2 + 0.9 * 0.965) = 1.324734
      fever in D1 (f 1, dl 2):    1.9 / (1 + 0.9 * 0.860) = 1.071026
      headache in D2 (f 1, dl 5): 1.9 / (1 + 0.9 * 1.175) = 0.923451
    Query "fever fever headache" (|Q| 3, avgQL 2), kQ 0.4, bQ 0.7: norm = 0.4 * (0.3 + 0.7 * 1.5) = 0.54
      fever (f 2): 2.8 / 2.54 = 1.102362;  headache (f 1): 1.4 / 1.54 = 0.909091
    Scores, IDF squared:
      D0 = 0.470004^2 * 1.324734 * 1.102362 = 0.322593
      D1 = 0.470004^2 * 1.071026 * 1.102362 = 0.260811
      D2 = 0.980829^2 * 0.923451 * 0.909091 = 0.807622
    """
    engine = CustomBM25.load(build(tmp_path), {"corpus_checksum": "x"}, "hint")
    scores = dense_scores(engine, "fever fever headache", QueryParams(kq=0.4, bq=0.7, avg_len=2.0))
    np.testing.assert_allclose(scores, [0.322593, 0.260811, 0.807622], rtol=2e-5)


def test_query_saturation_by_formula(tmp_path):
    engine = CustomBM25.load(build(tmp_path), {"corpus_checksum": "x"}, "hint")
    scores = dense_scores(engine, "fever fever rash", QueryParams(kq=0.4, bq=0.7, avg_len=2.0))
    # doc lengths 3, 2, 5 -> avgdl 10/3; df(fever)=2, df(rash)=2; N=3
    kd, bd, kq, bq = 0.9, 0.35, 0.4, 0.7
    idf = math.log(1 + (3 - 2 + 0.5) / (2 + 0.5))
    def doc(tf, dl):
        return idf * tf * (kd + 1) / (tf + kd * (1 - bd + bd * dl / (10 / 3)))  # BM25(q, D), IDF included
    def qry(tf, ql=3, avg=2.0):
        return idf * tf * (kq + 1) / (tf + kq * (1 - bq + bq * ql / avg))  # IDF(q) x query saturation
    expected = [
        qry(2) * doc(2, 3),
        qry(2) * doc(1, 2) + qry(1) * doc(1, 2),
        qry(1) * doc(1, 5),
    ]
    np.testing.assert_allclose(scores, expected, rtol=1e-5)


def test_index_with_other_scoring_is_refused(tmp_path):
    folder = build(tmp_path)
    manifest = json.loads((folder / "manifest.json").read_text())
    del manifest["scoring"]  # an index written before the paper's IDF-twice formula
    (folder / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(IndexMismatchError, match="scoring=None.*rebuild with `openqa index --lang en`"):
        CustomBM25.load(folder, {}, "openqa index --lang en")


def test_search_ranks_and_drops_non_matching(tmp_path):
    engine = CustomBM25.load(build(tmp_path), {}, "hint")
    hits = engine.search(["headache", "nothing matches"], k=3)
    assert [h.index for h in hits[0]] == [2]
    assert hits[1] == []
    assert engine.paragraphs[hits[0][0].index].pid == "B:2"


def test_a_querys_hits_never_depend_on_the_queries_searched_with_it(tmp_path):
    """avgQL is a given number (tuning measures it: ``query_statistics``, the mean length of a set of
    queries); without one each query is its own average. Either way a query searched with others
    gets exactly the hits it gets alone."""
    engine = CustomBM25.load(build(tmp_path), {}, "hint")
    queries = ["fever", "fever rash cough", "headache fever"]
    assert engine.query_statistics(queries[:2]) == {"avg_ql": 2.0}
    assert engine.query_statistics([]) == {}
    for params in (QueryParams(), QueryParams(avg_len=2.0), QueryParams(avg_len=9.0)):
        together = engine.search(queries, 3, params)
        assert together == [engine.search([q], 3, params)[0] for q in queries]
    assert engine.search(queries, 3, QueryParams(avg_len=2.0)) != engine.search(queries, 3, QueryParams(avg_len=9.0))
    # without avgQL a query is its own average: "fever rash cough" as with avgQL 3
    assert engine.search(queries[1:2], 3) == engine.search(queries[1:2], 3, QueryParams(avg_len=3.0))


def test_mismatched_settings_or_corpus_are_refused(tmp_path):
    folder = build(tmp_path)
    with pytest.raises(IndexMismatchError, match="corpus_checksum"):
        CustomBM25.load(folder, {"corpus_checksum": "other"}, "openqa index --lang en")
    with pytest.raises(IndexMismatchError, match="rebuild with `openqa index --lang en`"):
        CustomBM25.load(folder, {"tokenizer": {"lang": "en", "ngram": 2}}, "openqa index --lang en")


def test_missing_index_says_how_to_build(tmp_path):
    with pytest.raises(OpenQAError, match="build it with"):
        CustomBM25.load(tmp_path / "none", {}, "openqa index --lang en")


def test_interrupted_build_keeps_the_old_index(tmp_path):
    folder = build(tmp_path)
    before = json.loads((folder / "manifest.json").read_text())
    with pytest.raises(RuntimeError):
        with atomic_folder(folder) as scratch:
            (scratch / "partial").write_text("half")
            raise RuntimeError("interrupted")
    assert json.loads((folder / "manifest.json").read_text()) == before
    assert not (folder / "partial").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["idx"]


def test_rebuild_replaces_index(tmp_path):
    build(tmp_path)
    folder = build(tmp_path, ["single document about rash"])
    assert json.loads((folder / "manifest.json").read_text())["paragraphs"] == 1


def random_corpus(seed: int, n_docs: int = 400) -> tuple[list[str], list[str]]:
    """Paragraphs over 40 words of skewed frequency, a quarter of them repeated (ties), and queries:
    questions of 4 and 5 options (question + option), lone queries, unknown and empty ones."""
    rng = np.random.default_rng(seed)
    words = [f"w{i}" for i in range(40)]
    p = 1.0 / np.arange(1, 41)
    docs = [" ".join(rng.choice(words, rng.integers(1, 12), p=p / p.sum())) for _ in range(n_docs)]
    docs += docs[: n_docs // 4]
    queries = []
    for n_options in [4] * 30 + [5] * 10 + [1] * 10:
        stem = " ".join(rng.choice(words, rng.integers(3, 15)))
        queries += [f"{stem} {' '.join(rng.choice(words, rng.integers(1, 3)))}".strip() for _ in range(n_options)]
    return docs, queries + ["zz unknown", "", "w1", "w1 w1 zz"]


@pytest.mark.parametrize("threads", [1, 2])
def test_hits_equal_the_sparse_product(tmp_path, threads):
    """Groups of 1 to 5 queries (4 lanes and a lone one), ties, k below and above the paragraph
    count, one and two threads (CustomBM25.THREAD_CHUNK lowered so that two threads share the work)."""
    docs, queries = random_corpus(seed=threads)
    engine = CustomBM25.load(build(tmp_path, docs), {}, "hint")
    engine.threads = threads
    engine.THREAD_CHUNK = 4
    groups = [queries[start:stop] for start, stop, _ in shared_runs(queries)]
    assert sorted({len(g) for g in groups}) == [1, 4, 5]
    assert set(np.diff(engine.encode(queries).groups)) == {1, LANES}  # 5 options: 4 + 1
    for k in (1, 10, 200, 1000):
        assert_same_hits(engine, groups, k, fitted(engine, queries))
    assert_same_hits(engine, [queries], 10, QueryParams())  # each query's own length


def test_the_kernel_leaves_its_buffer_clear(tmp_path):
    engine = CustomBM25.load(build(tmp_path, random_corpus(seed=3)[0]), {}, "hint")
    first = engine.search(["w1 w2 w3", "w1 w2 w4"], 5)
    engine.search(["w5 w6 w7 w8"] * 7, 5)
    assert engine.search(["w1 w2 w3", "w1 w2 w4"], 5) == first


def test_k_zero_and_no_queries(tmp_path):
    engine = CustomBM25.load(build(tmp_path), {}, "hint")
    assert engine.search(["fever"], 0) == [[]]
    assert engine.search([], 5) == []


def test_runs_of_queries_sharing_a_question():
    question = "A 45-year-old man has fever and a rash on his palms"
    options = ["Syphilis", "Measles", "Rocky Mountain spotted fever", "Kawasaki disease", "Lyme"]
    other = "A 45-year-old woman has a cough"
    queries = [f"{question} {o}" for o in options] + [other, "Increased renin", "Increased aldosterone"]
    assert common_prefix_length("abcdef", "abcxyz") == 3
    assert common_prefix_length("abc", "abc") == 3
    assert common_prefix_length("abcdef", "abcdxy", 2) == 2 and common_prefix_length("abcdef", "abcxyz", 5) == 3
    assert common_prefix_length("abc", "abcd", 9) == 3 and common_prefix_length("xbc", "abc", 3) == 0
    assert shared_runs(queries) == [(0, 5, len(question)), (5, 6, 0), (6, 8, len("Increased"))]
    assert shared_runs(queries[:1]) == [(0, 1, 0)]
    assert shared_runs([]) == []


@pytest.mark.parametrize("config", [
    {"lang": "en", "ngram": 1, "stem": True},
    {"lang": "en", "ngram": 2, "stem": True},
    {"lang": "zh", "mode": "char", "ngram": 2},
])
def test_question_text_tokenized_once_gives_the_query_terms(tmp_path, config):
    """Terms of a run's shared question, tokenized once, plus each option's: the same terms as
    each whole query (English bigrams span the join, so there every query is tokenized whole)."""
    tokenizer = make_tokenizer(config)
    docs = ["fever rash palms syphilis measles", "發熱 皮疹 梅毒 麻疹 fever", "kawasaki disease rash fever"]
    engine = CustomBM25.load(build(tmp_path, docs, tokenizer), {}, "hint")
    question = "Fever and a RASH on the palms: 發熱和手掌皮疹"
    queries = [f"{question} {o}" for o in ["syphilis", "measles 麻疹", "Kawasaki disease", "梅毒"]]
    together = engine.encode(queries)
    for q, text in enumerate(queries):
        alone = engine.encode([text])
        assert sorted(together.rows[together.starts[q] : together.starts[q + 1]]) == sorted(alone.rows)
        assert together.lengths[q] == alone.lengths[0]
    assert splits_at_spaces(tokenizer) == (config.get("ngram") == 1 or config.get("mode") == "char")


@pytest.mark.parametrize("dataset", ["us", "mainland", "tw"])
def test_real_questions_split_where_their_terms_split(medqa_dir, dataset):
    """On real question texts (traditional Chinese included): each query's terms are the terms of
    the question text its run shares plus those of the rest, whichever query mode."""
    questions = load_questions(dataset, "dev", medqa_dir)[:150]
    lang = "en" if dataset == "us" else "zh"
    tok = make_tokenizer({"en": {"lang": "en", "ngram": 1, "stem": True}, "zh": {"lang": "zh", "mode": "char", "ngram": 2}}[lang])
    terms = lambda text: tok.tokenize(tok.prepare_query(text))  # noqa: E731
    for mode in ("full", "filter"):
        queries = [text for q in questions for text in option_queries(q, mode, lang)]
        runs = shared_runs(queries)
        assert sum(cut > 0 for _, _, cut in runs) >= 0.8 * len(questions)  # most questions shared
        for start, stop, cut in runs:
            for text in queries[start:stop]:
                assert terms(text) == terms(text[:cut]) + terms(text[cut:])


@pytest.fixture(scope="module")
def real_engine(medqa_dir, tmp_path_factory):
    """The English custom index of the real textbooks, built afresh (a few seconds)."""
    indexes = tmp_path_factory.mktemp("indexes")
    build_index(medqa_dir, indexes, "en", "custom")
    return open_index(indexes, "en", "custom", data_dir=medqa_dir)


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["full", "phrases"])
def test_real_index_hits_equal_the_sparse_product(real_engine, medqa_dir, mode):
    """300 US test questions, their option queries searched together on two threads."""
    questions = load_questions("us", "test", medqa_dir)[:300]
    groups = [option_queries(q, mode, "en") for q in questions]
    real_engine.threads = 2
    assert_same_hits(real_engine, groups, 10, fitted(real_engine, [q for g in groups for q in g], QUERY_PRESETS["usmle"]))


@pytest.mark.spawns
def test_the_compiled_kernel_is_cached_in_the_users_cache_folder_not_the_package(tmp_path):
    """numba's default cache sits beside the source: inside an installed package. openqa's goes to
    $XDG_CACHE_HOME/openqa/numba, or where NUMBA_CACHE_DIR says, and leaves numba's setting as it was."""
    import os
    import subprocess
    import sys

    code = ("import numba; from openqa.retrieval import custom_kernel as k; "
            "print(k._query_weight._cache._cache_path); print(repr(numba.config.CACHE_DIR))")
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "xdg")}
    env.pop("NUMBA_CACHE_DIR", None)
    where, setting = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                                    check=True).stdout.splitlines()
    assert where.startswith(str(tmp_path / "xdg" / "openqa" / "numba")) and setting == "''"
    named = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                           env={**env, "NUMBA_CACHE_DIR": str(tmp_path / "mine")}).stdout.splitlines()[0]
    assert named.startswith(str(tmp_path / "mine"))
