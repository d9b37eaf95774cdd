"""MiniLM in the explorer: the step-through lesson and the interventions against Hugging Face.

References: Hugging Face's BertModel (hidden states, attention weights and its own weights, loaded
offline from the same folder as glassformer's MiniLM), the same model with a head's W_O columns or an
FFN's W_2 zeroed, or a head's context replaced by its mean through a torch hook; and NumPy for the
step equations of seed 000 §2 (Q = X·W_Q + b_Q, QKᵀ, ÷√d_k, softmax, A·V). The lesson prints
4 digits, hence the tolerances.
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
def client(tmp_path_factory):
    return TestClient(create_app(tmp_path_factory.mktemp("runs")), base_url="http://127.0.0.1:8000")


@pytest.fixture(scope="module")
def lesson(client):
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


def test_lesson_cuts_wide_tables_and_says_so(client):
    d = client.post("/api/lesson", json={"sentence": "猫 吃 鱼", "model": "minilm", "lang": "zh"}).json()
    ffn = next(s for s in d["steps"] if s["formula"].startswith("GELU") or "FFN" in s["title"] and "W_1" in s["title"])
    t = ffn["tables"][0]
    assert len(t["cols"]) == 64 and t["cols_total"] == 1536 and len(t["values"][0]) == 64
    assert any("句" in (s["text"] or "") for s in d["steps"])  # the segment step, narrated in Chinese
    r = client.post("/api/lesson", json={"sentence": " ".join(["cat"] * 31), "model": "minilm"})
    assert r.status_code == 422
    assert r.json()["detail"] == ("the sentence has 33 tokens; the walkthrough prints every number "
                                  "and takes at most 32 (shorten it)")


def _ablated_hf(hf, layer, head=None, ffn=False, mean=False):
    """HF BertModel's last hidden state and attentions with one head or FFN switched off, by its own weights."""
    import copy
    _, model, _ = hf
    model = copy.deepcopy(model)
    cols = slice(32 * head, 32 * (head + 1)) if head is not None else None
    handle = None
    with torch.no_grad():
        if ffn:  # the FFN's output is zero: W_2 and b_2 zeroed (seed §6)
            model.encoder.layer[layer].output.dense.weight.zero_()
            model.encoder.layer[layer].output.dense.bias.zero_()
        elif not mean:  # zeroing z_h = zeroing head h's rows of W_O (our (in, out) layout; HF's columns)
            model.encoder.layer[layer].attention.output.dense.weight[:, cols] = 0.0
        else:  # the head's context (A·V) replaced by its mean over positions
            def hook(_mod, _inp, out):
                ctx = out[0].clone()
                ctx[..., cols] = ctx[..., cols].mean(dim=1, keepdim=True)
                return (ctx, *out[1:])
            handle = model.encoder.layer[layer].attention.self.register_forward_hook(hook)
    return model, handle


def _run(model, tok_ids):
    with torch.no_grad():
        out = model(tok_ids, output_attentions=True)
    return out.last_hidden_state[0].numpy(), out.attentions


@pytest.fixture(scope="module")
def hf_ids(hf):
    from transformers import AutoTokenizer

    from glassformer import pretrained
    return AutoTokenizer.from_pretrained(str(pretrained.model_dir("minilm")))(SENTENCE, return_tensors="pt")["input_ids"]


@pytest.mark.parametrize("body, where", [
    ({"heads": [["enc.2.attn", 5]]}, dict(layer=2, head=5)),
    ({"heads": [["enc.1.attn", 3]], "how": "mean"}, dict(layer=1, head=3, mean=True)),
    ({"ffns": ["enc.4.ffn"]}, dict(layer=4, ffn=True)),
])
def test_minilm_interventions_match_hf_with_the_part_removed(client, hf, hf_ids, body, where):
    d = client.post("/api/intervene", json={"sentence": SENTENCE, "model": "minilm", **body}).json()
    base = hf[2].last_hidden_state[0].numpy()
    model, handle = _ablated_hf(hf, **where)
    try:
        after, attentions = _run(model, hf_ids)
    finally:
        if handle is not None:
            handle.remove()
    moved = np.linalg.norm(after - base, axis=-1) / np.linalg.norm(base, axis=-1)
    assert d["change"]["hook"] == "enc.5.out" and moved.max() > 1e-3  # the part did matter
    np.testing.assert_allclose(d["change"]["relative"], moved, atol=2e-5)
    later = where["layer"] + 1  # the next layer's patterns change, and equal HF's
    np.testing.assert_allclose(d["patterns"][f"enc.{later}.attn.pattern"], attentions[later][0].numpy(), atol=2e-5)


def test_minilm_logit_lens_reads_through_the_embedding(client, hf):
    d = client.post("/api/intervene", json={"sentence": SENTENCE, "model": "minilm",
                                            "heads": [["enc.5.attn", 0]]}).json()
    lens = d["lens"]
    assert lens["unembedding"] == "embedding (no output head)"
    assert [layer["layer"] for layer in lens["before"]] == ["x0"] + [f"enc.{l}" for l in range(6)]
    tokens, model, out = hf
    W_E = model.embeddings.word_embeddings.weight.detach().numpy().astype(np.float64)
    vocab = {i: t for t, i in model_vocab().items()}
    for k, h in ((0, out.hidden_states[0]), (6, out.hidden_states[6])):  # X₀ and the last layer, by hand
        logits = h[0].numpy().astype(np.float64) @ W_E.T
        p = np.exp(logits - logits.max(-1, keepdims=True))
        p /= p.sum(-1, keepdims=True)
        assert [top[0]["token"] for top in lens["before"][k]["top"]] == [vocab[i] for i in p.argmax(-1)]
        np.testing.assert_allclose([top[0]["p"] for top in lens["before"][k]["top"]], p.max(-1), atol=2e-5)


def model_vocab() -> dict[str, int]:
    from transformers import AutoTokenizer

    from glassformer import pretrained
    return AutoTokenizer.from_pretrained(str(pretrained.model_dir("minilm"))).get_vocab()


def test_trace_names_the_words_minilm_reads_as_unk(client):
    """The words the explorer names are the words Hugging Face's own fast BERT tokenizer, loaded from
    the same folder, turns into [UNK] (found from its character offsets)."""
    from transformers import AutoTokenizer

    from glassformer import pretrained
    tok = AutoTokenizer.from_pretrained(str(pretrained.model_dir("minilm")))
    sentence = "The ☃ cat 𝔥𝔦 eats ☃ fish."
    enc = tok(sentence, return_offsets_mapping=True)
    unk = [sentence[a:b] for i, (a, b) in zip(enc["input_ids"], enc["offset_mapping"]) if i == tok.unk_token_id]
    assert unk == ["☃", "𝔥𝔦", "☃"]
    d = client.post("/api/trace", json={"sentence": sentence, "model": "minilm"}).json()
    assert d["unknown"]["pieces"] == ["☃", "𝔥𝔦"]
    assert d["unknown"]["note"] == f"'☃', '𝔥𝔦' not in the model's vocabulary ({len(tok)} tokens); read as [UNK]"
    assert d["tokens"] == tok.convert_ids_to_tokens(enc["input_ids"])
    assert client.post("/api/trace", json={"sentence": SENTENCE, "model": "minilm"}).json()["unknown"] is None
