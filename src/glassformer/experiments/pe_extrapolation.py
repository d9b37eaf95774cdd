"""§3.3, §3.5 and seed 003 §3: which positional encodings extrapolate past the training length.

Train on rows of length ≤ L with the rule y_t = x_{t−1} (attend one position back: pure
position information), then test on rows of length L, 2L and 4L. A learned table has 4L rows
but only the first L are ever trained, so its extrapolation is measured rather than refused
(a table shorter than the input refuses with one line; that is tested in tests/test_inputs.py).
`none` (no positional encoding) is the baseline every encoding must beat.
"""

from __future__ import annotations

from .base import Context, Outcome, run_tagging, tiny_config
from .report import line_plot
from .runner import TrainSpec, evaluate_tagging
from .synthetic import TaggingTask
from .verdict import Check, Variant, mean_std

ID = "pe-extrapolation"
SECTION = "seed 000 §3.3, §3.5; seed 003 §3"
CLAIM = ("sin/cos can compute the encoding of a position never seen in training, so a model "
         "trained on positions 0–511 can process 512–1023 (perhaps slightly worse, but it does "
         "not fail completely); a learned position table cannot extrapolate (the model breaks). "
         "RoPE extrapolates better; ALiBi's distance bias works better and supports longer sequences.")

ENCODINGS = ("sinusoidal", "learned", "relative", "rope", "alibi", "none")
TABLE3_E = ("Vaswani et al. 2017 Table 3 (E): learned positional embeddings instead of sinusoids, PPL 4.92 / BLEU 25.7 against 4.92 / 25.8, at the training lengths only")
SEEDS = 5
LAG = 1


def run(ctx: Context) -> Outcome:
    L = ctx.pick(8, 16)
    task = TaggingTask("lag", n_symbols=8, min_len=L // 2, max_len=L, a=LAG)
    spec = TrainSpec(steps=ctx.pick(40, 300), batch_size=32, lr=3e-3, warmup=ctx.pick(10, 50))
    lengths = (L, 2 * L, 4 * L)
    evals = {n: task.batches(ctx.pick(1, 4), 32, seed=500 + n, length=n) for n in lengths}
    variants, acc_series, acc_bands = [], {}, {}
    chance = Variant("chance level", "token accuracy", [task.chance] * len(ctx.seeds))
    for pe in ENCODINGS:
        # the learned table has 4L rows, of which only the first L are ever trained: its
        # extrapolation is measured (the untrained rows are their random initialisation), not refused
        cfg = tiny_config(task.vocab_size, pe=pe, max_len=4 * L)
        accs = {n: [] for n in lengths}
        for seed in ctx.seeds:
            run_ = run_tagging(cfg, task, spec, seed)
            for n in lengths:
                accs[n].append(evaluate_tagging(run_.model, evals[n])["accuracy"])
        ctx.log(f"{pe}: " + ", ".join(f"len {n}: {accs[n]}" for n in lengths))
        for n in lengths:
            variants.append(Variant(f"{pe} @ {n}", "token accuracy", accs[n]))
        means = [mean_std(accs[n]) for n in lengths]
        acc_series[pe] = (lengths, [m for m, _ in means])
        acc_bands[pe] = [s or 0.0 for _, s in means]
    variants.append(chance)
    line_plot(ctx.out_dir / "pe_extrapolation.png", acc_series, "test length (trained on ≤ %d)" % L,
              "token accuracy (y_t = x_{t-1})", "Accuracy against length, per positional encoding",
              logx=True, bands=acc_bands)
    checks = [
        Check("ALiBi beats sinusoidal at 4L", f"alibi @ {4 * L}", f"sinusoidal @ {4 * L}", True, 0.05,
              published="Press et al. 2022: ALiBi trained at L extrapolates to ≫ L; sinusoidal does not"),
        Check("RoPE beats sinusoidal at 4L", f"rope @ {4 * L}", f"sinusoidal @ {4 * L}", True, 0.05),
        Check("sinusoidal extrapolates to 2L better than a learned table (rows ≥ L untrained)",
              f"sinusoidal @ {2 * L}", f"learned @ {2 * L}", True, 0.1, published=TABLE3_E),
        Check("(causal, no PE) the causal mask alone lets a model extrapolate as well as sinusoids at 4L",
              f"none @ {4 * L}", f"sinusoidal @ {4 * L}", True, 0.0, main=False),
        Check("sinusoidal at 2L does not fail completely (above chance)", f"sinusoidal @ {2 * L}",
              "chance level", True, 0.1, main=False),
    ]
    setup = (f"Decoder-only model (d_model 64, 4 heads, 2 layers), task `lag(1)` (y_t = x[t−1], 8 "
             f"symbols), trained on rows of length {L // 2}–{L} for {spec.steps} steps (batch "
             f"{spec.batch_size}, peak lr {spec.lr}); tested on rows of exactly {L}, {2 * L} and "
             f"{4 * L} tokens. The learned table has {4 * L} rows, of which positions ≥ {L} are never trained; "
             "`none` has no positional encoding (a causal model still sees position through its mask).")
    notes = ("Sinusoidal accuracy past the training length measures whether the "
             "unseen sin/cos vectors still work in practice: they can be computed (§3.3), but "
             "the attention weights were only trained on the angles of positions < L.")
    return Outcome(variants, checks, setup,
                   plots=[("pe_extrapolation.png", "Token accuracy at L, 2L, 4L (band: ±1 std)")],
                   notes=notes)
