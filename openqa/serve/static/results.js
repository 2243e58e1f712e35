// The results page: runs of the results folder (GET v1/results), a run's questions (GET
// v1/results/RUN) beside another run's, its risk-coverage curve and reliability diagram (GET
// v1/results/RUN/curves), a comparison of ticked runs (GET v1/compare?runs=A,B), and a question
// re-asked through POST v1/answer with the run's method, its evidence with the matched words marked.
// Text is set with textContent only (element(), spoken(), marked() and paragraphView() of common.js): nothing from a
// record is parsed as HTML. A question's text and options carry the run's language (lang).
"use strict";

const state = {
  runs: [], sortKey: "run", ascending: true,
  run: null, questions: [],   // the open run and its questions (the first `cut` of them, when the server lists no more)
  cut: null,
  beside: null,               // the run shown beside it (its questions by key), or null
  served: new Set(),          // "method|lang" of the methods this server answers with
};
const SVG = "http://www.w3.org/2000/svg";
//: One colour per run on a chart (readable on the light and the dark background).
const COLORS = ["#3b7dd8", "#d8563b", "#2f9e58", "#9a5bd1", "#c98a1a", "#2aa3a3"];

function cell(row, text) {
  const td = document.createElement("td");
  td.textContent = text === null || text === undefined ? "-" : String(text);
  row.appendChild(td);
  return td;
}

const fixed = (value, digits) => (typeof value === "number" ? value.toFixed(digits) : "-");

function accuracyText(run) {
  const ci = Array.isArray(run.ci95) ? ` (${fixed(run.ci95[0], 1)}-${fixed(run.ci95[1], 1)})` : "";
  return `${fixed(run.accuracy, 2)}${ci}`;
}

async function getJSON(url, body) {
  const reply = await fetch(url, body === undefined ? {} : {
    method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body),
  });
  const data = await reply.json().catch(() => ({}));
  if (!reply.ok) throw new Error(data.error || reply.statusText || `the server answered ${reply.status}`);
  return data;
}

// The name a run is asked for by: its folder in the results folder and its file name (runs/us/NAME.json),
// so that two runs of one name in different folders stay apart.
function nameOf(run) {
  return run.folder ? `${run.folder}/${run.run}` : run.run;
}

function showRuns() {
  const body = document.querySelector("#runs tbody");
  const needle = document.getElementById("filter").value.trim().toLowerCase();
  const readable = state.runs.filter((r) => !r.unreadable);
  const shown = readable.filter((r) => !needle || [r.run, r.folder || "", r.dataset, r.split, r.method, r.variant || ""].join(" ").toLowerCase().includes(needle));
  const key = state.sortKey;
  shown.sort((a, b) => {
    const x = a[key], y = b[key];
    const order = x === y ? 0 : (x === null || x === undefined) ? 1 : (y === null || y === undefined) ? -1 : x < y ? -1 : 1;
    return state.ascending ? order : -order;
  });
  body.replaceChildren();
  for (const run of shown) {
    const row = document.createElement("tr");
    row.dataset.run = nameOf(run);
    const tick = element("input", { type: "checkbox", className: "tick", value: nameOf(run) });
    tick.addEventListener("change", updateCompare);
    row.appendChild(element("td", {}, [tick]));
    const name = cell(row, "");
    if (run.questions) {
      const link = element("a", { href: "#", textContent: run.run, className: "open-run" });
      link.addEventListener("click", (event) => { event.preventDefault(); openRun(run); });
      name.appendChild(link);
    } else {
      name.textContent = run.run;
    }
    cell(row, run.folder || ""); cell(row, run.dataset); cell(row, run.split); cell(row, run.method + (run.variant ? ` (${run.variant})` : ""));
    cell(row, run.n); cell(row, accuracyText(run)); cell(row, fixed(run.ece, 3));
    cell(row, fixed(run.accuracy_at_20, 1)); cell(row, run.date); cell(row, run.openqa_version);
    body.appendChild(row);
  }
  const bad = state.runs.filter((r) => r.unreadable);
  document.getElementById("unreadable").textContent = bad.length
    ? "Unreadable: " + bad.map((r) => `${r.run} (${r.unreadable})`).join("; ") : "";
}

function updateCompare() {
  const ticked = document.querySelectorAll(".tick:checked");
  document.getElementById("compare").disabled = ticked.length < 2;
}

// ---------------------------------------------------------------- charts

function svg(tag, attributes = {}, children = []) {
  const node = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attributes)) node.setAttribute(name, String(value));
  node.append(...children);
  return node;
}

// A chart of percentages (0-100 on both axes): each series a line through its points (with dots when
// `dots`), and a dotted reference line from (0, reference[0]) to (100, reference[1]).
function chart(title, xLabel, yLabel, series, reference, dots) {
  const width = 340, height = 250, left = 46, right = 10, top = 10, bottom = 40;
  const x = (v) => left + ((width - left - right) * v) / 100;
  const y = (v) => height - bottom - ((height - top - bottom) * v) / 100;
  const parts = [];
  for (const tick of [0, 25, 50, 75, 100]) {
    parts.push(svg("line", { x1: x(0), x2: x(100), y1: y(tick), y2: y(tick), class: "grid" }));
    parts.push(svg("text", { x: left - 6, y: y(tick) + 4, "text-anchor": "end", class: "tick" }, [String(tick)]));
    parts.push(svg("text", { x: x(tick), y: height - bottom + 16, "text-anchor": "middle", class: "tick" }, [String(tick)]));
  }
  if (reference) {
    parts.push(svg("line", { x1: x(0), y1: y(reference[0]), x2: x(100), y2: y(reference[1]), class: "reference" }));
  }
  series.forEach((one, i) => {
    const color = COLORS[i % COLORS.length];
    const points = one.points.map(([px, py]) => `${x(px).toFixed(1)},${y(py).toFixed(1)}`).join(" ");
    parts.push(svg("polyline", { points, fill: "none", stroke: color, "stroke-width": 2, class: "series" }));
    if (dots) {
      for (const [px, py, n] of one.points) {
        parts.push(svg("circle", { cx: x(px), cy: y(py), r: 3.5, fill: color },
          [svg("title", {}, [`${one.label}: confidence ${px.toFixed(1)}%, right ${py.toFixed(1)}% (${n} questions)`])]));
      }
    }
  });
  parts.push(svg("text", { x: (left + width - right) / 2, y: height - 6, "text-anchor": "middle", class: "axis" }, [xLabel]));
  parts.push(svg("text", { x: 12, y: (top + height - bottom) / 2, "text-anchor": "middle", class: "axis",
    transform: `rotate(-90 12 ${(top + height - bottom) / 2})` }, [yLabel]));
  const picture = svg("svg", { viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": title }, parts);
  const legend = element("ul", { className: "legend" }, series.map((one, i) => element("li", {}, [
    element("span", { className: "swatch", style: `background: ${COLORS[i % COLORS.length]}` }), one.label,
  ])));
  return element("figure", { className: "chart" }, [element("figcaption", { textContent: title }), picture, legend]);
}

// The risk-coverage curves and reliability diagrams of `names`, drawn into `target` (one line per run).
async function drawCurves(target, names) {
  target.replaceChildren(element("p", { className: "meta", textContent: "drawing..." }));
  let records;
  try {
    records = await Promise.all(names.map((name) => getJSON(`v1/results/${encodeURIComponent(name)}/curves`)));
  } catch (error) {
    target.replaceChildren(element("p", { className: "error", textContent: `cannot draw the curves: ${error.message}` }));
    return;
  }
  const chance = records[0].chance;
  const coverage = records.map((r) => ({ label: `${r.run} (${r.n} questions)`, points: r.coverage }));
  const reliability = records.map((r) => ({
    label: `${r.run} (ECE ${fixed(r.ece, 3)})`,
    points: r.reliability.map((bin) => [bin.confidence, bin.accuracy, bin.n]),
  }));
  target.replaceChildren(
    chart("Accuracy of the answered, most confident first" + (chance === null ? "" : ` (dotted: chance, ${chance.toFixed(0)}%)`),
      "coverage: questions answered (%)", "accuracy (%)", coverage, chance === null ? null : [chance, chance], false),
    chart("Reliability: right answers against confidence (dotted: perfectly calibrated)",
      "confidence, mean of the bin (%)", "right (%)", reliability, [0, 100], true),
  );
}

// ---------------------------------------------------------------- a run's questions

// A question's key across runs: its content digest (rows written before digests: its id).
const keyOf = (q) => q.digest || `id:${q.qid}`;

const FILTERS = {
  all: () => true,
  right: (q) => q.correct,
  wrong: (q) => !q.correct,
  "confident-wrong": (q) => !q.correct && (q.confidence || 0) >= 0.5,
  abstained: (q) => q.abstained === true,
  disagree: (q, other) => other !== undefined && other.prediction !== q.prediction,
  "only-this": (q, other) => other !== undefined && q.correct && !other.correct,
  "only-other": (q, other) => other !== undefined && !q.correct && other.correct,
};

function probability(row, letter) {
  return row && row.probabilities && row.probabilities[letter] !== undefined ? row.probabilities[letter].toFixed(2) : "-";
}

function showQuestions() {
  const keep = FILTERS[document.getElementById("which").value];
  const beside = state.beside;
  const list = document.getElementById("questions");
  list.replaceChildren();
  const shown = state.questions.filter((q) => keep(q, beside ? beside.rows.get(keyOf(q)) : undefined));
  const both = beside ? state.questions.filter((q) => beside.rows.has(keyOf(q))).length : 0;
  const listed = state.cut === null ? "" : ` (the first ${state.cut.toLocaleString("en")} of the run's ${state.run.n.toLocaleString("en")}: `
    + "the server lists no more of a run)";
  document.getElementById("run-count").textContent = `${shown.length} of ${state.questions.length} questions${listed}`
    + (beside ? ` (${both} also in ${beside.name}, matched by content)` : "") + (shown.length > 500 ? "; the first 500 shown" : "");
  for (const q of shown.slice(0, 500)) list.appendChild(questionItem(q, beside ? beside.rows.get(keyOf(q)) : undefined));
}

function questionItem(q, other) {
  const item = element("li", { className: q.correct ? "right" : "wrong" });
  const lang = state.run && state.run.lang ? state.run.lang : undefined;  // the question's language, where the run names it
  const confidence = q.confidence === null || q.confidence === undefined ? "" : `, confidence ${q.confidence.toFixed(2)}`;
  const otherText = other ? `; ${state.beside.name}: predicted ${other.prediction || "none"} (${other.correct ? "right" : "wrong"})` : "";
  item.appendChild(element("p", { className: "question-head", textContent: `${q.qid}: predicted ${q.prediction || "none"}, answer ${q.answer}${confidence}${otherText}` }));
  if (q.question) item.appendChild(element("p", { className: "question-text", lang, textContent: q.question }));
  const letters = q.options ? Object.keys(q.options) : Object.keys(q.probabilities || {});
  item.appendChild(element("ul", {}, letters.map((letter) => element("li", {}, [
    `${letter}. `, ...(q.options ? [spoken(q.options[letter], lang)] : []),
    ` (p ${probability(q, letter)}${other ? ` | ${probability(other, letter)}` : ""})` + (letter === q.answer ? " (answer)" : ""),
  ]))));
  if (q.evidence_ids && q.evidence_ids.length) {
    item.appendChild(element("p", { className: "meta", textContent: `evidence read: ${q.evidence_ids.join(", ")}` }));
  }
  const how = reaskable(state.run, q);
  if (how) {
    const button = element("button", { type: "button", className: "reask", textContent: `Re-ask through /v1/answer (${how.method}, ${how.lang})` });
    const answer = element("div", { className: "reasked" });
    button.addEventListener("click", () => reask(q, how, button, answer));
    item.append(button, answer);
  }
  return item;
}

// How a run's question can be asked again on this server: its method in its dataset's language,
// when the server answers with that method and the run used no variant of it; else null.
function reaskable(run, q) {
  if (!run || !run.lang || run.variant || !q.question || !q.options) return null;
  return state.served.has(`${run.method}|${run.lang}`) ? { method: run.method, lang: run.lang } : null;
}

// Ask the question again; show what the server answers now against what the run recorded, and each
// option's evidence paragraphs with the matched words marked (the predicted option's open).
async function reask(q, how, button, target) {
  button.disabled = true;
  target.replaceChildren(element("p", { className: "meta", textContent: "asking..." }));
  try {
    const answer = await getJSON("v1/answer", { question: q.question, options: q.options, method: how.method, lang: how.lang, evidence: 3 });
    const now = Object.fromEntries(answer.options.map((o) => [o.letter, o.probability]));
    const gap = Math.max(...Object.keys(now).map((k) => Math.abs((now[k] || 0) - ((q.probabilities || {})[k] || 0))));
    const verdict = answer.prediction !== q.prediction
      ? `a different answer from the run's ${q.prediction || "none"}: this server's settings or index differ from the run's (settings below)`
      : gap < 1e-3 ? "the same answer and probabilities as the run" : `the same answer as the run; probabilities differ by up to ${gap.toFixed(3)}`;
    const settings = JSON.stringify(answer.settings);
    target.replaceChildren(
      element("p", { className: "verdict", textContent: `Now: ${answer.prediction || "none"}; ${verdict}.` }),
      ...answer.options.map((option) => element("details", { open: option.letter === answer.prediction, className: "option-evidence" }, [
        element("summary", {}, [`${option.letter}. `, spoken(option.text, answer.lang),
          ` (p ${fixed(option.probability, 2)}, ${option.evidence.length} paragraphs)`]),
        ...option.evidence.map((paragraph) => paragraphView(paragraph, answer.lang)),
      ])),
      element("p", { className: "meta settings", textContent: `settings: ${settings}` }),
    );
  } catch (error) {
    target.replaceChildren(element("p", { className: "error", textContent: error.message }));
  } finally {
    button.disabled = false;
  }
}

function fillBeside(run) {
  const select = document.getElementById("beside");
  const others = state.runs.filter((r) => !r.unreadable && r.questions && nameOf(r) !== nameOf(run) && r.dataset === run.dataset && r.split === run.split);
  select.replaceChildren(element("option", { value: "", textContent: "no other run" }),
    ...others.map((r) => element("option", { value: nameOf(r), textContent: `${nameOf(r)} (${r.method})` })));
  select.disabled = others.length === 0;
  setPairFilters(false);
}

function setPairFilters(enabled) {
  for (const value of ["disagree", "only-this", "only-other"]) {
    document.querySelector(`#which option[value="${value}"]`).disabled = !enabled;
  }
  const which = document.getElementById("which");
  if (!enabled && which.selectedOptions[0].disabled) which.value = "all";
}

async function chooseBeside() {
  const name = document.getElementById("beside").value;
  state.beside = null;
  if (name) {
    try {
      const rows = (await getJSON(`v1/results/${encodeURIComponent(name)}`)).questions;
      state.beside = { name, rows: new Map(rows.map((row) => [keyOf(row), row])) };
    } catch (error) {
      document.getElementById("run-count").textContent = `cannot read ${name}: ${error.message}`;
    }
  }
  setPairFilters(state.beside !== null);
  showQuestions();
  drawCurves(document.getElementById("run-charts"), state.beside ? [nameOf(state.run), state.beside.name] : [nameOf(state.run)]);
}

async function openRun(run) {
  state.run = run;
  state.beside = null;
  document.getElementById("run-title").textContent = `${nameOf(run)}: ${run.method} on ${run.dataset} ${run.split}`;
  const served = run.lang && state.served.has(`${run.method}|${run.lang}`);
  document.getElementById("run-reask").textContent = !run.lang ? ""
    : run.variant ? `Re-asking is off: this run used a variant of ${run.method} (${run.variant}) that the server does not answer with.`
      : served ? `Each question can be re-asked through /v1/answer with ${run.method} (${run.lang}) as this server has it.`
        : `To re-ask its questions, start the server with --method ${run.method} --lang ${run.lang}.`;
  fillBeside(run);
  state.cut = null;
  try {
    const listed = await getJSON(`v1/results/${encodeURIComponent(nameOf(run))}`);
    state.questions = listed.questions;
    state.cut = listed.cut ? listed.most : null;
  } catch (error) {
    state.questions = [];
    document.getElementById("run-count").textContent = `cannot read its questions: ${error.message}`;
  }
  document.getElementById("run").hidden = false;
  document.getElementById("run").scrollIntoView();  // below the list of runs: brought into sight
  showQuestions();
  drawCurves(document.getElementById("run-charts"), [nameOf(run)]);
}

// ---------------------------------------------------------------- comparison

async function compareTicked() {
  const names = [...document.querySelectorAll(".tick:checked")].map((t) => t.value);
  const target = document.getElementById("comparison-body");
  document.getElementById("comparison").hidden = false;
  document.getElementById("comparison").scrollIntoView();
  target.replaceChildren();
  try {
    const record = await getJSON(`v1/compare?runs=${encodeURIComponent(names.join(","))}`);
    target.appendChild(element("p", { textContent: `${record.common_questions} common questions, matched by ${record.matched_by}.` }));
    const table = element("table", { id: "pairs" });
    const head = table.createTHead().insertRow();
    for (const title of ["run", "against", "difference (points, 95% CI)", "only this right", "only the first right", "McNemar exact p"]) {
      head.insertCell().textContent = title;
    }
    for (const pair of record.pairs) {
      const row = table.insertRow();
      row.insertCell().textContent = pair.run;
      row.insertCell().textContent = pair.against;
      row.insertCell().textContent = `${pair.difference >= 0 ? "+" : ""}${pair.difference.toFixed(2)} (${pair.ci95[0].toFixed(2)} to ${pair.ci95[1].toFixed(2)})`;
      row.insertCell().textContent = pair.only_this_right;
      row.insertCell().textContent = pair.only_first_right;
      row.insertCell().textContent = pair.mcnemar_exact_p.toPrecision(3);
    }
    target.appendChild(table);
    const charts = element("div", { className: "charts", id: "comparison-charts" });
    target.appendChild(charts);
    await drawCurves(charts, names);
  } catch (error) {
    target.appendChild(element("p", { className: "error", textContent: error.message }));
  }
}

async function start() {
  for (const header of document.querySelectorAll("#runs th[data-key]")) {
    header.addEventListener("click", () => {
      const key = header.dataset.key;
      state.ascending = state.sortKey === key ? !state.ascending : true;
      state.sortKey = key;
      showRuns();
    });
  }
  document.getElementById("filter").addEventListener("input", showRuns);
  document.getElementById("which").addEventListener("change", showQuestions);
  document.getElementById("beside").addEventListener("change", chooseBeside);
  document.getElementById("compare").addEventListener("click", compareTicked);
  try {
    const methods = await getJSON("v1/methods");
    state.served = new Set(methods.served.filter((o) => o.available).map((o) => `${o.method}|${o.lang}`));
  } catch {
    state.served = new Set();  // re-asking is then offered nowhere
  }
  try {
    state.runs = (await getJSON("v1/results")).runs;
  } catch (error) {
    document.getElementById("unreadable").textContent = `cannot list the runs: ${error.message}`;
  }
  showRuns();
}

start();
