"""Head roles and layer trends over a sentence set, written up as docs/head_roles.md.

The question (seed 000 §2.6): do heads settle into the roles Clark et al. (2019) found in BERT,
and are shallow heads local and deep heads global? Every number in the report is measured here,
over the bundled sentences, on our own implementation of the model.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import InputError
from . import neurons as neurons_mod
from . import projection, views
from .loader import Subject
from .roles import ROLE_NAMES, ROLES, assign_roles, consistency, layer_trends, role_scores


@dataclass
class Analysis:
    model: str
    n_sentences: int
    mean_scores: dict  # role -> (layer, head)
    majority: np.ndarray  # (layer, head) role names
    frac: np.ndarray  # (layer, head) fraction of sentences with the majority role
    trends: dict  # key -> (sentence, layer)
    neurons: dict = field(default_factory=dict)  # "L{l}N{n}" -> top tokens
    projection: dict = field(default_factory=dict)
    figures: dict = field(default_factory=dict)
    neuron_layer: int = 0


def layer_count(subject: Subject) -> int:
    """Layers of the stack analysed: an LM's decoder, else the encoder (a translator's too)."""
    cfg = subject.model.config
    return cfg.n_layers if subject.kind != "decoder" else cfg.dec_layers


def analyze(subject: Subject, sentences: list[str], neuron_layer: int | None = None,
            n_neurons: int = 4, proj_layer: int = 0, method: str = "pca",
            fig_dir: str | Path | None = None) -> Analysis:
    """Run every sentence once and gather role scores, trends, neurons and a head projection."""
    L = layer_count(subject)
    neuron_layer = L // 2 if neuron_layer is None else neuron_layer
    if not 0 <= neuron_layer < L:  # the hook name below would name no layer (a KeyError deep in the trace)
        raise InputError(f"neuron layer {neuron_layer} is outside {subject.name}; its layers are 0..{L - 1}")
    prefix = "dec.{}.self_attn" if subject.causal else "enc.{}.attn"
    ffn = ("dec.{}.ffn.act" if subject.causal else "enc.{}.ffn.act").format(neuron_layer)
    z_name = prefix.format(proj_layer) + ".z"
    scores, roles, trends, acts, toks, points, labels, masks = [], [], [], [], [], [], [], []
    W_O = getattr(_attn(subject, proj_layer), "W_O").detach().numpy()
    for s in sentences:
        tokens, tr = subject.trace(s, [subject.pattern_hook, ffn, z_name])
        P = np.stack([v[0].float().numpy() for k, v in tr.items() if k.endswith(".pattern")])
        special = subject.special_positions(tokens)
        sc = role_scores(P, subject.sep_positions(tokens), subject.causal)
        scores.append(sc)
        roles.append(assign_roles(sc))
        trends.append(layer_trends(P, special, subject.causal))
        acts.append(tr[ffn][0].float().numpy())
        toks.append(tokens)
        masks.append(np.array([i not in special for i in range(len(tokens))]))
        contrib = projection.head_contributions(tr[z_name][0].float().numpy(), W_O)
        for h in range(contrib.shape[0]):
            points.append(contrib[h][masks[-1]])
            labels += [h] * int(masks[-1].sum())
    mean_scores = {r: np.nanmean(np.stack([sc[r] for sc in scores]), 0) for r in ROLES}
    majority, frac = consistency(np.stack(roles))
    trend = {k: np.stack([t[k] for t in trends]) for k in trends[0]}
    chosen = neurons_mod.selective_neurons(acts, n_neurons, masks)
    skip = {t for t in ("[CLS]", "[SEP]", "<bos>", "<eos>")}
    neuron_tops = {f"L{neuron_layer}N{n}": neurons_mod.top_activating(acts, toks, n, 8, skip) for n in chosen}
    X, y = np.concatenate(points), np.array(labels)
    Y = projection.project(X, method)
    result = Analysis(subject.name, len(sentences), mean_scores, majority, frac, trend, neuron_tops,
                      {"layer": proj_layer, "method": method, "n_points": int(len(y)),
                       "silhouette": projection.separation(Y, y)}, neuron_layer=neuron_layer)
    if fig_dir is not None:
        fig_dir = Path(fig_dir)
        result.figures = {
            "roles": views.role_grid(mean_scores, majority, frac, fig_dir / f"{subject.name}_roles.png"),
            "trends": views.trend_plot(trend, fig_dir / f"{subject.name}_layer_trends.png",
                                       f"{subject.name}: per-layer mean ± std over {len(sentences)} sentences"),
            "projection": views.scatter(Y, y, fig_dir / f"{subject.name}_heads_L{proj_layer}_{method}.png",
                                        f"layer {proj_layer} head outputs z_h·W_O[h] ({method.upper()})"),
        }
        tokens, P = subject.patterns(sentences[0])
        result.figures["model_view"] = views.model_view(P, tokens, fig_dir / f"{subject.name}_model_view.png",
                                                        assign_roles(role_scores(P, subject.sep_positions(tokens), subject.causal)))
    return result


def _attn(subject: Subject, layer: int):
    stack = subject.model.dec if subject.causal else subject.model.enc
    return stack[layer].self_attn if subject.causal else stack[layer].attn


def findings(a: Analysis) -> dict:
    """The claims the report states, computed (not typed): trend slopes and role counts."""
    layers = np.arange(a.trends["entropy"].shape[1])
    out = {}
    for k in ("entropy_norm", "distance", "distance_content"):
        mean = np.nanmean(a.trends[k], 0)
        out[k] = {"per_layer": mean.round(3).tolist(), "slope": float(np.polyfit(layers, mean, 1)[0]),
                  "first": float(mean[0]), "last": float(mean[-1]),
                  "spearman": float(_spearman(layers, mean))}
    for k in ("entropy_norm", "distance", "distance_content"):
        v = a.trends[k]  # (sentence, layer): paired by sentence, so length does not confound
        out[k]["last_above_first"] = float(np.nanmean(v[:, -1] > v[:, 0]))
    consistent = a.frac >= 0.8
    out["positional_heads"] = [
        {"layer": int(l), "head": int(h), "role": str(a.majority[l, h]),
         "score": float(a.mean_scores[str(a.majority[l, h])][l, h]), "consistency": float(a.frac[l, h])}
        for l, h in zip(*np.nonzero(consistent))
        if a.majority[l, h] in ("prev", "next", "self", "sep")]
    counts = {}
    for r in list(ROLES) + ["mixed"]:
        counts[r] = int(((a.majority == r) & consistent).sum())
    out["consistent_roles"] = counts
    out["n_heads"] = int(a.majority.size)
    return out


def _spearman(x: np.ndarray, y: np.ndarray) -> float:
    rx, ry = np.argsort(np.argsort(x)), np.argsort(np.argsort(y))
    return float(np.corrcoef(rx, ry)[0, 1])


def write_report(a: Analysis, path: str | Path, command: str) -> Path:
    """docs/head_roles.md: tables and figures of the analysis, with the command that made them."""
    path = Path(path)
    f = findings(a)
    L, H = a.majority.shape
    rel = lambda p: os.path.relpath(p, path.parent)  # noqa: E731
    lines = [f"# Head roles and layer trends in {a.model}", "",
             f"Generated by `{command}` over the {a.n_sentences} bundled sentences "
             "(`src/glassformer/inspect/sentences.txt`). Patterns are read at the hook "
             "`enc.{l}.attn.pattern` of glassformer's own implementation of the model.", "",
             "## What we find", "", *verdict(a, f), "",
             "## Role scores (after Clark et al. 2019; seed 000 §2.6)", "",
             "For every head and sentence: the mean attention mass from each query to the previous "
             "token, the next token, itself, the first position ([CLS]), the [SEP] positions, and the "
             "normalised row entropy (`broad`, 1 = uniform). A head takes a positional role when that "
             "role gets ≥ 50% of its mass, `broad` when its normalised entropy is ≥ 0.75, `mixed` "
             "otherwise; *consistent* means the same role in ≥ 80% of the sentences.", "",
             f"![role scores]({rel(a.figures['roles'])})", "" if a.figures else "",
             "| layer | " + " | ".join(f"head {h}" for h in range(H)) + " |",
             "|---|" + "---|" * H]
    for l in range(L):
        cells = [f"{a.majority[l, h]} ({a.frac[l, h]:.0%})" for h in range(H)]
        lines.append(f"| {l} | " + " | ".join(cells) + " |")
    lines += ["", "Mean score of each role per layer (averaged over heads and sentences):", "",
              "| layer | " + " | ".join(ROLES) + " |", "|---|" + "---|" * len(ROLES)]
    for l in range(L):
        lines.append(f"| {l} | " + " | ".join(f"{np.nanmean(a.mean_scores[r][l]):.3f}" for r in ROLES) + " |")
    c = f["consistent_roles"]
    lines += ["", "Heads with a consistent role: " + ", ".join(f"{ROLE_NAMES[r]} {n}" for r, n in c.items() if n)
              + f" (of {f['n_heads']}).", "",
              "## Shallow local, deep global?", "",
              f"![layer trends]({rel(a.figures['trends'])})", "",
              "| layer | entropy (norm.) | distance (tokens) | distance, [CLS]/[SEP] keys excluded |",
              "|---|---|---|---|"]
    for l in range(L):
        lines.append(f"| {l} | {f['entropy_norm']['per_layer'][l]:.3f} | {f['distance']['per_layer'][l]:.3f} "
                     f"| {f['distance_content']['per_layer'][l]:.3f} |")
    lines += ["", "Least-squares slope per layer and Spearman rank correlation with depth:", ""]
    for k in ("entropy_norm", "distance", "distance_content"):
        lines.append(f"- {k}: slope {f[k]['slope']:+.3f} per layer, Spearman {f[k]['spearman']:+.2f} "
                     f"(layer 0: {f[k]['first']:.3f}, last: {f[k]['last']:.3f})")
    lines += ["", "## FFN neurons (seed 003 §5)", "",
              "The most selective neurons of layer {} — (mean of its 8 largest activations − its mean) / its "
              "std, over all content tokens — and the tokens, in context, where each fires hardest "
              "(activation φ(x·W_1 + b_1) at the hook `enc.{}.ffn.act`):".format(a.neuron_layer, a.neuron_layer), ""]
    for name, tops in a.neurons.items():
        lines.append(f"- **{name}**: " + "; ".join(f"`{t['context']}` ({t['value']:.2f})" for t in tops[:5]))
    p = a.projection
    lines += ["", "## Head outputs projected (seed 003 §2)", "",
              f"Each content token gives one point per head of layer {p['layer']}: the head's write into "
              f"the residual stream z_h·W_O[h]. {p['method'].upper()} of {p['n_points']} points; "
              f"silhouette by head {p['silhouette']:.2f} (1 = heads fully apart, 0 = mixed).", "",
              f"![head projection]({rel(a.figures['projection'])})", "",
              f"Model view of the first sentence: ![model view]({rel(a.figures['model_view'])})", ""]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


def verdict(a: Analysis, f: dict) -> list[str]:
    """The report's conclusions, worded from the measured numbers (nothing typed by hand)."""
    c, n = f["consistent_roles"], f["n_heads"]
    top = max((r for r in c if r != "mixed"), key=lambda r: c[r])
    L = a.majority.shape[0]
    per_layer = []
    for l in range(L):
        names, counts = np.unique(a.majority[l].astype(str), return_counts=True)
        per_layer.append(f"{l}: {names[counts.argmax()]} ({counts.max()}/{a.majority.shape[1]})")
    pos = "; ".join(f"L{p['layer']}H{p['head']} {ROLE_NAMES[p['role']]} (mean mass {p['score']:.2f}, "
                    f"{p['consistency']:.0%} of sentences)" for p in f["positional_heads"]) or "none"
    ent, dist, dc = f["entropy_norm"], f["distance"], f["distance_content"]
    e = ent["per_layer"]
    lo, hi = int(np.argmin(e)), int(np.argmax(e))

    def trend(x: dict) -> str:
        s = x["spearman"]
        word = ("rises steadily" if s >= 0.9 else "rises overall" if s >= 0.5 else "falls steadily" if s <= -0.9
                else "falls overall" if s <= -0.5 else "shows no monotone trend")
        return (f"{word} with depth (Spearman {s:+.2f}; layer 0 {x['first']:.2f} → layer {L - 1} {x['last']:.2f}; "
                f"the last layer exceeds the first in {x['last_above_first']:.0%} of sentences)")

    sink = np.nan_to_num(a.mean_scores["cls"]) + np.nan_to_num(a.mean_scores["sep"])
    special = ", ".join(f"{v:.0%}" for v in sink.mean(1))
    local_global = dc["spearman"] >= 0.5 and ent["spearman"] >= 0.5
    partly = dc["spearman"] >= 0.5 or dist["spearman"] >= 0.5
    claim = ("holds" if local_global else "holds only in part" if partly else "does not hold")
    cls_l, sep_l = (np.nanmean(a.mean_scores[r], 1) for r in ("cls", "sep"))
    sink_note = (f" Clark et al. saw BERT-base's middle layers park attention on [SEP]; here the sink is "
                 f"[CLS] (mean mass per layer {', '.join(f'{v:.2f}' for v in cls_l)} against "
                 f"{', '.join(f'{v:.2f}' for v in sep_l)} for [SEP])." if top == "cls" and np.nanmax(cls_l) > np.nanmax(sep_l) else "")
    return [
        f"- **Roles.** {sum(v for k, v in c.items() if k != 'mixed')} of {n} heads keep one role in ≥ 80% "
        f"of the sentences; the commonest is {ROLE_NAMES[top]} ({c[top]} heads). Majority role per layer — "
        + ", ".join(per_layer) + "." + sink_note,
        f"- **Positional heads** (consistent previous / next / self / [SEP]): {pos}.",
        f"- **Entropy** (normalised) {trend(ent)}; the sharpest layer is {lo} ({e[lo]:.2f}), the broadest "
        f"{hi} ({e[hi]:.2f}).",
        f"- **Attention distance** {trend(dist)}. Per layer, {special} of the attention mass goes to "
        f"[CLS]/[SEP] (Clark et al.'s \"no-op\" sinks), which lie far from most queries; with those keys "
        f"excluded, the distance among content tokens {trend(dc)}.",
        f"- **Shallow local, deep global?** For {a.model} the claim {claim}: "
        + ("deeper layers attend farther among content tokens" if dc["spearman"] >= 0.5
           else "content-token distance does not grow with depth")
        + ", " + ("and their entropy grows too." if ent["spearman"] >= 0.5 else
                  f"but entropy does not grow with depth: layer {hi} is the broadest and layer {lo} the "
                  "sharpest, so the first layer is not \"local\" in the sense of focused — its heads mostly "
                  "average over the whole sentence, apart from the positional heads listed above."),
    ]
