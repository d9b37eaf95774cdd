// The step-through lesson: seed 000 chapter 7 one step at a time (POST /api/lesson).
// Embedding, PE, X₀, then per layer Q/K/V, QKᵀ, ÷√d_k, softmax, ·V, concat, W_O, add & norm, FFN:
// each step's equation, shape, numbers (hover a cell for all its digits) and narration (en / 中文).
// ← / → (or j / k) walk the steps; a selected token's row lights up in every table.
"use strict";

const lesson = { steps: [], at: 0, tokens: [] };

function lessonShell() {
  const box = $("lesson-box");
  box.hidden = false;
  box.innerHTML = "";
  const h = document.createElement("h2"); h.textContent = "Lesson: the forward pass step by step"; box.append(h);
  const bar = document.createElement("div"); bar.className = "controls";
  const lang = document.createElement("select"); lang.id = "lesson-lang";
  lang.add(new Option("English", "en")); lang.add(new Option("中文", "zh"));
  lang.value = lesson.lang || "en";
  const prev = document.createElement("button"); prev.id = "lesson-prev"; prev.textContent = "← previous";
  const next = document.createElement("button"); next.id = "lesson-next"; next.textContent = "next →";
  const pos = document.createElement("span"); pos.id = "lesson-pos";
  bar.append(lang, prev, next, pos);
  const body = document.createElement("div"); body.id = "lesson-step"; body.className = "lesson-step";
  const note = document.createElement("p"); note.className = "note";
  note.textContent = "Keys: ← / → step, Home / End first and last. Click a row label to select that token.";
  box.append(bar, note, body);
  prev.addEventListener("click", () => showStep(lesson.at - 1));
  next.addEventListener("click", () => showStep(lesson.at + 1));
  lang.addEventListener("change", () => { lesson.lang = lang.value; loadLesson(current); });
}

async function loadLesson(data) { // any model: the walkthrough's, a checkpoint, MiniLM
  lessonShell();
  if (window.GLASSFORMER_DATA) { // offline, or a model without the walkthrough's tables
    if (!data.steps) { $("lesson-box").hidden = true; return; }
    lesson.steps = data.steps.filter((s) => s.level !== 1); lesson.tokens = data.tokens;
    showStep(0);
    return;
  }
  if (limits.lesson_tokens && data.tokens.length > limits.lesson_tokens) { // not worth a refused request
    lesson.steps = [];
    $("lesson-pos").textContent = "";
    $("lesson-step").innerHTML = `<p class="hint">The lesson prints every number of every step, so it takes at most ` +
      `${limits.lesson_tokens} tokens; this input has ${data.tokens.length}. Shorten the sentence to step through it.</p>`;
    return;
  }
  const body = { sentence: $("sentence").value, model: data.model, lang: lesson.lang || "en" };
  const d = await postJSON("/api/lesson", body, $("lesson-step"));
  if (!d) return;
  lesson.steps = d.steps.filter((s) => s.level !== 1); // section headings become the step's heading
  lesson.tokens = d.tokens;
  showStep(Math.min(lesson.at, lesson.steps.length - 1));
}

function showStep(i) {
  if (!lesson.steps.length) return;
  lesson.at = Math.max(0, Math.min(lesson.steps.length - 1, i));
  const s = lesson.steps[lesson.at], box = $("lesson-step");
  box.innerHTML = "";
  $("lesson-pos").textContent = `step ${lesson.at + 1} / ${lesson.steps.length}`;
  const h = document.createElement("h3"); h.textContent = s.title; box.append(h);
  if (s.formula) { const f = document.createElement("p"); f.className = "formula"; f.textContent = s.formula; box.append(f); }
  if (s.shape) { const sh = document.createElement("p"); sh.className = "shape"; sh.textContent = `shape: ${s.shape}`; box.append(sh); }
  if (s.text) { const p = document.createElement("p"); p.className = "narration"; p.textContent = s.text; box.append(p); }
  s.tables.forEach((t) => box.append(lessonTable(t)));
  box.dataset.step = String(lesson.at);
}

function lessonTable(t) {
  const tbl = document.createElement("table"); tbl.className = "lesson-table";
  const cut = t.cols_total && t.cols_total > t.cols.length; // MiniLM's 384 or 1536 columns: the first ones
  if (t.caption || cut) {
    tbl.createCaption().textContent = (t.caption || "") + (cut ? ` (first ${t.cols.length} of ${t.cols_total} columns)` : "");
  }
  const head = tbl.createTHead().insertRow();
  head.append(document.createElement("th"));
  t.cols.forEach((c) => { const th = document.createElement("th"); th.textContent = c; head.append(th); });
  const body = tbl.createTBody();
  const tokenRows = t.rows.length === lesson.tokens.length && t.rows.every((r, i) => r === lesson.tokens[i]);
  t.values.forEach((row, i) => {
    const tr = body.insertRow();
    if (tokenRows) { tr.dataset.token = String(i); if (selected.has(i)) tr.classList.add("sel"); }
    const th = document.createElement("th"); th.textContent = t.rows[i]; tr.append(th);
    if (tokenRows) th.addEventListener("click", (e) => selectToken(i, e.shiftKey));
    row.forEach((v, j) => {
      const td = tr.insertCell();
      td.textContent = typeof v === "number" ? v.toFixed(4) : v;
      td.title = `${t.rows[i]} · ${t.cols[j]} = ${v}`; // the numbers on hover
    });
  });
  return tbl;
}

document.addEventListener("keydown", (e) => {
  if (!lesson.steps.length || $("lesson-box").hidden) return;
  const tag = (e.target.tagName || "").toLowerCase();
  if (tag === "input" || tag === "select" || tag === "textarea") return;
  const to = { ArrowRight: lesson.at + 1, ArrowLeft: lesson.at - 1, j: lesson.at + 1, k: lesson.at - 1,
    Home: 0, End: lesson.steps.length - 1 }[e.key];
  if (to === undefined) return;
  e.preventDefault();
  showStep(to);
});
document.addEventListener("glassformer:trace", (e) => { lesson.at = 0; loadLesson(e.detail); });
document.addEventListener("glassformer:select", () => {
  document.querySelectorAll("#lesson-step tr[data-token]").forEach((tr) =>
    tr.classList.toggle("sel", selected.has(Number(tr.dataset.token))));
});
