// Exports: every figure as PNG and as SVG, made in the page (no server, no library).
// A heatmap's SVG is rebuilt from its numbers (one <rect> per cell, labels as <text>, so it stays
// sharp in a paper); an SVG view is serialised as it is; a PNG is the canvas, or the SVG rasterised.
"use strict";

function heatmapSVG(canvas) {
  const f = canvas.figure, cell = Number(canvas.dataset.cell), left = Number(canvas.dataset.left), top = Number(canvas.dataset.top);
  const W = canvas.width, H = canvas.height + 20;
  const esc = (t) => String(t).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
  const out = [`<svg xmlns="${SVG_NS}" width="${W}" height="${H}" font-family="Noto Sans CJK SC, sans-serif" font-size="${Math.min(12, Math.max(cell, 9))}">`,
    `<rect width="${W}" height="${H}" fill="#fff"/>`, `<title>${esc(f.title)}</title>`,
    `<text x="4" y="14">${esc(f.title)}</text>`, `<g transform="translate(0,20)">`];
  f.matrix.forEach((row, i) => row.forEach((v, j) => out.push(
    `<rect x="${left + j * cell}" y="${top + i * cell}" width="${cell}" height="${cell}" fill="${f.colour(v)}"><title>${Number(v).toFixed(4)}</title></rect>`)));
  if (left > 4) {
    f.rows.forEach((t, i) => out.push(`<text x="${left - 4}" y="${top + (i + 0.5) * cell}" text-anchor="end" dominant-baseline="middle">${esc(t)}</text>`));
    f.cols.forEach((t, j) => out.push(`<text transform="translate(${left + (j + 0.5) * cell},${top - 4}) rotate(-60)">${esc(t)}</text>`));
  }
  out.push("</g></svg>");
  return out.join("\n");
}

function figureSVG(el) {
  if (el.toSVG) return el.toSVG(); // a canvas view that knows its own vector form (the long head view)
  if (el.tagName.toLowerCase() === "canvas") return heatmapSVG(el);
  const copy = el.cloneNode(true);
  copy.setAttribute("xmlns", SVG_NS);
  return new XMLSerializer().serializeToString(copy);
}

function figurePNG(el) { // a promise of a PNG data URL
  if (el.tagName.toLowerCase() === "canvas") return Promise.resolve(el.toDataURL("image/png"));
  return new Promise((resolve, reject) => {
    const img = new Image();
    img.onload = () => {
      const c = document.createElement("canvas");
      c.width = img.width * 2; c.height = img.height * 2; // 2×: sharp enough for a slide
      const ctx = c.getContext("2d"); ctx.scale(2, 2); ctx.drawImage(img, 0, 0);
      resolve(c.toDataURL("image/png"));
    };
    img.onerror = () => reject(new Error("the SVG could not be rasterised"));
    img.src = "data:image/svg+xml;charset=utf-8," + encodeURIComponent(figureSVG(el));
  });
}

function download(name, url) {
  const a = document.createElement("a");
  a.href = url; a.download = name;
  document.body.append(a); a.click(); a.remove();
}

function fileName(el, ext) {
  const t = (el.dataset.title || el.getAttribute("data-title") || "figure").replace(/[^\w\u4e00-\u9fff.-]+/g, "_");
  return `${t}.${ext}`;
}

function addExportButtons() {
  const figs = [...document.querySelectorAll("figure.heatmap-box > canvas, svg.figure-svg")]
    .filter((el) => !el.closest(".model-grid") && !el.dataset.exportable);
  figs.forEach((el) => {
    el.dataset.exportable = "1";
    const bar = document.createElement("span"); bar.className = "export";
    const png = document.createElement("button"); png.textContent = "PNG"; png.className = "export-png";
    const svg = document.createElement("button"); svg.textContent = "SVG"; svg.className = "export-svg";
    png.addEventListener("click", async () => download(fileName(el, "png"), await figurePNG(el)));
    svg.addEventListener("click", () => download(fileName(el, "svg"),
      URL.createObjectURL(new Blob([figureSVG(el)], { type: "image/svg+xml" }))));
    bar.append(png, svg);
    el.after(bar);
  });
}

let exportQueued = false;
new MutationObserver(() => {
  if (exportQueued) return;
  exportQueued = true;
  requestAnimationFrame(() => { exportQueued = false; addExportButtons(); });
}).observe(document.body, { childList: true, subtree: true });
window.glassformerExport = { svg: figureSVG, png: figurePNG }; // for scripts and the browser tests
