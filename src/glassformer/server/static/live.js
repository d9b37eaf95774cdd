// Generation, live: decode step by step with a translator or an LM (POST /api/generate).
// Each step shows the top-k next-token probabilities, the token taken and the attention of the new
// token (cross-attention over the source for a translator); beam search draws its tree.
"use strict";

const live = { data: null, at: 0 };

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
    <label>beams <input id="gen-beams" type="number" min="1" max="8" value="3"></label>
    <label>max tokens <input id="gen-max" type="number" min="1" max="48" value="12"></label>
    <button id="gen-run">Generate</button>
    <button id="gen-prev">◀</button><button id="gen-next">▶</button><span id="gen-pos"></span>`;
  const out = document.createElement("div"); out.id = "gen-out";
  box.append(bar, out);
  $("gen-temp").addEventListener("input", () => { $("gen-temp-out").textContent = Number($("gen-temp").value).toFixed(1); });
  $("gen-run").addEventListener("click", () => runGenerate(data));
  $("gen-prev").addEventListener("click", () => showGenStep(live.at - 1));
  $("gen-next").addEventListener("click", () => showGenStep(live.at + 1));
}

async function runGenerate(data, extra = {}) {
  const body = { sentence: $("sentence").value, model: data.model, strategy: $("gen-strategy").value,
    temperature: Number($("gen-temp").value), beam_size: Number($("gen-beams").value),
    max_new_tokens: Number($("gen-max").value), top_k: 5, ...extra };
  const d = await postJSON("/api/generate", body, $("gen-out"));
  if (!d) return;
  live.data = d;
  showGenStep(0);
}

function showGenStep(i) {
  const d = live.data;
  if (!d) return;
  live.at = Math.max(0, Math.min(d.steps.length - 1, i));
  const s = d.steps[live.at], out = $("gen-out");
  out.innerHTML = "";
  $("gen-pos").textContent = ` step ${live.at + 1} / ${d.steps.length}`;
  const text = document.createElement("p"); text.id = "gen-text";
  const sofar = d.strategy === "beam" ? (s.beams[0] || "") : d.steps.slice(0, live.at + 1).map((x) => x.token).join(" ");
  text.textContent = `${d.strategy}: ${sofar}   (final: ${d.text})`;
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
  if (d.tree) out.append(beamTree(d.tree));
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
