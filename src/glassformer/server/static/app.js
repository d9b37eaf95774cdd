// glassformer explorer: fetch a trace from /api/trace and draw it. No libraries, no network but ours.
"use strict";

const $ = (id) => document.getElementById(id);
let current = null; // the last /api/trace response
let limits = {}; // GET /api/models' input limits

// ---- colours: viridis-like ramp for [0, 1] patterns, blue-white-red for signed values ----
const RAMP = [[68, 1, 84], [59, 82, 139], [33, 145, 140], [94, 201, 98], [253, 231, 37]];
function rampRGB(t) {
  t = Math.min(1, Math.max(0, t)) * (RAMP.length - 1);
  const i = Math.min(RAMP.length - 2, Math.floor(t)), f = t - i;
  return RAMP[i].map((v, k) => Math.round(v + f * (RAMP[i + 1][k] - v)));
}
function divergingRGB(t) { // t in [-1, 1]
  t = Math.min(1, Math.max(-1, t));
  const a = Math.round(255 * (1 - Math.abs(t)));
  return t >= 0 ? [255, a, a] : [a, a, 255];
}
const RAMP_LUT = Array.from({ length: 256 }, (_, i) => rampRGB(i / 255)); // 256 shades: no allocation per cell
const css = (c) => `rgb(${c[0]},${c[1]},${c[2]})`;
const ramp = (t) => css(rampRGB(t)), diverging = (t) => css(divergingRGB(t));

// ---- a heatmap on a canvas, with the value under the mouse in a tooltip ----
// One pixel per cell on an offscreen canvas, scaled up without smoothing: a 256-token pattern is
// one putImageData, not 65 536 fillRects (issue 14: 256 tokens render within a second).
const selected = new Set(); // token positions selected in the page (linked highlighting)
function heatmap(parent, matrix, rows, cols, title, opts = {}) {
  const n = Math.max(rows.length, cols.length);
  const cell = opts.cell || Math.max(n > 64 ? 2 : 8, Math.min(48, Math.floor(420 / n)));
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
  let lo = 0, hi = opts.max || 1;
  if (opts.signed) {
    hi = opts.max || Math.max(1e-9, ...matrix.map((r) => Math.max(...r.map(Math.abs))));
    lo = -hi;
  }
  const rgb = opts.signed ? (v) => divergingRGB(v / hi) : (v) => RAMP_LUT[Math.max(0, Math.min(255, Math.round(255 * (v - lo) / (hi - lo))))];
  const colour = (v) => css(rgb(v));
  canvas.figure = { matrix, rows, cols, title, colour }; // for the SVG export
  const px = document.createElement("canvas");
  px.width = cols.length; px.height = rows.length;
  const pctx = px.getContext("2d"), img = pctx.createImageData(cols.length, rows.length);
  matrix.forEach((row, i) => row.forEach((v, j) => {
    const c = rgb(v), o = 4 * (i * cols.length + j);
    img.data[o] = c[0]; img.data[o + 1] = c[1]; img.data[o + 2] = c[2]; img.data[o + 3] = 255;
  }));
  pctx.putImageData(img, 0, 0);
  const ctx = canvas.getContext("2d");
  canvas.redraw = () => {
    ctx.fillStyle = "#fff"; ctx.fillRect(0, 0, canvas.width, canvas.height);
    ctx.imageSmoothingEnabled = false;
    ctx.drawImage(px, left, top, cell * cols.length, cell * rows.length);
    if (cell >= 36 && opts.values !== false) { // big cells carry their number, as the seed prints them
      ctx.font = "11px sans-serif"; ctx.textAlign = "center"; ctx.textBaseline = "middle";
      matrix.forEach((row, i) => row.forEach((v, j) => {
        ctx.fillStyle = opts.signed || (v - lo) / (hi - lo) > 0.6 ? "#000" : "#fff";
        ctx.fillText(Number(v).toFixed(opts.signed ? 2 : 3), left + (j + 0.5) * cell, top + (i + 0.5) * cell);
      }));
    }
    if (opts.labels !== false) {
      ctx.fillStyle = "#222";
      ctx.font = `${Math.min(12, Math.max(cell, 9))}px sans-serif`;
      ctx.textAlign = "right"; ctx.textBaseline = "middle";
      const every = Math.ceil(10 / cell); // small cells: label every k-th token so labels stay legible
      rows.forEach((t, i) => { if (i % every === 0) ctx.fillText(String(t).slice(0, 10), left - 4, top + (i + 0.5) * cell); });
      cols.forEach((t, j) => {
        if (j % every) return;
        ctx.save();
        ctx.translate(left + (j + 0.5) * cell, top - 4);
        ctx.rotate(-Math.PI / 3);
        ctx.textAlign = "left";
        ctx.fillText(String(t).slice(0, 10), 0, 0);
        ctx.restore();
      });
    }
    if (opts.select !== false) { // linked highlighting: the selected tokens' rows, outlined
      ctx.strokeStyle = "#ff2d55"; ctx.lineWidth = 2;
      selected.forEach((i) => { if (i < rows.length) ctx.strokeRect(left - 1, top + i * cell, cell * cols.length + 2, cell); });
    }
  };
  canvas.redraw();
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
  if (opts.onclick) canvas.addEventListener("click", opts.onclick);
  box.append(cap, canvas);
  parent.append(box);
  return canvas;
}

// select a token (shift/ctrl-click adds to the selection): every view redraws its rows
function selectToken(i, add) {
  if (!add) { const had = selected.has(i) && selected.size === 1; selected.clear(); if (had) i = -1; }
  if (i >= 0) { if (selected.has(i)) selected.delete(i); else selected.add(i); }
  document.querySelectorAll("#tokens .token").forEach((el, k) => el.classList.toggle("selected", selected.has(k)));
  document.querySelectorAll("canvas.heatmap").forEach((c) => c.redraw && c.redraw());
  document.dispatchEvent(new CustomEvent("glassformer:select"));
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
  limits = data.limits;
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
    const t0 = performance.now();
    render(data);
    const ms = performance.now() - t0; // the scale goal: rendered within 1 s of the trace arriving
    $("status").dataset.renderMs = ms.toFixed(1);
    $("status").textContent = `${data.model}: ${data.tokens.length} tokens, ${data.pattern_hooks.length} layers (drawn in ${ms.toFixed(0)} ms)`;
  } catch (err) {
    $("status").textContent = String(err.message || err);
    $("status").className = "error";
  }
}

function render(data) {
  $("result").hidden = false;
  // pieces the model never saw, read as its unknown token: said here as the CLI says it on stderr
  $("unknown").hidden = !data.unknown;
  $("unknown").textContent = data.unknown ? `warning: ${data.unknown.note}` : "";
  const toks = $("tokens");
  toks.innerHTML = "";
  data.tokens.forEach((t, i) => {
    const s = document.createElement("span");
    s.className = "token"; s.textContent = t; s.title = `position ${i} (click to select, shift-click to add)`;
    s.addEventListener("click", (e) => selectToken(i, e.shiftKey || e.ctrlKey || e.metaKey));
    toks.append(s);
  });
  selected.clear();
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
  document.dispatchEvent(new CustomEvent("glassformer:trace", { detail: data })); // the other views
}

function drawHeads() {
  const data = current, l = Number($("layer").value || 0);
  const box = $("heads");
  box.innerHTML = "";
  const hook = data.pattern_hooks[l];
  // one colour scale across heads (the largest weight of the layer) or each head its own
  const shared = $("scale") && $("scale").value === "shared";
  const layerMax = Math.max(...data.trace[hook].map((p) => Math.max(...p.map((r) => Math.max(...r)))));
  data.trace[hook].forEach((pattern, h) => {
    const max = shared ? layerMax : Math.max(1e-9, ...pattern.map((r) => Math.max(...r)));
    heatmap(box, pattern, data.tokens, data.tokens, `${hook} · head ${h}`, { max });
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
if (window.GLASSFORMER_DATA) { // a file written by `glassformer export-html`: no server behind it
  document.body.classList.add("offline");
  current = window.GLASSFORMER_DATA;
  // after every script has run, so the other views hear the trace too
  document.addEventListener("DOMContentLoaded", () => {
    render(current);
    $("status").textContent = `${current.model}: ${current.tokens.length} tokens (offline export)`;
  });
} else {
  loadModels().catch((e) => { $("status").textContent = `could not list models: ${e}`; });
}
