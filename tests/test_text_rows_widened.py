"""`real-pe` and `real-norm` at the text rows' width (issue 28 §2 and §4): real-pe's loss at 4L is taken on
the positions past the training length only; an arm a row does not require to train (real-pe's `none`,
which plateaus far above the 4-gram; real-norm's Post-LN without warmup, whose failure is the claim) is
left out of the quality gate by name and with its reason, not silently."""

from __future__ import annotations

from types import SimpleNamespace

import torch
import torch.nn.functional as F

from glassformer.experiments import base, real_norm, real_pe, text_task
from glassformer.experiments.ngram import text_baselines
from glassformer.experiments.runner import IGNORE, evaluate_tagging
from glassformer.experiments.text_task import CharTextTask, beyond_batches, text_gate


def test_the_loss_past_the_training_length_is_the_mean_over_those_positions_only():
    torch.manual_seed(0)
    L, n, vocab = 8, 32, 11
    ids = torch.randint(3, vocab, (3, n))
    targets = torch.randint(3, vocab, (3, n))
    targets[1, 20:] = IGNORE  # a padded row stays padded
    logits = torch.randn(3, n, vocab)
    model = _Fixed(logits)
    got = evaluate_tagging(model, beyond_batches([(ids, targets)], L))["loss"]
    # by hand: the cross-entropy of every position t >= L that has a target, averaged
    keep = torch.zeros_like(targets, dtype=torch.bool)
    keep[:, L:] = True
    keep &= targets != IGNORE
    want = F.cross_entropy(logits[keep], targets[keep]).item()
    assert abs(got - want) < 1e-6
    whole = evaluate_tagging(model, [(ids, targets)])["loss"]
    assert abs(whole - want) > 1e-3  # the positions < L changed the whole-window mean
    assert int((targets[:, :L] != IGNORE).sum()) > 0  # and the input batches are left as they were


class _Fixed(torch.nn.Module):
    def __init__(self, logits):
        super().__init__()
        self.logits = logits

    def forward(self, ids):
        return self.logits


def test_the_row_scores_4L_past_L_and_L_on_every_position(monkeypatch):
    seen = {}

    def fake_run(cfg, task, spec, seed, evals=None, model=None, first_layer=None):
        seen.update(evals)
        return SimpleNamespace(metrics={k: {"loss": 1.0} for k in evals}, result=SimpleNamespace(diverged=False))
    monkeypatch.setattr(base, "run_tagging", fake_run)
    ctx = base.Context(quick=True, seeds=[0], out_dir=None, log=lambda s: None)
    task = CharTextTask()
    L = task.seq_len
    text_task.run_arms(ctx, {"sinusoidal": (text_task.text_config(task.vocab_size), None)}, text_task.text_spec(ctx),
                       (L, 4 * L), task, beyond=True)
    (ids_l, t_l), = seen[str(L)][:1]
    assert bool((t_l != IGNORE).all())  # at L every position counts
    for ids, t in seen[str(4 * L)]:
        assert ids.shape[1] == 4 * L
        assert bool((t[:, :L] == IGNORE).all()) and bool((t[:, L:] != IGNORE).all())


def test_an_arm_left_out_of_the_gate_is_named_with_its_mean_and_reason():
    bar = text_baselines()[3]  # the character 4-gram
    losses = {"sinusoidal": {64: [bar - 0.1] * 3}, "none": {64: [2.3, 2.4, 2.5]}}
    assert text_gate(losses, 64).startswith("failed:")
    gate = text_gate(losses, 64, {"none": "it plateaus"})
    assert gate.startswith("met:") and "not required of `none` (2.400 here): it plateaus" in gate
    assert "of every arm but the 1 named after it below" in gate and "every arm's mean" not in gate
    losses["rope"] = {64: [bar + 0.01] * 3}  # an arm the gate does require still fails it
    assert text_gate(losses, 64, {"none": "it plateaus"}).startswith("failed:")


def test_real_pe_is_at_the_common_width_and_leaves_out_only_none():
    assert real_pe.spec is text_task.text_spec
    assert set(real_pe.GATE_LEFT_OUT) == {"none"}


def test_real_pe_sizes_only_the_learned_table_so_its_sinusoidal_arm_is_the_common_model():
    """max_len sizes a learned table only; the sinusoidal arm is then the text rows' common model (real-heads'
    h = 8, real-ffn's d_ff 4×) and shares its rate sweep through the run archive instead of training it again."""
    v, L = 117, 64
    assert real_pe.pe_config(v, "sinusoidal", L) == text_task.text_config(v)
    assert real_pe.pe_config(v, "learned", L).max_len == 4 * L
    assert all(real_pe.pe_config(v, pe, L).max_len == text_task.text_config(v).max_len
               for pe in real_pe.ENCODINGS if pe != "learned")


def test_real_norm_leaves_out_only_the_arm_its_main_checks_expect_to_lose(monkeypatch):
    built = []

    def fake_arms(ctx, arms, spec, lengths, task=None, beyond=False):
        built.extend((name, cfg, spec) for name, (cfg, _) in arms.items())
        return {name: {lengths[0]: [1.7, 1.7]} for name in arms}
    monkeypatch.setattr(real_norm, "run_arms", fake_arms)
    ctx = base.Context(quick=False, seeds=[0, 1], out_dir=None, log=lambda s: None)
    outcome = real_norm.run(ctx)
    assert {n for n, _, _ in built} == {"Post-LN, warmup", "Pre-LN, warmup", "Post-LN, no warmup", "Pre-LN, no warmup"}
    assert all(cfg.d_model == text_task.D_MODEL and cfg.n_layers == real_norm.DEPTH for _, cfg, _ in built)
    assert all(spec.steps == real_norm.STEPS for _, _, spec in built)
    [left_out] = real_norm.GATE_LEFT_OUT
    assert all(c.worse == left_out for c in outcome.checks if c.main)
    assert outcome.gate.startswith("met:") and f"not required of `{left_out}`" in outcome.gate


def test_real_ffn_reads_its_gate_on_the_arm_the_claim_is_about(monkeypatch):
    """real-ffn leaves out of its gate exactly the arms its checks say are weaker (no FFN, d_ff 1×), each with
    what twice the budget gave it; the d_ff 4× arm is still required: above the 4-gram, the row fails it."""
    from glassformer.experiments import real_ffn
    bar = text_baselines()[3]
    given = {"no FFN": 1.93, "d_ff=1×": 1.84, "d_ff=4×": bar - 0.09}

    def fake_arms(ctx, arms, spec, lengths, task=None, beyond=False):
        return {name: {lengths[0]: [given[name]] * 2} for name in arms}
    monkeypatch.setattr(real_ffn, "run_arms", fake_arms)
    ctx = base.Context(quick=False, seeds=[0, 1], out_dir=None, log=lambda s: None)
    outcome = real_ffn.run(ctx)
    assert set(real_ffn.GATE_LEFT_OUT) == {c.worse for c in outcome.checks}
    assert outcome.gate.startswith("met:")
    assert "not required of `no FFN` (1.930 here)" in outcome.gate and "10,000 steps" in outcome.gate
    given["d_ff=4×"] = bar + 0.01
    assert real_ffn.run(ctx).gate.startswith("failed:")
