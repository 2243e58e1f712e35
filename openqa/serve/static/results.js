// The results page: runs of the results folder (GET v1/results), a run's questions
// (GET v1/results/RUN) and a comparison of ticked runs (GET v1/compare?runs=A,B). Text is set with
// textContent only: nothing from a record is parsed as HTML.
"use strict";

const state = { runs: [], sortKey: "run", ascending: true, questions: [] };

function cell(row, text) {
  const td = document.createElement("td");
  td.textContent = text === null || text === undefined ? "-" : String(text);
  row.appendChild(td);
  return td;
}

function accuracyText(run) {
  const ci = run.ci95 ? ` (${run.ci95[0].toFixed(1)}-${run.ci95[1].toFixed(1)})` : "";
  return `${run.accuracy.toFixed(2)}${ci}`;
}

function showRuns() {
  const body = document.querySelector("#runs tbody");
  const needle = document.getElementById("filter").value.trim().toLowerCase();
  const readable = state.runs.filter((r) => !r.unreadable);
  const shown = readable.filter((r) => !needle || [r.run, r.dataset, r.split, r.method, r.variant || ""].join(" ").toLowerCase().includes(needle));
  const key = state.sortKey;
  shown.sort((a, b) => {
    const x = a[key], y = b[key];
    const order = x === y ? 0 : (x === null || x === undefined) ? 1 : (y === null || y === undefined) ? -1 : x < y ? -1 : 1;
    return state.ascending ? order : -order;
  });
  body.replaceChildren();
  for (const run of shown) {
    const row = document.createElement("tr");
    row.dataset.run = run.run;
    const tick = document.createElement("input");
    tick.type = "checkbox";
    tick.className = "tick";
    tick.value = run.run;
    tick.addEventListener("change", updateCompare);
    row.appendChild(document.createElement("td")).appendChild(tick);
    const name = cell(row, "");
    if (run.questions) {
      const link = document.createElement("a");
      link.href = "#";
      link.textContent = run.run;
      link.className = "open-run";
      link.addEventListener("click", (event) => { event.preventDefault(); openRun(run); });
      name.appendChild(link);
    } else {
      name.textContent = run.run;
    }
    cell(row, run.dataset); cell(row, run.split); cell(row, run.method + (run.variant ? ` (${run.variant})` : ""));
    cell(row, run.n); cell(row, accuracyText(run)); cell(row, run.ece === null ? "-" : run.ece.toFixed(3));
    cell(row, run.accuracy_at_20 === null ? "-" : run.accuracy_at_20.toFixed(1)); cell(row, run.date); cell(row, run.openqa_version);
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

async function getJSON(url) {
  const reply = await fetch(url);
  const body = await reply.json();
  if (!reply.ok) throw new Error(body.error || reply.statusText);
  return body;
}

function showQuestions() {
  const which = document.getElementById("which").value;
  const keep = {
    all: () => true,
    right: (q) => q.correct,
    wrong: (q) => !q.correct,
    "confident-wrong": (q) => !q.correct && (q.confidence || 0) >= 0.5,
    abstained: (q) => q.abstained === true,
  }[which];
  const list = document.getElementById("questions");
  list.replaceChildren();
  const shown = state.questions.filter(keep);
  document.getElementById("run-count").textContent = `${shown.length} of ${state.questions.length} questions`;
  for (const q of shown.slice(0, 500)) {
    const item = document.createElement("li");
    item.className = q.correct ? "right" : "wrong";
    const head = document.createElement("p");
    const confidence = q.confidence === null || q.confidence === undefined ? "" : `, confidence ${q.confidence.toFixed(2)}`;
    head.textContent = `${q.qid}: predicted ${q.prediction || "none"}, answer ${q.answer}${confidence}`;
    item.appendChild(head);
    if (q.question) {
      const text = document.createElement("p");
      text.className = "question-text";
      text.textContent = q.question;
      item.appendChild(text);
    }
    const options = document.createElement("ul");
    const letters = q.options ? Object.keys(q.options) : Object.keys(q.probabilities || {});
    for (const letter of letters) {
      const option = document.createElement("li");
      const p = q.probabilities && q.probabilities[letter] !== undefined ? ` (p ${q.probabilities[letter].toFixed(2)})` : "";
      option.textContent = `${letter}. ${q.options ? q.options[letter] : ""}${p}${letter === q.answer ? " (answer)" : ""}`;
      options.appendChild(option);
    }
    item.appendChild(options);
    list.appendChild(item);
  }
}

async function openRun(run) {
  const section = document.getElementById("run");
  document.getElementById("run-title").textContent = `${run.run}: ${run.method} on ${run.dataset} ${run.split}`;
  try {
    state.questions = (await getJSON(`v1/results/${encodeURIComponent(run.run)}`)).questions;
  } catch (error) {
    state.questions = [];
    document.getElementById("run-count").textContent = `cannot read its questions: ${error.message}`;
  }
  section.hidden = false;
  showQuestions();
}

async function compareTicked() {
  const names = [...document.querySelectorAll(".tick:checked")].map((t) => t.value);
  const target = document.getElementById("comparison-body");
  document.getElementById("comparison").hidden = false;
  target.replaceChildren();
  try {
    const record = await getJSON(`v1/compare?runs=${encodeURIComponent(names.join(","))}`);
    const note = document.createElement("p");
    note.textContent = `${record.common_questions} common questions, matched by ${record.matched_by}.`;
    target.appendChild(note);
    const table = document.createElement("table");
    table.id = "pairs";
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
  } catch (error) {
    const message = document.createElement("p");
    message.className = "error";
    message.textContent = error.message;
    target.appendChild(message);
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
  document.getElementById("compare").addEventListener("click", compareTicked);
  try {
    state.runs = (await getJSON("v1/results")).runs;
  } catch (error) {
    document.getElementById("unreadable").textContent = `cannot list the runs: ${error.message}`;
  }
  showRuns();
}

start();
