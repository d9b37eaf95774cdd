"""What the seed measures on the traced numbers: dimension table (§1.8), cosine drift (§7.3), pairwise cosines (§7.4).

Everything here reads the plain-list trace of `build()`, so it works the same on a loaded JSON file.
"""

from __future__ import annotations

import numpy as np


def layer_names(result: dict) -> list[str]:
    """Hook prefixes of the traced layers in order: ["enc.0", "enc.1"] (or "dec.{l}" for an LM)."""
    stack = result.get("stack", "enc")
    n = 0
    while f"{stack}.{n}.out" in result["trace"]:
        n += 1
    return [f"{stack}.{l}" for l in range(n)]


def attention_name(result: dict) -> str:
    """The self-attention module's name inside a layer: `attn` (encoder) or `self_attn` (decoder)."""
    return "self_attn" if result.get("stack", "enc") == "dec" else "attn"


def stages(result: dict) -> list[tuple[str, np.ndarray]]:
    """(label, (seq, d_model) matrix): X₀, then each layer's output X₁, X₂, ..., then a final norm if any."""
    trace = result["trace"]
    out = [("X0", np.asarray(trace["x0"]))]
    for l, prefix in enumerate(layer_names(result)):
        out.append((f"X{l + 1}", np.asarray(trace[f"{prefix}.out"])))
    final = "enc_norm" if result.get("stack", "enc") == "enc" else "dec_norm"
    if final in trace:
        out.append(("final norm", np.asarray(trace[final])))
    return out


def cosine_matrix(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """cos(A_i, B_j) for every row pair."""
    An = A / np.linalg.norm(A, axis=-1, keepdims=True)
    Bn = B / np.linalg.norm(B, axis=-1, keepdims=True)
    return An @ Bn.T


def dimension_table(result: dict) -> list[dict]:
    """Seed §1.8's data-flow table, with each shape read off the traced tensors of the first layer."""
    trace, params = result["trace"], result["params"]
    layers = layer_names(result)
    if not layers:
        return []
    a = f"{layers[0]}.{attention_name(result)}"
    f = f"{layers[0]}.ffn"
    shape = lambda name: "×".join(str(d) for d in np.shape(trace[name]))  # noqa: E731
    pshape = lambda name, drop=0: "×".join(str(d) for d in np.shape(params[name])[drop:])  # noqa: E731
    rows = [
        ("input X₀ = E + PE", "n × d_model", shape("x0")),
        ("W_Q, W_K, W_V (one head)", "d_model × d_k", pshape(f"{a}.W_Q", 1)),
        ("Q, K, V (each head)", "n × d_k", "×".join(str(d) for d in np.shape(trace[f"{a}.q"])[1:])),
        ("scores Q·Kᵀ (each head)", "n × n", "×".join(str(d) for d in np.shape(trace[f"{a}.scores"])[1:])),
        ("÷√d_k, softmax → A", "n × n", "×".join(str(d) for d in np.shape(trace[f"{a}.pattern"])[1:])),
        ("head output A·V", "n × d_k", "×".join(str(d) for d in np.shape(trace[f"{a}.z"])[1:])),
        ("concat(head₁..head_h)", "n × (h·d_k)", shape(f"{a}.concat")),
        ("W_O", "(h·d_k) × d_model", pshape(f"{a}.W_O")),
        ("multi-head output", "n × d_model", shape(f"{a}.out")),
        ("Add & Norm", "n × d_model", shape(f"{layers[0]}.norm1")),
        ("FFN hidden φ(x·W_1 + b_1)", "n × d_ff", shape(f"{f}.act")),
        ("FFN output ·W_2 + b_2", "n × d_model", shape(f"{f}.out")),
        ("layer output", "n × d_model", shape(f"{layers[0]}.out")),
    ]
    return [{"step": s, "symbolic": sym, "shape": sh} for s, sym, sh in rows]


def analyse(result: dict) -> dict:
    """{"dimensions": [...], "drift": {...}, "pairwise": {...}} for the renderers and the JSON."""
    st = stages(result)
    x0 = st[0][1]
    drift = {label: np.diag(cosine_matrix(x0, X)).tolist() for label, X in st[1:]}
    pairwise = {label: cosine_matrix(X, X).tolist() for label, X in st}
    return {"dimensions": dimension_table(result), "drift": drift, "pairwise": pairwise,
            "seed_figures": seed_figures(result)}


# Seed 000 §7.2 and §7.4: the numbers that follow from the printed embeddings and the PE formula
# alone. (The attention and layer numbers of §7.3–7.4 come from the author's unpublished weights.)
SEED_FIGURES = [
    ("X₀(猫)[:4]", [0.21, 1.54, 0.13, 1.82]),
    ("X₀(吃)[:4]", [1.22, 0.77, 1.12, 1.40]),
    ("X₀(鱼)[:4]", [1.64, -0.26, 0.87, 1.25]),
    ("cos(猫₀, 吃₀)", 0.8565),
    ("cos(吃₀, 鱼₀)", 0.9396),
    ("cos(猫₀, 鱼₀)", 0.7298),
]


def seed_figures(result: dict) -> list[dict] | None:
    """Ours next to the seed's, when the sentence holds 猫, 吃, 鱼 at positions 0, 1, 2 with the seed's vectors."""
    tokens, src, cfg = result["tokens"], result.get("embedding_source", {}), result["config"]
    if tokens[:3] != ["猫", "吃", "鱼"] or any(src.get(t) != "seed" for t in tokens[:3]) \
            or cfg["pe"] != "sinusoidal" or cfg.get("embed_scale") or "embed_norm" in result["trace"]:
        return None
    x0 = np.asarray(result["trace"]["x0"])
    cos = cosine_matrix(x0, x0)
    ours = [x0[0, :4].tolist(), x0[1, :4].tolist(), x0[2, :4].tolist(), cos[0, 1], cos[1, 2], cos[0, 2]]
    return [{"figure": label, "ours": np.round(o, 4).tolist(), "seed": s}
            for (label, s), o in zip(SEED_FIGURES, ours)]
