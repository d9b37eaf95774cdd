"""Issue 12 item 4, seed 000 §2.1 on real text: more heads at a fixed width.

The `heads` experiment shows it on a task built to need two patterns; here the same question on
English text (next character, fortunes-en): 1, 8 and 16 heads at d_model 128 (d_k = 128, 16, 8),
Vaswani et al. Table 3 (A)'s comparison of one head with the base model's eight (and with sixteen).
Until stop 53 the row was 1, 4 and 16 heads at d_model 64 and 600 steps, which stopped above the
character 4-gram (issue 28 §2's gate); widened to the text rows' common model (text_task.D_MODEL),
its 8-head arm is the same runs as `dk-sweet-spot`'s d_k = 16 arm.
"""

from __future__ import annotations

from .base import SWEEP_WORDS, Context, Outcome
from .text_task import D_MODEL, CharTextTask, rates_words, run_arms, text_config, text_gate, text_spec
from .verdict import Check, Variant

ID = "real-heads"
SECTION = "seed 000 §2.1 (issue 12 item 4: real text)"
CLAIM = ("Multi-head attention gives the model h independent attention mechanisms, each focusing on a "
         "different aspect; a single head can learn only one kind of pattern. (Measured on English text.)")
SEEDS = 5
HEADS = (1, 8, 16)
spec = text_spec


def run(ctx: Context) -> Outcome:
    task = CharTextTask()
    L = task.seq_len
    arms = {f"h={h}": (text_config(task.vocab_size, n_heads=h), None) for h in HEADS}
    losses = run_arms(ctx, arms, spec(ctx), (L,), task)
    variants = [Variant(name, "held-out loss (nats/char)", by_len[L]) for name, by_len in losses.items()]
    checks = [
        Check("8 heads beat 1 head on text", "h=8", "h=1", False, 0.02,
              published="Vaswani et al. 2017 Table 3 (A): h=1 PPL 5.29 vs h=8 4.92 (BLEU 24.9 vs 25.8)"),
        Check("16 heads (d_k = 8) beat 8 heads (d_k = 16)", "h=16", "h=8", False, 0.02, main=False,
              published="Table 3 (A): h=16 PPL 4.91, h=8 4.92, h=32 5.01: too many heads hurts"),
    ]
    s = spec(ctx)
    setup = (f"Character LM on fortunes-en (Debian's English fortunes, 10% of documents held out), windows of "
             f"{L} characters, vocabulary {task.vocab_size}. Decoder-only, 2 layers, d_model {D_MODEL}, d_ff "
             f"{4 * D_MODEL}, Post-LN, sinusoidal PE, embed_scale on; h in {list(HEADS)}; {s.steps} AdamW steps, "
             f"batch {s.batch_size}, warmup {s.warmup}, {SWEEP_WORDS} (full protocol). {rates_words(ctx)} "
             "The h = 8 arm is the same runs as dk-sweet-spot's d_k = 16 arm and h = 1 its d_k = 128 arm (one "
             "config, spec, seed and test windows: trained once).")
    return Outcome(variants, checks, setup, gate=text_gate(losses, L))
