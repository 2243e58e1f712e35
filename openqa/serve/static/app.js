// openqa's page: paste a question (or pick a real MedQA example), solve it through the JSON API
// (/v1/parse, then /v1/answer), show the options ranked with score bars, the answer key when known,
// the method's measured accuracy, and the chosen option's evidence with its matched words marked.
// Text from the server is only ever inserted as text (never as HTML).
"use strict";
// element(), spoken(), marked(), solvedView() and paragraphView() come from common.js, loaded before this file.
// Text of the question's language (its options, the evidence) carries that language (lang), as the examples do.

const $ = (id) => document.getElementById(id);
const CJK = /[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]/g;
const LATIN_WORD = /[A-Za-z\u00c0-\u024f]+/g;
const LANG_NAMES = { en: "English", zh: "Chinese" };
let served = { languages: ["en"], default: { lang: "en" }, served: [] };
let answer = null;      // the answer shown
let latest = 0;         // the number of the newest request; replies to older ones are dropped
let busy = false;       // a request is in flight
let asked = "";         // what the newest request asked (see asks()): while it is in flight, Solve is off for it alone
let example = null;     // the example loaded into the box, while its text is unchanged

// A JSON request to the API; a refusal becomes an Error carrying a message for a reader of the page.
async function api(path, body) {
  let response;
  try {
    response = await fetch(path, body === undefined ? {} : {
      method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body),
    });
  } catch {
    throw new Error("Cannot reach the openqa server: is it still running?");
  }
  const data = await response.json().catch(() => ({}));
  if (!response.ok) throw new Error(webMessage(response.status, data.error));
  return data;
}

// The server's one-line error, said for the page (the server's wording is kept; HTTP codes are explained).
function webMessage(status, error) {
  const why = {
    413: "The question is too long for this method",
    503: "The server cannot answer this now",
    408: "The question took too long to arrive",
  }[status];
  const text = error || `the server answered ${status}`;
  return why ? `${why}: ${text}` : text.charAt(0).toUpperCase() + text.slice(1);
}

// Fill the method and language choices with what the server offers; then load its examples.
async function loadMethods() {
  served = await api("v1/methods");
  const available = served.served.filter((offer) => offer.available);
  const methods = [...new Set(available.map((offer) => offer.method))];
  $("method").replaceChildren(...methods.map((name) => element("option", { value: name, textContent: name })));
  $("method").value = methods.includes(served.default.method) ? served.default.method : methods[0];
  $("lang").append(...served.languages.map((lang) => element("option", { value: lang, textContent: `${lang} (${LANG_NAMES[lang] || lang})` })));
  const missing = served.served.filter((offer) => !offer.available);
  if (missing.length) $("status").textContent = `Not available on this server: ${missing.map((o) => `${o.method} (${o.lang})`).join(", ")}.`;
  const loaded = await Promise.all(served.languages.map((lang) => api(`v1/examples?lang=${encodeURIComponent(lang)}`)));
  loaded.forEach((data, i) => showExamples(served.languages[i], data));  // in the server's order, however they arrive
}

// Real MedQA questions from the server's data folder, with the rule that chose them.
function showExamples(lang, data) {
  if (!data.questions.length) return;
  $("examples").hidden = false;
  $("examples-rule").append(element("span", { textContent: `${LANG_NAMES[lang] || lang}: ${data.rule}. ` }));
  $("example-list").append(...data.questions.map((q) => {
    const button = element("button", { type: "button", className: "example", textContent: `${q.id}: ${q.question}` });
    button.addEventListener("click", () => useExample(q, lang));
    return element("li", { lang }, [button]);
  }));
}

// Put an example in the box with its answer key, and solve it.
function useExample(q, lang) {
  const before = example ? example.before : { key: $("key").value, lang: $("lang").value };
  $("text").value = [q.question, ...Object.entries(q.options).map(([letter, text]) => `${letter}: ${text}`)].join("\n");
  $("key").value = q.answer;
  $("lang").value = lang;
  example = { id: q.id, text: $("text").value, key: q.answer, lang, before };
  run();  // an example replaces a question still being solved: the older reply will be dropped
}

// A question typed over an example is not that example: the answer key and language the example set
// go back to what they were before it (a choice made since is kept), and the page says so.
function leaveExample() {
  if (!example || $("text").value === example.text) return;
  const cleared = [];
  if ($("key").value === example.key) { $("key").value = example.before.key; cleared.push("answer key"); }
  if ($("lang").value === example.lang) { $("lang").value = example.before.lang; cleared.push("language"); }
  if (cleared.length) $("status").textContent = `The text is no longer example ${example.id}: its ${cleared.join(" and ")} ${cleared.length > 1 ? "were" : "was"} cleared.`;
  example = null;
}

// The language to ask for: the one chosen, else Chinese for text mostly in Chinese script (at least as
// many Chinese characters as Latin words: one character in an English question does not count) if served.
function language(text) {
  const chosen = $("lang").value;
  if (chosen !== "auto") return chosen;
  const count = (pattern) => (text.match(pattern) || []).length;
  const wanted = count(CJK) && count(CJK) >= count(LATIN_WORD) ? "zh" : "en";
  return served.languages.includes(wanted) ? wanted : served.default.lang;
}

// What the form asks as one string: the text, method, language and minimum confidence (the correct
// answer only changes how a reply is judged, not the reply).
function asks() {
  const text = $("text").value;
  return JSON.stringify([text, $("method").value, language(text), $("min-confidence").value.trim()]);
}

// Solve is off only while the form asks what the request in flight asks: a second click or Ctrl+Enter
// cannot send the same question twice, but an edited question is solved at once (the older reply is dropped).
function refresh() {
  $("solve").disabled = busy && asks() === asked;
  $("text").lang = language($("text").value);  // the box speaks the language the question is asked in
}

function setBusy(on, message = "") {
  busy = on;
  refresh();
  $("ask").setAttribute("aria-busy", String(on));
  $("result").classList.toggle("stale", on && !$("result").hidden);
  $("status").textContent = message;
}

function solve(event) {
  event.preventDefault();
  refresh();  // the text may have changed without an input event (a script, an extension)
  if (!$("solve").disabled) run();
}

// The Minimum confidence typed (a text field: whatever is typed stays visible), as a number from 0 to 1, or
// null when empty; anything else is an error saying what was typed, never dropped without a word.
function minimumConfidence(typed) {
  if (!typed) return null;
  if (!/^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/.test(typed)) {
    throw new Error(`Minimum confidence "${typed}" is not a number: give a probability from 0 to 1, or leave it empty for none`);
  }
  const least = Number(typed);
  if (!(least >= 0 && least <= 1)) throw new Error(`Minimum confidence must be a probability from 0 to 1 (or empty for none), not ${typed}`);
  return least;
}

// Parse and answer the box's question; only the newest request's reply (or error) is shown.
async function run() {
  const number = ++latest;
  const text = $("text").value;
  asked = asks();
  const method = $("method").value, lang = language(text);
  leaveExample();
  $("error").hidden = true;
  setBusy(true, `Solving with ${method} (${lang})…`);
  try {
    const least = minimumConfidence($("min-confidence").value.trim());
    const request = await api("v1/parse", { text });
    const data = await api("v1/answer", { ...request, method, lang, evidence: 5, ...(least === null ? {} : { min_confidence: least }) });
    if (number !== latest) return;  // a newer request has been made: its reply is the one to show
    answer = data;
    show(data, $("key").value || null);
    const edited = asks() !== asked;  // edited while out, and not solved again: say whose answer this is
    setBusy(false, edited ? "This answer is for the question as it was when you pressed Solve; it has been edited since: Solve again for the new text." : "");
    $("result").classList.toggle("stale", edited);
    $("prediction").focus();
  } catch (error) {
    if (number !== latest) return;
    answer = null;
    $("result").hidden = true;  // an old result must not look like the answer to this question
    setBusy(false);
    $("error").textContent = error.message;
    $("error").hidden = false;
  }
}

// A setting's value in words: a number to 4 significant digits, a list item by item, an object
// (an ensemble's weights, a bank's sources) as its keys and values in parentheses.
function shownValue(value) {
  if (typeof value === "number") return Number.isInteger(value) ? String(value) : String(Number(value.toPrecision(4)));
  if (Array.isArray(value)) return value.map(shownValue).join(", ");
  if (value && typeof value === "object") {
    return `(${Object.entries(value).map(([k, v]) => `${k.replaceAll("_", " ")} ${shownValue(v)}`).join(", ")})`;
  }
  return String(value);
}

// Every setting with its value, grouped by where it came from (as the CLI prints them).
function settingsLine(settings) {
  const groups = new Map();
  for (const [key, source] of Object.entries(settings.sources)) {
    groups.set(source, [...(groups.get(source) || []), `${key.replaceAll("_", "-")} ${shownValue(settings[key])}`]);
  }
  return [...groups].map(([source, items]) => `${items.join(", ")} (${source})`).join("; ");
}

// Bar lengths and what they mean: with no negative score, each option's score as a share of the best
// one's; otherwise where it lies between the lowest and the best. Options without evidence get none.
function bars(options, method, settings) {
  if (options.length && options.every((o) => typeof o.probability === "number")) {
    const fitted = String(settings.probabilities || "").startsWith("temperature");
    return { widths: options.map((o) => 100 * o.probability),
      meaning: fitted ? "Bars: each option's probability (the method's scores turned into probabilities by a temperature fitted on the exam's dev split; see the confidence line)."
        : "Bars: each option's probability at temperature 1 (no temperature was fitted for this method on the exam's dev split, so it says little of how often the method is right; see the settings line)." };
  }
  const what = method === "llm" ? "Scores are the model's probabilities of each option's letter (votes with generated answers)."
    : "Scores are the method's evidence scores, not probabilities.";
  const scores = options.map((o) => o.score).filter((s) => s !== null);
  const high = Math.max(...scores), low = Math.min(...scores);
  if (!scores.length || high <= 0 && low === high) return { widths: options.map(() => 0), meaning: "" };
  if (low >= 0) {
    return { widths: options.map((o) => (o.score === null ? 0 : (100 * o.score) / high)),
      meaning: "Bars: each option's score as a share of the best option's (full bar: as good as the best); the percentage under a score is its margin behind the best. " + what };
  }
  return { widths: options.map((o) => (o.score === null || high === low ? 0 : (100 * (o.score - low)) / (high - low))),
    meaning: "Bars: where each option's score lies between the lowest (empty) and the best (full). " + what };
}

// What an LLM reader adds: its raw reply, the letter read from it and the paragraphs it was shown.
function replyLine(details) {
  if (!details || !("reply" in details)) return "";
  const reply = Array.isArray(details.reply) ? details.reply.join(" | ") : details.reply;
  const letter = Array.isArray(details.letter) ? details.letter.join(", ") : details.letter;
  const shown = details.evidence_ids && details.evidence_ids.length ? ` Paragraphs shown to the model: ${details.evidence_ids.join(", ")}.` : " No paragraphs were shown to the model.";
  return `Model reply: ${JSON.stringify(reply)}; letter read from it: ${letter || "none (counted as no answer)"}.${shown}`;
}

// How far an option's score is behind the best one's, in percent of the best (when both are positive).
function margin(score, best) {
  if (score === null || best === null || best <= 0 || score < 0 || score === best) return "";
  return `${(100 * (score - best) / best).toFixed(1).replace("-", "−")}%`;
}

// Ranks with ties sharing one (1, 1, 3, …); options without evidence come last, unranked.
function ranks(options) {
  return options.map((o) => (o.score === null ? null : 1 + options.filter((p) => p.score !== null && p.score > o.score).length));
}

function noEvidenceNote(method) {
  return method === "pmi"
    ? "no evidence: none of this option's words or word pairs occurs near the question's in the books, so its PMI is undefined"
    : "no evidence: no paragraph of the books matches this option's words";
}

function show(data, key) {
  $("result").hidden = false;
  const tied = data.tied.filter((l) => l !== data.prediction);
  const predicted = data.options.find((o) => o.letter === data.prediction);
  $("prediction").replaceChildren(...(data.prediction === null
    ? [data.confidence && data.confidence.abstained ? "No prediction (openqa abstains)" : "No prediction"]
    : [`Prediction: ${data.prediction}. `, spoken(predicted.text, data.lang), ...(tied.length ? [` (tied with ${tied.join(", ")})`] : [])]));
  const keyed = key && data.options.find((o) => o.letter === key);
  const sure = data.confidence;
  const held = sure && sure.abstained;  // below the asked minimum confidence: the best guess is not the prediction
  const chosen = held ? sure.best_guess : data.prediction;
  const which = held ? "best guess" : "prediction";
  let verdict = [];  // text and the nodes of the question's language
  if (!data.matched) {
    const other = served.languages.find((l) => l !== data.lang);
    const foreign = !data.message || data.message.startsWith("no word");  // the server asks about another language only where the question looks written in one
    verdict = [foreign
      ? `No word of the question or its options occurs in the ${data.lang} (${LANG_NAMES[data.lang] || data.lang}) books.`
        + (other ? ` Is it in another language? Choose ${other} (${LANG_NAMES[other] || other}) under Language.` : "")
      : `The ${data.lang} (${LANG_NAMES[data.lang] || data.lang}) books hold no evidence for any option: nothing to score.`];
  } else if (chosen === null) {
    verdict = ["No option could be read from the model's reply (counted wrong in an evaluation)."];
  } else if (key && !keyed) {
    verdict = [`The correct answer you gave, ${key}, is not one of this question's options.`];
  } else if (keyed) {
    const source = example ? `Answer key (${example.id})` : "Correct answer (given)";
    verdict = [`${source}: ${key}. `, spoken(keyed.text, data.lang), ". "
      + (key === chosen ? (tied.length ? `The ${which} matches it, but tied with other options.` : `The ${which} matches it.`)
        : data.tied.includes(key) ? `It is tied with the ${which}.` : `The ${which} does not match it.`)];
  }
  if (held) {
    verdict.unshift(`openqa abstains: its best guess ${sure.best_guess} has probability ${sure.probability.toFixed(2)}, below your minimum ${sure.min_confidence}. `);
  }
  $("verdict").replaceChildren(...verdict);
  $("confidence").textContent = sure && sure.probability !== null
    ? `Probability of the ${which}: ${sure.probability.toFixed(2)}; ${sure.meaning}.` : "";
  $("verdict").className = keyed && data.prediction !== null ? (key === data.prediction ? "verdict right" : "verdict wrong") : "verdict";
  const offer = served.served.find((o) => o.method === data.method && o.lang === data.lang);
  $("accuracy").textContent = offer && offer.accuracy ? `${offer.accuracy.sentence} (${offer.accuracy.record})`
    : `${data.method}: no measured accuracy on record here; a baseline, not medical advice.`;
  $("settings").textContent = `${data.method} (${data.lang}): ${settingsLine(data.settings)}`;
  $("reply").textContent = replyLine(data.details);
  $("reply").hidden = !$("reply").textContent;
  const solved = (data.details && data.details.solved_questions) || [];
  $("solved-title").hidden = !solved.length;
  $("solved").replaceChildren(...solved.map((one) => solvedView(one, data.lang)));
  const { widths, meaning } = bars(data.options, data.method, data.settings);
  $("bars").textContent = meaning;
  const rank = ranks(data.options);
  const topTied = new Set(data.tied.length ? data.tied : []);
  $("ranking").replaceChildren(...data.options.map((option, i) => {
    const isTied = rank[i] !== null && rank.filter((r) => r === rank[i]).length > 1;
    const label = (typeof option.probability === "number" ? `${(100 * option.probability).toFixed(0)}% · ` : "")
      + (option.score === null ? "no evidence" : option.score.toFixed(2));
    const behind = margin(option.score, data.options[0].score);
    const button = element("button", { type: "button", className: "option" }, [
      element("span", { className: "rank", textContent: rank[i] === null ? "–" : (isTied ? `=${rank[i]}` : String(rank[i])) }),
      element("span", { className: "letter", textContent: option.letter }),
      element("span", { className: "text" }, [
        spoken(option.text, data.lang),
        ...(option.letter === key ? [element("span", { className: "badge key", textContent: "correct answer" })] : []),
        ...(isTied ? [element("span", { className: "badge tie", textContent: topTied.has(option.letter) ? "tied best" : "tied" })] : []),
      ]),
      element("span", { className: "bar", ariaHidden: "true" },
        [element("span", { className: "fill", style: `width: ${widths[i].toFixed(1)}%` })]),
      element("span", { className: "score" }, [label, ...(behind ? [element("span", { className: "margin", textContent: behind })] : [])]),
    ]);
    button.dataset.letter = option.letter;
    button.setAttribute("aria-label", `${rank[i] === null ? "unranked" : `rank ${isTied ? "tied " : ""}${rank[i]}`}: ${option.letter}. ${option.text}; `
      + `score ${option.score === null ? noEvidenceNote(data.method) : label}${option.letter === key ? "; the correct answer" : ""}`);
    if (option.letter === data.prediction) button.classList.add("predicted");
    if (option.letter === key) button.classList.add("keyed");
    button.addEventListener("click", () => choose(option.letter));
    return element("li", {}, [button]);
  }));
  choose(data.prediction || data.options[0].letter, false);
  $("announce").replaceChildren(...[...$("prediction").childNodes, ". ", ...$("verdict").childNodes]
    .map((node) => (typeof node === "string" ? node : node.cloneNode(true))));  // its Chinese text keeps its lang
}

// Show one option's evidence paragraphs with the matched words marked.
function choose(letter, focus = true) {
  const option = answer.options.find((o) => o.letter === letter);
  for (const button of $("ranking").querySelectorAll("button")) {
    const chosen = button.dataset.letter === letter;
    button.setAttribute("aria-pressed", String(chosen));
    if (chosen && focus) button.focus();
  }
  $("evidence-title").replaceChildren(`${option.evidence.length ? "Evidence for" : "No evidence shown for"} ${option.letter}. `,
    spoken(option.text, answer.lang));
  $("evidence-note").textContent = option.score === null ? `${option.letter}: ${noEvidenceNote(answer.method)}.`
    : option.evidence.length ? "" : `${answer.method} scores this option without retrieving paragraphs.`;
  $("evidence").replaceChildren(...option.evidence.map((paragraph) => paragraphView(paragraph, answer.lang)));
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

// The answer shown, as the API returned it, on the clipboard (a hidden text box where the Clipboard API is refused).
async function copyJSON() {
  const text = JSON.stringify(answer, null, 2);
  let done = false;
  try {
    await navigator.clipboard.writeText(text);
    done = true;
  } catch {
    const box = element("textarea", { value: text, className: "visually-hidden" });
    document.body.append(box);
    box.select();
    done = document.execCommand("copy");
    box.remove();
  }
  $("copied").textContent = done ? "Copied." : "Your browser refused the clipboard; the JSON API at /docs returns the same.";
}

function toggleKeys(show = $("keys").hidden) {
  $("keys").hidden = !show;
  $("keys-toggle").setAttribute("aria-expanded", String(show));
}

document.addEventListener("DOMContentLoaded", () => {
  $("solve").disabled = false;  // off in the page itself, so that without JavaScript a question is never submitted and lost
  $("ask").addEventListener("submit", solve);
  $("text").addEventListener("input", leaveExample);
  for (const kind of ["input", "change"]) $("ask").addEventListener(kind, refresh);
  $("text").addEventListener("keydown", (event) => {
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
      event.preventDefault();
      $("ask").requestSubmit();  // solve() decides whether it may be sent
    }
  });
  $("ranking").addEventListener("keydown", moveInRanking);
  $("copy").addEventListener("click", copyJSON);
  $("keys-toggle").addEventListener("click", () => toggleKeys());
  document.addEventListener("keydown", (event) => {
    const typing = ["TEXTAREA", "INPUT", "SELECT"].includes(document.activeElement.tagName);
    if (event.key === "?" && !typing) { event.preventDefault(); toggleKeys(); }
    if (event.key === "Escape" && !$("keys").hidden) toggleKeys(false);
  });
  loadMethods().catch((error) => {
    $("error").textContent = error.message;
    $("error").hidden = false;
  });
});
