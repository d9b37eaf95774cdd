"""Issue 12 item 4, seed 000 §6 on real text: no FFN, d_ff = 1× and 4× d_model."""

from __future__ import annotations

from .base import SWEEP_WORDS, Context, Outcome, tiny_config
from .ffn import _model
from .real_heads import spec
from .text_task import CharTextTask, rates_words, run_arms, text_gate
from .verdict import Check, Variant

ID = "real-ffn"
SECTION = "seed 000 §6 (issue 12 item 4: real text)"
CLAIM = ("The FFN is where the model stores what it knows (its share of the parameters is large); "
         "d_ff = 4 × d_model gives it room. (Measured on English text.)")
SEEDS = 5
D_MODEL = 64


def run(ctx: Context) -> Outcome:
    task = CharTextTask()
    L = task.seq_len
    arms = {}
    for name, mult, with_ffn in (("no FFN", 1, False), ("d_ff=1×", 1, True), ("d_ff=4×", 4, True)):
        cfg = tiny_config(task.vocab_size, d_ff=mult * D_MODEL)
        arms[name] = (cfg, lambda cfg=cfg, w=with_ffn: _model(cfg, w))
    losses = run_arms(ctx, arms, spec(ctx), (L,), task)
    variants = [Variant(name, "held-out loss (nats/char)", by_len[L]) for name, by_len in losses.items()]
    checks = [
        Check("an FFN (4×) beats no FFN on text", "d_ff=4×", "no FFN", False, 0.05),
        Check("d_ff = 4× beats d_ff = 1×", "d_ff=4×", "d_ff=1×", False, 0.02, main=False,
              published="Vaswani et al. 2017 Table 3 (C): d_ff 1024 PPL 5.12, 2048 4.92, 4096 4.75"),
    ]
    s = spec(ctx)
    setup = (f"Character LM on fortunes-en ({L}-character windows), decoder-only, 2 layers, d_model {D_MODEL}, "
             f"4 heads, Post-LN, sinusoidal, embed_scale on; FFN removed, d_ff {D_MODEL} or {4 * D_MODEL}; "
             f"{s.steps} steps, batch {s.batch_size}, warmup {s.warmup}, {SWEEP_WORDS} (full protocol). "
             f"{rates_words(ctx)}")
    return Outcome(variants, checks, setup, gate=text_gate(losses, L))
