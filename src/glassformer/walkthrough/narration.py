"""Plain-language narration of each step, in English or Chinese (the seed's "人话解释" spirit).

Each step key has one short template per language; a few phrases are computed from the numbers
(which token a head listens to, how far each token drifted) so the narration describes *this*
forward pass, not a generic one.
"""

from __future__ import annotations

import re

import numpy as np

NORM_NAMES = {"layernorm": "LayerNorm", "rmsnorm": "RMSNorm", "batchnorm": "BatchNorm", "none": "no norm"}
ACT_NAMES = {"relu": "ReLU", "gelu": "GELU", "gelu_tanh": "GELU (tanh)", "silu": "SiLU",
             "swiglu": "SwiGLU", "geglu": "GEGLU", "reglu": "ReGLU"}

TEXT = {
    "en": {
        "embed": "Each token looks up its own row of the embedding table: {n} tokens × {d_model} numbers. {source}",
        "pos": "Self-attention cannot see word order (§3.1), so every position gets a stamp of waves: "
               "even dimensions sin(pos/10000^(2i/d)), odd ones cos. Position 0 is [0, 1, 0, 1, …]; the first "
               "dimensions wave fast, the last ones slowly — fine and coarse position at once (§3.3). {note}",
        "pos_learned": "A learned table gives each position its own trained vector (BERT, GPT-2): flexible, but "
                       "nothing exists past its last row — no extrapolation (§3.3, §3.5).",
        "pos_bias": "This model adds no position vector to the embedding; instead each head adds a bias that "
                    "depends on the distance between query and key to its scores (§3.5).",
        "segment": "BERT adds a third vector: which sentence (A or B) the token belongs to. With one sentence "
                   "every row is the same segment-A vector.",
        "embed_norm": "A norm right after the input side, as BERT does.",
        "x0": "The stamp is added, not concatenated, to the meaning (§3.4): X₀ = E + PE — the same word, now "
              "with a place in the sentence.",
        "norm1_pre": "Pre-LN: the input is normalised before attention reads it; the residual path keeps the raw "
                     "X (§4.4).",
        "qkv": "Head {head} projects every token three ways: a Query (what am I looking for?), a Key (what do I "
               "offer?) and a Value (what do I pass on?). Each is {n} × {d_k}.",
        "rope": "RoPE rotates Q and K by an angle that grows with the position, so Q·K depends on the distance.",
        "scores": "Every Query meets every Key in a dot product: row i, column j says how well token i's "
                  "question matches token j's answer. This {n} × {n} table is where the cost grows with n².",
        "scaled": "Divide by √d_k = {sqrt_dk:g}, so the scores do not grow with the head width and push softmax "
                  "into saturation (§1.5).",
        "pattern": "Softmax turns each row into weights that add up to 1: how much each token listens to each "
                   "other token. {focus}",
        "pattern_again": "{focus}",
        "z": "Each token's output from this head is the weighted average of the Values: A·V, {n} × {d_k}.",
        "concat": "The {h} heads' outputs are laid side by side: {n} × ({h}·{d_k}) = {n} × {hdk}.",
        "attn_out": "W_O mixes what the heads found into one {d_model}-number vector per token: the multi-head "
                    "attention output (§2.4).",
        "resid_mid": "Residual: the layer's input is added back, so nothing the token knew is lost (§4.2).",
        "norm1": "{norm_name} brings each token's vector back to mean 0 and variance 1, then scales by γ and "
                 "shifts by β (§5.2). This is X_mid.",
        "norm2_pre": "Pre-LN: normalise again before the FFN reads it; the residual path keeps the raw sum.",
        "ffn_pre": "FFN, step 1: each token on its own is spread out from {d_model} to {d_ff} numbers "
                   "(x·W_1 + b_1, §6.1).",
        "ffn_gate": "The gate branch of a gated FFN: it decides how much of each hidden unit passes.",
        "ffn_act": "{act_name} keeps positive values and smoothly squashes negative ones: the non-linearity that "
                   "makes two layers more than one (§6.1). {active} of {total} values are positive.",
        "ffn_out": "FFN, step 2: folded back to {d_model} numbers (·W_2 + b_2). Attention let the tokens talk; "
                   "the FFN lets each one think alone (§6.3).",
        "resid_post": "Residual again: the FFN's input is added back.",
        "norm2": "{norm_name} once more. The result is this layer's output X{layer}: still {n} × {d_model}, so "
                 "another layer can be stacked on top.",
        "layer_out_pre": "This layer's output X{layer} is the residual sum itself: still {n} × {d_model}.",
        "final_norm": "A Pre-LN stack ends with one more norm, so its output is on a steady scale.",
        "dimensions": "The shapes step by step (§1.8): only the attention tables are n × n; everything else "
                      "keeps n × d_model, which is why layers stack.",
        "drift": "How much of each token's starting vector X₀ survives (cosine, 1 = unchanged): the context "
                 "rewrites meaning (§7.3). {drift_text}",
        "pairwise": "How alike the tokens are after each layer (cosine). {pair_text}",
    },
    "zh": {
        "embed": "每个词在 Embedding 表里查出自己那一行：{n} 个词 × {d_model} 维。{source}",
        "pos": "自注意力是个“大近视”，看不出谁前谁后（§3.1），所以给每个位置发一顶印着条纹的帽子："
               "偶数维用 sin(pos/10000^(2i/d))，奇数维用 cos。位置 0 是 [0, 1, 0, 1, …]；前面的维度波动快，"
               "后面的维度波动慢——既有细刻度也有粗刻度（§3.3）。{note}",
        "pos_learned": "可学习的位置表给每个位置一个训练出来的向量（BERT、GPT-2 的做法）：灵活，但超出表的最后一行就无能为力——不能外推（§3.3、§3.5）。",
        "pos_bias": "这个模型不往词向量上加位置向量，而是给每个头的注意力分数加一个只和两个词距离有关的偏置（§3.5）。",
        "segment": "BERT 还加第三个向量：这个词属于第几句（A 或 B）。只有一句话时，每一行都是同一个 A 句向量。",
        "embed_norm": "输入端紧接着做一次归一化（BERT 的做法）。",
        "x0": "位置编码是“加”到词义上的，不是拼接（§3.4）：X₀ = E + PE——同一个词，现在多了“我排第几”的印记。",
        "norm1_pre": "Pre-LN：先归一化，再交给注意力；残差通路保留原始的 X（§4.4）。",
        "qkv": "第 {head} 个头把每个词投影成三份：Query（我在找什么）、Key（我能提供什么）、"
               "Value（我要传出去的内容）。每份都是 {n} × {d_k}。",
        "rope": "RoPE 按位置把 Q 和 K 旋转一个角度，于是 Q·K 只和两个词的距离有关。",
        "scores": "每个 Query 和每个 Key 做点积：第 i 行第 j 列表示第 i 个词的“问题”和第 j 个词的“答案”"
                  "有多对得上。这张 {n}×{n} 的表，就是计算量随 n² 增长的地方。",
        "scaled": "除以 √d_k = {sqrt_dk:g}，免得分数随维度变大、把 softmax 推到饱和（§1.5）。",
        "pattern": "Softmax 把每一行变成加起来等于 1 的权重：每个词把多少注意力分给谁。{focus}",
        "pattern_again": "{focus}",
        "z": "这个头给每个词的输出，就是按权重把所有 Value 加权平均：A·V，{n} × {d_k}。",
        "concat": "把 {h} 个头的输出并排拼起来：{n} × ({h}·{d_k}) = {n} × {hdk}。",
        "attn_out": "W_O 把各个头找到的信息混合成每个词一个 {d_model} 维的向量——多头注意力的输出（§2.4）。",
        "resid_mid": "残差：把这一层的输入加回来，原来知道的东西不会丢（§4.2）。",
        "norm1": "{norm_name} 把每个词的向量拉回均值 0、方差 1，再乘 γ、加 β（§5.2）。得到 X_mid。",
        "norm2_pre": "Pre-LN：送进 FFN 之前再归一化一次；残差通路保留原始的和。",
        "ffn_pre": "FFN 第一步：每个词关起门来，从 {d_model} 维展开到 {d_ff} 维（x·W_1 + b_1，§6.1）。",
        "ffn_gate": "门控 FFN 的“门”：决定每个隐藏单元放行多少。",
        "ffn_act": "{act_name} 保留正值、平滑地压低负值——正是这个非线性让两层线性变换不等于一层（§6.1）。"
                   "{total} 个值里有 {active} 个是正的。",
        "ffn_out": "FFN 第二步：再折回 {d_model} 维（·W_2 + b_2）。注意力让词“交流”，FFN 让每个词自己“思考”（§6.3）。",
        "resid_post": "再做一次残差：把 FFN 的输入加回来。",
        "norm2": "再做一次 {norm_name}。得到这一层的输出 X{layer}：仍是 {n} × {d_model}，所以还能再叠一层。",
        "layer_out_pre": "这一层的输出 X{layer} 就是残差之和：仍是 {n} × {d_model}。",
        "final_norm": "Pre-LN 的整叠层最后再做一次归一化，让输出的尺度稳定。",
        "dimensions": "逐步的形状（§1.8）：只有注意力表是 n × n；其余始终是 n × d_model，所以层可以随意堆叠。",
        "drift": "每个词的起点 X₀ 还剩多少（余弦，1 = 没变）：语境改写了词义（§7.3）。{drift_text}",
        "pairwise": "每一层之后词与词有多像（余弦）。{pair_text}",
    },
}


# Step titles in Chinese: fragment by fragment, longest first (formulas and symbols stay as they are).
ZH_TITLES = [
    ("Input: embedding + positional encoding (§7.2)", "输入：词嵌入 + 位置编码（§7.2）"),
    ("What happened (§1.8, §7.3, §7.4)", "发生了什么（§1.8、§7.3、§7.4）"),
    ("Dimension tracking (§1.8)", "维度追踪（§1.8）"),
    ("Cosine drift from X₀ (§7.3)", "相对 X₀ 的余弦漂移（§7.3）"),
    ("Pairwise cosine similarity (§7.4)", "两两余弦相似度（§7.4）"),
    ("Token embeddings E", "词嵌入 E"), ("Positional encoding PE", "位置编码 PE"),
    ("Position bias", "位置偏置"), ("Embedding norm", "输入归一化"), ("Segment embedding", "句子段嵌入"),
    ("Norm before attention", "注意力之前的归一化"), ("Norm before the FFN", "FFN 之前的归一化"),
    ("scores Q·Kᵀ", "注意力分数 Q·Kᵀ"), ("head output", "头的输出"), ("Concat", "拼接"),
    ("Add (residual)", "相加（残差）"), ("Norm →", "归一化 →"), ("gate", "门"), ("output X", "输出 X"),
    ("Final norm", "最后的归一化"), ("input X", "输入 X"),
]


def title_in(lang: str | None, title: str) -> str:
    """A step title in `lang` (English titles are the source)."""
    if lang != "zh":
        return title
    for en, zh in ZH_TITLES:
        title = title.replace(en, zh)
    title = re.sub(r"Layer (\d+)", r"第 \1 层", title)
    return re.sub(r"Head (\d+)", r"头 \1", title)


def _focus(lang: str, tokens: list[str], pattern: np.ndarray) -> str:
    if len(tokens) > 1 and pattern.max() - pattern.min() < 0.1:  # the seed's "uniform head" (§7.3)
        return ("This head is nearly uniform: everyone listens to everyone about equally."
                if lang == "en" else "这个头近乎均匀：每个词对所有词的关注都差不多。")
    parts = []
    for i, row in enumerate(pattern):
        j = int(row.argmax())
        parts.append(f"{tokens[i]} → {tokens[j]} ({row[j]:.0%})" if lang == "en"
                     else f"「{tokens[i]}」最关注「{tokens[j]}」（{row[j]:.0%}）")
    return ("Strongest links: " + "; ".join(parts) + "." if lang == "en" else "；".join(parts) + "。")


def _source(lang: str, result: dict) -> str:
    src = result.get("embedding_source", {})
    seed = [t for t, s in src.items() if s == "seed"]
    rand = [t for t, s in src.items() if s == "random"]
    parts = []
    if seed:
        parts.append(f"{', '.join(seed)}: the seed's own vectors (§7.2)." if lang == "en"
                     else f"{'、'.join(seed)}：用的是原文 §7.2 给出的向量。")
    if rand:
        parts.append(f"{', '.join(rand)}: seeded random vectors (the seed gives them no embedding)." if lang == "en"
                     else f"{'、'.join(rand)}：原文没有给出它们的向量，这里用随机种子生成。")
    if any(s == "pretrained" for s in src.values()):
        parts.append("Rows of the pretrained model's table." if lang == "en" else "来自预训练模型的词表。")
    if any(s == "checkpoint" for s in src.values()):
        parts.append("Rows of the trained checkpoint's table." if lang == "en" else "来自训练好的检查点。")
    return " ".join(parts)


def _pos_note(lang: str, result: dict) -> str:
    d = result["config"]["d_model"]
    if d != 12 or result["config"]["pe"] != "sinusoidal" or result.get("stack") != "enc":
        return ""
    # Seed §7.2 prints PE(pos=1) = [0.8415, 0.5403, 0.2338, 0.9769, 0.0096, …]; the formula gives
    # sin(1/10000^(2/12)) = 0.2138 and sin(1/10000^(4/12)) = 0.0464. Its X₀ (1.12 = 0.91 + 0.2138) agrees
    # with the formula, so the PE row has typos, not the method.
    return ("(The seed prints 0.2338 and 0.0096 for PE(1) dims 2 and 4; the formula gives 0.2138 and 0.0464, "
            "and the seed's own X₀ agrees with the formula.)" if lang == "en" else
            "（原文 PE(1) 第 2、4 维印的是 0.2338 和 0.0096；公式给出 0.2138 和 0.0464，原文自己的 X₀ 也与公式一致。）")


def _drift_text(lang: str, tokens: list[str], drift: dict) -> str:
    last = list(drift)[-1]
    vals = drift[last]
    parts = [f"{t} {v:.2f}" for t, v in zip(tokens, vals)]
    return (f"After {last}: " + ", ".join(parts) + "." if lang == "en"
            else f"到 {last}：" + "，".join(parts) + "。")


def _pair_text(lang: str, pairwise: dict) -> str:
    labels = list(pairwise)
    n = len(pairwise[labels[0]])
    if n < 2:
        return ""
    mean = lambda m: float((np.sum(m) - np.trace(m)) / (n * (n - 1)))  # noqa: E731
    a, b = mean(np.asarray(pairwise[labels[0]])), mean(np.asarray(pairwise[labels[-1]]))
    trend = ("more alike" if b > a else "less alike") if lang == "en" else ("更相似" if b > a else "更不相似")
    return (f"Average pair similarity: {a:.3f} at {labels[0]}, {b:.3f} at {labels[-1]} — the tokens became "
            f"{trend} (the seed's trained model: more alike, §7.4)." if lang == "en" else
            f"平均两两相似度：{labels[0]} 为 {a:.3f}，{labels[-1]} 为 {b:.3f}——词变得{trend}了"
            f"（原文训练过的模型里是更相似，§7.4）。")


def say(lang: str, key: str, facts: dict) -> str | None:
    """The narration of step `key` in `lang`, with the numbers of this forward pass filled in."""
    template = TEXT[lang].get(key)
    if template is None:
        return None
    result, tokens = facts["result"], facts["tokens"]
    extra = {}
    if key in ("pattern", "pattern_again"):
        extra["focus"] = _focus(lang, tokens, facts["pattern"])
    elif key == "embed":
        extra["source"] = _source(lang, result)
    elif key == "pos":
        extra["note"] = _pos_note(lang, result)
    elif key == "drift":
        extra["drift_text"] = _drift_text(lang, tokens, facts["drift"])
    elif key == "pairwise":
        extra["pair_text"] = _pair_text(lang, facts["pairwise"])
    text = template.format(**facts, **extra).strip()
    if key == "scaled" and facts.get("masked"):
        text += (" Keys a token may not see (the future, or padding) are set to −∞, so softmax gives them 0 (§7.5)."
                 if lang == "en" else " 不许看的位置（未来的词或填充）被设为 −∞，softmax 之后权重为 0（§7.5）。")
    return text
