"""`glassformer walkthrough` (issue 3 §2–4): seed 000 chapter 7 as a command, every number recomputable."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import warnings

import numpy as np
import pytest
from typer.testing import CliRunner

from glassformer.cli import app
from glassformer.walkthrough import build
from numpy_encoder import encoder_forward

runner = CliRunner()
CJK = re.compile(r"[\u4e00-\u9fff]")


def _cli(*args):
    return runner.invoke(app, ["walkthrough", *args])


@pytest.mark.parametrize("position", ["post", "pre"])
def test_every_traced_tensor_recomputed_in_numpy_from_the_exported_params(position, tmp_path):
    """The JSON alone (params + ids + config) reproduces every traced number to 1e-5."""
    args = ["--no-plots", "--quiet", "--json", str(tmp_path / "w.json"), "--norm-position", position]
    if position == "pre":  # another sentence, seeded random embeddings and another seed as well
        args += ["我 爱 猫 鱼", "--random-embeddings", "--seed", "3"]
    res = _cli(*args)
    assert res.exit_code == 0, res.output
    data = json.loads((tmp_path / "w.json").read_text(encoding="utf-8"))
    cfg = data["config"]
    assert cfg["norm_position"] == position
    for key in ("n_heads", "n_layers", "norm_eps", "activation", "norm_position", "d_model", "d_ff"):
        assert key in cfg
    ids = [data["vocab"].index(t) for t in data["tokens"]]
    want = encoder_forward(data["params"], ids, cfg)
    assert set(data["trace"]) == set(want) - {"output"}  # every traced tensor, nothing skipped
    for name, traced in data["trace"].items():
        np.testing.assert_allclose(np.asarray(traced), want[name], rtol=0, atol=1e-5, err_msg=name)
    n = len(data["tokens"])
    assert np.shape(data["params"]["enc.0.attn.W_Q"]) == (3, 12, 4)
    assert np.shape(data["params"]["enc.0.attn.b_K"]) == (3, 4)
    assert np.shape(data["params"]["enc.1.attn.W_O"]) == (12, 12)
    assert np.shape(data["params"]["enc.0.ffn.W_1"]) == (12, 48)
    assert np.shape(data["params"]["enc.0.ffn.W_2"]) == (48, 12)
    assert np.shape(data["params"]["enc.1.norm2.gamma"]) == (12,)
    assert np.shape(data["trace"]["x0"]) == (n, 12)  # batch dimension dropped
    assert np.shape(data["trace"]["enc.0.attn.pattern"]) == (3, n, n)
    if position == "pre":
        assert "enc_norm" in data["trace"] and data["tokens"] == ["我", "爱", "猫", "鱼"]
        assert data["embedding_source"] == {"我": "random", "爱": "random", "猫": "seed", "鱼": "seed"}


def test_default_output_shows_the_seed_figures():
    res = _cli("--no-plots")
    assert res.exit_code == 0, res.output
    out = res.output
    # seed 000 §7.2 (X₀ = E + PE) and §7.4 (cosines of the original representations)
    assert "X₀(吃)[:4] = [1.22, 0.77, 1.12, 1.40]" in out
    assert "X₀(猫)[:4] = [0.21, 1.54, 0.13, 1.82]" in out
    assert "cos(猫₀, 吃₀) = 0.8565" in out
    assert "cos(吃₀, 鱼₀) = 0.9396" in out
    assert "cos(猫₀, 鱼₀) = 0.7298" in out
    for shown in ("d_model 12, 3 heads, d_k 4, d_ff 48, 2 layers", "softmax", "Σ", "=1.00", "Dimension tracking",
                  "Cosine drift", "Pairwise cosine", "3 × 48"):
        assert shown in out
    assert out.count("· softmax → A") == 6  # 2 layers × 3 heads


def test_seed_embeddings_and_pe_in_the_json_match_the_seed_text():
    data = build()
    assert data["tokens"] == ["猫", "吃", "鱼"]
    E = np.asarray(data["params"]["embed.W_E"])
    np.testing.assert_allclose(E[1], [0.38, 0.23, 0.91, 0.42, 0.55, 0.19, 0.87, 0.33, 0.61, 0.28, 0.49, 0.76])
    pe = np.asarray(data["trace"]["pos"])
    np.testing.assert_allclose(pe[0], [0, 1] * 6, atol=1e-12)  # §7.2: position 0 is [0, 1, 0, 1, ...]
    np.testing.assert_allclose(pe[1, :2], [0.8415, 0.5403], atol=5e-5)
    np.testing.assert_allclose(pe[2, :2], [0.9093, -0.4161], atol=5e-5)


def test_lang_zh_narrates_in_chinese_and_en_in_english():
    zh = _cli("--no-plots", "--lang", "zh")
    assert zh.exit_code == 0, zh.output
    narration = [line for line in zh.output.splitlines() if "Softmax" in line and "加起来等于 1" in line]
    assert narration, "no Chinese narration of the softmax step"
    assert "残差" in zh.output and "除以 √d_k = 2" in zh.output
    en = _cli("--no-plots", "--lang", "en")
    assert "Residual: the layer's input is added back" in en.output
    assert not CJK.search(en.output.split("Token embeddings E")[1].splitlines()[1].split(":")[0])
    none = _cli("--no-plots", "--lang", "none")
    assert "Residual: the layer's input" not in none.output and "X₀(吃)[:4]" in none.output


def test_unsegmented_chinese_is_segmented_with_jieba():
    assert build("猫吃鱼")["tokens"] == ["猫", "吃", "鱼"]
    assert build("猫 吃 鱼 鱼")["vocab"] == ["猫", "吃", "鱼"]  # a repeated token reuses its row


def test_model_flags_change_the_model():
    res = _cli("--no-plots", "--lang", "none", "--heads", "2", "--layers", "1", "--d-ff", "24",
               "--activation", "relu", "--norm", "rmsnorm")
    assert res.exit_code == 0, res.output
    assert "d_model 12, 2 heads, d_k 6, d_ff 24, 1 layers, post-rmsnorm, relu" in res.output
    assert "Layer 2" not in res.output and res.output.count("· softmax → A") == 2
    wide = build("猫 吃", random_embeddings=True, d_model=16, n_heads=2, pe="rope")
    assert np.shape(wide["trace"]["x0"]) == (2, 16) and "pos" not in wide["trace"]


def test_files_json_markdown_and_self_contained_html(tmp_path):
    res = _cli("--lang", "zh", "--out", str(tmp_path / "png"), "--json", str(tmp_path / "w.json"),
               "--markdown", str(tmp_path / "w.md"), "--html", str(tmp_path / "w.html"))
    assert res.exit_code == 0, res.output
    for name in ("attention.png", "positional.png", "drift.png"):
        png = tmp_path / "png" / name
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and str(png) in res.output
    page = (tmp_path / "w.html").read_text(encoding="utf-8")
    assert "data:image/png;base64," in page and "猫" in page and "加起来等于 1" in page
    assert not re.search(r"(src|href)\s*=\s*[\"']?(https?:)?//", page)  # nothing fetched from a network
    md = (tmp_path / "w.md").read_text(encoding="utf-8")
    assert "| 猫(Q) |" in md and "X₀(吃)[:4] = [1.22, 0.77, 1.12, 1.40]" in md and "](png/attention.png)" in md
    data = json.loads((tmp_path / "w.json").read_text(encoding="utf-8"))
    assert {"tokens", "config", "params", "trace"} <= set(data)


def test_without_a_cjk_font_labels_fall_back_with_one_warning(monkeypatch):
    from glassformer.viz import fonts

    monkeypatch.setattr(fonts, "cjk_font", lambda: None)
    fonts._warn_once.cache_clear()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert fonts.labels(["猫", "吃", "fish"]) == ["#0", "#1", "fish"]
        assert fonts.labels(["cat", "eats"]) == ["cat", "eats"]
    assert len([w for w in caught if "fonts-noto-cjk" in str(w.message)]) == 1
    fonts._warn_once.cache_clear()


@pytest.mark.parametrize("args, message", [
    (["我 爱 你"], "unknown token '我' has no embedding"),
    ([""], "the sentence is empty"),
    ([" ".join(["猫"] * 40)], "the sentence has 40 tokens"),
    (["--heads", "5"], "d_model=12 is not divisible by n_heads=5"),
    (["--d-model", "24"], "add --random-embeddings"),
    (["--ckpt", "runs/none", "--d-model", "16"], "--ckpt takes the model and embeddings from the checkpoint"),
    (["--lang", "fr"], "--lang 'fr' is not one of en, zh, none"),
    (["--pe", "wavy"], "pe='wavy' is not one of"),
])
def test_bad_input_is_one_line_nonzero_and_no_traceback(args, message):
    res = _cli(*args, "--no-plots")
    assert res.exit_code == 2
    lines = [line for line in res.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], res.output
    assert res.exception is None or isinstance(res.exception, SystemExit)


def test_bad_input_through_the_installed_entry_point_has_no_traceback():
    proc = subprocess.run([sys.executable, "-m", "glassformer", "walkthrough", "猫 吃 虎", "--no-plots"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.strip() == ("error: unknown token '虎' has no embedding (the seed gives only 猫, 吃, 鱼); "
                                   "add --random-embeddings or use --ckpt DIR")
    assert "Traceback" not in proc.stdout + proc.stderr


def test_checkpoint_walkthrough_traces_the_trained_encoder(tmp_path):
    from glassformer.config import ModelConfig
    from glassformer.nn import build_model
    from glassformer.tokenize import build_tokenizer
    from glassformer.train.checkpoint import save_checkpoint

    src, tgt = build_tokenizer("word", ["猫 吃 鱼", "狗 追 猫"]), build_tokenizer("word", ["the cat eats fish"])
    cfg = ModelConfig(arch="encoder-decoder", vocab_size=src.vocab_size, tgt_vocab_size=tgt.vocab_size,
                      share_embeddings=False, d_model=8, n_heads=2, n_layers=1, d_ff=16, pad_id=0, bos_id=1,
                      eos_id=2)
    model = build_model(cfg)
    save_checkpoint(tmp_path / "ck", model, cfg, {"src": src, "tgt": tgt}, None, {"task": "test"})
    res = _cli("狗 追 猫", "--ckpt", str(tmp_path / "ck"), "--no-plots", "--json", str(tmp_path / "c.json"))
    assert res.exit_code == 0, res.output
    data = json.loads((tmp_path / "c.json").read_text(encoding="utf-8"))
    assert data["tokens"] == ["狗", "追", "猫"] and data["ids"] == src.encode("狗 追 猫")
    np.testing.assert_allclose(data["params"]["embed.W_E"], model.embed.W_E.detach().double().numpy())
    assert not any(k.startswith(("dec", "head")) for k in data["params"])  # the encoder only
    want = encoder_forward(data["params"], data["ids"], data["config"])
    for name, traced in data["trace"].items():
        np.testing.assert_allclose(np.asarray(traced), want[name], atol=1e-5, err_msg=name)
    bad = _cli("猫 虎 吃 ☃ 虎", "--ckpt", str(tmp_path / "ck"), "--no-plots")  # every unseen word, once, on one line
    assert bad.exit_code == 2 and bad.output.count("\n") == 1, bad.output
    assert bad.output.startswith("error: '虎', '☃' in '猫 虎 吃 ☃ 虎' not in the model's source vocabulary ("), bad.output
    missing = _cli("--ckpt", str(tmp_path / "nothing"), "--no-plots")
    assert missing.exit_code == 2 and missing.output.startswith("error: ")
