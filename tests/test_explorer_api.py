"""The explorer's second API: lesson, neuron view, interventions, live generation, size limits.

References: the independent NumPy encoder (tests/numpy_encoder.py) for interventions and q·k terms,
the model's plain forward pass for every probability shown, `glassformer.generate` (cached decoding,
its own beam search) for the tokens generated step by step.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from explorer_helpers import client, runs_dir  # noqa: F401 (fixtures)
from numpy_encoder import encoder_forward


SENTENCE = "猫 吃 鱼"


@pytest.fixture(scope="module")
def seed_result():
    from glassformer.walkthrough import build
    return build(SENTENCE, random_embeddings=True)  # the weights the explorer's walkthrough model uses


@pytest.fixture(scope="module")
def tiny(runs_dir):
    from glassformer.train.checkpoint import load_checkpoint
    ck = load_checkpoint(runs_dir / "tiny")
    return ck, torch.tensor([ck.src_tokenizer.encode(SENTENCE)])


def test_switching_off_a_head_and_an_ffn_matches_numpy(client, seed_result):
    d = client.post("/api/intervene", json={"sentence": SENTENCE, "heads": [["enc.0.attn", 1]]}).json()
    ref = encoder_forward(seed_result["params"], seed_result["ids"], seed_result["config"], zero_head=(0, 1))
    base = encoder_forward(seed_result["params"], seed_result["ids"], seed_result["config"])
    np.testing.assert_allclose(np.array(d["patterns"]["enc.1.attn.pattern"]), ref["enc.1.attn.pattern"], atol=2e-5)
    # the change reported per token: ‖out_after − out_before‖ / ‖out_before‖ of the last layer
    moved = np.linalg.norm(ref["enc.1.out"] - base["enc.1.out"], axis=-1) / np.linalg.norm(base["enc.1.out"], axis=-1)
    np.testing.assert_allclose(d["change"]["relative"], moved, atol=1e-6)
    assert d["lens"]["unembedding"] == "embedding (no output head)"  # an encoder: the lens reads through W_E
    # an FFN off: layer 1's output is LayerNorm(resid_mid) alone (Post-LN, seed §4), by hand
    d = client.post("/api/intervene", json={"sentence": SENTENCE, "ffns": ["enc.1.ffn"]}).json()
    x = base["enc.1.resid_mid"]
    mu, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
    P = seed_result["params"]
    ln1 = np.array(P["enc.1.norm1.gamma"]) * (x - mu) / np.sqrt(var + 1e-5) + np.array(P["enc.1.norm1.beta"])
    mu, var = ln1.mean(-1, keepdims=True), ln1.var(-1, keepdims=True)
    out = np.array(P["enc.1.norm2.gamma"]) * (ln1 - mu) / np.sqrt(var + 1e-5) + np.array(P["enc.1.norm2.beta"])
    moved = np.linalg.norm(out - base["enc.1.out"], axis=-1) / np.linalg.norm(base["enc.1.out"], axis=-1)
    np.testing.assert_allclose(d["change"]["relative"], moved, atol=1e-6)


def test_neuron_view_terms_add_up_to_the_score(client, seed_result):
    d = client.post("/api/neuron", json={"sentence": SENTENCE, "layer": 1, "query": 1, "key": 2}).json()
    ref = encoder_forward(seed_result["params"], seed_result["ids"], seed_result["config"])
    terms = np.array(d["terms"])  # (head, d_k)
    assert terms.shape == (3, 4)
    np.testing.assert_allclose(terms.sum(-1), ref["enc.1.attn.scaled"][:, 1, 2], atol=1e-6)
    np.testing.assert_allclose(d["bias"], 0.0, atol=1e-9)  # sinusoidal PE adds no score bias
    np.testing.assert_allclose(d["pattern"], ref["enc.1.attn.pattern"][:, 1, 2], atol=1e-6)
    np.testing.assert_allclose(terms, np.array(d["q"]) * np.array(d["k"]) / 2.0, atol=1e-12)  # ÷√d_k = ÷2


def test_greedy_steps_equal_cached_generation(client, tiny):
    from glassformer.generate import generate
    ck, src = tiny
    d = client.post("/api/generate", json={"sentence": SENTENCE, "model": "run:tiny", "max_new_tokens": 6,
                                           "top_k": 4}).json()
    ref = generate(ck.model, src, max_new_tokens=6, strategy="greedy")[0].tolist()
    assert d["ids"] == ref
    with torch.no_grad():
        probs = torch.softmax(ck.model(src, torch.tensor([ref[:-1]])).double(), dim=-1)[0]
    for i, step in enumerate(d["steps"]):
        assert [t["id"] for t in step["top"]] == probs[i].topk(4).indices.tolist()
        np.testing.assert_allclose([t["p"] for t in step["top"]], probs[i].topk(4).values.numpy(), atol=1e-5)
        A = np.array(step["attention"]["dec.0.cross_attn.pattern"])  # (head, source) of the new query
        assert A.shape == (2, 3) and np.allclose(A.sum(-1), 1, atol=1e-6)


def test_sampling_uses_the_temperature(client, tiny):
    ck, src = tiny
    d = client.post("/api/generate", json={"sentence": SENTENCE, "model": "run:tiny", "strategy": "sample",
                                           "temperature": 2.5, "max_new_tokens": 3, "seed": 3}).json()
    with torch.no_grad():
        logits = ck.model(src, torch.tensor([d["ids"][:1]])).double()[0, -1]
    p = torch.softmax(logits / 2.5, dim=-1)
    first = d["steps"][0]
    assert first["p"] == pytest.approx(float(p[first["id"]]), abs=1e-5)
    assert first["top"][0]["p"] == pytest.approx(float(p.max()), abs=1e-5)


def test_beam_tree_ends_in_beam_search_result(client, tiny):
    from glassformer.generate import generate
    ck, src = tiny
    d = client.post("/api/generate", json={"sentence": SENTENCE, "model": "run:tiny", "strategy": "beam",
                                           "beam_size": 3, "max_new_tokens": 5}).json()
    ref = generate(ck.model, src, max_new_tokens=5, strategy="beam", beam_size=3, length_penalty=1.0)[0].tolist()
    assert d["ids"] == ref
    nodes = d["tree"]["nodes"]
    path = [nodes[i]["token"] for i in d["tree"]["best"][1:]]
    assert path == [ck.tgt_tokenizer.id_to_token(i) for i in ref[1:]]
    assert all(nodes[n["parent"]]["step"] == n["step"] - 1 for n in nodes[1:])


def test_logit_lens_last_layer_is_the_output(client, tiny):
    ck, src = tiny
    d = client.post("/api/intervene", json={"sentence": SENTENCE, "model": "run:tiny",
                                            "heads": [["dec.0.cross_attn", 0]]}).json()
    assert set(d["output"]) == {"before", "after"}
    tgt = torch.tensor([[ck.tgt_tokenizer.token_to_id(t) for t in d["target_tokens"]]])
    with torch.no_grad():
        base = torch.softmax(ck.model(src, tgt).double(), dim=-1)[0]
    lens = d["lens"]["before"][-1]
    assert lens["layer"] == "dec.0" and d["lens"]["before"][0]["layer"] == "x0"
    assert [top[0]["token"] for top in lens["top"]] == [ck.tgt_tokenizer.id_to_token(i) for i in base.argmax(-1).tolist()]
    np.testing.assert_allclose([top[0]["p"] for top in lens["top"]], base.max(-1).values.numpy(), atol=1e-5)


def test_lesson_in_chinese(client, seed_result):
    d = client.post("/api/lesson", json={"sentence": SENTENCE, "lang": "zh"}).json()
    x0 = next(s for s in d["steps"] if s["formula"].startswith("X₀"))
    np.testing.assert_allclose(x0["tables"][0]["values"], np.round(seed_result["trace"]["x0"], 4), atol=1e-9)
    assert any("词" in (s["text"] or "") for s in d["steps"])
    d = client.post("/api/lesson", json={"sentence": SENTENCE, "model": "run:tiny"}).json()
    assert d["tokens"] == ["猫", "吃", "鱼"] and len(d["steps"]) > 10


def test_256_tokens_accepted_and_too_many_weights_refused(client, monkeypatch):
    words = " ".join(["cat"] * 254)
    d = client.post("/api/trace", json={"sentence": words, "model": "minilm"}).json()
    assert len(d["tokens"]) == 256 and np.array(d["trace"]["enc.5.attn.pattern"]).shape == (12, 256, 256)
    from glassformer.server import models
    monkeypatch.setattr(models, "MAX_CELLS", 1000)
    r = client.post("/api/trace", json={"sentence": "hello world", "model": "minilm"})
    assert r.status_code == 422
    assert r.json()["detail"] == "4 tokens give 1,152 attention weights for minilm; the limit is 1,000 — shorten the sentence"


@pytest.mark.parametrize("path, body, status, message", [
    ("/api/intervene", {"sentence": SENTENCE, "heads": [["enc.7.attn", 0]]}, 422,
     "'enc.7.attn' is not an attention block of this model; use one of enc.0.attn, enc.1.attn"),
    ("/api/intervene", {"sentence": SENTENCE, "heads": [["enc.0.attn", 3]]}, 422,
     "head 3 of enc.0.attn does not exist; heads are 0..2"),
    ("/api/intervene", {"sentence": SENTENCE, "ffns": ["enc.0.attn"]}, 422,
     "'enc.0.attn' is not a feed-forward block of this model; use one of enc.0.ffn, enc.1.ffn"),
    ("/api/neuron", {"sentence": SENTENCE, "layer": 2, "query": 0, "key": 0}, 422,
     "layer 2 does not exist; this model has layers 0..1"),
    ("/api/neuron", {"sentence": SENTENCE, "layer": 0, "query": 0, "key": 3}, 422,
     "key position 3 does not exist; the sentence has positions 0..2"),
    ("/api/generate", {"sentence": SENTENCE}, 422,
     "model 'walkthrough' is an encoder and cannot generate; pick a translator or a language model (run:...)"),
    ("/api/lesson", {"sentence": SENTENCE, "max_cols": 0}, 422, None),
    ("/api/lesson", {"sentence": SENTENCE, "model": "../x"}, 404, "unknown model '../x'"),
    ("/api/generate", {"sentence": "  ", "model": "run:tiny"}, 422, "sentence is empty"),
])
def test_bad_requests(client, path, body, status, message):
    r = client.post(path, json=body)
    assert r.status_code == status, r.json()
    assert message is None or r.json()["detail"].startswith(message), r.json()


@pytest.mark.parametrize("body", [
    {"sentence": SENTENCE, "model": "run:tiny", "temperature": 0},
    {"sentence": SENTENCE, "model": "run:tiny", "max_new_tokens": 1000},
    {"sentence": SENTENCE, "model": "run:tiny", "strategy": "nucleus"},
    {"sentence": SENTENCE, "model": "run:tiny", "path": "/etc/passwd"},
])
def test_bad_generation_options_are_422(client, body):
    assert client.post("/api/generate", json=body).status_code == 422


def test_trace_names_the_words_the_checkpoint_never_saw(client):
    """The page's warning: the source words outside the training sentences (explorer_helpers.SRC),
    read as <unk>, named once each; a sentence of known words has none."""
    from explorer_helpers import SRC
    seen = {w for line in SRC for w in line.split()}
    sentence = "猫 吃 ☃ 鸟 ☃"
    d = client.post("/api/trace", json={"sentence": sentence, "model": "run:tiny"}).json()
    assert d["unknown"]["pieces"] == ["☃", "鸟"] == [w for w in dict.fromkeys(sentence.split()) if w not in seen]
    note = d["unknown"]["note"]
    assert note.startswith("'☃', '鸟' not in the model's source vocabulary (") and note.endswith("; read as <unk>")
    assert [t for t, w in zip(d["tokens"], sentence.split()) if w not in seen] == ["<unk>"] * 3
    assert client.post("/api/trace", json={"sentence": SENTENCE, "model": "run:tiny"}).json()["unknown"] is None
    assert client.post("/api/trace", json={"sentence": "猫 ☃", "model": "walkthrough"}).json()["unknown"] is None


@pytest.fixture(scope="module")
def lm_client(tmp_path_factory):
    """The explorer over a runs/ folder holding one character LM that trained on windows of 4 tokens."""
    from fastapi.testclient import TestClient

    from glassformer.config import ModelConfig
    from glassformer.nn import build_model
    from glassformer.server.app import create_app
    from glassformer.tokenize import build_tokenizer
    from glassformer.train.checkpoint import save_checkpoint
    from glassformer.train.config import TrainConfig

    runs = tmp_path_factory.mktemp("lm_runs")
    tok = build_tokenizer("char", ["abcdefgh ijk"])
    cfg = ModelConfig(arch="decoder", vocab_size=tok.vocab_size, d_model=16, n_heads=2, n_layers=2, d_ff=32,
                      pad_id=tok.pad_id, bos_id=tok.bos_id, eos_id=tok.eos_id)
    torch.manual_seed(0)
    model = build_model(cfg).eval()
    with torch.no_grad():  # a wider spread of logits: varied output, eos unlikely
        for w in model.parameters():
            w.mul_(2.0)
    train = TrainConfig(task="lm", data=str(runs / "text.txt"), out=str(runs / "lm4"), block_size=4)
    save_checkpoint(runs / "lm4", model, cfg, {"lm": tok}, None, {"task": "lm", "step": 0, "train_config":
                                                                     train.to_dict()})
    return TestClient(create_app(runs), base_url="http://127.0.0.1:8000"), model


def test_a_language_model_generates_within_the_window_it_trained_on(lm_client):
    """Each step reads the last 4 tokens (its block_size), as `generate(window=4)` does; the page's
    attention row still has one weight per token, 0 on the tokens the query did not read."""
    from glassformer.generate import generate
    client, model = lm_client
    d = client.post("/api/generate", json={"sentence": "abc de", "model": "run:lm4", "max_new_tokens": 8,
                                           "top_k": 3}).json()
    n_new = len(d["steps"])
    prompt = d["ids"][:len(d["ids"]) - n_new]
    assert len(prompt) + n_new > 4  # the text outgrows the window
    ref = generate(model, torch.tensor([prompt]), max_new_tokens=n_new, strategy="greedy", window=4)[0].tolist()
    assert d["ids"] == ref
    for i, step in enumerate(d["steps"]):
        length = len(prompt) + i  # tokens before this step's new one
        for layer in ("dec.0.self_attn.pattern", "dec.1.self_attn.pattern"):
            A = np.array(step["attention"][layer])  # (head, key)
            assert A.shape == (2, length)
            np.testing.assert_allclose(A.sum(-1), 1, atol=1e-6)
            assert not A[:, :max(0, length - 4)].any() and A[:, -min(length, 4):].all()
