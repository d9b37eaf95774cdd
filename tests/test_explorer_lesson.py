"""The step-through lesson on any model the explorer can load: MiniLM's numbers against Hugging Face.

References: Hugging Face's BertModel (hidden states, attention weights and its own weights, loaded
offline from the same folder as glassformer's MiniLM) and NumPy for the step equations of seed 000
§2 (Q = X·W_Q + b_Q, QKᵀ, ÷√d_k, softmax, A·V). The lesson prints 4 digits, hence the tolerances.
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from fastapi.testclient import TestClient  # noqa: E402

from glassformer.server.app import create_app  # noqa: E402

SENTENCE = "The cat eats the fish."
ROUND = 6e-5  # 4 printed digits (5e-5) and float32


@pytest.fixture(scope="module")
def lesson(tmp_path_factory):
    client = TestClient(create_app(tmp_path_factory.mktemp("runs")), base_url="http://127.0.0.1:8000")
    r = client.post("/api/lesson", json={"sentence": SENTENCE, "model": "minilm", "max_cols": 4096})
    assert r.status_code == 200, r.json()
    d = r.json()
    return d, {s["title"]: s for s in d["steps"]}


@pytest.fixture(scope="module")
def hf():
    from transformers import AutoTokenizer, BertModel

    from glassformer import pretrained
    folder = str(pretrained.model_dir("minilm"))
    tok = AutoTokenizer.from_pretrained(folder)
    model = BertModel.from_pretrained(folder, attn_implementation="eager").eval()
    enc = tok(SENTENCE, return_tensors="pt")
    with torch.no_grad():
        out = model(**enc, output_hidden_states=True, output_attentions=True)
    return tok.convert_ids_to_tokens(enc["input_ids"][0]), model, out


def _table(step, i=0):
    return np.array(step["tables"][i]["values"], dtype=np.float64)


def test_minilm_lesson_follows_hf_bert_layer_by_layer(lesson, hf):
    d, steps = lesson
    tokens, _, out = hf
    assert d["tokens"] == tokens and tokens[0] == "[CLS]" and tokens[-1] == "[SEP]"
    x0 = steps["X₀ = LN(E + PE + S)"]
    assert x0["shape"] == f"{len(tokens)} × 384"
    np.testing.assert_allclose(_table(x0), out.hidden_states[0][0].numpy(), atol=ROUND)
    for L in range(1, 7):  # Post-LN: the second norm of layer L is its output X_L
        np.testing.assert_allclose(_table(steps[f"Layer {L} · Norm → X{L}"]), out.hidden_states[L][0].numpy(),
                                   atol=2e-4)
        for H in (1, 12):
            A = _table(steps[f"Layer {L} · Head {H} · softmax → A{H}"])
            np.testing.assert_allclose(A, out.attentions[L - 1][0, H - 1].numpy(), atol=ROUND)
    assert sum(s["title"].endswith("Q, K, V") for s in d["steps"]) == 6 * 12


def test_minilm_lesson_steps_obey_the_seed_equations(lesson, hf):
    """Layer 2, head 3, by hand: Q, K, V from X₁ and BERT's weights; QKᵀ; ÷√32; softmax; A·V."""
    _, steps = lesson
    _, model, out = hf
    attn = model.encoder.layer[1].attention.self
    X1 = out.hidden_states[1][0].numpy().astype(np.float64)
    cols = slice(2 * 32, 3 * 32)  # head 3 of 12, d_k = 32
    proj = {name: X1 @ m.weight.detach().numpy()[cols].T + m.bias.detach().numpy()[cols]
            for name, m in (("Q", attn.query), ("K", attn.key), ("V", attn.value))}
    qkv = steps["Layer 2 · Head 3 · Q, K, V"]
    for i, name in enumerate("QKV"):
        np.testing.assert_allclose(_table(qkv, i), proj[name], atol=2e-4)
    scores = _table(steps["Layer 2 · Head 3 · scores Q·Kᵀ"])
    np.testing.assert_allclose(scores, proj["Q"] @ proj["K"].T, atol=5e-3)
    scaled = _table(steps["Layer 2 · Head 3 · ÷√d_k"])
    np.testing.assert_allclose(scaled, scores / np.sqrt(32), atol=ROUND)
    e = np.exp(scaled - scaled.max(-1, keepdims=True))
    A = _table(steps["Layer 2 · Head 3 · softmax → A3"])
    np.testing.assert_allclose(A, e / e.sum(-1, keepdims=True), atol=3e-4)
    np.testing.assert_allclose(_table(steps["Layer 2 · Head 3 · head output"]), A @ proj["V"], atol=2e-3)


def test_lesson_cuts_wide_tables_and_says_so(tmp_path):
    client = TestClient(create_app(tmp_path / "runs"), base_url="http://127.0.0.1:8000")
    d = client.post("/api/lesson", json={"sentence": "猫 吃 鱼", "model": "minilm", "lang": "zh"}).json()
    ffn = next(s for s in d["steps"] if s["formula"].startswith("GELU") or "FFN" in s["title"] and "W_1" in s["title"])
    t = ffn["tables"][0]
    assert len(t["cols"]) == 64 and t["cols_total"] == 1536 and len(t["values"][0]) == 64
    assert any("句" in (s["text"] or "") for s in d["steps"])  # the segment step, narrated in Chinese
    r = client.post("/api/lesson", json={"sentence": " ".join(["cat"] * 31), "model": "minilm"})
    assert r.status_code == 422
    assert r.json()["detail"] == ("the sentence has 33 tokens; the walkthrough prints every number "
                                  "and takes at most 32 (shorten it)")
