"""A flag that would have no effect in its combination is refused in one line, never silently ignored.

Each case is a call that used to run (or fail with a traceback) while one of its flags did nothing: the
command now names the flag and what would be right; the neighbouring call that means something still runs.
"""

from __future__ import annotations

import json

import pytest

from cli_helpers import run, train_once

TINY = ["--d-model", "32", "--heads", "2", "--layers", "2", "--d-ff", "64", "--threads", "1", "--quiet"]

pytestmark = pytest.mark.usefixtures("one_thread")  # and the threads a command set are restored after it


@pytest.fixture(scope="module")
def rev(tmp_path_factory):
    """A tiny reverse translator (encoder-decoder), 30 steps."""
    out = tmp_path_factory.mktemp("rev") / "run"
    train_once("--task", "reverse", "--out", str(out), "--max-steps", "30", "--eval-every", "30", "--eval-size", "20",
               *TINY)
    return out


@pytest.fixture(scope="module")
def lm(tmp_path_factory):
    """A tiny character language model (2 layers, so head-roles takes it), 30 steps."""
    root = tmp_path_factory.mktemp("lm")
    text = root / "text.txt"
    text.write_text("the cat eats the fish.\nthe dog sees the bird on the hill.\n" * 40, encoding="utf-8")
    train_once("--task", "lm", "--data", str(text), "--recipe", "paper", "--block-size", "32", "--max-steps", "30",
               "--eval-every", "30", "--out", str(root / "run"), *TINY)
    return root / "run"


def refused(monkeypatch, capsys, *args: str, words: tuple[str, ...]) -> str:
    """Run ARGS; assert exit 2 with exactly one `error: ...` line on stderr holding every one of `words`."""
    code, _, err = run(monkeypatch, capsys, *args)
    lines = err.strip().splitlines()
    assert code == 2, (code, err)
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    for w in words:
        assert w in lines[0], (w, lines[0])
    return lines[0]


def works(monkeypatch, capsys, *args: str) -> str:
    code, out, err = run(monkeypatch, capsys, *args)
    assert code == 0, err
    return out


def vocab_size(run_dir) -> int:
    from glassformer.train import load_checkpoint
    return load_checkpoint(run_dir).config.vocab_size


# ---- eval ----

def test_eval_beam_is_refused_for_a_language_model(lm, rev, monkeypatch, capsys):
    refused(monkeypatch, capsys, "eval", "--ckpt", str(lm), "--beam", "3", words=("--beam 3", "translators", "decoder",
                                                                                   "drop --beam"))
    works(monkeypatch, capsys, "eval", "--ckpt", str(lm))
    works(monkeypatch, capsys, "eval", "--ckpt", str(rev), "--beam", "2")


def test_eval_strict_without_data_is_refused(rev, tmp_path, monkeypatch, capsys):
    refused(monkeypatch, capsys, "eval", "--ckpt", str(rev), "--strict", words=("--strict", "--data FILE"))
    data = tmp_path / "pairs.tsv"
    data.write_text("1 2 3\t3 2 1\n4 5\t5 4\n", encoding="utf-8")
    works(monkeypatch, capsys, "eval", "--ckpt", str(rev), "--strict", "--data", str(data))


# ---- generate ----

@pytest.mark.parametrize("flags, shown", [
    (["--top-k", "5"], "--top-k 5"),
    (["--top-p", "0.9"], "--top-p 0.9"),
    (["--seed", "0"], "--seed 0"),  # typed, though it is the default value
    (["--top-k", "5", "--seed", "3"], "--top-k 5 --seed 3"),
])
def test_generate_greedy_refuses_sampling_flags(lm, monkeypatch, capsys, flags, shown):
    base = ["generate", "--ckpt", str(lm), "--prompt", "the", "--max-new-tokens", "4"]
    refused(monkeypatch, capsys, *base, "--temperature", "0", *flags,
            words=("--temperature 0", "greedy", shown, "--temperature above 0"))


def test_generate_greedy_and_sampling_still_run(lm, monkeypatch, capsys):
    base = ["generate", "--ckpt", str(lm), "--prompt", "the", "--max-new-tokens", "4"]
    assert works(monkeypatch, capsys, *base, "--temperature", "0").startswith("the")
    assert works(monkeypatch, capsys, *base, "--temperature", "0.8", "--top-k", "5", "--top-p", "0.9",
                 "--seed", "1").startswith("the")


def test_generate_top_k_above_the_vocabulary_is_refused(lm, monkeypatch, capsys):
    v = vocab_size(lm)
    base = ["generate", "--ckpt", str(lm), "--prompt", "the", "--max-new-tokens", "4"]
    refused(monkeypatch, capsys, *base, "--top-k", str(v + 1), words=(f"--top-k {v + 1}", f"{v} tokens",
                                                                     f"at most {v}"))
    works(monkeypatch, capsys, *base, "--top-k", str(v))


# ---- hooks ----

def test_hooks_arch_with_model_is_refused(lm, monkeypatch, capsys):
    refused(monkeypatch, capsys, "hooks", "--arch", "llama", "--model", str(lm), words=("--arch llama", "--model"))
    rows = json.loads(works(monkeypatch, capsys, "hooks", "--model", str(lm), "--json"))
    assert any(r["name"].startswith("dec.") for r in rows)


@pytest.mark.parametrize("flags, shown", [
    (["--json"], "--json"),
    (["--arch", "t5"], "--arch"),
    (["--model", "minilm"], "--model"),
    (["--arch", "llama", "--json"], "--arch, --json"),
])
def test_hooks_markdown_refuses_what_it_ignores(tmp_path, monkeypatch, capsys, flags, shown):
    page = tmp_path / "hooks.md"
    refused(monkeypatch, capsys, "hooks", "--markdown", str(page), *flags, words=("--markdown", f"drop {shown}"))
    assert not page.exists()
    works(monkeypatch, capsys, "hooks", "--markdown", str(page))
    assert page.stat().st_size > 1000


# ---- inspect and head-roles ----

@pytest.mark.parametrize("flags, shown", [
    (["--layer", "1"], "--layer 1"),
    (["--head", "0"], "--head 0"),  # typed, though it is the default value
    (["--layer", "0", "--head", "1"], "--layer 0 --head 1"),
])
def test_inspect_layer_and_head_without_out_are_refused(lm, monkeypatch, capsys, flags, shown):
    refused(monkeypatch, capsys, "inspect", "--model", str(lm), "the cat", *flags, words=(shown, "--out DIR"))


def test_inspect_without_layer_or_head_still_runs(lm, monkeypatch, capsys):
    assert "layer 1:" in works(monkeypatch, capsys, "inspect", "--model", str(lm), "the cat")


@pytest.mark.parametrize("layer", ["99", "2", "-1"])
def test_head_roles_neuron_layer_outside_the_model_is_refused(lm, tmp_path, monkeypatch, capsys, layer):
    refused(monkeypatch, capsys, "head-roles", "--model", str(lm), "--neuron-layer", layer,
            "--report", str(tmp_path / "r.md"), "--figures", str(tmp_path / "f"),
            words=(f"--neuron-layer {layer}", "layers 0..1"))
    assert not (tmp_path / "r.md").exists()


def test_analyze_refuses_a_neuron_layer_outside_the_model(lm):
    from glassformer.errors import InputError
    from glassformer.inspect import load_subject
    from glassformer.inspect.analysis import analyze
    with pytest.raises(InputError, match="neuron layer 5 is outside"):
        analyze(load_subject(str(lm)), ["the cat", "the dog", "a bird"], neuron_layer=5)


# ---- decompose and lens ----

@pytest.mark.parametrize("flags, shown", [
    (["--token", "cat"], "--token cat"),
    (["--minus", "dog"], "--minus dog"),
    (["--token", "cat", "--minus", "dog"], "--token cat --minus dog"),
])
def test_decompose_token_for_a_model_without_a_head_is_refused(monkeypatch, capsys, flags, shown):
    refused(monkeypatch, capsys, "decompose", "--model", "minilm", "the cat", *flags,
            words=("minilm has no output head", shown, "drop"))


@pytest.mark.parametrize("top", ["0", "-2"])
def test_decompose_top_below_one_is_refused_as_lens_does(lm, monkeypatch, capsys, top):
    line = refused(monkeypatch, capsys, "decompose", "--model", str(lm), "the cat", "--top", top, words=())
    again = refused(monkeypatch, capsys, "lens", "--model", str(lm), "the cat", "--top", top, words=())
    assert line == again == f"error: --top {top} must be at least 1"


def test_decompose_top_one_still_runs(lm, monkeypatch, capsys):
    out = works(monkeypatch, capsys, "decompose", "--model", str(lm), "the cat", "--top", "1")
    assert "direct attribution" in out


def test_lens_top_above_the_vocabulary_is_refused(lm, monkeypatch, capsys):
    v = vocab_size(lm)
    refused(monkeypatch, capsys, "lens", "--model", str(lm), "the cat", "--top", str(v + 1),
            words=(f"--top {v + 1}", f"{v} tokens", f"at most {v}"))
    works(monkeypatch, capsys, "lens", "--model", str(lm), "the cat", "--top", str(v))


# ---- walkthrough ----

def test_walkthrough_seed_with_ckpt_is_refused(rev, tmp_path, monkeypatch, capsys):
    refused(monkeypatch, capsys, "walkthrough", "1 2 3", "--ckpt", str(rev), "--seed", "1", "--no-plots",
            words=("--ckpt", "drop --seed"))
    refused(monkeypatch, capsys, "walkthrough", "1 2 3", "--ckpt", str(rev), "--seed", "0", "--d-model", "16",
            "--no-plots", words=("drop --d-model, --seed",))
    out = tmp_path / "w.json"
    works(monkeypatch, capsys, "walkthrough", "1 2 3", "--ckpt", str(rev), "--no-plots", "--quiet", "--json", str(out))
    assert json.loads(out.read_text(encoding="utf-8"))["seed"] is None  # no seed drew these weights


def test_walkthrough_build_refuses_a_seed_with_ckpt(rev):
    from glassformer.errors import InputError
    from glassformer.walkthrough import build
    with pytest.raises(InputError, match="drop --seed"):
        build("1 2 3", seed=0, ckpt=str(rev))
    assert build(None)["seed"] == 0  # the seed model's default


def test_walkthrough_out_with_no_plots_is_refused(tmp_path, monkeypatch, capsys):
    refused(monkeypatch, capsys, "walkthrough", "--out", str(tmp_path / "pics"), "--no-plots",
            words=("--out", "--no-plots", "drop --out"))
    assert not (tmp_path / "pics").exists()


def test_walkthrough_that_produces_nothing_is_refused(monkeypatch, capsys):
    for extra in ([], ["--lang", "zh"], ["--max-cols", "4"]):
        refused(monkeypatch, capsys, "walkthrough", "--quiet", "--no-plots", *extra,
                words=("--quiet --no-plots", "nothing", "--json"))


@pytest.mark.parametrize("flags, shown", [
    (["--lang", "zh"], "--lang zh"),
    (["--max-cols", "4"], "--max-cols 4"),
    (["--lang", "en", "--max-cols", "4"], "--lang en --max-cols 4"),
])
def test_walkthrough_lang_and_max_cols_with_no_steps_shown_are_refused(tmp_path, monkeypatch, capsys, flags, shown):
    args = ["walkthrough", "--quiet", "--no-plots", "--json", str(tmp_path / "w.json")]
    refused(monkeypatch, capsys, *args, *flags, words=(shown, "--quiet", "--markdown FILE"))
    assert not (tmp_path / "w.json").exists()
    works(monkeypatch, capsys, *args, *flags, "--markdown", str(tmp_path / "w.md"))
    assert (tmp_path / "w.md").stat().st_size > 1000


# ---- bench, case-study, serve, export-html ----

def test_bench_notes_without_md_is_refused(tmp_path, monkeypatch, capsys):
    notes = tmp_path / "notes.md"
    notes.write_text("measured on a quiet core\n", encoding="utf-8")
    import glassformer.bench as bench_mod  # a regression fails here, not after minutes of benchmarks
    monkeypatch.setattr(bench_mod, "run_all", lambda **kw: pytest.fail("the benchmarks ran"))
    refused(monkeypatch, capsys, "bench", "--notes", str(notes), words=("--notes", "--md FILE"))


def test_case_study_run_with_ckpt_is_refused(rev, tmp_path, monkeypatch, capsys):
    refused(monkeypatch, capsys, "case-study", "--ckpt", str(rev), "--run", str(tmp_path / "train-here"),
            words=("--run", "--ckpt", "drop --run"))


@pytest.mark.parametrize("host", [None, "localhost", "::1"])
def test_serve_allow_remote_on_loopback_is_refused(monkeypatch, capsys, host):
    import glassformer.commands.serve as serve_mod
    monkeypatch.setattr(serve_mod, "serve_forever", lambda app, sock: pytest.fail("the server started"))
    args = ["serve", "--allow-remote"] + (["--host", host] if host else [])
    refused(monkeypatch, capsys, *args, words=("--allow-remote", f"--host {host or '127.0.0.1'}",
                                               "drop --allow-remote"))


def test_export_html_runs_without_a_run_model_is_refused(tmp_path, monkeypatch, capsys):
    runs = tmp_path / "runs"
    runs.mkdir()
    page = tmp_path / "page.html"
    for model in ([], ["--model", "walkthrough"]):
        refused(monkeypatch, capsys, "export-html", "--runs", str(runs), "--out", str(page), *model,
                words=("--runs", "run:<folder>"))
    assert not page.exists()
    works(monkeypatch, capsys, "export-html", "--out", str(page))
    assert page.stat().st_size > 1000
