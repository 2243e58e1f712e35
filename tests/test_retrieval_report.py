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


def test_the_retrieval_report_writes_its_judgments_as_trec_qrels(indexed, tmp_path):
    """``eval --retrieval`` judges every paragraph a retriever found for a question: 1 when it mentions
    the correct option's text, else 0; the questions' topics file carries the same ids."""
    import json

    from openqa.cli import main

    assert main(["eval", "--dataset", "us", "--split", "test", "--retrieval", "--retrievers", "ir-custom",
                 "--output", str(tmp_path), *indexed]) == 0
    # IR-Custom finds the two Micro paragraphs for the first question (the second names Ceftriaxone, its
    # answer) and four for the second, of which only Cardio:1 names Aspirin
    assert (tmp_path / "retrieval-us-test.qrels").read_text().splitlines() == [
        "us-test-1 0 Micro:0 0", "us-test-1 0 Micro:1 1",
        "us-test-2 0 Cardio:0 0", "us-test-2 0 Cardio:1 1", "us-test-2 0 Cardio:2 0", "us-test-2 0 Micro:2 0"]
    topics = (tmp_path / "retrieval-us-test.topics.tsv").read_text().splitlines()
    assert [line.split("\t")[0] for line in topics] == ["us-test-1", "us-test-2"]
    assert "cyclooxygenase" in topics[1]
    report = json.loads((tmp_path / "retrieval-us-test.json").read_text())
    assert report["qrels"] == "retrieval-us-test.qrels" and "correct option" in report["relevance"]
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]  # written whole


def test_the_docs_score_a_search_run_against_the_judgments(indexed, tmp_path, monkeypatch, capsys):
    """docs/retrieval.md's commands and its pytrec_eval snippet, run as a reader runs them (on the tiny data)."""
    import re
    import shlex
    from pathlib import Path

    from openqa.cli import main

    page = (Path(__file__).resolve().parents[1] / "docs" / "retrieval.md").read_text(encoding="utf-8")
    section = page[page.index("## Judgments for a TREC run"):]
    commands = re.search(r"```bash\n(.*?)```", section, flags=re.S).group(1).splitlines()
    snippet = re.search(r"<!-- tested: .*?-->\n```python\n(.*?)```", section, flags=re.S).group(1)
    monkeypatch.chdir(tmp_path)
    for line in commands:
        words = shlex.split(line)
        assert words[0] == "openqa"
        assert main([*words[1:], *indexed]) == 0, line
    capsys.readouterr()
    exec(compile(snippet, "docs/retrieval.md", "exec"), {})
    printed = dict(line.split() for line in capsys.readouterr().out.splitlines())
    assert set(printed) == {"ndcg_cut_10", "P_5", "recip_rank"}
    # the search of the topics file ranks the answer's paragraph second for both questions
    assert float(printed["recip_rank"]) == 0.5 and float(printed["P_5"]) == 0.2
