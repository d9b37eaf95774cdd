"""Issue 12 item 4, seed 000 §6 on real text: no FFN, d_ff = 1× and 4× d_model.

At the text rows' common model (text_task: d_model 128, 8 heads, 5,000 steps; until stop 53 d_model
64 and 600 steps, above the character 4-gram gate). The d_ff = 4× arm is the same runs as
`dk-sweet-spot`'s d_k = 16 arm and `real-heads`' h = 8.
"""

from __future__ import annotations

from .base import SWEEP_WORDS, Context, Outcome
from .ffn import _model
from .text_task import D_MODEL, N_HEADS, CharTextTask, rates_words, run_arms, text_config, text_gate, text_spec
from .verdict import Check, Variant

ID = "real-ffn"
SECTION = "seed 000 §6 (issue 12 item 4: real text)"
CLAIM = ("The FFN is where the model stores what it knows (its share of the parameters is large); "
         "d_ff = 4 × d_model gives it room. (Measured on English text.)")
SEEDS = 5
spec = text_spec


def run(ctx: Context) -> Outcome:
    task = CharTextTask()
    L = task.seq_len
    # the arms with an FFN are built from their config alone (make = None), so that they are the runs
    # other rows share; only the FFN-less arm needs its own builder
    one_x = text_config(task.vocab_size, d_ff=D_MODEL)
    arms = {"no FFN": (one_x, lambda: _model(one_x, False)), "d_ff=1×": (one_x, None),
            "d_ff=4×": (text_config(task.vocab_size), None)}
    losses = run_arms(ctx, arms, spec(ctx), (L,), task)
    variants = [Variant(name, "held-out loss (nats/char)", by_len[L]) for name, by_len in losses.items()]
    checks = [
        Check("an FFN (4×) beats no FFN on text", "d_ff=4×", "no FFN", False, 0.05),
        Check("d_ff = 4× beats d_ff = 1×", "d_ff=4×", "d_ff=1×", False, 0.02, main=False,
              published="Vaswani et al. 2017 Table 3 (C): d_ff 1024 PPL 5.12, 2048 4.92, 4096 4.75"),
    ]
    s = spec(ctx)
    setup = (f"Character LM on fortunes-en ({L}-character windows), decoder-only, 2 layers, d_model {D_MODEL}, "
             f"{N_HEADS} heads, Post-LN, sinusoidal, embed_scale on; FFN removed, d_ff {D_MODEL} or {4 * D_MODEL}; "
             f"{s.steps} steps, batch {s.batch_size}, warmup {s.warmup}, {SWEEP_WORDS} (full protocol). "
             f"{rates_words(ctx)} The d_ff = 4× arm is the same runs as dk-sweet-spot's d_k = 16 arm.")
    return Outcome(variants, checks, setup, gate=text_gate(losses, L))
