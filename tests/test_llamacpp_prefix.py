"""Reusing the previous prompt's rows in llama.cpp (``openqa.llm.prefix``): the rule worked by hand,
the requests it sends to a fake llama.cpp that reuses as the real one does, and on the packaged
SmolLM2 GGUF the letter probabilities of a cold run, with a reuse the rule refuses shown to change
them."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from openqa.cli import main
from openqa.data import Question
from openqa.llm.backends import Request, letter_probabilities
from openqa.llm.prefix import TILED_ROWS, Reuse, common_length, exact_rows, plan, row_kinds
from openqa.llm.prompts import build_messages
from tests.helpers import QUESTIONS, make_data_dir, packaged_gguf

# --- the rule -------------------------------------------------------------------------------


def test_rows_come_in_groups_of_four_and_tiles_from_64_rows():
    kinds = row_kinds(0, 10)
    assert kinds == [(True, False)] * 8 + [(False, False)] * 2  # 10 rows: two groups and two left over; untiled
    kinds = row_kinds(0, 600)  # micro-batches of 512 and 88 rows, both tiled, 88 = 22 groups
    assert kinds == [(True, True)] * 600
    kinds = row_kinds(56, 146)  # 90 rows from row 56: 22 groups, 2 left over
    assert len(kinds) == 90 and kinds[:88] == [(True, True)] * 88 and kinds[88:] == [(False, True)] * 2


def test_exact_rows_stop_at_the_first_row_a_cold_run_may_compute_otherwise():
    assert exact_rows(row_kinds(56, 146), 56) == 144  # the 2 rows left over are not
    assert exact_rows(row_kinds(0, 10), 0) == 0  # untiled
    assert exact_rows(row_kinds(0, 66), 0) == 64


def test_the_plan_reuses_whole_groups_and_leaves_rows_of_a_cold_runs_kinds():
    head = list(range(1000, 1057))  # 57 tokens every prompt starts with
    before = head + list(range(140 - 57))  # the previous prompt: 140 tokens, 140 exact rows
    assert plan(before, 140, head + [7] * 89) == 56  # 146 tokens: 56 reused (of 57 in common), 90 left: tiled
    assert plan(before, 8, head + [7] * 89) == 8  # no more than the exact rows
    assert plan(before, 140, head + [7] * 43) == 36  # 100 tokens: 56 would leave 44 untiled rows; 36 leaves 64
    assert plan(before, 140, head + [7] * 13) == 4  # 70: 4 leaves 66 rows (the last 2 left over, as cold)
    assert plan(before, 140, head[:40] + [7] * 20) == 0  # 60 tokens: a cold run is untiled, reused rows are tiled
    assert plan([], 0, head + [7] * 89) == 0  # nothing held
    # 600 tokens: cold micro-batches 512 + 88; reusing 56 would leave 512 + 32 (untiled); 24 leaves 512 + 64
    assert plan(before, 140, head + [7] * 543) == 24
    assert common_length([1, 2, 3], [1, 2, 4]) == 2


# --- the requests, against a fake llama.cpp ---------------------------------------------------


class FakeLlama:
    """llama.cpp's reuse as its server does it: with ``cache_prompt`` the longest common start of
    what it holds, at most all but the last token; its own tokens of a chat are ``tokens``'s."""

    def __init__(self, tokens: dict[str, list[int]]) -> None:
        self.tokens = tokens
        self.held: list[int] = []
        self.requests: list[dict[str, Any]] = []
        self.error = False

    def handle_completions(self, body: dict[str, Any]) -> dict[str, Any]:
        return self._answer(body, list(body["prompt"]))

    def handle_chat_completions(self, body: dict[str, Any]) -> dict[str, Any]:
        return self._answer(body, self.tokens[body["messages"][0]["content"]])

    def _answer(self, body: dict[str, Any], prompt: list[int]) -> dict[str, Any]:
        self.requests.append(body)
        if self.error:
            self.error = False
            return {"error": {"message": "busy"}}
        reused = min(common_length(self.held, prompt), len(prompt) - 1) if body.get("cache_prompt") else 0
        self.held = prompt
        return {"timings": {"cache_n": reused, "prompt_ms": 2.0, "predicted_ms": 1.0}, "usage": {"prompt_tokens": len(prompt)}}


HEAD = list(range(1000, 1057))
ONE, TWO = HEAD + [1] * 89, HEAD + [2] * 89


def chat(name: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": name}], "cache_prompt": False}


def test_a_prompt_reuses_the_planned_rows_after_cutting_what_else_matches():
    llama = FakeLlama({"one": ONE, "two": TWO})
    reuse = Reuse()
    first = reuse.ask(llama, chat("one"), ONE)
    assert first["timings"]["cache_n"] == 0 and llama.requests == [chat("one")]  # nothing held: a cold run
    second = reuse.ask(llama, chat("two"), TWO)
    cut, asked = llama.requests[1:]
    assert cut == {"prompt": [*HEAD[:56], 0], "n_predict": 0, "cache_prompt": True}  # 57 match: cut at 56
    assert asked == {**chat("two"), "cache_prompt": True} and second["timings"]["cache_n"] == 56
    assert second["timings"]["prompt_ms"] == 2.0 + 3.0  # the cut's time counted with the reply's
    assert reuse.on and reuse.cached == TWO and reuse.exact == 144


def test_llama_cpp_tokens_other_than_the_tokenizers_end_reuse_and_ask_again_from_an_empty_cache():
    llama = FakeLlama({"one": [5, *ONE]})  # llama.cpp adds a token the tokenizer does not
    reuse = Reuse()
    reuse.ask(llama, chat("one"), ONE)
    assert not reuse.on  # the cold run's count already differs
    reuse = Reuse()
    llama = FakeLlama({"one": ONE, "two": HEAD[:50] + [9] * 96})  # the same count, other tokens
    reuse.ask(llama, chat("one"), ONE)
    reply = reuse.ask(llama, chat("two"), TWO)
    assert llama.requests[-1] == chat("two") and reply["timings"]["cache_n"] == 0  # asked again, cold
    assert not reuse.on and reuse.cached == TWO


def test_an_error_of_llama_cpp_does_not_end_reuse():
    llama = FakeLlama({"one": ONE, "two": TWO})
    reuse = Reuse()
    reuse.ask(llama, chat("one"), ONE)
    llama.error = True  # the cut fails
    reuse.ask(llama, chat("two"), TWO)
    assert reuse.on and llama.requests[-1] == chat("two")  # asked cold instead


# --- on a real GGUF file ----------------------------------------------------------------------

WORDS = "A 45-year-old man comes to the physician because of a cough that has lasted three weeks and fever at night".split()
OPTIONS = {"A": "Tuberculosis", "B": "Asthma", "C": "Pneumonia", "D": "Lung cancer"}
LETTERS = Request("letters", ("A", "B", "C", "D"), 1, 0.0, 0)


def question(words: int) -> Question:
    """A question of the first ``words`` words of a repeated case (so prompts share long starts)."""
    return Question(f"q{words}", " ".join((WORDS * 40)[:words]) + "?", OPTIONS, "A", OPTIONS["A"])


@pytest.fixture(scope="module")
def smollm2():
    """The packaged SmolLM2 run cold (as before) and with reuse (the default), and llama.cpp itself
    with openqa's parameters (``xllamacpp.Server``)."""
    import xllamacpp

    from openqa.llm.llamacpp import LlamaCppBackend, llama_params

    gguf = packaged_gguf()
    return (LlamaCppBackend(str(gguf), context=2048, reuse=False), LlamaCppBackend(str(gguf), context=2048),
            xllamacpp.Server(llama_params(xllamacpp, gguf, 2048, 1)))


def test_reused_rows_give_the_letter_probabilities_of_a_cold_run(smollm2):
    cold, warm, _ = smollm2
    assert warm.reuse and not cold.reuse
    assert warm.prompt_cache.startswith("exact reuse") and cold.prompt_cache.startswith("off")
    assert warm.identity() == cold.identity()  # the reply cache's key: the same replies
    # lengths around the rule's edges (the rest 64 or 66 rows), a prompt of two micro-batches, a repeat
    asked = [question(k) for k in (*range(20, 44, 2), 420)] + [question(30)]
    seen = []
    for q in asked:
        messages = build_messages(q, list(q.options), [], "letters")
        a, b = cold.reply(messages, LETTERS), warm.reply(messages, LETTERS)
        assert a["tokens_reused"] == 0 and a["probs"] and a["probs"].keys() == b["probs"].keys()
        assert max(abs(a["probs"][k] - b["probs"][k]) for k in a["probs"]) <= 1e-4, q.qid
        seen.append((b["tokens_reused"], b["tokens_in"] - b["tokens_reused"]))
    assert warm.reuse and seen[0][0] == 0  # still on; nothing held at first
    rests = {rest for reused, rest in seen if reused}
    assert TILED_ROWS in rests and TILED_ROWS + 2 in rests and any(rest > 500 for rest in rests)


def test_a_reuse_the_rule_refuses_changes_the_letters(smollm2):
    """The rule is needed: 60 rows computed after the reused ones (under 64: another attention
    kernel than the cold run's) give other letter probabilities than the cold run."""
    cold, _, server = smollm2
    messages = build_messages(question(60), "ABCD", [], "letters")
    reference = cold.reply(messages, LETTERS)["probs"]
    prompt = cold.prompt_ids(messages)
    server.handle_completions({"prompt": [*prompt[:-60], 0], "n_predict": 0, "cache_prompt": False})
    body = {"messages": messages, "max_tokens": 1, "temperature": 0.0, "seed": 0, "logprobs": True, "top_logprobs": 20}
    data = server.handle_chat_completions({**body, "cache_prompt": True})
    assert data["timings"]["cache_n"] == len(prompt) - 60
    top: dict[str, float] = {}
    for alt in data["choices"][0]["logprobs"]["content"][0]["top_logprobs"]:
        top[alt["token"]] = top.get(alt["token"], 0.0) + math.exp(alt["logprob"])
    probs = letter_probabilities(top, LETTERS.letters)
    assert max(abs(probs[k] - reference[k]) for k in reference) > 1e-3


def test_a_run_says_how_its_prompts_were_computed_and_both_ways_share_the_reply_cache(tmp_path, capsys):
    """The record says which way ran (``settings.prompt_cache``, ``tokens.reused``); the reply cache's
    key is the same both ways (the numbers are), so a run without reuse replays the replies of one with
    it; two copies of the model (``--concurrency 2``) give the same letters."""
    gguf = packaged_gguf()
    make_data_dir(tmp_path)
    args = ["eval", "--dataset", "us", "--method", "llm", "--model", str(gguf), "--evidence", "none", "--json",
            "--cache-dir", str(tmp_path / "cache"), "--data-dir", str(tmp_path / "data_clean"),
            "--index-dir", str(tmp_path / "indexes"), "--output", str(tmp_path / "results")]
    assert main(args) == 0
    first = json.loads(capsys.readouterr().out)
    assert first["settings"]["prompt_cache"].startswith("exact reuse") and first["model_calls"] == len(QUESTIONS)
    assert first["tokens"]["reused"] >= 0 and first["settings"]["runs_on"] == "llama.cpp (xllamacpp), 1 thread"
    assert main([*args, "--no-prompt-reuse"]) == 0
    second = json.loads(capsys.readouterr().out)
    assert second["settings"]["prompt_cache"].startswith("off") and second["model_calls"] == 0
    assert second["cached_replies"] == len(QUESTIONS) and second["accuracy"] == first["accuracy"]
    # two copies of the model answering at once, from an empty cache: the same numbers
    assert main([*args, "--concurrency", "2", "--cache-dir", str(tmp_path / "cache-2")]) == 0
    third = json.loads(capsys.readouterr().out)
    assert third["model_calls"] == len(QUESTIONS) and third["settings"]["runs_on"].endswith("2 copies of the model at once")
    assert [row["letter_probabilities"] for row in predictions(third)] == [row["letter_probabilities"] for row in predictions(first)]


def predictions(summary: dict[str, Any]) -> list[dict[str, Any]]:
    path = Path(summary["files"]["summary"]).with_suffix(".predictions.jsonl")
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_the_tokenizer_read_from_a_gguf_file_is_kept_and_the_kept_copy_tokenizes_the_same(tmp_path, monkeypatch):
    """The tokenizer converted from the GGUF file once is kept in the user's cache folder, named by
    the file's content; the kept copy gives the same prompt tokens (the reuse plan's and the token
    counts'), another file does not find it, and a damaged copy is read again from the file."""
    from openqa.llm.llamacpp import LlamaCppBackend, kept_tokenizer

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    gguf = packaged_gguf()
    kept = kept_tokenizer(gguf)
    assert kept is not None and not kept.exists()
    fresh = LlamaCppBackend(str(gguf), context=2048)
    assert kept.is_dir() and not list(kept.parent.glob(".*"))  # kept whole, no scratch left
    copy = tmp_path / "elsewhere" / "renamed.gguf"
    copy.parent.mkdir()
    copy.symlink_to(gguf)
    assert kept_tokenizer(copy) == kept  # by content, not by name
    converted = []
    from transformers import AutoTokenizer

    real = AutoTokenizer.from_pretrained
    monkeypatch.setattr(AutoTokenizer, "from_pretrained", lambda *a, **kw: converted.append(kw.get("gguf_file")) or real(*a, **kw))
    again = LlamaCppBackend(str(copy), context=2048)
    assert converted == [None]  # the kept copy, not the GGUF file
    for q in (question(k) for k in (20, 60, 200)):
        messages = build_messages(q, list(q.options), [], "letters")
        assert again.prompt_ids(messages) == fresh.prompt_ids(messages)
        assert again.count(q.question) == fresh.count(q.question)
    (kept / "tokenizer.json").write_text("{")  # damaged: read from the file again
    converted.clear()
    assert LlamaCppBackend(str(gguf), context=2048).tokenizer is not None
    assert converted == [None, gguf.name]
    converted.clear()
    assert LlamaCppBackend(str(gguf), context=2048).tokenizer is not None
    assert converted == [None]  # kept anew
