"""The commands: each reads its parsed flags, calls one function of the API below and prints
what it returns."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from openqa import arguments as arg
from openqa.cli.printing import confidence_lines, note, print_json, settings_line
from openqa.config import Settings
from openqa.errors import OpenQAError, UsageError
from openqa.languages import language
from openqa.text.unicode import printable

if TYPE_CHECKING:
    from openqa.api import Searcher, Solver, Workspace
    from openqa.llm.settings import LLMSettings
    from openqa.methods import Overrides
    from openqa.workspace import Context


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
        if getattr(args, "demonstrations", 0):  # shown to an LLM alone: silently dropped it would mislead
            raise OpenQAError("--demonstrations shows solved questions to an LLM: use it with --method llm "
                              "(or an ensemble given --model or --endpoint)")
        return None
    from openqa.llm.settings import LLMSettings

    return LLMSettings(
        model=args.model, endpoint=args.endpoint, evidence=args.evidence, scoring=args.scoring, prompt=args.prompt,
        retriever=args.retriever, top_k=getattr(args, "top_n", None), evidence_tokens=args.evidence_tokens, context=args.context,
        permutations=args.permutations, concurrency=args.concurrency, timeout=args.timeout, retries=args.retries,
        temperature=args.temperature, seed=args.seed, max_tokens=args.max_tokens, threads=args.threads,
        batch_size=args.llm_batch_size, prompt_reuse=args.prompt_reuse,
        cache_dir=Path(args.cache_dir) if args.cache_dir else None, demonstrations=args.demonstrations,
    )


def _settings(args: argparse.Namespace) -> Settings:
    """Locations from flags and environment; ``--output`` is the results folder of eval and filter-agreement."""
    results = args.output if args.command in ("eval", "filter-agreement") else getattr(args, "results", None)
    return Settings.resolve(args.data_dir, args.index_dir, args.models_dir, args.es_url, args.settings_dir, results,
                            check_settings=True)




def _workspace(args: argparse.Namespace) -> Workspace:
    """Locations and index-building flags of this command, as the API takes them (``openqa.api.Workspace``);
    ``--output`` is the results folder of eval and filter-agreement, ``--results`` that of train."""
    from openqa.api import Workspace

    return Workspace(
        data_dir=args.data_dir, index_dir=args.index_dir, models_dir=args.models_dir, settings_dir=args.settings_dir,
        results_dir=args.output if args.command in ("eval", "filter-agreement") else getattr(args, "results", None),
        es_url=args.es_url,
        encoder=getattr(args, "encoder", None), faiss_index=getattr(args, "faiss_index", None),
        ngram=getattr(args, "ngram", None), zh_mode=getattr(args, "zh_mode", None), corpus=getattr(args, "corpus", None),
    )


def _context(args: argparse.Namespace) -> Context:
    """The command's ``Workspace`` as the layers below take it, with notes printed."""
    return _workspace(args).context(note, check_settings=True)


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

        print_json({"lang": args.lang, **stats, **run_record()})
        return
    unit = language(args.lang).token_unit
    for key, value in stats.items():
        print(f"{key.replace('_', ' '):<24} {value}" + (f" {unit}" if "length" in key else ""))


def _overrides(args: argparse.Namespace) -> Overrides:
    from openqa.methods import Overrides

    if args.top_n is not None and args.top_n < 1:
        raise OpenQAError(f"--top-n must be at least 1, not {args.top_n}")
    return Overrides(top_n=args.top_n, aggregate=args.aggregate, query=args.query)



def cmd_train(args: argparse.Namespace) -> None:
    from openqa.readers.train import TrainConfig
    from openqa.training import train_reader

    lr = args.lr if args.lr is not None else 1e-3 if args.reader == "maxout" else 2e-5
    config = TrainConfig(epochs=args.epochs, lr=lr,
                         batch_size=args.batch_size, effective_batch=args.effective_batch, seed=args.seed)
    out = Path(args.output or f"runs/{args.reader}-{args.dataset}" + (f"-crossfit{args.cross_fit}" if args.cross_fit else ""))
    if args.cross_fit is not None:
        from openqa.training import cross_fit_reader

        if args.train_split:
            raise UsageError("--cross-fit trains on all of dev by folds: give it or --train-split, not both")
        record = cross_fit_reader(_context(args), args.reader, args.model, args.dataset, args.retriever, args.top_n, config,
                                  out, args.max_length, args.cross_fit, args.query)
        fits = record["cross_fit"]
        print(f"out-of-fold accuracy on {record['n']} dev questions {record['accuracy']:.2f}% after {fits['epochs_chosen']} "
              f"epochs (by epoch: {', '.join(f'{v:.2f}' for v in fits['accuracy_by_epoch'].values())}); "
              f"checkpoint {out / 'best'}")
        folder = _settings(args).results_dir
        print(f"wrote {folder / record['files']['summary']} and {folder / record['files']['predictions']} "
              f"(--predictions {args.reader}={folder / record['files']['predictions']})")
        return
    result = train_reader(_context(args), args.reader, args.model, args.dataset, args.train_split, args.retriever,
                          args.top_n, config, out, args.max_length, args.query)
    print(f"best selection accuracy {result['best_selection_accuracy']:.2f}%; checkpoint {out / 'best'}")


def cmd_eval(args: argparse.Namespace) -> None:
    from openqa.api import evaluate_request
    from openqa.pipeline import EvalRequest, retrieval_quality

    request = EvalRequest(
        method=args.method, dataset=args.dataset, split=args.split, questions=arg.path("--questions", args.questions),
        lang=args.lang, exam=args.exam, limit=args.limit, offset=args.offset, engine=args.engine, model=args.model,
        overrides=_overrides(args),
        llm=_llm_settings(args, args.method), subset=args.subset, predictions=_predictions(args), ensemble=args.ensemble,
        banks=tuple(args.bank), allow_bank_overlap=args.allow_bank_overlap,
    )
    if args.retrieval:
        table, path, skipped = retrieval_quality(_context(args), request, [m.strip() for m in args.retrievers.split(",") if m.strip()])
        if args.json:
            stem = path.resolve().with_suffix("")
            print_json({"retrievers": table, "skipped": skipped, "files": {
                "summary": str(path.resolve()), "qrels": f"{stem}.qrels", "topics": f"{stem}.topics.tsv"}})
            return
        for why in skipped:
            print(f"skipping {why}", file=sys.stderr)
        for name, row in table.items():
            print(f"{name:<10} " + "  ".join(f"@{k}: {row['correct'][k]:.1f} vs {row['wrong'][k]:.1f}" for k in row["correct"]))
        print(f"wrote {path.resolve()} (+ .md, .png, .qrels, .topics.tsv)")
        return
    summary = evaluate_request(_context(args), request, progress=not args.json).record
    if args.json:
        print_json(summary)
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
    if overlap_line(summary):
        lines.insert(1, overlap_line(summary))
    if summary["parse_failures"]:
        lines.insert(1, f"{summary['parse_failures']} replies held no readable answer: counted wrong (parse_failures)")
    if summary["unmatched"]:
        count = summary["unmatched"]
        lines.insert(1, f"{count} question{'s' if count != 1 else ''} had no word in the index (written in another language than the corpus?): "
                        "their predictions are tie-breaks")
    print("\n".join(lines))



def overlap_line(record: dict[str, Any]) -> str:
    """The line that says how many questions scored the bank held verbatim (left out of their own
    evidence), or nothing when it held none."""
    overlap = record.get("bank_overlap") or {}
    if not overlap.get("questions"):
        return ""
    where = "; ".join(f"{s.get('file') or s.get('dataset', '') + ' ' + s.get('split', '')} {s['holds']:,}" for s in overlap["by_source"])
    return (f"the bank holds copies of {overlap['questions']:,} of the {overlap['of']:,} questions scored ({where}; a copy: "
            "the same text, the answer among the options): each was left out of its question's evidence")


def cmd_tune(args: argparse.Namespace) -> None:
    from openqa.api import tune_in
    from openqa.evaluate.calibration import FEW_QUESTIONS, dataset_label
    from openqa.methods import Request
    from openqa.pipeline import QuestionSource

    parts = None
    if args.parts is not None:
        parts = tuple(p.strip() for p in args.parts.split(",") if p.strip())
        if not parts:
            raise OpenQAError(f"--parts names no method: give them comma-separated (not {args.parts!r}), or leave --parts out")
    request = Request(engine=args.engine, model=args.model, llm=_llm_settings(args, args.method), parts=parts,
                      predictions=_predictions(args), ensemble=args.ensemble, banks=tuple(args.bank),
                      allow_bank_overlap=args.allow_bank_overlap)
    source = QuestionSource(dataset=args.dataset, questions=arg.path("--questions", args.questions), lang=args.lang, exam=args.exam, subset=args.subset)
    record = tune_in(_context(args), args.method, source, request, args.calibrate_only, progress=True,
                     limit=args.limit).record
    calibration = record["calibration"]
    fitted_on = dataset_label(calibration["dataset"])
    if overlap_line(record):
        note(overlap_line(record))
    if "chosen" in record:
        print(f"chose {record['chosen']} (accuracy {record['dev_accuracy']:.2f}% on {fitted_on}); wrote {record['files']['settings']}")
    scope = f"{record['exam']} questions" + (f" over corpus {record['corpus']}" if record["corpus"] else "")
    print(f"probabilities: temperature {calibration['temperature']:.3g} fitted on {fitted_on} ({calibration['n']} questions); "
          f"wrote {record['files']['calibration']}; eval and answer scoring {scope} now use these over the shipped ones")
    if calibration["n"] < FEW_QUESTIONS:
        note(f"fitted on {calibration['n']} questions, fewer than {FEW_QUESTIONS}: these settings are mostly noise, "
             "and every run using them says so; tune on more questions" + (" (leave out --limit)" if record["limit"] else ""))


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
        note(f"loading {args.method} and its index...")
    solver = Solver.from_context(_context(args), args.method, Exam.resolve(lang=args.lang, exam=args.exam),
                                 Request(_overrides(args), args.engine, args.model, _llm_settings(args, args.method),
                                         banks=tuple(args.bank), ensemble=args.ensemble))
    print(settings_line(solver.settings), file=sys.stderr if args.json or interactive else sys.stdout)
    if interactive:
        _answer_typed(solver, args)
        return
    unmatched = []
    for number, question in enumerate(questions, start=1):
        if args.json:
            answer = solver.answer(question, evidence=args.paragraphs, min_confidence=args.min_confidence)
            print_json(answer.to_dict())
            unmatched += [] if answer.matched else [question]
            continue
        text, matched = solver.text(question, args.show, args.paragraphs, sys.stdout.isatty(), args.min_confidence)
        unmatched += [] if matched else [question]
        print(("\n" if number > 1 else "") + text)
    if unmatched:
        which = "the question" if len(questions) == 1 else f"{len(unmatched)} of {len(questions)} questions"
        raise OpenQAError(f"{which}: {no_match_message(solver.index.manifest['lang'], questions=unmatched)}")


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

    hits = searcher.search(args.query, k)
    if args.json:
        print_json({"query": args.query, "k": k, "hits": [h.to_dict() for h in hits], "corpus": corpus_line(searcher.manifest),
                     "index": provenance(searcher.engine)})
        return
    note(f"{searcher.manifest['engine']} index of {corpus_line(searcher.manifest)}; the engine's default query parameters")
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
    print(f"wrote {_wrote(written)}: {len(topics)} topics, {len(lines)} lines", file=sys.stderr)


def _wrote(written: Path) -> str:
    """How a note names an output written: a stream such as ``/dev/stderr`` as the user named it (not
    what it resolves to, ``/proc/<pid>/fd/pipe:[...]``), a file by its absolute path."""
    from openqa.evaluate.results import stream_fd

    return str(written) if stream_fd(written) is not None else str(written.resolve())


def cmd_compare(args: argparse.Namespace) -> None:
    from openqa.evaluate.compare import check_output
    from openqa.evaluate.results import stream_fd
    from openqa.pipeline import compare

    output = Path(args.output) if args.output not in (None, "-") else None  # --output -: standard output alone
    runs = [Path(r) for r in args.runs]
    if output is not None:
        check_output(output, runs)
        if stream_fd(output) == 1:  # standard output, where the tables are printed anyway: written once, not twice
            if args.json:
                raise OpenQAError(f"--output {output} is standard output, where --json prints the record: name a file, "
                                  "or leave out one of them")
            output = None
    record, markdown = compare(Settings.resolve(args.data_dir), runs)
    if output is not None:
        from openqa.evaluate.results import write_output

        written = write_output(output, markdown, json.dumps(record, indent=2) + "\n")
        print(f"wrote {_wrote(written)}", file=sys.stderr)
    if args.json:
        print_json(record)
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
          Request(model=args.model if "reader" in methods else None, llm=llm, banks=tuple(args.bank), ensemble=args.ensemble),
          results,
          args.client_header)


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


