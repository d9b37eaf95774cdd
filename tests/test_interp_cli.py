"""glassformer lens / patch / ablate-heads / hooks on a run folder, a Hugging Face folder and MiniLM.

Oracles: the model's own logits (the lens's last layer), the whole-activation identity (patching a
layer's entire clean output restores the clean score: effect 1), a copy of the model with one head's
W_O rows zeroed (ablate-heads), and docs/hooks.md regenerated from the code.
"""

import copy
import json
import sys
from pathlib import Path

import pytest
import torch

from glassformer import cli
from glassformer.config import ModelConfig
from glassformer.nn import build_model
from glassformer.tokenize import build_tokenizer
from glassformer.train.checkpoint import save_checkpoint

pytestmark = pytest.mark.usefixtures("one_thread")
ROOT = Path(__file__).resolve().parents[1]


def run_cli(monkeypatch, capsys, *argv):
    """(exit code, stdout, stderr); a command that succeeds returns without SystemExit."""
    monkeypatch.setattr(sys, "argv", ["glassformer", *argv])
    try:
        cli.main()
        code = 0
    except SystemExit as e:
        code = e.code or 0
    out = capsys.readouterr()
    return code, out.out, out.err


def own_translation(model, ids: torch.Tensor) -> torch.Tensor:
    """What the commands teacher-force on: the greedy translation, cut after <eos> (id 2)."""
    target = model.generate(ids, max_new_tokens=4 * ids.shape[1] + 8)[0]
    return target[: int((target == 2).nonzero()[0]) + 1] if (target == 2).any() else target


@pytest.fixture(scope="module")
def translator(tmp_path_factory):
    """A small random zh-en translator saved as a run folder (tokenizers included)."""
    src = build_tokenizer("jieba", ["猫 追 狗", "狗 追 猫", "猫 吃 鱼"])
    tgt = build_tokenizer("word", ["the cat chases the dog", "the cat eats the fish"])
    cfg = ModelConfig(arch="encoder-decoder", vocab_size=src.vocab_size, tgt_vocab_size=tgt.vocab_size,
                      share_embeddings=False, d_model=16, n_heads=2, n_layers=2, d_ff=32,
                      pad_id=0, bos_id=1, eos_id=2)
    torch.manual_seed(0)
    model = build_model(cfg).eval()
    path = tmp_path_factory.mktemp("run") / "best"
    save_checkpoint(path, model, cfg, {"src": src, "tgt": tgt}, meta={"task": "zh-en"})
    return path, model, src, tgt


def test_lens_last_layer_is_the_models_own_prediction(monkeypatch, capsys, tmp_path, translator):
    path, model, src, tgt = translator
    code, out, err = run_cli(monkeypatch, capsys, "lens", "--model", str(path), "猫 追 狗", "--json",
                             str(tmp_path / "l.json"), "--out", str(tmp_path / "l.png"))
    assert code == 0, err
    data = json.loads((tmp_path / "l.json").read_text())
    ids = torch.tensor([src.encode("猫 追 狗")])
    target = own_translation(model, ids)
    with torch.no_grad():
        logits = model(ids, target[None, :-1])[0]
    assert [t[0] for t in data["layers"][-1]["top"]] == [tgt.id_to_token(int(i)) for i in logits.argmax(-1)]
    assert [l["layer"] for l in data["layers"]] == ["x0", "dec.0", "dec.1"]
    assert (tmp_path / "l.png").stat().st_size > 1000


def test_patch_whole_memory_restores_and_heads_have_labels(monkeypatch, capsys, tmp_path, translator):
    path = str(translator[0])
    code, out, err = run_cli(monkeypatch, capsys, "patch", "--model", path, "猫 追 狗", "狗 追 猫",
                             "--hook", "enc.1.out", "--per", "all", "--json", str(tmp_path / "p.json"))
    assert code == 0, err
    data = json.loads((tmp_path / "p.json").read_text())
    assert abs(data["clean_metric"] - data["corrupted_metric"]) > 1e-3
    assert data["effects"] == [[pytest.approx(1.0, abs=1e-5)]]
    code, out, err = run_cli(monkeypatch, capsys, "patch", "--model", path, "猫 追 狗", "狗 追 猫", "--hook",
                             "dec.*.cross_attn.z", "--per", "head", "--attribution", "--json", str(tmp_path / "h.json"),
                             "--out", str(tmp_path / "h.png"))
    assert code == 0, err
    data = json.loads((tmp_path / "h.json").read_text())
    assert data["labels"] == ["head0", "head1"] and len(data["effects"]) == 2 and "pearson" in data["attribution"]


def test_ablate_heads_equals_the_model_with_W_O_rows_zeroed(monkeypatch, capsys, tmp_path, translator):
    path, model, src, _ = translator
    code, out, err = run_cli(monkeypatch, capsys, "ablate-heads", "--model", str(path), "猫 追 狗", "--deletions",
                             "--json", str(tmp_path / "a.json"))
    assert code == 0, err
    data = json.loads((tmp_path / "a.json").read_text())
    ids = torch.tensor([src.encode("猫 追 狗")])
    target = own_translation(model, ids)
    cut = copy.deepcopy(model)
    with torch.no_grad():
        cut.dec[1].self_attn.W_O[8:16].zero_()  # head 1 of layer 1 (d_k = 8): rows 8..15
        score = lambda m: float(torch.log_softmax(m(ids, target[None, :-1])[0], -1)[  # noqa: E731
            torch.arange(len(target) - 1), target[1:]].mean())
        expect = score(model) - score(cut)
    assert data["drops"][1][1] == pytest.approx(expect, abs=1e-4)
    assert [d["what"] for d in data["deletions"]] == ["residual", "norm", "ffn", "attention", "position"]


def test_hf_folder_and_minilm(monkeypatch, capsys, tmp_path):
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

    words = [f"w{i}" for i in range(40)]
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="w0"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    hf = GPT2LMHeadModel(GPT2Config(vocab_size=40, n_embd=16, n_head=2, n_layer=2, n_positions=16)).eval()
    hf.save_pretrained(tmp_path / "gpt2")
    PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="w0").save_pretrained(tmp_path / "gpt2")
    code, out, err = run_cli(monkeypatch, capsys, "lens", "--model", str(tmp_path / "gpt2"), "w3 w5 w7 w9",
                             "--json", str(tmp_path / "g.json"))
    assert code == 0, err
    data = json.loads((tmp_path / "g.json").read_text())
    with torch.no_grad():
        ref = hf(torch.tensor([[3, 5, 7, 9]])).logits[0].argmax(-1)
    assert [t[0] for t in data["layers"][-1]["top"]] == [words[i] for i in ref]
    code, out, err = run_cli(monkeypatch, capsys, "patch", "--model", "minilm", "the cat chases the dog",
                             "the dog chases the cat", "--hook", "enc.5.out", "--per", "all", "--json",
                             str(tmp_path / "m.json"))
    assert code == 0, err
    assert json.loads((tmp_path / "m.json").read_text())["effects"] == [[pytest.approx(1.0, abs=1e-5)]]


def test_hooks_page_is_current(monkeypatch, capsys, tmp_path):
    code, out, err = run_cli(monkeypatch, capsys, "hooks", "--markdown", str(tmp_path / "hooks.md"))
    assert code == 0, err
    assert (tmp_path / "hooks.md").read_text(encoding="utf-8") == (ROOT / "docs/hooks.md").read_text(encoding="utf-8"), \
        "docs/hooks.md is stale: run `glassformer hooks --markdown docs/hooks.md`"
    golden = (ROOT / "tests/golden/hook_names_encdec_1layer.txt").read_text().split()
    code, out, err = run_cli(monkeypatch, capsys, "hooks", "--arch", "encoder-decoder", "--json")
    rows = json.loads(out)
    assert [r["name"] for r in rows] == golden
    shapes = {r["name"]: r["shape"] for r in rows}
    assert shapes["dec.0.cross_attn.pattern"] == "(batch, head, q_pos[tgt_seq], k_pos[src_seq])"
    assert shapes["enc.0.attn.z"] == "(batch, head, src_seq, d_k)" and shapes["logits"] == "(batch, tgt_seq, vocab)"


@pytest.mark.parametrize("argv,needle", [
    (["lens", "--model", "no/such/dir", "猫"], "neither 'minilm' nor a folder"),
    (["patch", "--model", "minilm", "the cat", "the big black cat"], "same shapes"),
    (["ablate-heads", "--model", "minilm", "the cat", "--how", "median"], "--how 'median'"),
    (["hooks", "--arch", "gpt5"], "--arch 'gpt5' is not one of"),
    (["patch", "--model", "minilm", "a b", "c d", "--hook", "dec.*.z"], "no hook point matches"),
])
def test_mistakes_are_one_line(monkeypatch, capsys, argv, needle):
    code, _, err = run_cli(monkeypatch, capsys, *argv)
    assert code == 2 and err.count("\n") == 1 and needle in err, err


def test_decompose_reports_its_error_and_the_attribution_sums_to_the_logit(monkeypatch, capsys, tmp_path, translator):
    path, model, src, tgt = translator
    code, out, err = run_cli(monkeypatch, capsys, "decompose", "--model", str(path), "猫 追 狗", "--position", "1",
                             "--token", "cat", "--minus", "dog", "--json", str(tmp_path / "d.json"))
    assert code == 0, err
    assert "linearised: max |Σ parts − stream|" in out and "σ" in out  # Post-LN: says why, prints the error
    data = json.loads((tmp_path / "d.json").read_text())
    ids = torch.tensor([src.encode("猫 追 狗")])
    target = own_translation(model, ids)
    with torch.no_grad():
        logits = model(ids, target[None, :-1])[0, 1]
    cat, dog = tgt.token_to_id("cat"), tgt.token_to_id("dog")
    assert sum(data["attribution"]["parts"].values()) == pytest.approx(float(logits[cat] - logits[dog]), abs=1e-4)
    assert data["error"] <= 1e-5


def test_a_piece_the_checkpoint_never_saw_is_named_in_one_line(monkeypatch, capsys, translator):
    path = translator[0]
    code, _, err = run_cli(monkeypatch, capsys, "lens", "--model", str(path), "猫 追 ☃")
    assert code == 2 and err.count("\n") == 1, err
    assert "'☃' in '猫 追 ☃' not in the model's source vocabulary" in err


def test_minilm_unknown_words_are_those_hf_reads_as_unk(monkeypatch, capsys, tmp_path):
    """The warning names exactly the words HF's own fast BERT tokenizer (same folder) turns into [UNK]."""
    from transformers import BertTokenizerFast

    from glassformer import pretrained

    text = "the snowman ☃ met 𝔥𝔦 and ☃ again"
    hf = BertTokenizerFast.from_pretrained(str(pretrained.model_dir("minilm")), local_files_only=True)
    enc = hf(text, return_offsets_mapping=True)
    unk = list(dict.fromkeys(text[a:b] for i, (a, b) in zip(enc["input_ids"], enc["offset_mapping"])
                             if i == hf.unk_token_id))
    assert unk  # the oracle found some
    code, _, err = run_cli(monkeypatch, capsys, "lens", "--model", "minilm", text, "--json", str(tmp_path / "l.json"))
    assert code == 0, err
    warnings = [line for line in err.splitlines() if line.startswith("warning:")]
    assert warnings == [f"warning: {', '.join(repr(w) for w in unk)} not in the model's vocabulary"
                        f" ({hf.vocab_size} tokens); read as [UNK]"]
