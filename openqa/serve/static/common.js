// What both pages use: building elements, text with its matched spans marked, and an evidence paragraph. Text is only ever
// inserted as text (never parsed as HTML).
"use strict";

// An element with its properties set and its children (nodes or strings) appended.
function element(tag, props = {}, children = []) {
  const node = Object.assign(document.createElement(tag), props);
  node.append(...children);
  return node;
}

// Text in the language `lang` ("zh", "en": the question's), so that a screen reader speaks it and a browser draws it as that language.
function spoken(text, lang) {
  return element("span", { lang, textContent: text });
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

// A solved question of the bank (details.solved_questions of /v1/answer) in the language `lang`: its
// similarity, text, options and answer.
function solvedView(solved, lang) {
  return element("article", { className: "paragraph solved" }, [
    element("header", {}, [
      element("span", { className: "book", textContent: `Solved question ${solved.qid}` }),
      element("span", { className: "meta", textContent: ` · similarity ${solved.similarity.toFixed(2)}` }),
    ]),
    element("p", { lang, textContent: solved.question }),
    element("ol", { className: "meta options", lang },  // one line per option, as in the ranking
      Object.entries(solved.options).map(([l, t]) => element("li", { textContent: `${l}. ${t}` }))),
    element("p", {}, [`Answer: ${solved.answer_idx}. `, spoken(solved.answer, lang)]),
  ]);
}

// An evidence paragraph of /v1/answer from the books of the language `lang`: its book, id and score,
// and its text with the matched words marked.
function paragraphView(paragraph, lang) {
  return element("article", { className: "paragraph" }, [
    element("header", {}, [
      element("span", { className: "book", lang, textContent: paragraph.book.replaceAll("_", " ") }),
      element("span", { className: "meta" }, [" ", spoken(paragraph.id, lang), ` · score ${paragraph.score.toFixed(2)}`]),  // an id names its book
    ]),
    element("p", { lang }, marked(paragraph.text, paragraph.spans)),
  ]);
}
