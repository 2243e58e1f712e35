// openqa's page: paste a question, solve it through the JSON API (/v1/parse, then /v1/answer),
// show the options ranked with a score bar and the chosen option's evidence with its matched
// words marked. Text from the server is only ever inserted as text (never as HTML).
"use strict";

const $ = (id) => document.getElementById(id);
const CJK = /[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]/;
let served = { languages: ["en"], default: { lang: "en" } };
let answer = null;

// A JSON request to the API; a refusal becomes an Error carrying the server's one-line message.
async function api(path, body) {
  const response = await fetch(path, body === undefined ? {} : {
    method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body),
  });
  const data = await response.json().catch(() => ({ error: `${response.status} ${response.statusText}` }));
  if (!response.ok) throw new Error(data.error || `${response.status} ${response.statusText}`);
  return data;
}

function element(tag, props = {}, children = []) {
  const node = Object.assign(document.createElement(tag), props);
  node.append(...children);
  return node;
}

// Fill the method and language choices with what the server offers.
async function loadMethods() {
  served = await api("v1/methods");
  const available = served.served.filter((offer) => offer.available);
  const methods = [...new Set(available.map((offer) => offer.method))];
  $("method").replaceChildren(...methods.map((name) => element("option", { value: name, textContent: name })));
  $("method").value = served.default.method;
  $("lang").append(...served.languages.map((lang) => element("option", { value: lang, textContent: lang })));
  const missing = served.served.filter((offer) => !offer.available);
  if (missing.length) $("status").textContent = `Not available here: ${missing.map((o) => `${o.method} (${o.lang})`).join(", ")}.`;
}

// The language to ask for: the one chosen, else Chinese for text in Chinese script if served.
function language(text) {
  const chosen = $("lang").value;
  if (chosen !== "auto") return chosen;
  const wanted = CJK.test(text) ? "zh" : "en";
  return served.languages.includes(wanted) ? wanted : served.default.lang;
}

async function solve(event) {
  event.preventDefault();
  const text = $("text").value;
  $("error").hidden = true;
  $("solve").disabled = true;
  $("status").textContent = "Solving…";
  try {
    const request = await api("v1/parse", { text });
    answer = await api("v1/answer", { ...request, method: $("method").value, lang: language(text), evidence: 5 });
    show(answer);
    $("status").textContent = "";
  } catch (error) {
    $("status").textContent = "";
    $("error").textContent = error.message;
    $("error").hidden = false;
  } finally {
    $("solve").disabled = false;
  }
}

// Every setting with its value, grouped by where it came from (as the CLI prints them).
function settingsLine(settings) {
  const groups = new Map();
  for (const [key, source] of Object.entries(settings.sources)) {
    groups.set(source, [...(groups.get(source) || []), `${key.replace("_", "-")} ${settings[key]}`]);
  }
  return [...groups].map(([source, items]) => `${items.join(", ")} (${source})`).join("; ");
}

// The width of each option's score bar: its share of the range of this question's scores.
function barWidths(options) {
  const scores = options.map((o) => o.score).filter((s) => s !== null);
  const low = Math.min(0, ...scores), high = Math.max(...scores);
  return options.map((o) => (o.score === null || high <= low ? 0 : (100 * (o.score - low)) / (high - low)));
}

function show(data) {
  $("result").hidden = false;
  $("prediction").textContent = data.prediction === null
    ? `No prediction: ${data.message}`
    : `Prediction: ${data.prediction}. ${data.options.find((o) => o.letter === data.prediction).text}`
      + (data.tied.length ? ` (tied with ${data.tied.filter((l) => l !== data.prediction).join(", ")})` : "");
  $("settings").textContent = `${data.method} (${data.lang}): ${settingsLine(data.settings)}`;
  const widths = barWidths(data.options);
  $("ranking").replaceChildren(...data.options.map((option, rank) => {
    const button = element("button", { type: "button", className: "option" }, [
      element("span", { className: "letter", textContent: option.letter }),
      element("span", { className: "text", textContent: option.text }),
      element("span", { className: "bar", ariaHidden: "true" },
        [element("span", { className: "fill", style: `width: ${widths[rank].toFixed(1)}%` })]),
      element("span", { className: "score", textContent: option.score === null ? "no evidence" : option.score.toFixed(2) }),
    ]);
    button.dataset.letter = option.letter;
    if (option.letter === data.prediction) button.classList.add("predicted");
    button.addEventListener("click", () => choose(option.letter));
    return element("li", {}, [button]);
  }));
  choose(data.prediction || data.options[0].letter, false);
}

// Show one option's evidence paragraphs with the matched words marked.
function choose(letter, focus = true) {
  const option = answer.options.find((o) => o.letter === letter);
  for (const button of $("ranking").querySelectorAll("button")) {
    const chosen = button.dataset.letter === letter;
    button.setAttribute("aria-pressed", String(chosen));
    if (chosen && focus) button.focus();
  }
  $("evidence-title").textContent = option.evidence.length
    ? `Evidence for ${option.letter}. ${option.text}` : `No evidence found for ${option.letter}. ${option.text}`;
  $("evidence").replaceChildren(...option.evidence.map((paragraph) => element("article", { className: "paragraph" }, [
    element("header", {}, [
      element("span", { className: "book", textContent: paragraph.book.replaceAll("_", " ") }),
      element("span", { className: "meta", textContent: ` ${paragraph.id} · score ${paragraph.score.toFixed(2)}` }),
    ]),
    element("p", {}, marked(paragraph.text, paragraph.spans)),
  ])));
}

// The text as nodes, each span inside a <mark>.
function marked(text, spans) {
  const nodes = [];
  let last = 0;
  for (const [start, end] of spans) {
    nodes.push(text.slice(last, start), element("mark", { textContent: text.slice(start, end) }));
    last = end;
  }
  nodes.push(text.slice(last));
  return nodes;
}

// Arrow keys move between the ranked options; Home and End jump to the first and last.
function moveInRanking(event) {
  const buttons = [...$("ranking").querySelectorAll("button")];
  const at = buttons.indexOf(document.activeElement);
  const to = { ArrowDown: at + 1, ArrowRight: at + 1, ArrowUp: at - 1, ArrowLeft: at - 1, Home: 0, End: buttons.length - 1 }[event.key];
  if (at < 0 || to === undefined) return;
  event.preventDefault();
  const target = buttons[Math.max(0, Math.min(buttons.length - 1, to))];
  choose(target.dataset.letter);
}

document.addEventListener("DOMContentLoaded", () => {
  $("ask").addEventListener("submit", solve);
  $("text").addEventListener("keydown", (event) => {
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) $("ask").requestSubmit();
  });
  $("ranking").addEventListener("keydown", moveInRanking);
  loadMethods().catch((error) => {
    $("error").textContent = `Cannot reach the server: ${error.message}`;
    $("error").hidden = false;
  });
});
