"""Which model best/ holds at the end of a run monitored by exact match (train/selection.py): an
earlier best against the last model, decided by McNemar's exact test on the held-out pairs. Checked
against SciPy's binomial test, by hand on several right answers, and on runs whose every evaluated
model is kept here and scored again independently."""

from __future__ import annotations

import json

import pytest
import torch
from scipy.stats import binomtest

from glassformer.nn import build_model
from glassformer.train import TrainConfig, load_checkpoint, train
from glassformer.train.evaluate import evaluate
from glassformer.train.selection import ALPHA, mcnemar_one_sided, right_items, summary

from test_train import TINY, digit_task

pytestmark = pytest.mark.usefixtures("one_thread")

BASE = dict(task="reverse", max_steps=60, eval_every=10, batch_size=16, quiet=True, patience=None, warmup=10,
            eval_size=40, schedule="constant", lr=3e-2)


@pytest.mark.parametrize("only_first,only_second", [(0, 0), (1, 0), (0, 1), (3, 0), (9, 2), (48, 38), (38, 48),
                                                    (30, 12), (120, 80), (500, 440)])
def test_the_p_value_is_scipys_one_sided_binomial_test(only_first, only_second):
    n = only_first + only_second
    want = binomtest(only_first, n, 0.5, alternative="greater").pvalue if n else 1.0
    assert mcnemar_one_sided(only_first, only_second) == pytest.approx(want, rel=1e-9)


def test_right_items_by_hand():
    """A source with two right answers is right on either; a line repeated word for word counts as
    often as it occurs; whitespace does not count."""
    raw = [("read", "R IY D"), ("read", "R EH D"), ("cat", "K AE T"), ("cat", "K AE T"), ("dog", "D AO G")]
    hyps = ["R EH D", "R EH D", "K  AE T", "K  AE T", "D O G"]  # one per line; a source's lines share one
    assert right_items(raw, hyps) == [True, True, True, False]  # read; cat twice; dog


def _records(run_dir):
    return [json.loads(ln) for ln in (run_dir / "metrics.jsonl").read_text().splitlines()]


def _snapshots(every):
    kept = {}

    def keep(step, model, loss):  # the weights each evaluation sees (it runs right after this step)
        if step % every == 0:
            kept[step] = {k: v.detach().clone() for k, v in model.state_dict().items()}
    return kept, keep


def _outputs(weights, data, config, n):
    model = build_model(config)
    model.load_state_dict(weights)
    m = evaluate(model.eval(), data, "valid", limit=n)
    targets = [t for _, t in data.raw["valid"][:n]]  # one right answer per source in these tasks
    return m, [h.split() == t.split() for h, t in zip(m["hypotheses"], targets)]


def _check(run_dir, result, data, snapshots, n):
    """The run's choice, recomputed from its evaluated weights with SciPy; best/ holds the chosen ones."""
    records = _records(run_dir)
    valid = [r for r in records if r["split"] == "valid"]
    best = max(valid, key=lambda r: (r["exact_match"], -r["loss"]))
    last = valid[-1]
    chosen = [r for r in records if r["split"] == "selection"]
    if best["step"] == last["step"]:
        assert not chosen and not result.selection
        return None
    (d,) = chosen
    config = load_checkpoint(run_dir / "checkpoint").config
    _, right_best = _outputs(snapshots[best["step"]], data, config, n)
    _, right_last = _outputs(snapshots[last["step"]], data, config, n)
    only_best = sum(a and not b for a, b in zip(right_best, right_last))
    only_last = sum(b and not a for a, b in zip(right_best, right_last))
    p = binomtest(only_best, only_best + only_last, 0.5, alternative="greater").pvalue if only_best + only_last \
        else 1.0
    assert (d["best_step"], d["last_step"], d["only_best"], d["only_last"]) == \
        (best["step"], last["step"], only_best, only_last)
    assert d["p"] == pytest.approx(p) and d["kept"] == ("best" if p < ALPHA else "last") == result.selection["kept"]
    want = best if d["kept"] == "best" else last
    held = load_checkpoint(run_dir / "best")
    assert held.meta["step"] == want["step"] and result.best["exact_match"] == want["exact_match"]
    for k, v in held.model.state_dict().items():
        assert torch.equal(v, snapshots[want["step"]][k]), k
    assert result.reloaded["equal_to_logged"]  # best/ read back scores what was logged for the chosen model
    return d


def test_a_lead_within_chance_goes_to_the_last_model(tmp_path):
    """A rate held high makes exact match jump about; where an earlier evaluation led, the run's
    choice is recomputed here, and at least one of these seeds gives best/ to the last model."""
    data = digit_task("reverse", n=400)
    decisions = []
    for seed in (6, 7, 8, 11):
        snapshots, keep = _snapshots(BASE["eval_every"])
        out = tmp_path / str(seed)
        result = train(TrainConfig(out=str(out), seed=seed, **BASE), data=data, model_overrides=TINY,
                       callbacks=[keep])
        decisions.append(_check(out, result, data, snapshots, BASE["eval_size"]))
    assert any(d is not None and d["kept"] == "last" for d in decisions), decisions


def test_a_last_model_made_worse_leaves_best_where_it_was(tmp_path):
    """The last steps scramble the weights: the earlier best is right on far more pairs, p is tiny,
    and best/ keeps it."""
    data = digit_task("copy", n=400)
    cfg = dict(BASE, task="copy", seed=5, max_steps=120, eval_every=20, eval_size=100, schedule="wsd", lr=1e-2)
    snapshots, keep = _snapshots(cfg["eval_every"])
    gen = torch.Generator().manual_seed(0)

    def scramble(step, model, loss):
        if step == cfg["max_steps"] - 1:
            with torch.no_grad():
                for p in model.parameters():
                    p.add_(torch.randn(p.shape, generator=gen))

    result = train(TrainConfig(out=str(tmp_path), **cfg), data=data, model_overrides=TINY,
                   callbacks=[scramble, keep])
    d = _check(tmp_path, result, data, snapshots, cfg["eval_size"])
    assert d["kept"] == "best" and d["p"] < 1e-4 and d["best_step"] < d["last_step"], d


def test_a_resumed_run_scores_best_from_disk_again(tmp_path):
    """best/'s outputs are not kept across processes: a resumed run scores best/ read from disk. The
    first part's end already chose (its best/ and the score a resumed run must beat are what it kept),
    so the second part compares what best/ held when it resumed with its own last model."""
    data = digit_task("reverse", n=400)
    train(TrainConfig(out=str(tmp_path), seed=11, **{**BASE, "max_steps": 50}), data=data, model_overrides=TINY)
    held = load_checkpoint(tmp_path / "best")
    at_resume = {k: v.clone() for k, v in held.model.state_dict().items()}
    snapshots, keep = _snapshots(BASE["eval_every"])
    result = train(TrainConfig(out=str(tmp_path), seed=11, **BASE), data=data, resume=True, callbacks=[keep])
    (d,) = [r for r in _records(tmp_path) if r["split"] == "selection"]  # the first part's is dropped on resume
    assert (d["best_step"], d["last_step"]) == (held.meta["step"], 60), d  # measured: step 50's, then step 60
    n = BASE["eval_size"]
    _, right_best = _outputs(at_resume, data, held.config, n)
    _, right_last = _outputs(snapshots[60], data, held.config, n)
    assert d["only_best"] == sum(a and not b for a, b in zip(right_best, right_last))
    assert d["only_last"] == sum(b and not a for a, b in zip(right_best, right_last))
    assert result.selection["kept"] == d["kept"]


def test_the_line_says_which_model_and_why():
    d = {"best_step": 7000, "best_exact_match": 0.852, "last_step": 11205, "last_exact_match": 0.842, "n": 500,
         "only_best": 31, "only_last": 26, "p": 0.298, "kept": "last"}
    line = summary(d)
    assert line.startswith("best/ holds the last model (step 11,205, 84.2% exact match), not step 7,000's (85.2%)")
    assert "on 57 of the 500 held-out items" in line and "step 7,000 on 31 and the last on 26" in line
    assert "p = 0.3 ≥ 0.05" in line and "by chance" in line
    kept = summary({**d, "only_best": 40, "only_last": 12, "p": 8e-5, "kept": "best"})
    assert kept.startswith("best/ keeps step 7,000's model (85.2% exact match) over the last (step 11,205, 84.2%)")
    assert "on 52 of the 500" in kept and "p = 8e-05 < 0.05" in kept
    # num-en at its ceiling (measured): both right on every pair, the earlier best by a lower loss alone
    tie = summary({**d, "best_step": 4400, "last_step": 8018, "best_exact_match": 1.0, "last_exact_match": 1.0,
                   "only_best": 0, "only_last": 0, "p": 1.0})
    assert tie == ("best/ holds the last model (step 8,018, 100.0% exact match), not step 4,400's (100.0%): the two "
                   "are right on the same 500 held-out items (p = 1 ≥ 0.05), no lead in exact match: best/ takes the "
                   "model the whole run made (train/selection.py)")


def test_the_printed_recipe_says_what_best_holds():
    """The recipe's printed line on best/ names the rule for a translator, the lowest loss for an LM."""
    from glassformer.train.recipe import choose
    pairs = [("cat", "K AE T"), ("dog", "D AO G")] * 200
    tsv = choose("tsv", {"train": pairs, "valid": pairs[:5], "test": pairs[:5]}, 10, None, tokens_per_minute=400_000)
    assert any("best/ (by exact match: the last model unless an earlier evaluation is significantly better" in why
               for why in tsv.reasons), tsv.reasons
    lines = [f"line {i} of some text" for i in range(400)]
    lm = choose("lm", {"train": lines, "valid": lines[:10], "test": lines[:10]}, 10, None, tokens_per_minute=400_000)
    assert any("best model in best/ (the lowest valid loss)" in why for why in lm.reasons), lm.reasons
