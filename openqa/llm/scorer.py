"""The LLM reader as an option scorer: for each question, the evidence (none, the top paragraphs
for the whole question, or the top paragraphs of each option) cut to a token budget, one prompt per
order of the options, each reply taken from the cache or the model, and the letters read from it.

A reply without a readable letter is a parse failure: the question abstains (counted wrong), it is
never given an option. With several orders (``--permutations``), the letter probabilities (or the
votes of generated answers) of the orders are averaged per original option."""

from __future__ import annotations

import math
import random
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Sequence

from openqa.cancel import checkpoint
from openqa.data import Question
from openqa.errors import OpenQAError, UsageError
from openqa.llm.backends import CHARS_PER_TOKEN, Backend, ChatBackend, Request, reply_problem
from openqa.llm.cache import ReplyCache, reply_key
from openqa.llm.extract import cited_ids, extract_letter
from openqa.llm.prompts import Messages, Passage, build_messages, fit_passages, option_block
from openqa.llm.settings import LLMSettings
from openqa.progress import tqdm
from openqa.retrieval.base import Hit
from openqa.scorers.base import OptionScorer, OptionScores
from openqa.scorers.ir import IRScorer, question_query

if TYPE_CHECKING:
    from openqa.scorers.bank import QuestionBank


@dataclass(frozen=True)
class Prompt:
    """One prompt to send: its question and order of options, messages, request and cache key."""

    question: int
    order: tuple[str, ...]
    messages: Messages
    request: Request
    key: str


#: Batches of prompts handed at once to a backend that batches (``Backend.batch_size`` > 1): it sorts
#: them by length, so that each batch holds prompts of about one length and pads little.
CALL_BATCHES = 8


def option_orders(question: Question, k: int, seed: int) -> list[tuple[str, ...]]:
    """``k`` orders of the options: as given first, then shuffles seeded by ``seed`` and the question's
    content (the same on every run and whatever file carries the question)."""
    letters = tuple(question.options)
    orders = [letters]
    for i in range(1, k):
        shuffled = list(letters)
        random.Random(f"{seed}:{question.content_digest(*question.options.values())}:{i}").shuffle(shuffled)
        orders.append(tuple(shuffled))
    return orders


class Tally:
    """The counts of one ``score`` call (cached replies, tokens, model time, cut evidence, orders
    that disagreed, unreadable replies), added to from its request threads."""

    def __init__(self, calls_before: int) -> None:
        self.counts: dict[str, Any] = {"calls_before": calls_before, "cached": 0, "tokens_in": 0, "tokens_out": 0,
                                       "model_seconds": 0.0, "evidence_cut_budget": 0, "evidence_cut_context": 0,
                                       "orders_disagreed": 0, "replies_unreadable": 0, "seconds": 0.0,
                                       "reported_seconds": 0.0, "reported_calls": 0, "tokens_reused": 0}
        self._lock = threading.Lock()

    def add(self, **counts: float) -> None:
        with self._lock:
            for key, value in counts.items():
                self.counts[key] += value


def interleave(per_option: Sequence[Sequence[Hit]]) -> list[Hit]:
    """The options' hits merged rank by rank (every option's first paragraph, then every second...),
    each paragraph once: no option's evidence crowds out another's under a budget."""
    seen: set[int] = set()
    out: list[Hit] = []
    for rank in range(max((len(h) for h in per_option), default=0)):
        for hits in per_option:
            if rank < len(hits) and hits[rank].index not in seen:
                seen.add(hits[rank].index)
                out.append(hits[rank])
    return out


class LLMScorer(OptionScorer):
    """An instruction model choosing among the options, over openqa's evidence: what
    ``--method llm`` scores with (``Solver.open("llm", ...)`` opens one with its retriever).

    :param backend: the model (e.g. a ``TransformersBackend``).
    :param settings: what it is asked to do (``LLMSettings``).
    :param cache: the reply cache (``ReplyCache``): a prompt asked before is answered from it.
    :param retriever: the IR scorer whose engine finds the evidence (None: closed book).
    :param query: the query mode of the evidence searches.
    :param lang: the questions' language.
    :param bank: the solved questions ``settings.demonstrations`` are drawn from."""

    name = "llm"
    #: Its scores are letter probabilities (or shares of votes).
    scale = "probability"

    def __init__(self, backend: Backend, settings: LLMSettings, cache: ReplyCache, retriever: IRScorer | None = None,
                 query: str = "full", lang: str = "en", bank: QuestionBank | None = None) -> None:
        from openqa import arguments as arg
        from openqa.languages import language
        from openqa.scorers.bank import QuestionBank
        from openqa.scorers.query import QUERY_MODES

        for name, value, kind in (("backend", backend, Backend), ("settings", settings, LLMSettings), ("cache", cache, ReplyCache)):
            if not isinstance(value, kind):
                raise UsageError(f"{name} must be a {kind.__name__}, not {type(value).__name__}")
        if retriever is not None and not isinstance(retriever, IRScorer):
            raise UsageError(f"retriever must be None or an IR scorer, not {type(retriever).__name__}")
        if bank is not None and not isinstance(bank, QuestionBank):
            raise UsageError(f"bank must be None or a QuestionBank, not {type(bank).__name__}")
        arg.one_of("query mode", query, QUERY_MODES)
        language(lang)
        self.backend = backend
        self.settings = settings
        self.cache = cache
        self.retriever = retriever
        self.engine = retriever.engine if retriever is not None else None
        self.query = query
        self.lang = lang
        #: Where demonstrations come from (``settings.demonstrations`` nearest solved questions).
        self.bank = bank
        self.instruction = "letters" if settings.scoring == "letters" else settings.prompt
        #: The counts of the last finished ``score`` call, which ``report`` describes (each call
        #: counts into its own ``Tally``, so calls from several threads never mix their counts).
        self.stats: dict[str, Any] = {}

    def banks(self) -> list[QuestionBank]:
        return [self.bank] if self.bank is not None and self.settings.demonstrations else []

    def _ranked(self, questions: Sequence[Question], progress: bool) -> tuple[list[list[Hit]], list[dict[str, list[Hit]]]]:
        """Per question: its paragraphs in rank order, and (evidence ``options``) each option's own hits.
        Each question is searched alone, so its evidence (and prompt, and cached reply) never depends
        on which other questions a run holds (IR-Custom's avgQL is a batch's mean query length)."""
        s = self.settings
        if s.evidence == "none" or self.retriever is None:
            return [[] for _ in questions], [{} for _ in questions]
        ranked, own = [], []
        assert self.engine is not None  # the retriever's engine
        for q in tqdm(questions, desc=f"retrieving ({self.engine.name})", unit="q", disable=not progress):
            checkpoint()
            if s.evidence == "options":
                per_option = self.retriever.retrieve([q], s.top, False, query=self.query)[0]
                ranked.append(interleave(per_option))
                own.append(dict(zip(q.options, per_option)))
            else:
                ranked += self.retriever.search([question_query(q, self.query, self.lang) or q.question], s.top)
                own.append({})
        return ranked, own

    def _prompts(self, question: Question, qi: int, hits: list[Hit]) -> tuple[list[Prompt], list[str], int]:
        """The prompts of one question (one per order), the evidence ids they show, and whether its
        evidence was cut (1: by the budget, 2: also to fit the context)."""
        s, backend = self.settings, self.backend
        store = self.engine.paragraphs if self.engine is not None else None
        passages = [Passage(p.pid, p.text) for h in hits for p in [store[h.index]]] if store is not None else []
        kept, cut = fit_passages(passages, s.evidence_tokens, backend.count)
        cut_level = int(cut)
        shots = [n.question for n in self.bank.nearest(question, s.demonstrations)] if self.bank and s.demonstrations else []
        prompts = []
        for order in option_orders(question, s.permutations, s.seed):
            shown = tuple(option_block(question, order)[1])
            while True:
                messages = build_messages(question, order, kept, self.instruction, shots)
                need = backend.prompt_tokens(messages) + s.reply_tokens
                if need <= backend.context:
                    break
                if not kept:
                    raise OpenQAError(
                        f"question {question.qid}: its prompt takes {need - s.reply_tokens} tokens + {s.reply_tokens} "
                        f"for the reply, more than the model's context of {backend.context} ({backend.context_source})")
                kept, cut_level = kept[:-1], 2
            request = Request(s.scoring, shown, s.reply_tokens, s.temperature, s.seed)
            prompts.append(Prompt(qi, order, messages, request,
                                  reply_key(backend.identity(), messages, request.as_dict())))
        return prompts, [p.pid for p in kept], cut_level

    def _cached(self, prompt: Prompt, tally: Tally) -> dict[str, Any] | None:
        """The cached reply to ``prompt``, or None (also for one kept by an older openqa: it is asked again)."""
        cached = self.cache.get(prompt.key)
        if cached is not None and reply_problem(cached) is None:
            tally.add(cached=1)
            return cached
        return None

    def _keep(self, prompt: Prompt, reply: dict[str, Any], seconds: float, tally: Tally) -> None:
        """Count a reply the model took ``seconds`` to make, and cache it."""
        tally.add(model_seconds=seconds, tokens_in=reply.get("tokens_in") or 0,
                  tokens_out=reply.get("tokens_out") or 0, tokens_reused=reply.get("tokens_reused") or 0,
                  reported_seconds=reply.get("model_ms", 0) / 1000,
                  reported_calls="model_ms" in reply)
        self.cache.put(prompt.key, reply)

    def _ask(self, prompt: Prompt, tally: Tally) -> dict[str, Any]:
        """The reply to ``prompt``: from the cache, else from the model (then cached)."""
        cached = self._cached(prompt, tally)
        if cached is not None:
            return cached
        start = time.perf_counter()
        reply = self.backend.reply(prompt.messages, prompt.request)
        self._keep(prompt, reply, time.perf_counter() - start, tally)
        return reply

    def _in_turn(self, prompts: list[Prompt], tally: Tally, done: Callable[[int, dict[str, Any]], None]) -> None:
        """Every prompt's reply on this thread, in windows of ``CALL_BATCHES`` of the backend's batches
        (one prompt where it answers one at a time): the window's cached replies are read, the others
        asked of the model in one call (each prompt once), each cached as it comes."""
        size = self.backend.batch_size
        window = size * CALL_BATCHES if size > 1 else 1
        for start in range(0, len(prompts), window):
            asked: dict[str, list[int]] = {}  # a prompt's key -> where it stands (a repeated question: twice)
            for i in range(start, min(start + window, len(prompts))):
                checkpoint()
                cached = self._cached(prompts[i], tally)
                if cached is not None:
                    done(i, cached)
                else:
                    asked.setdefault(prompts[i].key, []).append(i)
            first = [where[0] for where in asked.values()]
            began = time.perf_counter()
            for j, reply in self.backend.replies([(prompts[i].messages, prompts[i].request) for i in first]):
                self._keep(prompts[first[j]], reply, time.perf_counter() - began, tally)
                for repeat, i in enumerate(asked[prompts[first[j]].key]):
                    tally.add(cached=repeat > 0)
                    done(i, reply)
                checkpoint()
                began = time.perf_counter()

    def _run(self, prompts: list[Prompt], n_questions: int, progress: bool, tally: Tally) -> list[dict[str, Any]]:
        """Every prompt's reply, in order: ``--concurrency`` requests at a time to an endpoint, else in
        turn (in batches where the backend batches); the bar counts questions whose replies are all in."""
        replies: list[dict[str, Any] | None] = [None] * len(prompts)
        left = [0] * n_questions
        for p in prompts:
            left[p.question] += 1
        start = time.perf_counter()
        with tqdm(total=n_questions, desc=f"llm ({self.backend.name})",
                  unit="q", disable=not progress) as bar:
            def done(i: int, reply: dict[str, Any]) -> None:
                replies[i] = reply
                left[prompts[i].question] -= 1
                if not left[prompts[i].question]:
                    bar.update(1)
                    elapsed = max(time.perf_counter() - start, 1e-9)
                    bar.set_postfix(tok_s=f"{(tally.counts['tokens_in'] + tally.counts['tokens_out']) / elapsed:.0f}",
                                    calls=self.backend.calls, refresh=False)

            if self.settings.concurrency == 1:
                self._in_turn(prompts, tally, done)
            else:
                pool = ThreadPoolExecutor(self.settings.concurrency, thread_name_prefix="openqa-llm")
                try:
                    futures = {pool.submit(self._ask, prompt, tally): i for i, prompt in enumerate(prompts)}
                    for future in as_completed(futures):
                        checkpoint()
                        done(futures[future], future.result())
                finally:
                    pool.shutdown(wait=False, cancel_futures=True)
        return replies  # type: ignore[return-value]

    def _read(self, prompt: Prompt, reply: dict[str, Any]) -> tuple[dict[str, float] | None, str | None]:
        """Letter probabilities and the chosen letter of one reply, in the question's own letters
        (None, None: nothing readable)."""
        shown = dict(zip(prompt.request.letters, prompt.order))
        if prompt.request.scoring == "letters":
            probs = reply.get("probs") or {}
            if not probs:
                return None, None
            mapped = {shown[k]: v for k, v in probs.items()}
            return mapped, max(mapped, key=mapped.__getitem__)
        letter = extract_letter(reply.get("text") or "", prompt.request.letters)
        if letter is None:
            return None, None
        return {o: float(o == shown[letter]) for o in prompt.order}, shown[letter]

    def prompt_tokens_estimate(self, question: Question) -> int:
        """The prompt tokens scoring ``question`` reads, estimated without the model (a server weighs
        the request by them before it runs): per order of its options, its question and options at
        ``CHARS_PER_TOKEN`` characters a token, and the evidence budget when it reads evidence."""
        if not isinstance(question, Question):
            raise UsageError(f"question must be a Question, not {type(question).__name__}")
        s = self.settings
        text = len(question.question) + sum(map(len, question.options.values()))
        return s.permutations * (math.ceil(text / CHARS_PER_TOKEN) + (s.evidence_tokens if s.evidence != "none" else 0))

    def score(self, questions: Sequence[Question], progress: bool = True) -> list[OptionScores]:
        from openqa import arguments as arg
        from openqa.data.questions import question_list

        questions = question_list("questions", questions)
        arg.flag("progress", progress)
        tally = Tally(self.backend.calls)
        start = time.perf_counter()
        ranked, option_hits = self._ranked(questions, progress)
        prompts, shown_ids = [], []
        for qi, (q, hits) in enumerate(zip(questions, ranked)):
            own, ids, cut = self._prompts(q, qi, hits)
            prompts += own
            shown_ids.append(ids)
            tally.add(evidence_cut_budget=cut >= 1, evidence_cut_context=cut == 2)
        replies = self._run(prompts, len(questions), progress, tally)
        by_question: list[list[tuple[Prompt, dict[str, Any]]]] = [[] for _ in questions]
        for prompt, reply in zip(prompts, replies):
            by_question[prompt.question].append((prompt, reply))
        out = [self._combine(q, by_question[qi], shown_ids[qi], option_hits[qi], tally) for qi, q in enumerate(questions)]
        tally.add(seconds=time.perf_counter() - start)
        self.stats = tally.counts
        return out

    def _combine(self, question: Question, answered: list[tuple[Prompt, dict[str, Any]]], ids: list[str],
                 hits: dict[str, list[Hit]], tally: Tally) -> OptionScores:
        """One question's scores from its orders' replies, with what the predictions file keeps."""
        read = [self._read(p, r) for p, r in answered]
        good = [(probs, letter) for probs, letter in read if probs is not None]
        tally.add(replies_unreadable=len(read) - len(good))
        scores = {o: sum(probs[o] for probs, _ in good) / len(good) if good else 0.0 for o in question.options}
        letters = [letter for _, letter in read]
        tally.add(orders_disagreed=len({letter for _, letter in good}) > 1)
        replies = [r.get("text") for _, r in answered]
        details: dict[str, Any] = {
            "reply": replies[0] if len(replies) == 1 else replies,
            "letter": letters[0] if len(letters) == 1 else letters,
            "letter_probabilities": {o: round(v, 4) for o, v in scores.items()} if good else None,
            "evidence_ids": ids,
            "cited": cited_ids(replies[0] or "") if self.settings.scoring == "generate" else [],
        }
        if len(answered) > 1:
            details["orders"] = ["".join(p.order) for p, _ in answered]
        return OptionScores(question, scores, hits, abstained=not good, details=details)

    def report(self, results: Sequence[OptionScores]) -> dict[str, Any]:
        st, s = self.stats, self.settings
        n = len(results)
        calls = self.backend.calls - st.get("calls_before", 0)
        seconds = st.get("seconds", 0.0)
        model_seconds = st.get("model_seconds", 0.0)
        return {
            "model": s.model_name(),
            "backend": self.backend.kind,
            "prompt_template_hash": self.settings_record()["template_hash"],
            "model_calls": calls,
            "cached_replies": st.get("cached", 0),
            "replies_unreadable": st.get("replies_unreadable", 0),
            "questions_per_second": round(n / seconds, 3) if seconds else None,
            # llama.cpp's own prompt and reply time (its "timings"), where every model call reported it:
            # what the model took, beside which openqa's overhead is seconds minus this
            "model_reported_seconds": round(st.get("reported_seconds", 0.0), 3) if calls and st.get("reported_calls") == calls else None,
            # prompt tokens llama.cpp reused from the previous prompt rather than computing them (openqa.llm.prefix)
            "tokens": {"prompt": st.get("tokens_in", 0), "reused": st.get("tokens_reused", 0), "reply": st.get("tokens_out", 0),
                       "per_second": round((st.get("tokens_in", 0) + st.get("tokens_out", 0)) / model_seconds, 1)
                       if model_seconds else None, "counted_by": self.backend.token_count},
            "evidence_cut": {"by_budget": st.get("evidence_cut_budget", 0), "to_fit_context": st.get("evidence_cut_context", 0)},
            "permutations": {"k": s.permutations, "questions_orders_disagreed": st.get("orders_disagreed", 0),
                             "rate": round(100 * st.get("orders_disagreed", 0) / n, 2) if n else 0.0},
        }

    def settings_record(self) -> dict[str, Any]:
        """The settings a record shows for this reader (``openqa.llm.method`` adds their sources)."""
        from openqa.llm.prompts import TEMPLATE_VERSION, template_hash

        s = self.settings
        record: dict[str, Any] = {
            "model": s.model_name(), "backend": self.backend.kind, "runs_on": self.backend.runs_on, "endpoint": s.endpoint,
            "evidence": s.evidence,
            "scoring": s.scoring, "prompt": s.prompt if s.scoring == "generate" else "letters",
            "template_version": TEMPLATE_VERSION, "template_hash": template_hash(self.instruction),
            "permutations": s.permutations, "temperature": s.temperature, "seed": s.seed,
            "reply_tokens": s.reply_tokens, "context": self.backend.context, "token_count": self.backend.token_count,
        }
        if isinstance(self.backend, ChatBackend):
            record["prompt_cache"] = self.backend.prompt_cache
        if s.evidence != "none":
            record.update(retriever=s.retriever, top_k=s.top, query=self.query, evidence_tokens=s.evidence_tokens)
        if s.demonstrations:
            record["demonstrations"] = s.demonstrations
        return record
