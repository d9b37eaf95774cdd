// Generation, live: decode step by step with a translator or an LM (POST /api/generate, streamed:
// one JSON line per step, drawn as it arrives). Each step shows the top-k next-token probabilities,
// the token taken and the attention of the new token (cross-attention over the source for a
// translator); beam search grows its tree step by step; moving the temperature slider re-samples.
"use strict";

const live = { data: null, at: 0, run: 0 };
const BEAM_ROOT = { id: 0, parent: null, token: "<start>", score: 0, step: 0, finished: false };

function liveShell(data) {
  const box = $("live-box");
  box.innerHTML = "";
  if (window.GLASSFORMER_DATA || !(data.kind === "encoder-decoder" || data.kind === "decoder")) return;
  const h = document.createElement("h2"); h.textContent = "Generation, step by step"; box.append(h);
  const bar = document.createElement("div"); bar.className = "controls";
  bar.innerHTML = `
    <select id="gen-strategy" aria-label="strategy"><option value="greedy">greedy</option>
      <option value="sample">sampling</option><option value="beam">beam search</option></select>
    <label>temperature <input id="gen-temp" type="range" min="0.1" max="3" step="0.1" value="1">
      <output id="gen-temp-out">1.0</output></label>
    <label>seed <input id="gen-seed" type="number" min="0" value="0" style="width:5em"></label>
    <label>beams <input id="gen-beams" type="number" min="1" max="8" value="3"></label>
    <label>max tokens <input id="gen-max" type="number" min="1" max="48" value="12"></label>
    <button id="gen-run">Generate</button>
    <button id="gen-prev" title="previous step">◀</button><button id="gen-next" title="next step">▶</button><span id="gen-pos"></span>`;
  const status = document.createElement("p"); status.id = "gen-status"; status.className = "note";
  const strip = document.createElement("div"); strip.id = "gen-strip";
  const out = document.createElement("div"); out.id = "gen-out";
  box.append(bar, status, strip, out);
  $("gen-temp").addEventListener("input", () => { $("gen-temp-out").textContent = Number($("gen-temp").value).toFixed(1); });
  // the slider re-samples when let go: the same seed, another temperature
  $("gen-temp").addEventListener("change", () => { if ($("gen-strategy").value === "sample") runGenerate(data); });
  $("gen-run").addEventListener("click", () => runGenerate(data));
  $("gen-prev").addEventListener("click", () => showGenStep(live.at - 1));
  $("gen-next").addEventListener("click", () => showGenStep(live.at + 1));
}

async function runGenerate(data, extra = {}) {
  const strategy = $("gen-strategy").value, run = ++live.run; // a newer run stops drawing this one
  const body = { sentence: $("sentence").value, model: data.model, strategy, stream: true,
    temperature: Number($("gen-temp").value), beam_size: Number($("gen-beams").value), seed: Number($("gen-seed").value),
    max_new_tokens: Number($("gen-max").value), top_k: 5, ...extra };
  live.data = { strategy, steps: [], source_tokens: [], nodes: [BEAM_ROOT], tree: null, text: null };
  live.at = 0;
  $("gen-out").innerHTML = ""; $("gen-strip").innerHTML = "";
  $("gen-status").textContent = "decoding…"; delete $("gen-status").dataset.done;
  const res = await fetch("/api/generate", { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) });
  if (!res.ok) { // a 4xx: the server's one line
    const d = await res.json();
    $("gen-status").textContent = typeof d.detail === "string" ? d.detail : JSON.stringify(d.detail);
    $("gen-status").className = "error";
    return;
  }
  $("gen-status").className = "note";
  const reader = res.body.getReader(), decoder = new TextDecoder();
  let buf = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (run !== live.run) { reader.cancel(); return; }
    if (done) break;
    buf += decoder.decode(value, { stream: true });
    let nl;
    while ((nl = buf.indexOf("\n")) >= 0) {
      const line = buf.slice(0, nl); buf = buf.slice(nl + 1);
      if (line) onGenEvent(JSON.parse(line));
    }
  }
}

function onGenEvent(e) {
  const d = live.data;
  if (e.event === "start") { d.source_tokens = e.source_tokens; return; }
  if (e.event === "error") { $("gen-status").textContent = e.detail; $("gen-status").className = "error"; return; }
  if (e.event === "step") {
    d.steps.push(e);
    if (e.nodes) d.nodes.push(...e.nodes);
    $("gen-status").textContent = `decoding… step ${d.steps.length}`;
    showGenStep(d.steps.length - 1); // follow the newest step while it decodes
    return;
  }
  Object.assign(d, { text: e.text, ids: e.ids, tree: e.tree }); // done
  $("gen-status").textContent = `done: ${d.steps.length} steps — “${e.text}”`;
  $("gen-status").dataset.done = "1";
  showGenStep(live.at);
}

function genStrip() { // the tokens so far; click one to see its step
  const d = live.data, strip = $("gen-strip");
  strip.innerHTML = "";
  d.steps.forEach((s, i) => {
    const t = document.createElement("span");
    t.className = "token gen-token" + (i === live.at ? " selected" : "");
    t.textContent = d.strategy === "beam" ? `${i + 1}` : s.token;
    t.title = `step ${i + 1}`;
    t.addEventListener("click", () => showGenStep(i));
    strip.append(t);
  });
}

function showGenStep(i) {
  const d = live.data;
  if (!d) return;
  live.at = Math.max(0, Math.min(d.steps.length - 1, i));
  const s = d.steps[live.at], out = $("gen-out");
  out.innerHTML = "";
  $("gen-pos").textContent = ` step ${live.at + 1} / ${d.steps.length}`;
  genStrip();
  const text = document.createElement("p"); text.id = "gen-text";
  const sofar = d.strategy === "beam" ? (s.beams[0] || "") : d.steps.slice(0, live.at + 1).map((x) => x.token).join(" ");
  text.textContent = `${d.strategy}: ${sofar}` + (d.text === null ? "" : `   (final: ${d.text})`);
  out.append(text);
  const probs = document.createElement("div"); probs.className = "topk";
  s.top.forEach((t) => {
    const r = document.createElement("div"); r.className = "topk-row" + (t.id === s.id ? " chosen" : "");
    const lab = document.createElement("span"); lab.textContent = t.token;
    const bar = document.createElement("span"); bar.className = "topk-bar"; bar.style.width = `${Math.round(200 * t.p)}px`;
    const p = document.createElement("span"); p.textContent = t.p.toFixed(4);
    r.append(lab, bar, p); probs.append(r);
  });
  out.append(probs);
  if (s.attention) {
    const grid = document.createElement("div"); grid.className = "grid";
    Object.entries(s.attention).forEach(([hook, rows]) => {
      // keys: the source (translator) or the prompt and the tokens generated so far (LM)
      const keys = d.source_tokens.concat(d.steps.slice(0, live.at).map((x) => x.token)).slice(0, rows[0].length);
      heatmap(grid, rows, rows.map((_, h) => `head ${h}`), keys, `${hook}: the new token "${s.token}" (rows: heads)`,
        { select: false });
    });
    out.append(grid);
  }
  if (d.strategy === "beam") out.append(beamTree(d.tree || { nodes: d.nodes, best: [] })); // grows while decoding
}

function beamTree(tree) {
  const byStep = {};
  tree.nodes.forEach((n) => { (byStep[n.step] = byStep[n.step] || []).push(n); });
  const steps = Object.keys(byStep).length, most = Math.max(...Object.values(byStep).map((a) => a.length));
  const W = 110 * steps + 40, H = 28 * most + 40, pos = {};
  Object.values(byStep).forEach((nodes) => nodes.forEach((n, k) => { pos[n.id] = [20 + 110 * n.step, 24 + 28 * k]; }));
  const best = new Set(tree.best);
  const svg = svgEl("svg", { width: W, height: H, class: "figure-svg", id: "beam-tree", "data-title": "beam tree",
    "font-family": "Noto Sans CJK SC, sans-serif", "font-size": 11 });
  svgEl("rect", { width: W, height: H, fill: "#fff" }, svg);
  tree.nodes.forEach((n) => {
    if (n.parent === null) return;
    const [x1, y1] = pos[n.parent], [x2, y2] = pos[n.id];
    svgEl("line", { x1: x1 + 40, y1, x2, y2, stroke: best.has(n.id) ? "#d62728" : "#aaa",
      "stroke-width": best.has(n.id) ? 2.5 : 1 }, svg);
  });
  tree.nodes.forEach((n) => {
    const [x, y] = pos[n.id];
    const t = svgEl("text", { x, y, "dominant-baseline": "middle", class: "beam-node",
      fill: n.finished ? "#2ca02c" : best.has(n.id) ? "#d62728" : "#222" }, svg);
    t.textContent = n.token;
    svgEl("title", {}, t).textContent = `log p = ${n.score}`;
  });
  return svg;
}

document.addEventListener("glassformer:trace", (e) => { live.data = null; liveShell(e.detail); });
