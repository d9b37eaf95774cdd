// glassformer explorer: fetch a trace from /api/trace and draw it. No libraries, no network but ours.
"use strict";

const $ = (id) => document.getElementById(id);
let current = null; // the last /api/trace response

// ---- colours: viridis-like ramp for [0, 1] patterns, blue-white-red for signed values ----
const RAMP = [[68, 1, 84], [59, 82, 139], [33, 145, 140], [94, 201, 98], [253, 231, 37]];
function ramp(t) {
  t = Math.min(1, Math.max(0, t)) * (RAMP.length - 1);
  const i = Math.min(RAMP.length - 2, Math.floor(t)), f = t - i;
  const c = RAMP[i].map((v, k) => Math.round(v + f * (RAMP[i + 1][k] - v)));
  return `rgb(${c[0]},${c[1]},${c[2]})`;
}
function diverging(t) { // t in [-1, 1]
  t = Math.min(1, Math.max(-1, t));
  const a = Math.round(255 * (1 - Math.abs(t)));
  return t >= 0 ? `rgb(255,${a},${a})` : `rgb(${a},${a},255)`;
}

// ---- a heatmap on a canvas, with the value under the mouse in a tooltip ----
function heatmap(parent, matrix, rows, cols, title, opts = {}) {
  const cell = opts.cell || Math.max(8, Math.min(48, Math.floor(420 / Math.max(rows.length, cols.length))));
  const left = opts.labels === false ? 4 : 70, top = opts.labels === false ? 4 : 60;
  const box = document.createElement("figure");
  box.className = "heatmap-box";
  const cap = document.createElement("figcaption");
  cap.textContent = title;
  const canvas = document.createElement("canvas");
  canvas.className = "heatmap";
  canvas.width = left + cell * cols.length + 4;
  canvas.height = top + cell * rows.length + 4;
  Object.assign(canvas.dataset, { title, cell, left, top }); // geometry, for tests and tools
  const ctx = canvas.getContext("2d");
  let lo = 0, hi = 1;
  if (opts.signed) {
    hi = Math.max(1e-9, ...matrix.map((r) => Math.max(...r.map(Math.abs))));
    lo = -hi;
  }
  matrix.forEach((row, i) => row.forEach((v, j) => {
    ctx.fillStyle = opts.signed ? diverging(v / hi) : ramp((v - lo) / (hi - lo));
    ctx.fillRect(left + j * cell, top + i * cell, cell, cell);
    if (cell >= 36 && opts.values !== false) { // big cells carry their number, as the seed prints them
      ctx.fillStyle = opts.signed || (v - lo) / (hi - lo) > 0.6 ? "#000" : "#fff";
      ctx.font = "11px sans-serif"; ctx.textAlign = "center"; ctx.textBaseline = "middle";
      ctx.fillText(Number(v).toFixed(opts.signed ? 2 : 3), left + (j + 0.5) * cell, top + (i + 0.5) * cell);
    }
  }));
  if (opts.labels !== false) {
    ctx.fillStyle = "#222";
    ctx.font = `${Math.min(12, cell)}px sans-serif`;
    ctx.textAlign = "right"; ctx.textBaseline = "middle";
    rows.forEach((t, i) => ctx.fillText(String(t).slice(0, 10), left - 4, top + (i + 0.5) * cell));
    cols.forEach((t, j) => {
      ctx.save();
      ctx.translate(left + (j + 0.5) * cell, top - 4);
      ctx.rotate(-Math.PI / 3);
      ctx.textAlign = "left";
      ctx.fillText(String(t).slice(0, 10), 0, 0);
      ctx.restore();
    });
  }
  const tip = $("tooltip");
  canvas.addEventListener("mousemove", (e) => {
    const r = canvas.getBoundingClientRect();
    const x = (e.clientX - r.left) * (canvas.width / r.width), y = (e.clientY - r.top) * (canvas.height / r.height);
    const j = Math.floor((x - left) / cell), i = Math.floor((y - top) / cell);
    if (i < 0 || j < 0 || i >= rows.length || j >= cols.length) { tip.hidden = true; return; }
    tip.textContent = `${rows[i]} → ${cols[j]}: ${Number(matrix[i][j]).toFixed(4)}`;
    tip.style.left = `${e.pageX + 12}px`; tip.style.top = `${e.pageY + 12}px`;
    tip.hidden = false;
  });
  canvas.addEventListener("mouseleave", () => { tip.hidden = true; });
  box.append(cap, canvas);
  parent.append(box);
  return canvas;
}

function options(select, n, prefix) {
  select.innerHTML = "";
  for (let i = 0; i < n; i++) select.add(new Option(`${prefix} ${i}`, String(i)));
}

// ---- the page ----
async function loadModels() {
  const res = await fetch("/api/models");
  const data = await res.json();
  const sel = $("model");
  sel.innerHTML = "";
  data.models.forEach((m) => sel.add(new Option(m.name, m.name)));
  sel.value = data.default;
  $("sentence").maxLength = data.limits.max_chars;
}

async function runTrace(ev) {
  ev.preventDefault();
  const body = { sentence: $("sentence").value, model: $("model").value };
  $("status").textContent = "running…";
  $("status").className = "";
  try {
    const res = await fetch("/api/trace", {
      method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body),
    });
    const data = await res.json();
    if (!res.ok) {
      const msg = typeof data.detail === "string" ? data.detail : JSON.stringify(data.detail);
      throw new Error(`${res.status}: ${msg}`);
    }
    current = data;
    render(data);
    $("status").textContent = `${data.model}: ${data.tokens.length} tokens, ${data.pattern_hooks.length} layers`;
  } catch (err) {
    $("status").textContent = String(err.message || err);
    $("status").className = "error";
  }
}

function render(data) {
  $("result").hidden = false;
  const toks = $("tokens");
  toks.innerHTML = "";
  data.tokens.forEach((t, i) => {
    const s = document.createElement("span");
    s.className = "token"; s.textContent = t; s.title = `position ${i}`;
    toks.append(s);
  });
  options($("layer"), data.pattern_hooks.length, "layer");
  drawHeads();
  const pe = $("pe");
  pe.innerHTML = "";
  if (data.pe) {
    const dims = data.pe[0].map((_, j) => `d${j}`);
    heatmap(pe, data.pe, data.tokens.map((t, i) => `${i} ${t}`), dims, "PE (position × dimension)",
      { signed: true, cell: Math.max(3, Math.min(40, Math.floor(720 / dims.length))), labels: dims.length <= 64 });
  } else {
    pe.textContent = "This model has no absolute positional encoding to plot.";
  }
  renderTranslation(data.translation);
  renderSteps(data.steps);
}

function drawHeads() {
  const data = current, l = Number($("layer").value || 0);
  const box = $("heads");
  box.innerHTML = "";
  const hook = data.pattern_hooks[l];
  data.trace[hook].forEach((pattern, h) => {
    heatmap(box, pattern, data.tokens, data.tokens, `${hook} · head ${h}`);
  });
}

function renderTranslation(tr) {
  $("translation-box").hidden = !tr;
  if (!tr) return;
  $("translation").textContent = tr.text;
  const hooks = Object.keys(tr.cross_attention);
  options($("cross-layer"), hooks.length, "layer");
  options($("cross-head"), tr.cross_attention[hooks[0]].length, "head");
  const draw = () => {
    const hook = hooks[Number($("cross-layer").value)];
    const m = tr.cross_attention[hook][Number($("cross-head").value)];
    $("cross").innerHTML = "";
    heatmap($("cross"), m, tr.predicted_tokens, current.tokens, `${hook}: target (rows) → source (columns)`);
  };
  $("cross-layer").onchange = draw;
  $("cross-head").onchange = draw;
  draw();
}

function renderSteps(steps) {
  $("steps-box").hidden = !steps;
  const box = $("steps");
  box.innerHTML = "";
  if (!steps) return;
  steps.forEach((s) => {
    if (s.level === 1) {
      const h = document.createElement("h3"); h.textContent = s.title; box.append(h); return;
    }
    const d = document.createElement("details");
    d.className = "step";
    const sum = document.createElement("summary");
    sum.textContent = `${s.title}  —  ${s.formula}  (${s.shape})`;
    d.append(sum);
    if (s.text) { const p = document.createElement("p"); p.textContent = s.text; d.append(p); }
    s.tables.forEach((t) => d.append(table(t)));
    box.append(d);
  });
}

function table(t) {
  const tbl = document.createElement("table");
  if (t.caption) { const c = tbl.createCaption(); c.textContent = t.caption; }
  const head = tbl.createTHead().insertRow();
  head.append(document.createElement("th"));
  t.cols.forEach((c) => { const th = document.createElement("th"); th.textContent = c; head.append(th); });
  const body = tbl.createTBody();
  t.values.forEach((row, i) => {
    const tr = body.insertRow();
    const th = document.createElement("th"); th.textContent = t.rows[i]; tr.append(th);
    row.forEach((v) => { tr.insertCell().textContent = typeof v === "number" ? v.toFixed(4) : v; });
  });
  return tbl;
}

$("trace-form").addEventListener("submit", runTrace);
$("layer").addEventListener("change", drawHeads);
loadModels().catch((e) => { $("status").textContent = `could not list models: ${e}`; });
