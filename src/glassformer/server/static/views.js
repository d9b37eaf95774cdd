// Head view, model view, neuron view (the three views of bertviz, Vig 2019) over one trace.
// Head view: lines from each selected token to every key, one colour per head, opacity = weight.
// Model view: every layer × head pattern as a thumbnail; a click opens it full size.
// Neuron view: q_i·k_i·scale per dimension i for one query-key pair (POST /api/neuron).
"use strict";

const SVG_NS = "http://www.w3.org/2000/svg";
const HEAD_COLOURS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b",
  "#e377c2", "#7f7f7f", "#bcbd22", "#17becf", "#393b79", "#ad494a"];

function svgEl(tag, attrs, parent) {
  const e = document.createElementNS(SVG_NS, tag);
  Object.entries(attrs || {}).forEach(([k, v]) => e.setAttribute(k, v));
  if (parent) parent.append(e);
  return e;
}

function viewSection(parent, id, title, note) {
  let sec = document.getElementById(id);
  if (!sec) {
    sec = document.createElement("section");
    sec.id = id; sec.className = "view";
    parent.append(sec);
  }
  sec.innerHTML = "";
  const h = document.createElement("h2"); h.textContent = title; sec.append(h);
  if (note) { const p = document.createElement("p"); p.className = "note"; p.textContent = note; sec.append(p); }
  return sec;
}

// ---- head view ----
const HV = { W: 420, xl: 150, xr: 270, min: 0.02 }; // geometry; lines under 2% carry nothing a reader can see
const LONG_INPUT = 64; // past this many tokens the head view is one canvas, not thousands of SVG lines

function drawHeadView() {
  const data = current;
  const sec = viewSection($("views"), "head-view", "Head view",
    "Lines join each selected token (click tokens above; shift-click adds) to every token it attends to; " +
    "one colour per head, opacity = attention weight. With nothing selected, every token's lines are drawn.");
  const l = Number($("layer").value || 0), hook = data.pattern_hooks[l], P = data.trace[hook];
  const toks = data.tokens, n = toks.length, row = n > 48 ? 10 : 20;
  const on = drawHeadView.heads || (drawHeadView.heads = new Set(P.map((_, h) => h)));
  const bar = document.createElement("div"); bar.className = "head-toggles";
  P.forEach((_, h) => {
    const b = document.createElement("label");
    b.style.color = HEAD_COLOURS[h % HEAD_COLOURS.length];
    const c = document.createElement("input"); c.type = "checkbox"; c.checked = on.has(h); c.dataset.head = h;
    c.addEventListener("change", () => { if (c.checked) on.add(h); else on.delete(h); drawHeadView(); });
    b.append(c, ` head ${h}`); bar.append(b);
  });
  sec.append(bar);
  const from = selected.size ? [...selected].filter((i) => i < n) : toks.map((_, i) => i);
  const lines = []; // [head, query, key, weight]
  [...on].forEach((h) => from.forEach((i) => P[h][i].forEach((w, j) => { if (w >= HV.min) lines.push([h, i, j, w]); })));
  if (n > LONG_INPUT) {
    const hint = document.createElement("p"); hint.className = "hint"; hint.id = "hv-hint";
    hint.textContent = `${n} tokens: drawn on a canvas. ` + (selected.size
      ? `Showing the lines of ${selected.size} selected token(s); click a selected token again to see every token's lines.`
      : "Every token's lines are drawn at once (a dense fan); click a token on the left (shift-click adds) to follow only its lines.");
    sec.append(hint);
    sec.append(headCanvas(toks, lines, row, hook));
    return;
  }
  const { W, xl, xr } = HV;
  const svg = svgEl("svg", { width: W, height: row * n + 30, class: "figure-svg", "data-title": `head view ${hook}`,
    "font-family": "Noto Sans CJK SC, sans-serif", "font-size": Math.min(13, row - 2) });
  svgEl("rect", { width: W, height: row * n + 30, fill: "#fff" }, svg);
  const y = (i) => 20 + i * row + row / 2;
  toks.forEach((t, i) => {
    const a = svgEl("text", { x: xl - 6, y: y(i), "text-anchor": "end", "dominant-baseline": "middle",
      class: "hv-token", fill: selected.has(i) ? "#ff2d55" : "#222" }, svg);
    a.textContent = t;
    a.addEventListener("click", (e) => selectToken(i, e.shiftKey));
    const b = svgEl("text", { x: xr + 6, y: y(i), "dominant-baseline": "middle", fill: "#222" }, svg);
    b.textContent = t;
  });
  lines.forEach(([h, i, j, w]) => svgEl("line", { x1: xl, y1: y(i), x2: xr, y2: y(j), stroke: HEAD_COLOURS[h % HEAD_COLOURS.length],
    "stroke-opacity": Math.min(1, w).toFixed(3), "stroke-width": 2, class: "hv-line" }, svg));
  sec.append(svg);
}

// The head view of a long input on one canvas: lines batched by head and by opacity (ten levels),
// so 256 tokens × 12 heads is ~120 strokes, not tens of thousands of DOM nodes (bertviz #82).
function headCanvas(toks, lines, row, hook) {
  const { W, xl, xr } = HV, n = toks.length, H = row * n + 30;
  const y = (i) => 20 + i * row + row / 2;
  const box = document.createElement("figure"); box.className = "heatmap-box";
  const c = document.createElement("canvas");
  c.width = W; c.height = H; c.className = "hv-canvas";
  Object.assign(c.dataset, { title: `head view ${hook}`, lines: String(lines.length), row: String(row) });
  const ctx = c.getContext("2d");
  ctx.fillStyle = "#fff"; ctx.fillRect(0, 0, W, H);
  ctx.font = `${Math.min(13, row - 1)}px Noto Sans CJK SC, sans-serif`; ctx.textBaseline = "middle";
  toks.forEach((t, i) => {
    ctx.fillStyle = selected.has(i) ? "#ff2d55" : "#222";
    ctx.textAlign = "right"; ctx.fillText(String(t).slice(0, 16), xl - 6, y(i));
    ctx.fillStyle = "#222"; ctx.textAlign = "left"; ctx.fillText(String(t).slice(0, 16), xr + 6, y(i));
  });
  const batches = new Map();
  lines.forEach((ln) => {
    const key = `${ln[0]}|${Math.min(10, Math.ceil(ln[3] * 10))}`;
    if (!batches.has(key)) batches.set(key, []);
    batches.get(key).push(ln);
  });
  ctx.lineWidth = 1.5;
  batches.forEach((group, key) => {
    const [h, level] = key.split("|").map(Number);
    ctx.strokeStyle = HEAD_COLOURS[h % HEAD_COLOURS.length]; ctx.globalAlpha = level / 10;
    ctx.beginPath();
    group.forEach(([, i, j]) => { ctx.moveTo(xl, y(i)); ctx.lineTo(xr, y(j)); });
    ctx.stroke();
  });
  ctx.globalAlpha = 1;
  c.addEventListener("click", (e) => { // a click on a token (either column) selects it
    const r = c.getBoundingClientRect(), i = Math.floor(((e.clientY - r.top) * (H / r.height) - 20) / row);
    if (i >= 0 && i < n) selectToken(i, e.shiftKey || e.ctrlKey || e.metaKey);
  });
  c.toSVG = () => { // the export: the same lines as SVG, one <line> each
    const esc = (t) => String(t).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
    const out = [`<svg xmlns="${SVG_NS}" width="${W}" height="${H}" font-family="Noto Sans CJK SC, sans-serif" font-size="${Math.min(13, row - 1)}">`,
      `<rect width="${W}" height="${H}" fill="#fff"/>`, `<title>${esc(c.dataset.title)}</title>`];
    toks.forEach((t, i) => out.push(`<text x="${xl - 6}" y="${y(i)}" text-anchor="end" dominant-baseline="middle">${esc(t)}</text>`,
      `<text x="${xr + 6}" y="${y(i)}" dominant-baseline="middle">${esc(t)}</text>`));
    lines.forEach(([h, i, j, w]) => out.push(`<line x1="${xl}" y1="${y(i)}" x2="${xr}" y2="${y(j)}" ` +
      `stroke="${HEAD_COLOURS[h % HEAD_COLOURS.length]}" stroke-opacity="${Math.min(1, w).toFixed(3)}" stroke-width="1.5"/>`));
    out.push("</svg>");
    return out.join("\n");
  };
  box.append(c);
  return box;
}

// ---- model view ----
function drawModelView() {
  const data = current;
  const sec = viewSection($("views"), "model-view", "Model view",
    "Every layer (rows) × head (columns). Click a thumbnail to open it full size.");
  const grid = document.createElement("div"); grid.className = "model-grid";
  const zoom = document.createElement("div"); zoom.id = "zoom";
  const n = data.tokens.length;
  data.pattern_hooks.forEach((hook, l) => {
    const r = document.createElement("div"); r.className = "model-row";
    const lab = document.createElement("span"); lab.className = "model-label"; lab.textContent = `L${l}`; r.append(lab);
    data.trace[hook].forEach((P, h) => {
      const [T, labels] = pooled(P, data.tokens, 64);
      heatmap(r, T, labels, labels, `L${l} H${h}`, {
        labels: false, values: false, select: false, cell: Math.max(1, Math.floor(64 / labels.length)),
        max: Math.max(1e-9, ...T.map((row) => Math.max(...row))), // each thumbnail to its own largest weight
        onclick: () => {
          zoom.innerHTML = "";
          heatmap(zoom, P, data.tokens, data.tokens, `${hook} · head ${h}`);
          zoom.scrollIntoView({ block: "nearest" });
        },
      });
    });
    grid.append(r);
  });
  sec.append(grid, zoom);
}

// A thumbnail needs at most `size` cells a side: longer inputs are averaged in blocks of k × k
// (256 tokens: 72 thumbnails of 64², not 72 of 256² — the model view stays within the time budget).
function pooled(P, tokens, size) {
  const n = tokens.length, k = Math.ceil(n / size);
  if (k === 1) return [P, tokens];
  const m = Math.ceil(n / k), T = Array.from({ length: m }, () => new Array(m).fill(0));
  for (let i = 0; i < n; i++) for (let j = 0; j < n; j++) T[(i / k) | 0][(j / k) | 0] += P[i][j] / (k * k);
  return [T, Array.from({ length: m }, (_, b) => `${tokens[b * k]}…`)];
}

// ---- neuron view ----
function drawNeuronView() {
  const data = current;
  const sec = viewSection($("views"), "neuron-view", "Neuron view",
    "Why query q attends to key k: the score q·k·scale is a sum over dimensions; each bar is one term " +
    "(red adds, blue subtracts). Pick the pair and press Show.");
  if (window.GLASSFORMER_DATA) { sec.append("(needs the server: run `glassformer serve`)"); return; }
  const form = document.createElement("div"); form.className = "controls";
  const mk = (id, items) => {
    const s = document.createElement("select"); s.id = id;
    items.forEach((t, i) => s.add(new Option(t, String(i))));
    return s;
  };
  const layer = mk("nv-layer", data.pattern_hooks.map((_, l) => `layer ${l}`));
  const q = mk("nv-query", data.tokens.map((t, i) => `query ${i} ${t}`));
  const k = mk("nv-key", data.tokens.map((t, i) => `key ${i} ${t}`));
  const go = document.createElement("button"); go.id = "nv-show"; go.textContent = "Show";
  const out = document.createElement("div"); out.id = "nv-out"; out.className = "grid";
  form.append(layer, q, k, go);
  sec.append(form, out);
  go.addEventListener("click", async () => {
    const body = { sentence: $("sentence").value, model: data.model, layer: +layer.value, query: +q.value, key: +k.value };
    const d = await postJSON("/api/neuron", body, out);
    if (!d) return;
    out.innerHTML = "";
    d.terms.forEach((terms, h) => out.append(neuronBars(terms, d, h)));
  });
}

function neuronBars(terms, d, h) {
  const W = 14 * terms.length + 60, H = 150, mid = 80;
  const top = Math.max(1e-9, ...terms.map(Math.abs));
  const svg = svgEl("svg", { width: Math.max(W, 220), height: H, class: "figure-svg", "data-title": `neuron view head ${h}`,
    "font-family": "Noto Sans CJK SC, sans-serif", "font-size": 11 });
  svgEl("rect", { width: Math.max(W, 220), height: H, fill: "#fff" }, svg);
  const t = svgEl("text", { x: 4, y: 12 }, svg);
  t.textContent = `head ${h}: Σ ${d.terms[h].reduce((a, b) => a + b, 0).toFixed(3)} + bias ${d.bias[h].toFixed(3)} = ${d.score[h].toFixed(3)}; weight ${d.pattern[h].toFixed(3)}`;
  svgEl("line", { x1: 30, x2: Math.max(W, 220), y1: mid, y2: mid, stroke: "#999" }, svg);
  terms.forEach((v, i) => {
    const hgt = 55 * Math.abs(v) / top;
    const r = svgEl("rect", { x: 30 + i * 14, y: v >= 0 ? mid - hgt : mid, width: 11, height: Math.max(hgt, 0.5),
      fill: v >= 0 ? "#d62728" : "#1f77b4", class: "nv-bar" }, svg);
    svgEl("title", {}, r).textContent = `d${i}: q=${d.q[h][i].toFixed(4)} k=${d.k[h][i].toFixed(4)} term=${v.toFixed(4)}`;
  });
  return svg;
}

// POST a JSON body; on a 4xx show the server's one line in `where` and return null
async function postJSON(url, body, where) {
  const res = await fetch(url, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) });
  const data = await res.json();
  if (!res.ok) {
    const msg = typeof data.detail === "string" ? data.detail : JSON.stringify(data.detail);
    if (where) { where.innerHTML = ""; const p = document.createElement("p"); p.className = "error"; p.textContent = msg; where.append(p); }
    return null;
  }
  return data;
}

function drawViews() { drawHeadView(); drawModelView(); drawNeuronView(); }

document.addEventListener("glassformer:trace", () => { drawHeadView.heads = null; drawViews(); });
document.addEventListener("glassformer:select", () => { if (current) drawHeadView(); });
$("layer").addEventListener("change", () => { drawHeadView.heads = null; drawHeadView(); });
$("scale").addEventListener("change", () => { if (current) drawHeads(); });
