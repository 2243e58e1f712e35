"""Write RESULTS.md, the README's results table and docs/paper-tables.md (``paper_tables.py``) from
the JSON records under eval/results/ (so every number there has a file and a command behind it).

    python scripts/maintenance/results_md.py
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # scripts/: benchlib and the other kinds of script

from paper_tables import (
    BEFORE_PACKED,
    BEFORE_PACKED_NOTE,
    BEST_NOTE,
    BEST_RULE,
    GENERATED,
    LABELS,
    before_packed,
    books,
    paper_figure,
    readme_table,
    write_page,
)

from benchlib import REPO, RESULTS, record_path
from openqa import known_languages

#: Runs whose records were made before IR-Custom computed the paper's formula (IDF twice) and were
#: removed rather than shown: they await a rerun of these commands (the mainland hybrid first needs
#: the Chinese dense index, about 2 hours here: `openqa index --lang zh --engine dense`, then
#: `openqa tune --dataset mainland --method hybrid --settings-dir openqa/tuned`).
TO_RERUN = (
    "openqa eval --dataset mainland --split test --method hybrid",
)


def settings_source(settings: dict) -> str:
    """Where a record's top-N came from (older records name one source for all settings)."""
    sources = settings.get("sources", {})
    return sources.get("top_n") or sources.get("weights") or settings.get("source", "")


def chosen(settings: dict) -> str:
    """The settings a row's method chose on dev, those it has (a reader's evidence has no aggregate)."""
    parts = [f"top-{settings['top_n']}" if settings.get("top_n") else None, settings.get("aggregate"),
             f"query {settings['query']}" if settings.get("query") else None,
             f"{settings['fusion']} {settings.get('weight')}" if "fusion" in settings else None,
             "weights " + ", ".join(f"{k} {v:.3g}" for k, v in settings["weights"].items()) if "weights" in settings else None]
    return ", ".join(part for part in parts if part)


def load(name: str) -> dict | None:
    path = record_path(name)
    return json.loads(path.read_text()) if path.is_file() else None


def where_is(name: str) -> str:
    """Where the record (or figure) ``name`` is, as the pages write it: ``eval/results/<folder>/<name>``."""
    return record_path(name).relative_to(REPO).as_posix()


def records(pattern: str) -> list[Path]:
    """The records of the results tree whose names match ``pattern``, by name, wherever their folder
    (the compact records of LLM parts under ``llm-parts/`` apart: their own table reads them)."""
    return sorted((path for path in RESULTS.rglob(pattern) if "llm-parts" not in path.relative_to(RESULTS).parts),
                  key=lambda path: path.name)


#: What the tie rule of records made before ties depended on the question's content alone says.
FORMER_TIES = "with the question id"


def interval(ci95: list[float] | None) -> str:
    """A 95% interval as the tables write it: ``low-high``, one decimal ("no interval" for a record
    that keeps none, such as an LLM part put together from slices)."""
    return "no interval" if ci95 is None else f"{ci95[0]:.1f}-{ci95[1]:.1f}"


def accuracy_table() -> list[str]:
    rows = ["| dataset | split | method | n | accuracy % | 95% CI | paper | tied best | acc. if ties random | settings chosen on dev | from | s |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for path in records("*.json"):
        s = json.loads(path.read_text())
        if "ci95" not in s or s.get("limit"):
            continue
        st = s.get("settings", {})
        method = s["method"] + (f" ({s['variant']})" if s.get("variant") else "") + (" †" if FORMER_TIES in s["ties"].get("rule", "") else "") \
            + (f" {BEFORE_PACKED}" if before_packed(s) else "")
        paper = None if s.get("variant") else paper_figure(s["dataset"], s["split"], s["method"])
        rows.append(
            f"| {s['dataset']} | {s['split']} | {method} | {s['n']} | **{s['accuracy']:.2f}** | {interval(s['ci95'])} "
            f"| {paper or ''} | {s['ties']['tie_rate']:.1f}% | {s['ties']['expected_accuracy_random_ties']:.2f} "
            f"| {chosen(st)} | {settings_source(st)} | {s['seconds']:.1f} |"
        )
    return rows


def confidence_table() -> list[str]:
    """How far to trust each evaluated run's answers (runs whose record has probabilities)."""
    rows = ["| dataset | split | method | n | accuracy % | probabilities from | ECE (10 bins) | Brier | AURC "
            "| acc. @10% | acc. @20% (95% CI) | acc. @50% | vs best part on dev (95% CI) |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for path in records("*.json"):
        s = json.loads(path.read_text())
        c = s.get("confidence")
        if not c or s.get("limit"):
            continue
        at = c["accuracy_at_coverage"]
        versus = s.get("versus_best_part")
        against = (f"{versus['difference']:+.2f} vs {versus['part']} ({versus['ci95'][0]:+.2f} to {versus['ci95'][1]:+.2f})"
                   if versus else "")
        method = s["method"] + (f" ({s['variant']})" if s.get("variant") else "")
        rows.append(f"| {s['dataset']} | {s['split']} | {method} | {s['n']} | {s['accuracy']:.2f} "
                    f"| {s['settings'].get('sources', {}).get('probabilities', '')} | {c['ece']:.3f} | {c['brier']:.3f} | {c['aurc']:.3f} "
                    f"| {at['10']['accuracy']:.1f} | {at['20']['accuracy']:.1f} ({interval(at['20']['ci95'])}) "
                    f"| {at['50']['accuracy']:.1f} | {against} |")
    return rows


#: The README lines between which ``headline_table`` is written.
README_MARKS = GENERATED


def named_ensembles() -> list[tuple[str, dict]]:
    """The test records of ensembles filed under a name (``--ensemble NAME``, e.g. with an LLM part) that were
    compared with the exam's own ensemble on the same questions, as (file name, record)."""
    named = [(path.name, load(path.name)) for path in records("*-test-ensemble-*.json")]
    return [(file, r) for file, r in named if r and r.get("versus_baseline")]


def headline_table() -> list[str]:
    """The README's results block: each exam's best test figure against the paper's best, with its record
    (``paper_tables.readme_table``, whose rule for "best" it states)."""
    return [*readme_table(), "", f"Best: {BEST_RULE}. {BEST_NOTE}; every row of its Tables 7 and 8 beside ours: "
            "[the paper's tables](docs/paper-tables.md)."]


def named_ensemble_lines() -> list[str]:
    """One line per named ensemble (``named_ensembles``): its questions, accuracy, calibration and the
    exam's own ensemble on the same questions, with its record."""
    lines = []
    for file, r in named_ensembles():
        if r.get("offset"):
            where = f"{r['offset'] + 1:,}-{r['offset'] + r['n']:,}"
        else:
            where = f"first {r['n']:,}" if r.get("limit") else f"all {r['n']:,}"
        lines.append(f"- {LABELS.get(r['dataset'], r['dataset'])} test ({books(r['dataset'])}), {where} questions: `{r['variant']}` "
                     f"{r['accuracy']:.2f} ({interval(r['ci95'])}), ECE {r['confidence']['ece']:.3f}; the exam's own ensemble "
                     f"{r['versus_baseline']['accuracy']:.2f} (`{where_is(file)}`)")
    return lines


def write_readme_table(readme: Path) -> None:
    """Replace the README's headline table (between ``README_MARKS``) with the records' figures."""
    text = readme.read_text()
    start, end = (text.index(mark) for mark in README_MARKS)
    readme.write_text(text[: start + len(README_MARKS[0])] + "\n" + "\n".join(headline_table()) + "\n" + text[end:])


def training_table() -> list[str]:
    """One row per reader training run (train-*.run.json): data, evidence, settings, and loss / selection accuracy by epoch.
    A reader trained on all of dev (``--cross-fit``) has no selection part: its row gives the out-of-fold
    accuracy of its cross-fit record (``train-<run>.json``), by epoch, and the epochs chosen by it."""
    rows = ["| run | reader | evidence | lr, effective batch | loss by epoch | selection accuracy % by epoch | best | command |",
            "|---|---|---|---|---|---|---|---|"]
    for path in records("train-*.run.json"):
        r = json.loads(path.read_text())
        c, epochs = r["config"], r["epochs"]
        evidence = f"{r['retriever']} top-{r['top_n']}" + (f", query {r['query']}" if r.get("query") else "")
        losses = ", ".join(f"{e['loss']:.4f}" for e in epochs)
        name = path.name.removeprefix('train-').removesuffix('.run.json')
        crossed = path.with_name(f"train-{name}.json")
        if r.get("best_selection_accuracy") is None and crossed.is_file():
            fit = json.loads(crossed.read_text())["cross_fit"]
            selection = (f"none: all of dev; out of fold ({fit['k']} folds, {fit['questions']:,} questions): "
                         + ", ".join(f"{v:.2f}" for v in fit["accuracy_by_epoch"].values()))
            best = f"{max(fit['accuracy_by_epoch'].values()):.2f} out of fold, {fit['epochs_chosen']} epochs"
        else:
            selection = ", ".join(f"{e['selection_accuracy']:.2f}" for e in epochs)
            best = f"{r['best_selection_accuracy']:.2f}"
        note = f" ({r['note']})" if r.get("note") else ""
        rows.append(
            f"| {name}{f' {BEFORE_PACKED}' if before_packed(r) else ''} | {' '.join(filter(None, (r['reader'], r['model'])))} ({r['dataset']}, "
            f"{r['train_questions']} train) | {evidence} | {c['lr']:g}, {c['effective_batch']} "
            f"| {losses} | {selection} | {best} | `{r['command']}`{note} |"
        )
    return rows


def fault_command(faults: dict) -> str:
    """How the fault record was made, as a reader reruns it: a record merged from parts run alone
    names each part's command without the scratch file it wrote (a developer's ``$TMPDIR/...``),
    then the merge."""
    parts = faults.get("part_runs") or []
    if not parts:
        return f"`{faults['command']}`"
    script = "python scripts/benchmarks/bench_faults.py"
    steps = [re.sub(r"\s+--output\s+\S+", "", run["command"]).removeprefix(script).strip() for run in parts]
    return (f"`{script}` in {len(parts)} parts run alone ({', '.join(f'`{step}`' for step in steps)}), "
            "then merged with `--merge`")


#: What † says under the accuracy table.
FORMER_TIES_NOTE = ("† made under the former tie rule (ties broken by a hash with the question id, so by file name and line); "
                    "ties are now broken by the question's content alone; these rows await a rerun of their command.")


def marks_noted(rows: list[str], *notes: str) -> list[str]:
    """The notes (each starting with its mark) whose mark some row of a table carries, each followed by a
    blank line: a note with no row to explain is left out."""
    out = []
    for note in notes:
        mark = note.split(" ", 1)[0]
        if any(f" {mark} " in row for row in rows):
            out += [note, ""]
    return out


def results_text() -> str:
    """RESULTS.md as the records under eval/results/ make it."""
    out = ["# Results", "",
           "Generated by `python scripts/maintenance/results_md.py` from the JSON records in `eval/results/`; each record",
           "holds the command that produced it, its settings, the data and the date. English figures use the",
           "11 English books of this copy of MedQA (the paper had 18); Chinese use all 33. Settings were",
           "chosen on dev with `openqa tune` (records shipped in `openqa/tuned/`), test was run once with them.",
           "The paper column gives the paper's figure for the same split (18 English books). Records made",
           "before the tuned settings moved into the package name `eval/tuned/`, where the same files lived then.",
           "Every row comes from a record made with the current scoring; runs made before IR-Custom computed",
           "the paper's formula (IDF twice) were removed and await these commands:", "",
           *(f"- `{command}`" for command in TO_RERUN), ""]
    for language in known_languages():
        lang = language.code
        stats = load(f"corpus-stats-{lang}.json")
        if stats:
            unit = language.token_unit
            out.append(f"- Corpus `{lang}`: {stats['books']} books, {stats['paragraphs']:,} paragraphs, {stats['tokens']:,} {unit}, "
                       f"vocabulary {stats['vocabulary']:,}, paragraph length {stats['avg_paragraph_length']} on average, "
                       f"{stats['max_paragraph_length']} at most (`{stats['command']}`).")
    accuracy = accuracy_table()
    out += ["", "## Accuracy", "", *accuracy, "", *marks_noted(accuracy, FORMER_TIES_NOTE, BEFORE_PACKED_NOTE)]
    out += ["## How far to trust an answer", "",
            "Probabilities are each method's option scores on its logit scale divided by a temperature fitted on the "
            "exam's dev split (`openqa tune`, shipped in `openqa/tuned/*.calibration.json`); an ensemble weighs its parts' "
            "logits with weights fitted on dev (`openqa tune --method ensemble`; its temperature on cross-fitted dev logits, "
            "5 folds). ECE over 10 equal-width bins of the "
            "chosen option's probability; AURC: area under the risk-coverage curve; acc. @k%: accuracy of the k% most "
            "confident questions (ties in confidence share their answers evenly). Default ensemble parts: "
            "`python scripts/studies/ensemble_parts.py` (5-fold CV on dev).", "", *confidence_table(), ""]
    formats = load("formats-us-test-ir-custom.json")
    if formats:
        shown = ", ".join(f"{r['format']} {r['file']} {r['accuracy']:.2f}%" for r in formats["files"])
        out.append(f"- The same questions in every format (`{formats['command']}`): {shown}; predictions identical "
                   f"question by question: {formats['identical']}.")
    http = load("bench-llamacpp-http.json")
    if http:
        ways = http["ways"]
        out.append(f"- llama.cpp in process vs its HTTP server (`{http['command']}`, {http['model']}, {http['n']} US test questions, "
                   f"{http['settings']['evidence']} evidence, {http['settings']['scoring']}): letters agree {http['letters_agree']}/{http['n']}, "
                   f"largest probability difference {http['max_probability_difference']} (with llama.cpp's prompt cache left on: "
                   f"{http['with_llama_cpp_prompt_cache_on']['letters_agree']}/{http['n']}, "
                   f"{http['with_llama_cpp_prompt_cache_on']['max_probability_difference']}); s/question in process "
                   f"{ways['in_process']['seconds_per_question']['median']}, over HTTP {ways['http']['seconds_per_question']['median']} "
                   f"(median of {http['settings']['repeats']}); openqa's overhead over HTTP "
                   f"{ways['http']['overhead_percent_of_model_time']}% of llama.cpp's own time.")
    for name, title in (("us-dev-filter-agreement.json", "US dev"), ("tw-en-dev-filter-agreement.json", "TW-en dev")):
        fa = load(name)
        if fa:
            out.append(f"- Medical filter vs MetaMap, {title}: token precision {fa['precision']:.3f}, recall {fa['recall']:.3f} "
                       f"over {fa['n']} questions (`{fa['command']}`).")
    training = training_table()
    out += ["", "## Reader training", "", "The data folder these runs read has no official train split, so readers train on dev: "
            "on a seeded 80/20 split (`--train-split dev:0.8`: the selection part picks the checkpoint), or cross-fitted on all of it "
            "(`--cross-fit 5`: every dev question scored by a reader that never saw it, the epochs chosen on those scores, then one "
            "reader trained on all of dev). The test rows above evaluate these checkpoints.", "", *training, "",
            *marks_noted(training, BEFORE_PACKED_NOTE)]
    llms = [r for r in (load(path.name) for path in records("bench-llm*.json")) if "n_available" in r]  # bench_llm.py's
    if llms:
        from benchmarks.bench_llm import table

        out += ["", "## LLM reader"]
        for llm in llms:
            out += ["", f"`{llm['command']}` ({llm['date']}), model {llm['model']}, at least the first {llm['n']} of "
                    f"{llm['n_available']} US test questions in every cell. {llm['note']}", "", table(llm)]
    out += ["", "## Speed", ""]
    for name in ("bench-core.json", "bench-engines.json", "bench-search.json", "bench-encoder.json", "bench-dense.json",
                 "bench-serve.json"):
        b = load(name)
        if b:
            figures = {k: v for k, v in b.items()
                       if k in ("figures", "queries_per_second", "ratios", "ratio_openqa_over_bm25s", "ratio_matched_by_bm25s_mode", "variants", "met")}
            out.append(f"- `{b['command']}` ({b['date']}): `{json.dumps(figures)}`")
    cpu = load("bench-llm-cpu.json")
    if cpu:
        speed = "; ".join(f"{name} {s['questions_per_second']['median']} q/s, {s['speedup']['median']:.2f}x "
                          f"({s['speedup']['min']:.2f}-{s['speedup']['max']:.2f}), letters differing {s['letters_differing']}"
                          for name, s in cpu["settings"].items())
        out.append(f"- The LLM part on the CPU, {cpu['n']} {cpu['dataset']} {cpu['split']} questions, {cpu['rounds']} rounds "
                   f"(`{cpu['command']}`, {cpu['date']}): {speed}.")
    parts = [json.loads(path.read_text()) for path in sorted((RESULTS / "llm-parts").glob("*.json"))]
    named = [r for _, r in named_ensembles()]
    if parts or named:
        out += ["", "## A small LLM beside the textbooks", "",
                "LLM parts kept as compact records under `eval/results/llm-parts/` (letter probabilities by question digest; "
                "the model named by its sha256), and ensembles fitted with them on dev, evaluated on test against the exam's own "
                "ensemble on the same questions (paired bootstrap, 2,000 resamples):", "",
                "| part | dataset | split | questions | accuracy % (95% CI) | model seconds | model sha256 |", "|---|---|---|---|---|---|---|"]
        for r in parts:
            s = r["settings"]
            evidence = "closed book" if s["evidence"] == "none" else f"{s['evidence']} evidence, top {s['top_k']}, {s['evidence_tokens']} tokens"
            if s.get("demonstrations"):
                evidence += f", {s['demonstrations']} solved questions shown first"
            out.append(f"| {r['model']} ({evidence}, {s['scoring']}) | {r['dataset']} | {r['split']} "
                       f"| {r['n']:,} | {r['accuracy']:.2f} ({interval(r.get('ci95'))}) | {format(r['model_seconds_all_slices'] or 0, ',.0f') if r['model_seconds_all_slices'] else 'not recorded'} "
                       f"| `{r['model_sha256'][:16]}...` |")
        if named:
            out += ["", "| test split | ensemble | questions | accuracy % (95% CI) | ECE | 20% most confident | exam's own ensemble "
                    "| difference (95% CI) | record |", "|---|---|---|---|---|---|---|---|---|"]
            for r in named:
                c, base = r["confidence"], r["versus_baseline"]
                out.append(f"| {r['dataset']} | {r['variant']} | {r['n']:,} | {r['accuracy']:.2f} ({interval(r['ci95'])}) "
                           f"| {c['ece']:.3f} | {c['accuracy_at_coverage']['20']['accuracy']:.1f} | {base['accuracy']:.2f} "
                           f"| {base['difference']:+.2f} ({base['ci95'][0]:+.2f} to {base['ci95'][1]:+.2f}) | `{r['command']}` |")
            out += ["", "Each named ensemble against the exam's own ensemble on the same questions, with its record:", "",
                    *named_ensemble_lines()]
    routes = [load(path.name) for path in records("routes-*.json")]
    if routes:
        out += ["", "## One question, one answer", "",
                "The same questions through every route, compared question by question (matched by content) with "
                "`Solver.answer` one question at a time:", "",
                "| dataset | split | method | questions | route | predictions that differ | score vectors that differ | command |",
                "|---|---|---|---|---|---|---|---|"]
        for r in routes:
            for route, row in r["routes"].items():
                out.append(f"| {r['dataset']} | {r['split']} | {r['method']} | {row['matched']} | {route} "
                           f"| {row['predictions_differ']} | {row['scores_differ']} | `{r['command']}` |")
    scale = load("bench-scale.json")
    if scale:
        out += ["", "## Cost against corpus size", "", f"`{scale['command']}` ({scale['date']}); {scale['accuracy_note']}.", "",
                "| corpus | paragraphs | engine | build s | build peak MiB | index bytes/paragraph | open s | p50 ms | p95 ms | questions/s | US test % |",
                "|---|---|---|---|---|---|---|---|---|---|---|"]
        for r in scale["rows"]:
            out.append(f"| {r['corpus']} | {r['paragraphs']:,} | {r['engine']} | {r['build_s']} | {r['build_peak_memory_mb']:.0f} "
                       f"| {r['index_bytes_per_paragraph']:.0f} | {r['open_s']} | {r['p50_ms']} | {r['p95_ms']} "
                       f"| {r['throughput_qps']} | {r['accuracy']} |")
        out += ["", f"![cost against corpus size]({where_is('bench-scale.png')})"]
    faults = load("bench-faults.json")
    if faults:
        bad = [k for k in ("tracebacks", "crashes", "hangs", "wrong_exits", "indexes_lost", "indexes_half_written", "scratch_left",
                           "crash_logs", "result_sets_inconsistent", "temporaries_left") if k in faults]
        out += ["", "## Faults", "",
                f"{fault_command(faults)} ({faults['date']}): {faults['cases']} hostile cases ({', '.join(faults['categories'])}) "
                f"and {faults['interruptions']} interruptions (SIGINT and SIGKILL of `index` for {', '.join(faults['engines_interrupted'])}, "
                f"and of `eval` and `tune --method ensemble`); {faults['clean_errors']} clean one-line errors, {faults['answered']} right answers, "
                f"{faults['clean_stops']} clean stops.", "",
                "| " + " | ".join(bad) + " |", "|" + "---|" * len(bad), "| " + " | ".join(str(faults[k]) for k in bad) + " |"]
    marks = load("bench-highlights-zh.json")
    if marks:
        shipped, former = marks["rules"]["words (shipped)"], marks["rules"]["index terms (former)"]

        def share(rule: dict) -> str:
            return f"{rule['median_percent']}% (quartiles {rule['quartiles_percent'][0]}-{rule['quartiles_percent'][1]}%)"

        out += ["", "## Evidence marks", "",
                f"`{marks['command']}` ({marks['date']}): the share of a Chinese evidence paragraph's characters marked on the page, "
                f"over the {marks['paragraphs']:,} paragraphs of the first {marks['n']} MCMLE dev questions ({marks['method']}): median "
                f"{share(shipped)} with the query's words, {share(former)} with the index's characters and bigrams; "
                f"{shipped['unmarked_paragraphs']} paragraphs left unmarked (before: {former['unmarked_paragraphs']})."]
    report = record_path("retrieval-us-dev.md")
    if report.is_file():
        out += ["", "## Retrieval quality", "", *report.read_text().splitlines()[2:], "", f"![answer support]({where_is('retrieval-us-dev.png')})"]
    return "\n".join(out) + "\n"


def main() -> None:
    (RESULTS.parents[1] / "RESULTS.md").write_text(results_text())
    write_readme_table(RESULTS.parents[1] / "README.md")
    write_page()
    print("wrote RESULTS.md, the README's results table and docs/paper-tables.md")


if __name__ == "__main__":
    main()
