"""`glassformer export` on runs trained by `glassformer train` (a few steps each, tiny widths).

Each run keeps what its task and recipe choose (Pre-/Post-LN, interleaved sinusoids, × sqrt(d_model),
tied or separate embeddings, separate source and target vocabularies); only the widths are shrunk.
The exported folder is read back with transformers' Auto classes and AutoTokenizer, which are the
independent reference: ids of every training sentence, logits on the held-out split, and generate().
"""

import json
import shutil

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoModelForSeq2SeqLM, AutoTokenizer

from cli_helpers import run
from export_helpers import held_out, train_runs
from glassformer.errors import InputError
from glassformer.interop import export_folder
from glassformer.train.checkpoint import load_checkpoint
from glassformer.train.config import TrainConfig
from glassformer.train.tasks import raw_splits

pytestmark = pytest.mark.usefixtures("one_thread")

TOL = 1e-5
FAMILY = {"zh-en": "marian", "tsv-auto": "pegasus", "tsv-paper": "marian", "lm-auto": "llama", "lm-paper": "openai-gpt",
          "lm-layernorm": "gpt2"}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    return train_runs(tmp_path_factory.mktemp("runs"), FAMILY)


def _held_out_and_train(ck):
    return held_out(ck, 6), raw_splits(TrainConfig.from_dict(ck.meta["train_config"]))["train"]


@pytest.mark.parametrize("name", FAMILY)
def test_exported_run_equals_ours_in_transformers(name, runs, tmp_path, monkeypatch, capsys):
    out = tmp_path / "hf"
    code, stdout, err = run(monkeypatch, capsys, "export", "--ckpt", str(runs[name]), "--format", "hf", "--out", str(out))
    assert code == 0, err
    family = FAMILY[name]
    assert f"family: {family}" in stdout
    report = json.loads((out / "glassformer_export.json").read_text())
    assert report["family"] == family
    ck = load_checkpoint(runs[name])
    model = ck.model
    test, train = _held_out_and_train(ck)
    tok = AutoTokenizer.from_pretrained(out)
    if model.config.arch == "decoder":
        _check_lm(model, ck.src_tokenizer, tok, AutoModelForCausalLM.from_pretrained(out).eval(), test, train, name)
    else:
        target = out / "target_tokenizer"
        tgt_tok = AutoTokenizer.from_pretrained(target) if target.exists() else tok
        hf = AutoModelForSeq2SeqLM.from_pretrained(out).eval()
        _check_translator(model, ck.src_tokenizer, ck.tgt_tokenizer, tok, tgt_tok, hf, test, train, name)


def _check_lm(model, ours_tok, tok, hf, test, train, name):
    for line in train:  # AutoTokenizer gives what `glassformer generate` feeds: <bos> + the line's ids
        assert tok(line).input_ids == [ours_tok.bos_id, *ours_tok.encode(line)]
    batch = tok(test, return_tensors="pt", padding=True)
    pad = batch.attention_mask == 0
    with torch.no_grad():
        ref = hf(**batch).logits
        ours = model(batch.input_ids, padding_mask=pad)
    err = (ref - ours)[~pad].abs().max().item()
    print(f"{name}: max abs logit error {err:.2e} on {len(test)} held-out lines")
    assert err <= TOL
    prompt = tok("the ", return_tensors="pt")
    with torch.no_grad():
        assert torch.equal(hf.generate(**prompt), model.generate(prompt.input_ids))


def _check_translator(model, src_ours, tgt_ours, tok, tgt_tok, hf, test, train, name):
    for s, t in train:
        assert tok(s).input_ids == src_ours.encode(s)
        assert tgt_tok(t).input_ids == tgt_ours.encode(t)
    assert tgt_tok.decode(tgt_ours.encode(train[0][1])) == tgt_ours.decode(tgt_ours.encode(train[0][1]))
    sources = [s for s, _ in test]
    batch = tok(sources, return_tensors="pt", padding=True)
    pad = batch.attention_mask == 0
    start = model.config.start_id
    targets = [[start, *tgt_ours.encode(t)] for _, t in test]
    width = max(map(len, targets))
    tgt = torch.tensor([t + [tgt_ours.eos_id] * (width - len(t)) for t in targets])
    with torch.no_grad():
        ref = hf(**batch, decoder_input_ids=tgt).logits[..., :model.config.out_vocab_size]
        ours = model(batch.input_ids, tgt, src_padding_mask=pad)
    err = (ref - ours).abs().max().item()
    print(f"{name}: max abs logit error {err:.2e} on {len(test)} held-out pairs")
    assert err <= TOL
    with torch.no_grad():
        theirs = hf.generate(**batch)  # no arguments: start token, eos, pad ban come from the folder
        mine = model.generate(batch.input_ids, src_padding_mask=pad)
    assert torch.equal(theirs, mine)


# ---- refusals: one line each, nothing written or overwritten ----

def test_existing_out_is_kept_without_force_and_replaced_with_it(runs, tmp_path, monkeypatch, capsys):
    out = tmp_path / "hf"
    out.mkdir()
    (out / "mine.txt").write_text("keep me")
    code, _, err = run(monkeypatch, capsys, "export", "--ckpt", str(runs["lm-auto"]), "--out", str(out))
    assert code == 2 and "already exists" in err and "--force" in err and len(err.strip().splitlines()) == 1
    assert (out / "mine.txt").read_text() == "keep me"
    code, _, err = run(monkeypatch, capsys, "export", "--ckpt", str(runs["lm-auto"]), "--out", str(out), "--force")
    assert code == 0, err
    assert not (out / "mine.txt").exists() and (out / "model.safetensors").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["hf"]  # no temporary or set-aside folder left


@pytest.mark.parametrize("args, words", [
    (["--format", "tflite"], "not one of hf, ctranslate2, onnx"),
    (["--format", "hf", "--int8"], "--int8 applies to --format ctranslate2"),
])
def test_bad_flags_are_one_line(args, words, runs, tmp_path, monkeypatch, capsys):
    code, _, err = run(monkeypatch, capsys, "export", "--ckpt", str(runs["lm-auto"]), "--out", str(tmp_path / "x"), *args)
    assert code == 2 and words in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "x").exists()


def _copy(run_dir, tmp_path):
    ck = tmp_path / "ck"
    shutil.copytree(load_checkpoint(run_dir).path, ck)
    return ck


def test_damaged_checkpoint_is_one_line(runs, tmp_path, monkeypatch, capsys):
    ck = _copy(runs["zh-en"], tmp_path)
    weights = ck / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:len(weights.read_bytes()) // 2])  # cut in half
    code, _, err = run(monkeypatch, capsys, "export", "--ckpt", str(ck), "--out", str(tmp_path / "x"))
    assert code == 2 and "corrupt" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "x").exists()


def test_nan_weights_are_one_line(runs, tmp_path, monkeypatch, capsys):
    from safetensors.torch import load_file, save_file
    ck = _copy(runs["tsv-auto"], tmp_path)
    state = load_file(ck / "model.safetensors")
    name = next(k for k in state if k.endswith("W_1"))
    state[name][0, 0] = float("nan")
    save_file(state, ck / "model.safetensors", metadata={"format": "pt"})
    code, _, err = run(monkeypatch, capsys, "export", "--ckpt", str(ck), "--out", str(tmp_path / "x"))
    assert code == 2 and "NaN" in err and name in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize("existing", [False, True])
def test_interrupted_export_leaves_nothing_behind(existing, runs, tmp_path, monkeypatch):
    out = tmp_path / "hf"
    if existing:
        out.mkdir()
        (out / "old.txt").write_text("the previous export")

    def interrupted(*args, **kwargs):  # Ctrl-C while the tokenizer is written, after the weights
        raise KeyboardInterrupt

    monkeypatch.setattr(export_folder, "to_fast", interrupted)
    ck = load_checkpoint(runs["zh-en"])
    with pytest.raises(KeyboardInterrupt):
        export_folder.save(ck.model, out, "hf", {"src": ck.src_tokenizer, "tgt": ck.tgt_tokenizer}, force=existing)
    assert [p.name for p in tmp_path.iterdir()] == (["hf"] if existing else [])
    if existing:
        assert [p.name for p in out.iterdir()] == ["old.txt"]


def test_library_refuses_an_unknown_format(runs, tmp_path):
    ck = load_checkpoint(runs["lm-auto"])
    with pytest.raises(InputError, match="not one of hf, ctranslate2, onnx"):
        export_folder.save(ck.model, tmp_path / "x", "safetensors")
