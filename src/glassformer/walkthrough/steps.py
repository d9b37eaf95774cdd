"""The chapter's sequence of steps, read off a `build()` result (seed 000 §7.2–7.4).

X₀ = E + PE; per head Q, K, V, QKᵀ, ÷√d_k, softmax (rows with Σ = 1), head output; concat; W_O;
Add & Norm; FFN; Add & Norm — each a `Step` holding its formula, its shape and its numbers as
labelled tables. Every renderer (terminal, Markdown, HTML) draws the same list, so the three
always agree. Works on a loaded JSON file as well as on a fresh result.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from .analysis import attention_name, layer_names, stages
from .narration import ACT_NAMES, NORM_NAMES, say, title_in


@dataclass
class Table:
    caption: str
    rows: list[str]
    cols: list[str]
    values: np.ndarray  # (len(rows), len(cols))
    row_sums: bool = False  # softmax tables show Σ = 1 per row

    def view(self, max_cols: int = 12) -> tuple[list[str], np.ndarray, bool]:
        """Columns to show (the first `max_cols`) and whether some were left out."""
        cut = len(self.cols) > max_cols
        return self.cols[:max_cols], self.values[:, :max_cols], cut


@dataclass
class Step:
    key: str  # narration key
    title: str
    formula: str
    shape: str
    tables: list[Table] = field(default_factory=list)
    text: str | None = None  # the plain-language narration, when a language was asked for
    level: int = 2  # heading depth: 1 section, 2 step, 3 per-head step


def _shape(a) -> str:
    return " × ".join(str(d) for d in np.shape(a))


def _dims(n: int) -> list[str]:
    return [f"d{i}" for i in range(n)]


def build_steps(result: dict, lang: str | None = "en") -> list[Step]:
    """The ordered steps of the walkthrough, narrated in `lang` ("en", "zh" or None)."""
    cfg, trace, tokens = result["config"], result["trace"], result["tokens"]
    n, d_model = len(tokens), cfg["d_model"]
    h = cfg["n_heads"]
    d_k = cfg["d_k"] or d_model // h
    facts = dict(n=n, d_model=d_model, h=h, d_k=d_k, hdk=h * d_k, d_ff=cfg["d_ff"],
                 sqrt_dk=math.sqrt(d_k), norm_name=NORM_NAMES.get(cfg["norm"], cfg["norm"]),
                 act_name=ACT_NAMES.get(cfg["activation"], cfg["activation"]), tokens=tokens,
                 result=result)
    out: list[Step] = []
    said: set[str] = set()

    def add(key, title, formula, tensor_or_tables, level=2, **more):
        is_tables = isinstance(tensor_or_tables, list) and tensor_or_tables and isinstance(tensor_or_tables[0], Table)
        tables = tensor_or_tables if is_tables else [
            Table("", tokens, _dims(np.shape(tensor_or_tables)[-1]), np.asarray(tensor_or_tables))]
        shape = more.pop("shape") if "shape" in more else _shape(tables[0].values)
        step = Step(key, title_in(lang, title), formula, shape, tables, level=level)
        if lang:  # the generic explanation once; a head's pattern is described every time
            narr_key = key if key not in said else "pattern_again" if key == "pattern" else None
            step.text = say(lang, narr_key, {**facts, **more, "step": step}) if narr_key else None
            said.add(key)
        out.append(step)
        return step

    def section(title):
        out.append(Step("section", title_in(lang, title), "", "", level=1))

    section("Input: embedding + positional encoding (§7.2)")
    add("embed", "Token embeddings E", "E = W_E[token]", trace["embed"])
    absolute = "pos" in trace and np.ndim(trace["pos"]) == 2  # (seq, width); relative/ALiBi: (head, q, k)
    if absolute:
        formula = ("PE(pos,2i) = sin(pos/10000^(2i/d)), PE(pos,2i+1) = cos(…)" if cfg["pe"].startswith("sinusoidal")
                   else "PE = W_pos[pos] (learned)")
        add("pos" if cfg["pe"].startswith("sinusoidal") else "pos_learned", "Positional encoding PE", formula,
            trace["pos"])
    elif "pos" in trace:  # a bias on the scores, one table per head (§3.5)
        bias = np.asarray(trace["pos"])
        add("pos_bias", f"Position bias ({cfg['pe']})", "added to QKᵀ/√d_k in every layer",
            [Table(f"head {h + 1}", [f"{t}(Q)" for t in tokens], [f"{t}(K)" for t in tokens], bias[h])
             for h in range(bias.shape[0])])
    summed = "E + PE" if absolute else "E"
    if "segment" in trace:  # BERT: a sentence-A/B vector is added too (Devlin et al. 2019, Fig. 2)
        add("segment", "Segment embedding S", "S = W_seg[segment]", trace["segment"])
        summed += " + S"
    if "embed_norm" in trace:
        add("embed_norm", "Embedding norm", f"LN({summed})", trace["embed_norm"])
        summed = f"LN({summed})"
    add("x0", f"X₀ = {summed}", f"X₀ = {summed}", trace["x0"])

    pre = cfg["norm_position"] == "pre"
    attn = attention_name(result)
    for l, prefix in enumerate(layer_names(result)):
        L = l + 1
        x_in = f"X{l}"
        section(f"Layer {L} (input {x_in}, {'Pre-LN' if pre else 'Post-LN'})")
        a = f"{prefix}.{attn}"
        if pre:
            add("norm1_pre", f"Layer {L} · Norm before attention", f"norm1 = {facts['norm_name']}({x_in})",
                trace[f"{prefix}.norm1"], layer=L)
        q, k, v = (np.asarray(trace[f"{a}.{t}"]) for t in ("q", "k", "v"))
        for hd in range(q.shape[0]):
            H = hd + 1
            kw = dict(level=3, layer=L, head=H)
            add("qkv", f"Layer {L} · Head {H} · Q, K, V", f"Q = X·W_Q[{H}] + b_Q[{H}] (K, V alike)",
                [Table(f"{name}{H}", tokens, _dims(d_k), t[hd]) for name, t in (("Q", q), ("K", k), ("V", v))],
                **kw)
            if f"{a}.q_rot" in trace:
                add("rope", f"Layer {L} · Head {H} · RoPE", "rotate (Q, K) pairs by pos·θ",
                    [Table(f"Q{H} rotated", tokens, _dims(d_k), np.asarray(trace[f"{a}.q_rot"])[hd])], **kw)
            cols = [f"{t}(K)" for t in tokens]
            rows = [f"{t}(Q)" for t in tokens]
            scores = np.asarray(trace[f"{a}.scores"])[hd]
            add("scores", f"Layer {L} · Head {H} · scores Q·Kᵀ", f"Q{H}·K{H}ᵀ",
                [Table(f"Q{H}K{H}ᵀ", rows, cols, scores)], **kw)
            scaled = np.asarray(trace[f"{a}.scaled"])[hd]
            add("scaled", f"Layer {L} · Head {H} · ÷√d_k", f"Q{H}K{H}ᵀ / √{d_k}",
                [Table("scaled", rows, cols, scaled)], masked=bool((scaled < -1e30).any()), **kw)
            pattern = np.asarray(trace[f"{a}.pattern"])[hd]
            add("pattern", f"Layer {L} · Head {H} · softmax → A{H}", f"A{H} = softmax(Q{H}K{H}ᵀ/√{d_k})",
                [Table(f"A{H}", rows, cols, pattern, row_sums=True)], pattern=pattern, **kw)
            add("z", f"Layer {L} · Head {H} · head output", f"head{H} = A{H}·V{H}",
                [Table(f"head{H}", tokens, _dims(d_k), np.asarray(trace[f"{a}.z"])[hd])], **kw)
        add("concat", f"Layer {L} · Concat", "concat(head₁, …, head_h)", trace[f"{a}.concat"], layer=L)
        add("attn_out", f"Layer {L} · × W_O", "MHA = concat·W_O + b_O", trace[f"{a}.out"], layer=L)
        add("resid_mid", f"Layer {L} · Add (residual)", f"{x_in} + MHA", trace[f"{prefix}.resid_mid"], layer=L)
        if pre:
            add("norm2_pre", f"Layer {L} · Norm before the FFN", f"norm2 = {facts['norm_name']}(resid_mid)",
                trace[f"{prefix}.norm2"], layer=L)
        else:
            add("norm1", f"Layer {L} · Norm → X_mid", f"X_mid = {facts['norm_name']}({x_in} + MHA)",
                trace[f"{prefix}.norm1"], layer=L)
        f = f"{prefix}.ffn"
        add("ffn_pre", f"Layer {L} · FFN · x·W_1 + b_1", "x·W_1 + b_1", trace[f"{f}.pre"], layer=L)
        if f"{f}.gate" in trace:
            add("ffn_gate", f"Layer {L} · FFN · gate x·W_G", "x·W_G", trace[f"{f}.gate"], layer=L)
        act = np.asarray(trace[f"{f}.act"])
        add("ffn_act", f"Layer {L} · FFN · {facts['act_name']}", f"{facts['act_name']}(x·W_1 + b_1)", act,
            layer=L, active=int((act > 0).sum()), total=act.size)
        add("ffn_out", f"Layer {L} · FFN · ·W_2 + b_2", "FFN = φ(·)·W_2 + b_2", trace[f"{f}.out"], layer=L)
        res = "resid_mid" if pre else "X_mid"
        add("resid_post", f"Layer {L} · Add (residual)", f"{res} + FFN", trace[f"{prefix}.resid_post"], layer=L)
        if pre:
            add("layer_out_pre", f"Layer {L} · output X{L}", f"X{L} = resid_mid + FFN", trace[f"{prefix}.out"],
                layer=L)
        else:
            add("norm2", f"Layer {L} · Norm → X{L}", f"X{L} = {facts['norm_name']}(X_mid + FFN)",
                trace[f"{prefix}.norm2"], layer=L)
    final = "enc_norm" if result.get("stack", "enc") == "enc" else "dec_norm"
    if final in trace:
        add("final_norm", "Final norm", f"{facts['norm_name']}(X_N)", trace[final])

    section("What happened (§1.8, §7.3, §7.4)")
    analysis = result["analysis"]
    dims = analysis["dimensions"]
    add("dimensions", "Dimension tracking (§1.8)", "", [
        Table("", [r["step"] for r in dims], ["shape", "here"],
              np.array([[r["symbolic"], r["shape"]] for r in dims], dtype=object))], shape="")
    labels = list(analysis["drift"])
    add("drift", "Cosine drift from X₀ (§7.3)", "cos(token₀, token_l)", [
        Table("", [f"cos({t}₀, {t}_l)" for t in tokens], labels,
              np.array([analysis["drift"][lab] for lab in labels]).T)], shape="",
        drift=analysis["drift"])
    st = stages(result)
    add("pairwise", "Pairwise cosine similarity (§7.4)", "cos(token_i, token_j)",
        [Table(label, tokens, list(tokens), np.asarray(analysis["pairwise"][label])) for label, _ in st],
        shape="", pairwise=analysis["pairwise"])
    return out
