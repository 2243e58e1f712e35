from openqa.retrieval_report import contains, first_rank


def test_contains_needs_a_contiguous_run():
    assert contains(["a", "b", "c"], ["b", "c"])
    assert not contains(["a", "b", "c"], ["a", "c"])
    assert not contains(["a"], [])


def test_first_rank_is_one_based():
    paragraphs = [["x", "y"], ["aspirin", "dose"], ["aspirin"]]
    assert first_rank(paragraphs, ["aspirin"]) == 2
    assert first_rank(paragraphs, ["heparin"]) is None
