// Interventions: switch off heads or FFNs and see the patterns and the output change; the logit lens
// (POST /api/intervene, built on glassformer.interp). A head off = its z zeroed (or set to its mean over
// the sentence) before concat·W_O (seed §2.3); an FFN off = its output zeroed (or its mean) before the
// residual add (§6).
"use strict";

function interveneShell(data) {
  const box = $("intervene-box");
  box.innerHTML = "";
  if (window.GLASSFORMER_DATA) return;
  const h = document.createElement("h2"); h.textContent = "Interventions"; box.append(h);
  const note = document.createElement("p"); note.className = "note";
  note.textContent = "Tick heads or FFNs to switch off, then Apply: the patterns after the change, how far each " +
    "token's output moved, the translation before/after, and the logit lens of every layer.";
  box.append(note);
  const stack = data.kind === "decoder" ? "dec" : "enc", attn = data.kind === "decoder" ? "self_attn" : "attn";
  const table = document.createElement("table"); table.id = "iv-table";
  data.pattern_hooks.forEach((hook, l) => {
    const tr = table.insertRow();
    const th = document.createElement("th"); th.textContent = `layer ${l}`; tr.append(th);
    data.trace[hook].forEach((_, hd) => {
      const c = document.createElement("input"); c.type = "checkbox";
      c.dataset.block = `${stack}.${l}.${attn}`; c.dataset.head = hd; c.title = `switch off head ${hd} of layer ${l}`;
      const td = tr.insertCell(); td.append(c, ` H${hd}`);
    });
    const f = document.createElement("input"); f.type = "checkbox"; f.dataset.ffn = `${stack}.${l}.ffn`;
    const td = tr.insertCell(); td.append(f, " FFN");
  });
  const how = document.createElement("select"); how.id = "iv-how"; how.setAttribute("aria-label", "ablation");
  how.add(new Option("zero ablation", "zero")); how.add(new Option("mean ablation", "mean"));
  const go = document.createElement("button"); go.id = "iv-apply"; go.textContent = "Apply";
  const out = document.createElement("div"); out.id = "iv-out";
  box.append(table, how, go, out);
  go.addEventListener("click", () => runIntervene(data));
}

async function runIntervene(data) {
  const heads = [...document.querySelectorAll("#iv-table input[data-head]:checked")].map((c) => [c.dataset.block, Number(c.dataset.head)]);
  const ffns = [...document.querySelectorAll("#iv-table input[data-ffn]:checked")].map((c) => c.dataset.ffn);
  const d = await postJSON("/api/intervene",
    { sentence: $("sentence").value, model: data.model, heads, ffns, how: $("iv-how").value }, $("iv-out"));
  if (!d) return;
  const out = $("iv-out");
  out.innerHTML = "";
  const off = heads.map(([b, h]) => `${b} head ${h}`).concat(ffns).join(", ") || "nothing";
  const p = document.createElement("p"); p.id = "iv-summary";
  p.textContent = `switched off (${d.how} ablation): ${off}.` + (d.output ? ` Translation before: “${d.output.before}” — after: “${d.output.after}”` : "");
  out.append(p);
  const change = d.change.relative;
  heatmap(out, [change], ["‖Δ‖/‖x‖"], d.tokens, `how far each token's ${d.change.hook} moved`, { max: Math.max(1e-9, ...change), select: false });
  out.append(changedPatterns(d));
  if (d.lens) out.append(lensTable(d.lens, d.target_tokens || d.tokens));
}

// The patterns after the change as thumbnails, one row per layer (as the model view); a red frame
// marks a head whose pattern moved against the trace above (max |Δ| > 0.001); a click zooms.
function changedPatterns(d) {
  const box = document.createElement("div");
  const note = document.createElement("p"); note.className = "note";
  note.textContent = "Patterns after the change, one row per layer. A red frame marks a head whose pattern moved " +
    "(max |Δ| > 0.001 against the trace above); hover for the number, click to open it full size.";
  const grid = document.createElement("div"); grid.className = "model-grid"; grid.id = "iv-patterns";
  const zoom = document.createElement("div"); zoom.id = "iv-zoom";
  d.pattern_hooks.forEach((hook) => {
    const r = document.createElement("div"); r.className = "model-row";
    const lab = document.createElement("span"); lab.className = "model-label";
    lab.textContent = hook.replace(".pattern", "").replace(".attn", "").replace("self_attn", "self").replace("cross_attn", "cross");
    r.append(lab);
    d.patterns[hook].forEach((P, hd) => {
      const rows = hook.includes("cross_attn") ? d.target_tokens : d.tokens; // cross: target rows, source columns
      const before = current && current.trace[hook] && current.trace[hook][hd];
      const delta = before && before.length === P.length
        ? Math.max(...P.map((row, i) => Math.max(...row.map((v, j) => Math.abs(v - before[i][j]))))) : null;
      const [T, labels] = rows === d.tokens ? pooled(P, d.tokens, 64) : [P, rows];
      const title = `after: ${hook} · head ${hd}` + (delta === null ? "" : ` · max |Δ| ${delta.toFixed(4)}`);
      const c = heatmap(r, T, labels, rows === d.tokens ? labels : d.tokens, title, {
        labels: false, values: false, select: false, cell: Math.max(2, Math.floor(64 / Math.max(labels.length, 1))),
        onclick: () => { zoom.innerHTML = ""; heatmap(zoom, P, rows, d.tokens, title); },
      });
      c.title = title;
      if (delta !== null && delta > 1e-3) c.classList.add("moved");
    });
    grid.append(r);
  });
  box.append(note, grid, zoom);
  return box;
}

function lensTable(lens, positions) {
  const box = document.createElement("div"); box.id = "lens";
  const h = document.createElement("h3"); h.textContent = "Logit lens: the top token after each layer (before → after)"; box.append(h);
  const note = document.createElement("p"); note.className = "note";
  note.textContent = lens.unembedding === "head" ? "Each layer's stream read through the final norm and the output head."
    : "An encoder has no output head: each layer's stream is read through the token embedding (the nearest token).";
  box.append(note);
  const tbl = document.createElement("table");
  const head = tbl.createTHead().insertRow();
  head.append(document.createElement("th"));
  positions.forEach((t) => { const th = document.createElement("th"); th.textContent = t; head.append(th); });
  lens.after.forEach((layer, l) => {
    const tr = tbl.insertRow();
    const th = document.createElement("th"); th.textContent = layer.layer; tr.append(th);
    layer.top.forEach((tops, pos) => {
      const b = lens.before[l].top[pos][0], a = tops[0];
      const td = tr.insertCell();
      td.textContent = b.token === a.token ? `${a.token} ${a.p.toFixed(2)}` : `${b.token} → ${a.token} ${a.p.toFixed(2)}`;
      td.title = tops.map((t) => `${t.token} ${t.p.toFixed(4)}`).join("\n");
      if (b.token !== a.token) td.className = "changed";
    });
  });
  box.append(tbl);
  return box;
}

document.addEventListener("glassformer:trace", (e) => interveneShell(e.detail));
