"""The train / translate / generate / eval commands, end to end, and their one-line errors."""

from __future__ import annotations

import json
import random

import pytest
import sacrebleu
import torch

from glassformer.generate import generate
from glassformer.train import TrainConfig, load_checkpoint
from glassformer.train.tasks import raw_splits

from cli_helpers import run, train_once

TINY_MODEL = ["--d-model", "32", "--heads", "2", "--layers", "1", "--d-ff", "64", "--norm-position", "pre",
              "--batch-size", "32", "--quiet", "--threads", "1"]
# a warmup no longer than the shortest run that uses it (test_run_safety: 2 steps): a longer one is refused
TINY_FLAGS = [*TINY_MODEL, "--schedule", "cosine", "--lr", "3e-3", "--warmup", "2"]

NOAM = ["--schedule", "noam", "--warmup", "20", "--noam-factor", "2"]


@pytest.fixture(autouse=True)
def _threads():
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def reverse_run(tmp_path_factory):
    """A tiny reverse model trained for 60 steps through the CLI."""
    out = tmp_path_factory.mktemp("rev") / "run"
    train_once("--task", "reverse", "--out", str(out), "--max-steps", "60",
               "--eval-every", "30", "--eval-size", "50", "--seed", "3", *TINY_MODEL, *NOAM)
    return out


def test_model_flags_reach_the_config(reverse_run):
    ck = load_checkpoint(reverse_run)
    c = ck.config
    assert (c.d_model, c.n_heads, c.n_layers, c.d_ff, c.norm_position) == (32, 2, 1, 64, "pre")
    assert ck.meta["step"] in (30, 60) and ck.meta["task"] == "reverse"
    records = [json.loads(x) for x in (reverse_run / "metrics.jsonl").read_text().splitlines()]
    assert {"train", "valid", "test"} <= {r["split"] for r in records}
    assert (reverse_run / "loss.png").stat().st_size > 10_000


def test_translate_json_gives_one_line_per_input(reverse_run, monkeypatch, capsys):
    code, out, err = run(monkeypatch, capsys, "translate", "--ckpt", str(reverse_run), "--json", "1 2 3", "4 5")
    assert code == 0, err
    rows = [json.loads(line) for line in out.splitlines()]
    assert [r["source"] for r in rows] == ["1 2 3", "4 5"]
    assert all(set(r) == {"source", "translation"} and isinstance(r["translation"], str) for r in rows)


def test_resume_through_the_cli_matches_the_uninterrupted_run(reverse_run, tmp_path, monkeypatch, capsys):
    out = tmp_path / "run"
    base = ["train", "--task", "reverse", "--out", str(out), "--eval-every", "30", "--eval-size", "50",
            "--seed", "3", *TINY_MODEL, *NOAM]  # noam: the rate does not depend on --max-steps
    assert run(monkeypatch, capsys, *base, "--max-steps", "30")[0] == 0
    code, stdout, err = run(monkeypatch, capsys, "train", "--out", str(out), "--resume", "--max-steps", "60", "--quiet")
    assert code == 0, err
    assert "stopped after 60 steps" in stdout
    a = load_checkpoint(reverse_run / "checkpoint").model.state_dict()
    b = load_checkpoint(out / "checkpoint").model.state_dict()
    assert all(torch.allclose(a[k], b[k], atol=1e-6, rtol=0) for k in a)


def _train_eval_translate(monkeypatch, capsys, path, run_dir, *flags):
    """Train on the pairs file `path`, then eval --json and translate its test split: (train's stdout,
    eval's metrics, the translations, the references)."""
    code, stdout, err = run(monkeypatch, capsys, "train", "--task", "tsv", "--data", str(path), "--out",
                            str(run_dir), "--max-steps", "40", "--eval-every", "40", *flags, *TINY_FLAGS)
    assert code == 0, err
    code, out, err = run(monkeypatch, capsys, "eval", "--ckpt", str(run_dir), "--json")
    assert code == 0, err
    metrics = json.loads(out)
    test = raw_splits(TrainConfig(task="tsv", data=str(path), seed=0))["test"]
    code, out, err = run(monkeypatch, capsys, "translate", "--ckpt", str(run_dir), "--json", *[s for s, _ in test])
    hyps = [json.loads(line)["translation"] for line in out.splitlines()]
    assert metrics["n"] == len(test) == len(hyps)
    return stdout, metrics, hyps, [t for _, t in test]


def test_tsv_eval_reports_sacrebleu_of_the_translations(tmp_path, monkeypatch, capsys):
    from glassformer.data.zh_en import zh_en_splits
    pairs = zh_en_splits(seed=0)["train"][:400]
    path = tmp_path / "pairs.tsv"
    path.write_text("".join(f"{s}\t{t}\n" for s, t in pairs), encoding="utf-8")
    run_dir = tmp_path / "run"
    _, metrics, hyps, refs = _train_eval_translate(monkeypatch, capsys, path, run_dir, "--vocab-size", "200")
    assert metrics["bleu"] == pytest.approx(sacrebleu.corpus_bleu(hyps, [refs]).score)
    assert metrics["chrf"] == pytest.approx(sacrebleu.corpus_chrf(hyps, [refs]).score)
    assert metrics["exact_match"] == pytest.approx(sum(h == r for h, r in zip(hyps, refs)) / len(refs))
    code, out, _ = run(monkeypatch, capsys, "eval", "--ckpt", str(run_dir))
    assert code == 0 and "BLEU" in out and "chrF" in out and "exact match" in out


def test_bleu_is_on_characters_where_the_references_are_one_word_each(tmp_path, monkeypatch, capsys):
    """Kana readings, one word per line, three-word dates: sacrebleu's default tokenizer splits at spaces and
    BLEU needs 4-grams, so it read 0 whatever the outputs (kana at 64% exact match, date-fr at 100%: BLEU
    0.0); where under a tenth of the references have 4 words BLEU is on characters, and eval and train say so."""
    from glassformer.train.evaluate import bleu_chrf
    kana = ["いろよっ", "ざんしょみまい", "りそうきょう", "せいぎょぶ"]
    assert sacrebleu.corpus_bleu(kana, [kana]).score == 0.0  # every output right, BLEU 0: the failure
    m = bleu_chrf(kana, [[r] for r in kana])
    assert m["bleu_by"] == "char" and m["bleu"] == pytest.approx(100.0)
    dates = ["5 avril 2052", "20 mars 1966", "3 novembre 1629"]  # date-fr: three words, 100% right, BLEU 0
    assert sacrebleu.corpus_bleu(dates, [dates]).score == 0.0
    assert bleu_chrf(dates, [[r] for r in dates]) == {"bleu": pytest.approx(100.0), "bleu_by": "char",
                                                      "chrf": pytest.approx(100.0)}
    phones = ["R IY D", "K AE T", "S T R IY T", "D AO G"]  # a quarter have 4 words: BLEU on words
    assert bleu_chrf(phones, [[r] for r in phones])["bleu_by"] == "13a"
    rng = random.Random(0)  # end to end: words and their reversal, one word per line
    words = sorted({"".join(rng.choice("abcdefgh") for _ in range(rng.randint(3, 6))) for _ in range(600)})
    path = tmp_path / "words.tsv"
    path.write_text("".join(f"{w}\t{w[::-1]}\n" for w in words), encoding="utf-8")
    run_dir = tmp_path / "run"
    stdout, metrics, hyps, refs = _train_eval_translate(monkeypatch, capsys, path, run_dir)
    assert "BLEU" in stdout and "(on characters)" in stdout
    assert metrics["bleu_by"] == "char"
    assert metrics["bleu"] == pytest.approx(sacrebleu.corpus_bleu(hyps, [refs], tokenize="char").score)
    code, out, _ = run(monkeypatch, capsys, "eval", "--ckpt", str(run_dir))
    assert code == 0 and "(on characters: under a tenth of the references have 4 words)" in out


def test_an_lm_trains_on_its_text_in_order_and_holds_out_runs_of_lines(tmp_path):
    # a text wrapped into lines is read across its line ends: the training lines keep the file's order, and
    # valid/test are 5% each, drawn as runs of consecutive lines (20 lines each here: 400 = 8,000 // 20,
    # in runs of 400 // 20), not single lines whose neighbours train
    lines = [f"line {i:04d} of a paragraph" for i in range(8000)]
    path = tmp_path / "book.txt"
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    raw = raw_splits(TrainConfig(task="lm", data=str(path), seed=0))
    index = {line: i for i, line in enumerate(lines)}
    numbers = {name: [index[line] for line in raw[name]] for name in ("train", "valid", "test")}
    assert len(numbers["valid"]) == len(numbers["test"]) == 400
    assert sorted(numbers["train"] + numbers["valid"] + numbers["test"]) == list(range(8000))
    assert numbers["train"] == sorted(numbers["train"])
    for name in ("valid", "test"):
        held = numbers[name]
        assert held == sorted(held)
        starts = [i for i in held if i - 1 not in held]  # where a run of consecutive lines begins
        assert len(starts) <= 20 and all(i % 20 == 0 for i in starts)


def test_an_lm_checkpoint_from_before_the_ordered_split_is_scored_and_resumed_on_its_own_shuffled_split(
        tmp_path, monkeypatch, capsys):
    # checkpoints record how their text was split ("lm_split"); one saved before that key existed trained on
    # its lines shuffled one by one, and `eval` without --data or `--resume` must rebuild that split, or its
    # "test" lines would be lines it trained on
    import random

    from glassformer.train.tasks import task_for_checkpoint

    lines = [f"line {i:03d} of a paragraph" for i in range(400)]
    path = tmp_path / "book.txt"
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    run_dir = tmp_path / "lm"
    code, _, err = run(monkeypatch, capsys, "train", "--task", "lm", "--data", str(path), "--out", str(run_dir),
                       "--max-steps", "4", "--eval-every", "2", "--block-size", "16", *TINY_FLAGS)
    assert code == 0, err
    meta_path = run_dir / "checkpoint" / "meta.json"
    meta = json.loads(meta_path.read_text())
    assert meta["lm_split"] == "runs"
    ck = load_checkpoint(run_dir / "checkpoint")
    ordered = task_for_checkpoint(ck.meta, ck.src_tokenizer, ck.tgt_tokenizer).raw["test"]
    assert ordered == sorted(ordered) and len(ordered) == 20  # runs of consecutive lines, in order

    for name in ("checkpoint", "best"):  # as saved before the key existed
        old = json.loads((run_dir / name / "meta.json").read_text())
        del old["lm_split"]
        (run_dir / name / "meta.json").write_text(json.dumps(old))
    shuffled = list(lines)  # the old split, by hand: the lines shuffled with the run's seed, test the 2nd 5%
    random.Random(0).shuffle(shuffled)
    ck = load_checkpoint(run_dir / "checkpoint")
    assert task_for_checkpoint(ck.meta, ck.src_tokenizer, ck.tgt_tokenizer).raw["test"] == shuffled[20:40]
    code, out, err = run(monkeypatch, capsys, "eval", "--ckpt", str(run_dir / "checkpoint"), "--json")
    assert code == 0, err
    assert "lines shuffled one by one" in json.loads(out)["data"]
    code, _, err = run(monkeypatch, capsys, "train", "--out", str(run_dir), "--resume", "--max-steps", "6")
    assert code == 0, err
    assert json.loads(meta_path.read_text())["lm_split"] == "shuffled"  # it went on with, and kept, its own split


def test_language_model_generates_and_reports_perplexity(tmp_path, monkeypatch, capsys):
    text = tmp_path / "corpus.txt"
    text.write_text("the cat eats the fish.\nthe dog sees the bird.\n" * 60, encoding="utf-8")
    run_dir = tmp_path / "lm"
    code, _, err = run(monkeypatch, capsys, "train", "--task", "lm", "--data", str(text), "--out", str(run_dir),
                       "--max-steps", "60", "--eval-every", "30", "--block-size", "32", *TINY_FLAGS)
    assert code == 0, err
    code, out, err = run(monkeypatch, capsys, "generate", "--ckpt", str(run_dir), "--prompt", "the ",
                         "--max-new-tokens", "12", "--temperature", "0")
    assert code == 0, err
    assert out.startswith("the ") and len(out.strip()) > len("the")
    # a prompt longer than the 32-character windows it trained on: by default each token reads the last 32
    # (generate(window=32), tested against nanoGPT's cropping loop in test_generate_window.py), --window 0 all
    prompt = "the dog sees the bird.the cat eats the fi"
    ck = load_checkpoint(run_dir)
    tok = ck.tokenizer
    ids = torch.tensor([[tok.bos_id, *tok.encode(prompt)]])
    for flags, window, note in (([], 32, True), (["--window", "0"], None, False), (["--window", "40"], 40, True)):
        code, out, err = run(monkeypatch, capsys, "generate", "--ckpt", str(run_dir), "--prompt", prompt,
                             "--max-new-tokens", "12", "--temperature", "0", *flags)
        assert code == 0, err
        want = generate(ck.model, ids, max_new_tokens=12, strategy="greedy", eos_id=tok.eos_id, window=window)
        assert out.strip() == tok.decode(want[0].tolist()).strip()
        assert (f"read the {window} before it" in err) == note
    code, out, err = run(monkeypatch, capsys, "eval", "--ckpt", str(run_dir), "--data", str(text), "--json")
    assert code == 0, err
    m = json.loads(out)
    assert 1.0 < m["ppl"] < 10.0  # a character alphabet of ~20: far below uniform guessing


BAD_TSV = "猫 吃 鱼\tthe cat eats the fish\nonly one column\n"


@pytest.mark.parametrize("args, words", [
    (["train", "--task", "nope"], "task='nope'"),
    (["train", "--task", "tsv"], "needs a data file"),
    (["train", "--task", "tsv", "--data", "{tmp}/missing.tsv"], "no such file"),
    (["train", "--task", "tsv", "--data", "{tmp}/bad.tsv"], "line 2"),
    (["train", "--task", "lm", "--data", "{tmp}/binary.txt"], "binary"),
    (["train", "--task", "copy", "--norm", "wrongnorm", "--max-steps", "1"], "norm='wrongnorm'"),
    (["train", "--task", "copy", "--d-model", "30", "--heads", "4", "--max-steps", "1"], "not divisible"),
    (["train", "--task", "copy", "--batch-size", "0"], "batch_size=0"),
    (["train", "--out", "{tmp}/empty", "--resume"], "does not exist"),
    (["train", "--task", "copy", "--out", "{tmp}/nan", "--schedule", "constant", "--lr", "1e30", "--max-steps", "8",
      "--d-model", "32", "--heads", "2", "--layers", "1", "--d-ff", "64", "--quiet"], "the loss became nan"),
    (["translate", "--ckpt", "{tmp}/nothing", "猫 吃 鱼"], "does not exist"),
    (["translate", "--ckpt", "{tmp}", "猫 吃 鱼"], "not a glassformer checkpoint"),
    (["generate", "--ckpt", "{tmp}/nothing", "--prompt", "x"], "does not exist"),
    (["eval", "--ckpt", "{tmp}/nothing"], "does not exist"),
])
def test_user_mistakes_are_one_line(tmp_path, monkeypatch, capsys, args, words):
    (tmp_path / "bad.tsv").write_text(BAD_TSV, encoding="utf-8")
    (tmp_path / "binary.txt").write_bytes(b"abc\x00\x01\x02\n")
    code, out, err = run(monkeypatch, capsys, *[a.replace("{tmp}", str(tmp_path)) for a in args])
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and words in lines[0], err
    assert "Traceback" not in err + out


def test_translator_and_lm_commands_are_not_mixed_up(reverse_run, monkeypatch, capsys):
    code, _, err = run(monkeypatch, capsys, "generate", "--ckpt", str(reverse_run), "--prompt", "1 2")
    assert code == 2 and "use `glassformer translate`" in err and len(err.strip().splitlines()) == 1
    code, _, err = run(monkeypatch, capsys, "translate", "--ckpt", str(reverse_run), "")
    assert code == 2 and "empty sentence" in err
    code, _, err = run(monkeypatch, capsys, "translate", "--ckpt", str(reverse_run), "--beam", "0", "1")
    assert code == 2 and "--beam 0" in err


def test_demo_alignment_matches_the_cached_decoder(reverse_run, tmp_path):
    """The demo's heatmap (one traced full pass) equals the attention generate() records step by step."""
    from glassformer.commands.demo import cross_attention, draw_alignment
    from glassformer.generate import generate

    ck = load_checkpoint(reverse_run)
    src = ck.src_tokenizer.encode("1 2 3 4")
    # the demo decodes with translate_ids' limit; the same here, or an unconverged model that never
    # emits <eos> gives the demo more tokens than this call
    ids, attn = generate(ck.model, torch.tensor([src]), max_new_tokens=2 * len(src) + 10, return_cross_attention=True)
    tgt = [i for i in ids[0, 1:].tolist() if i not in (ck.config.eos_id, ck.config.pad_id)]
    weights = cross_attention(ck.model, src, tgt)  # rows: each predicted token, then <eos>
    n = min(weights.shape[0], attn.shape[1])
    assert torch.allclose(weights[:n], attn[0, :n], atol=1e-5)
    assert torch.allclose(weights.sum(-1), torch.ones(weights.shape[0]), atol=1e-5)
    png, looked = draw_alignment(ck, "1 2 3 4", tmp_path / "alignment.png")
    assert png.stat().st_size > 5_000 and [t for t, _ in looked] == [ck.tgt_tokenizer.id_to_token(i) for i in tgt]


def test_translate_strict_refuses_a_word_outside_the_vocabulary(reverse_run, monkeypatch, capsys):
    code, out, err = run(monkeypatch, capsys, "translate", "--ckpt", str(reverse_run), "--strict", "1 X 3")
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "'X' in '1 X 3' not in the model's source vocabulary" in err
