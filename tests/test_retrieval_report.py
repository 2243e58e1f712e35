from openqa.retrieval_report import contains, first_rank


def test_contains_needs_a_contiguous_run():
    assert contains(["a", "b", "c"], ["b", "c"])
    assert not contains(["a", "b", "c"], ["a", "c"])
    assert not contains(["a"], [])


def test_first_rank_is_one_based():
    paragraphs = [["x", "y"], ["aspirin", "dose"], ["aspirin"]]
    assert first_rank(paragraphs, ["aspirin"]) == 2
    assert first_rank(paragraphs, ["heparin"]) is None


def test_chinese_options_match_across_bigram_indexes():
    from types import SimpleNamespace

    from openqa.data import Question
    from openqa.retrieval.base import Hit
    from openqa.retrieval_report import answer_support
    from openqa.scorers.ir import IRScorer
    from openqa.text.tokenize import DEFAULT_CONFIGS, make_tokenizer

    class FakeEngine:
        """Returns the same two paragraphs for every query, with a character + bigram tokenizer."""

        name = "fake"
        manifest = {"lang": "zh"}
        tokenizer = make_tokenizer(DEFAULT_CONFIGS["zh"])
        paragraphs = [SimpleNamespace(text="胃溃疡常见上腹痛"), SimpleNamespace(text="十二指肠溃疡多在空腹时疼痛")]

        def search(self, queries, k, params=None, progress=None):
            return [[Hit(0, 2.0), Hit(1, 1.0)] for _ in queries]

    q = Question("z", "空腹痛最可能是", {"A": "十二指肠溃疡", "B": "胆囊炎"}, "A", "十二指肠溃疡", None, None)
    support = answer_support(IRScorer(FakeEngine()), [q], "full")
    assert support["correct"] == {1: 0.0, 5: 100.0, 10: 100.0, 25: 100.0}  # found in the second paragraph
    assert support["wrong"][25] == 0.0
