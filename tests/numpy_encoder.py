"""An independent NumPy encoder, written from the seed's formulas, for test_trace.py and test_walkthrough.py.

It reads plain parameters (`enc.{l}.attn.W_Q` (h, d_model, d_k), Q = X·W_Q + b_Q, ...) and returns
every hook value by name, so a traced forward pass can be checked number by number. Nothing here
imports glassformer.
"""

from __future__ import annotations

import math

import numpy as np


def sinusoidal_pe(n: int, d: int, base: float = 10000.0) -> np.ndarray:
    """Seed §3.2: PE(pos, 2i) = sin(pos / base^(2i/d)), PE(pos, 2i+1) = cos(same)."""
    pe = np.zeros((n, d))
    pos = np.arange(n)[:, None]
    angle = pos / base ** (np.arange(0, d, 2) / d)
    pe[:, 0::2], pe[:, 1::2] = np.sin(angle), np.cos(angle)
    return pe


def layer_norm(x, gamma, beta, eps):
    """Seed §5.2: mean, (biased) variance, standardise, scale and shift — per token."""
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return gamma * (x - mu) / np.sqrt(var + eps) + beta


def activation(name: str, x: np.ndarray) -> np.ndarray:
    if name == "gelu_tanh":  # seed §6.1
        return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))
    if name == "gelu":
        return 0.5 * x * (1 + np.vectorize(math.erf)(x / math.sqrt(2)))
    if name == "relu":
        return np.maximum(x, 0)
    raise ValueError(name)


def softmax(s: np.ndarray) -> np.ndarray:
    e = np.exp(s - s.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def encoder_forward(params: dict, ids: list[int], cfg: dict, zero_head: tuple[int, int] | None = None) -> dict:
    """Every hook value of an encoder with sinusoidal PE and LayerNorm, Post- or Pre-LN.

    zero_head=(layer, head) sets that head's output z to zero (the intervention of test_trace.py).
    """
    P = {k: np.asarray(v, dtype=np.float64) for k, v in params.items()}
    n, d = len(ids), cfg["d_model"]
    eps, pre = cfg["norm_eps"], cfg["norm_position"] == "pre"
    out = {"embed": P["embed.W_E"][ids], "pos": sinusoidal_pe(n, d, cfg.get("pe_base", 10000.0))}
    x = out["x0"] = out["embed"] + out["pos"]
    for l in range(cfg["n_layers"]):
        e = f"enc.{l}"
        ln = lambda t, which: layer_norm(t, P[f"{e}.{which}.gamma"], P[f"{e}.{which}.beta"], eps)  # noqa: E731
        h_in = out[f"{e}.norm1"] = ln(x, "norm1") if pre else None
        a_in = h_in if pre else x
        W = {t: P[f"{e}.attn.W_{t}"] for t in "QKV"}
        b = {t: P[f"{e}.attn.b_{t}"] for t in "QKV"}
        # per head: Q_h = X·W_Q[h] + b_Q[h]  (h, n, d_k)
        q, k, v = (np.einsum("sd,hdk->hsk", a_in, W[t]) + b[t][:, None, :] for t in "QKV")
        d_k = q.shape[-1]
        scores = q @ k.transpose(0, 2, 1)
        scaled = scores / math.sqrt(d_k)
        pattern = softmax(scaled)
        z = pattern @ v
        if zero_head is not None and zero_head[0] == l:
            z = z.copy()
            z[zero_head[1]] = 0.0
        concat = z.transpose(1, 0, 2).reshape(n, -1)
        attn_out = concat @ P[f"{e}.attn.W_O"] + P[f"{e}.attn.b_O"]
        for name, val in (("q", q), ("k", k), ("v", v), ("scores", scores), ("scaled", scaled),
                          ("pattern", pattern), ("z", z), ("concat", concat), ("out", attn_out)):
            out[f"{e}.attn.{name}"] = val
        resid_mid = out[f"{e}.resid_mid"] = x + attn_out
        if pre:
            f_in = out[f"{e}.norm2"] = ln(resid_mid, "norm2")
        else:
            f_in = out[f"{e}.norm1"] = ln(resid_mid, "norm1")
        pre_act = out[f"{e}.ffn.pre"] = f_in @ P[f"{e}.ffn.W_1"] + P[f"{e}.ffn.b_1"]
        act = out[f"{e}.ffn.act"] = activation(cfg["activation"], pre_act)
        ffn = out[f"{e}.ffn.out"] = act @ P[f"{e}.ffn.W_2"] + P[f"{e}.ffn.b_2"]
        resid_post = out[f"{e}.resid_post"] = f_in + ffn if not pre else resid_mid + ffn
        x = resid_post if pre else ln(resid_post, "norm2")
        if not pre:
            out[f"{e}.norm2"] = x
        out[f"{e}.out"] = x
    final = cfg["final_norm"] if cfg.get("final_norm") is not None else pre
    if final:
        x = out["enc_norm"] = layer_norm(x, P["enc_norm.gamma"], P["enc_norm.beta"], eps)
    out["output"] = x
    return out
