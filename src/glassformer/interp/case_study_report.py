"""docs/case-study.md from the measurements of `case_study` (tables, figures, findings from the numbers)."""

from __future__ import annotations

from pathlib import Path

import torch

from ..viz.heatmap import plot_heatmap
from .ablate import deletions
from .case_study import roles, word_identity

ROLE_POSITIONS = ["subject", "verb", "object"]


def _table(result, labels) -> list[str]:
    lines = ["| hook | " + " | ".join(labels) + " |", "|---" * (len(labels) + 1) + "|"]
    for name, row in zip(result.hooks if hasattr(result, "hooks") else result[0], _rows(result)):
        lines.append(f"| `{name}` | " + " | ".join(f"{v:.2f}" for v in row) + " |")
    return lines + [""]


def _rows(result):
    return (result.effects if hasattr(result, "effects") else result[1]).tolist()


def _best(effects: torch.Tensor, rows: list[str], cols: list[str]) -> tuple[str, str, float]:
    i = int(effects.flatten().argmax())
    return rows[i // effects.shape[1]], cols[i % effects.shape[1]], float(effects.flatten()[i])


def write(model, src_tok, tgt_tok, out: Path, fig_dir: Path, command: str, train_note: str) -> dict:
    """Measure, draw and write the case study; return the headline numbers."""
    w = word_identity(model, src_tok, tgt_tok)
    r = roles(model, src_tok, tgt_tok)
    fig_dir.mkdir(parents=True, exist_ok=True)
    rel = lambda p: Path(p).relative_to(out.parent).as_posix() if Path(p).is_relative_to(out.parent) else str(p)  # noqa: E731
    p = w["patch"]
    figs = {
        "identity_encoder": plot_heatmap(p["encoder"].effects.numpy(), p["encoder"].hooks, w["src_tokens"],
                                         fig_dir / "identity_encoder.png", "猫 吃 鱼 into 狗 吃 鱼: encoder outputs",
                                         "fraction restored"),
        "identity_cross": plot_heatmap(p["cross_heads"].effects.numpy(), p["cross_heads"].hooks, p["cross_heads"].labels,
                                       fig_dir / "identity_cross_heads.png", "猫 吃 鱼 into 狗 吃 鱼: cross-attention heads",
                                       "fraction restored"),
        "roles_cross": plot_heatmap(r["mean"]["cross_heads"].numpy(), r["example"]["cross_heads"].hooks,
                                    r["example"]["cross_heads"].labels, fig_dir / "roles_cross_heads.png",
                                    f"A 追 B into B 追 A, mean of {r['n_pairs']} pairs: cross-attention heads",
                                    "fraction restored"),
        "roles_encoder": plot_heatmap(r["mean"]["encoder"].numpy(), r["example"]["encoder"].hooks, ROLE_POSITIONS,
                                      fig_dir / "roles_encoder.png",
                                      f"A 追 B into B 追 A, mean of {r['n_pairs']} pairs: encoder outputs", "fraction restored"),
    }
    at, tl = w["at"], w["tgt_labels"]
    enc_l, enc_pos, enc_v = _best(p["encoder"].effects, p["encoder"].hooks, w["src_tokens"])
    dec_l, dec_pos, dec_v = _best(p["decoder"].effects, p["decoder"].hooks, tl)
    x_l, x_h, x_v = _best(p["cross_heads"].effects, p["cross_heads"].hooks, p["cross_heads"].labels)
    rc = r["mean"]["cross_heads"]
    re_ = r["mean"]["encoder_heads"]
    pair = r["pair"]
    enc_all = float(r["mean"]["all_encoder_attention"])
    tr = r["patterns"]
    last_cross = sorted(tr)[-1]
    att = tr[last_cross][0]  # (head, tgt, src)
    dels = deletions(model, pair.clean_src, pair.tgt_in)
    lines = [
        "# Case study: 猫 → \"cat\", and who chases whom", "",
        f"Reproduce: `{command}` ({train_note}). Every number below is measured by that command on that",
        "model; the sentences of the findings are written from the numbers, not by hand.", "",
        "Method: activation patching (`glassformer.interp.patch`). The corrupted source is run with one clean",
        "activation put back; the decoder is teacher-forced on the clean translation in both runs, so only the",
        "source differs. A cell is the fraction of the clean metric restored (1 = fully, 0 = nothing).", "",
        "## 1. 猫 → \"cat\" (clean 猫 吃 鱼, corrupted 狗 吃 鱼)", "",
        f"Metric: logit(cat) − logit(dog) at the target position {tl[at]} (clean {p['encoder'].clean_metric:.2f}, "
        f"corrupted {p['encoder'].corrupted_metric:.2f}).", "",
        "Encoder layer outputs × source position:", "", *_table(p["encoder"], w["src_tokens"]),
        f"![encoder]({rel(figs['identity_encoder'])})", "",
        "Decoder layer outputs × target position:", "", *_table(p["decoder"], tl),
        "Cross-attention heads (`dec.*.cross_attn.z`, whole head):", "", *_table(p["cross_heads"], p["cross_heads"].labels),
        f"![cross heads]({rel(figs['identity_cross'])})", "",
        "Decoder self-attention heads:", "", *_table(p["decoder_self_heads"], p["decoder_self_heads"].labels),
        f"Logit lens at {tl[at]} (P(cat) after each decoder layer; x0 = the target embedding): "
        + ", ".join(f"{l} {v:.3f} (top: {t})" for l, v, t in zip(w["lens_labels"], w["lens_p_cat"], w["lens_top"])) + ".", "",
        f"Direct logit attribution of logit(cat) − logit(dog) at {tl[at]} (largest parts; the parts sum to the",
        f"logit difference within {w['dla_error']:.1e}; the stream decomposition's own error is "
        f"{w['decompose_error']:.1e} — {w['decompose_note']}): "
        + ", ".join(f"`{k}` {v:+.2f}" for k, v in w["dla"]) + ".", "",
        "Attribution patching (gradient estimate) against activation patching: "
        + "; ".join(f"{k}: Pearson r {a['pearson']:.3f}, same top place {a['same_top']}" for k, a in w["attribution"].items())
        + ".", "",
        "**Findings.** "
        f"At the encoder, only the source position of the noun matters: patching `{enc_l}` at {enc_pos} restores "
        f"{enc_v:.2f}, every other position ≤ {float(p['encoder'].effects[:, [i for i, t in enumerate(w['src_tokens']) if t != enc_pos]].abs().max()):.2f}. "
        f"In the decoder the difference appears at `{dec_l}` at {dec_pos} ({dec_v:.2f}); "
        f"`dec.0.out` restores at most {float(p['decoder'].effects[0].abs().max()):.2f}, so the word crosses over in the last layer. "
        f"The strongest single cross-attention head is `{x_l}` {x_h} ({x_v:.2f}); the heads of that layer together "
        f"restore {float(p['cross_heads'].effects[-1].sum()):.2f} when summed one by one, and the decoder's "
        f"self-attention heads {float(p['decoder_self_heads'].effects.abs().max()):.2f} at most: "
        "the noun reaches the output through cross-attention, spread over heads, not one head.", "",
        f"## 2. Roles (clean A 追 B, corrupted B 追 A; mean over {r['n_pairs']} ordered noun pairs)", "",
        "Metric: logit(clean token) − logit(corrupted token) at the target positions where the two translations",
        "differ (the subject and the object).", "",
        "Encoder layer outputs × source position (mean):", "", *_table((r["example"]["encoder"].hooks, r["mean"]["encoder"]), ROLE_POSITIONS),
        f"![roles encoder]({rel(figs['roles_encoder'])})", "",
        "Encoder self-attention heads, one at a time (mean):", "", *_table((r["example"]["encoder_heads"].hooks, re_), r["example"]["encoder_heads"].labels),
        "Cross-attention heads (mean):", "", *_table((r["example"]["cross_heads"].hooks, rc), r["example"]["cross_heads"].labels),
        f"![roles cross heads]({rel(figs['roles_cross'])})", "",
        f"Where the last layer's cross-attention heads look in 猫 追 狗 (`{last_cross}`, rows: target positions):", "",
        "Each cell: the source word with the largest attention weight, and that weight.", "",
        "| head | " + " | ".join(r["tgt_labels"]) + " |",
        "|---" * (len(r["tgt_labels"]) + 1) + "|",
        *[f"| head{h} | " + " | ".join(f"{r['src_tokens'][int(att[h, q].argmax())]} ({float(att[h, q].max()):.2f})"
                                       for q in range(att.shape[1])) + " |" for h in range(att.shape[0])], "",
        "**Findings.** "
        f"Swapping the two nouns is undone half by the subject position and half by the object position of the "
        f"encoder output (mean {float(r['mean']['encoder'][-1, 0]):.2f} and {float(r['mean']['encoder'][-1, 2]):.2f}; the verb "
        f"{float(r['mean']['encoder'][-1, 1]):.2f}). The largest mean effect of one encoder self-attention head is "
        f"{float(re_.abs().max()):.2f}, and patching every encoder attention output at once restores {enc_all:.2f}"
        + (": attention between the source words carries little of the order; most of what the decoder reads is "
           "each word at its own position (its sinusoid added there). " if enc_all < 0.25 else
           ": encoder attention carries a real part of the order. ")
        + f"The decoder reads it through the last layer's cross-attention, spread over its heads (mean effects "
        f"{', '.join(f'{v:.2f}' for v in rc[-1].tolist())}; the first layer's ≤ {float(rc[0].abs().max()):.2f}).", "",
        "## 3. Seed 003's deletions on the same model (猫 追 狗, teacher-forced)", "",
        "| removed | cosine to intact logits | top-1 agreement |", "|---|---|---|",
        *[f"| {d['what']} | {d['cosine']:.3f} | {d['top1_agreement']:.2f} |" for d in dels], "",
    ]
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines), encoding="utf-8")
    return {"identity": {"encoder": (enc_l, enc_pos, enc_v), "decoder": (dec_l, dec_pos, dec_v), "cross": (x_l, x_h, x_v)},
            "roles_all_encoder_attention": enc_all,
            "roles_cross_mean": rc.tolist(), "roles_encoder_heads_max": float(re_.abs().max())}
