"""§6.3 (the FFN "thinks", stores what attention gathered): the FFN as a memory of facts.

Geva et al. 2021 read each FFN as key–value memories: W_1's columns are keys matched against
the input, W_2's rows the values written back. If that is where a Transformer stores facts,
the number of random facts a model can memorise should grow with d_ff. The task: N random
facts (a, b, c) → v, with a, b, c, v drawn from 64 symbols (no rule to learn, only a table); the
model reads "a b c" and must output v at c. One layer, d_model 64, d_ff ∈ {0 (no FFN), 64, 256};
N = 16384 (at 4096 facts of 2-symbol keys the arms that matter all sat at the ceiling; see N_FACTS);
recall is measured on the N training facts.

Issue 28 §4: an FFN of 4× has 33k more parameters than no FFN, so "it recalls more because it has
more parameters" was not ruled out. Two arms without an FFN spend the same parameters elsewhere
(within ±5% of the 4× arm, checked before training): two more attention layers at the same width
(same embeddings, same head: only where the FFN's parameters go differs; it decides), and one wider
attention layer (d_model 104; a side arm, since its extra width also enlarges the embedding and the
head, which store facts themselves).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch

from .base import SWEEP_SEED, SWEEP_WORDS, Context, Outcome, best_lr, run_identity, run_tagging, seeded, tiny_config
from .ffn import _model
from .report import line_plot
from .runner import IGNORE, TrainSpec
from .synthetic import FIRST_SYMBOL
from .verdict import Check, Variant

ID = "ffn-capacity"
SECTION = "seed 000 §6.3; seed 003 §5"
CLAIM = ("Attention finds the relations, the FFN 'thinks' about them: the expand–activate–compress "
         "FFN is where features are recombined and knowledge is stored (seed 003 §5: without the "
         "FFN a Transformer is only a relevance search engine), so its width sets how much a "
         "model can hold.")
SEEDS = 5
SYMBOLS = 64
# Issue 28: at N = 4096 facts of 2-symbol keys (all the keys there are) the FFN arm and the matched
# attention-only arm both recalled ~99.6%, the task's ceiling, so the check was not tested. Keys of 3
# symbols allow 262,144 facts. A pilot on 2026-12-03 (seed 0, one run per point, lr 3e-3, before any
# full run of this design) put both 58k-parameter arms' capacity at ~7-8k facts: N = 8192
# at 6000 steps recalled 0.948 (d_ff = 4×) and 0.958 (3 attention layers), near the ceiling again;
# N = 16384 at 8000 steps 0.387 and 0.431, far from it and ~62 passes over the table. So N = 16384
# and 8000 steps, fixed here before the full run.
KEY_LEN = 3
N_FACTS = 16384
MATCH = 0.05  # a matched arm's parameter count within ±5% of the 4× arm's
# δ of "the FFN beats a parameter-matched attention-only model": 5% of the N facts, pre-registered here
# before the first full run with these arms
MATCHED_DELTA = 0.05
FFN4, DEEP, WIDE = "d_ff=4×", "no FFN, 3 layers (matched)", "no FFN, d_model 104 (matched)"
# arm -> (n_layers, d_model, d_ff multiple of d_model; 0: the FFN sublayer removed)
ARMS = {"no FFN": (1, 64, 0), "d_ff=1×": (1, 64, 1), FFN4: (1, 64, 4), DEEP: (3, 64, 0), WIDE: (1, 104, 0)}


@dataclass(frozen=True)
class FactsTask:
    """N random facts key -> v; a row is the key's `key_len` symbols, the target v at its last one."""

    n_facts: int
    seed: int
    n_symbols: int = SYMBOLS
    key_len: int = KEY_LEN  # symbols per key: at most n_symbols ** key_len distinct facts

    @property
    def vocab_size(self) -> int:
        return FIRST_SYMBOL + self.n_symbols

    @property
    def chance(self) -> float:
        return 1.0 / self.n_symbols

    def table(self) -> tuple[torch.Tensor, torch.Tensor]:
        if self.n_facts > self.n_symbols ** self.key_len:
            raise ValueError(f"{self.n_facts} facts need more than the {self.n_symbols ** self.key_len} distinct keys "
                             f"of {self.key_len} symbols over {self.n_symbols}")
        gen = torch.Generator().manual_seed(self.seed)
        keys = torch.randperm(self.n_symbols ** self.key_len, generator=gen)[:self.n_facts]  # distinct keys
        digits = [(keys // self.n_symbols ** i) % self.n_symbols for i in reversed(range(self.key_len))]
        ids = torch.stack(digits, 1) + FIRST_SYMBOL
        values = torch.randint(0, self.n_symbols, (self.n_facts,), generator=gen) + FIRST_SYMBOL
        targets = torch.full_like(ids, IGNORE)
        targets[:, -1] = values  # read at the key's last symbol, after the whole key
        return ids, targets

    def sampler(self, batch_size: int, seed: int):
        ids, targets = self.table()
        gen = torch.Generator().manual_seed(seed)

        def next_batch(step):
            pick = torch.randint(0, self.n_facts, (batch_size,), generator=gen)
            return ids[pick], targets[pick]
        return next_batch

    def all_facts(self, batch_size: int = 1024) -> list[tuple]:
        ids, targets = self.table()
        return [(ids[i:i + batch_size], targets[i:i + batch_size]) for i in range(0, self.n_facts, batch_size)]


def config(arm: str):
    n_layers, d_model, mult = ARMS[arm]
    return tiny_config(FIRST_SYMBOL + SYMBOLS, n_layers=n_layers, d_model=d_model, d_ff=max(mult, 1) * d_model)


def make(arm: str):
    """The model of one arm, built fresh on each call ("no FFN": the sublayer removed, `ffn._model`)."""
    return lambda: _model(config(arm), ARMS[arm][2] > 0)


def parameters(arm: str) -> int:
    return sum(p.numel() for p in make(arm)().parameters())


def run(ctx: Context) -> Outcome:
    sizes = ctx.pick((256,), (N_FACTS,))
    spec = TrainSpec(steps=ctx.pick(50, 8000), batch_size=128, lr=3e-3, warmup=ctx.pick(10, 100), weight_decay=0.0)
    params = {arm: parameters(arm) for arm in ARMS}
    for arm in (DEEP, WIDE):  # the design, before any training
        if abs(params[arm] / params[FFN4] - 1) > MATCH:
            raise ValueError(f"{arm}: {params[arm]} parameters, not within {MATCH:.0%} of {FFN4}'s {params[FFN4]}")
    variants, lrs, means = [], {}, {}
    for arm in ARMS:
        key = arm.split(" (")[0].replace(" ", "_").replace(",", "")
        lrs[arm] = best_lr(ctx, key, config(arm), FactsTask(sizes[-1], seed=SWEEP_SEED), spec, make(arm))
        for n in sizes:
            recalls = []
            for seed in ctx.seeds:
                task = FactsTask(n, seed=seed)

                def one_run():
                    r = run_tagging(config(arm), task, replace(spec, lr=lrs[arm]), seed, {"facts": task.all_facts()},
                                    model=seeded(make(arm), seed))
                    return {"recall": r.metrics["facts"]["accuracy"]}
                facts = {"facts": task.all_facts()}
                identity = run_identity(config(arm), task, replace(spec, lr=lrs[arm]), seed, facts)
                recalls.append(ctx.memo(f"{key}.N{n}.s{seed}", one_run, identity, share=False)["recall"])
            ctx.log(f"{arm}, N={n}: recall {[round(x, 3) for x in recalls]} ({params[arm]} parameters)")
            variants.append(Variant(f"{arm}, N={n}", "fraction of the N facts recalled", recalls))
            means[arm] = sum(recalls) / len(recalls)
    big = sizes[-1]
    line_plot(ctx.out_dir / "ffn_capacity.png", {arm: ([params[arm] / 1000], [means[arm]]) for arm in ARMS},
              "parameters (thousands)", "fraction recalled (mean over seeds)",
              f"Memorising N = {big} random facts: FFN or not, at matched size")
    at = lambda arm: f"{arm}, N={big}"  # noqa: E731
    checks = [
        Check(f"N = {big}: an FFN of 4× recalls more facts than no FFN", at(FFN4), at("no FFN"),
              True, 0.1, ceiling=0.9, published="Geva et al. 2021: FFN layers act as key–value memories"),
        Check(f"N = {big}: an FFN (4×) recalls more facts than a parameter-matched attention-only model "
              "(3 attention layers, no FFN)", at(FFN4), at(DEEP), True, MATCHED_DELTA, ceiling=1 - MATCHED_DELTA),
        Check(f"N = {big}: d_ff = 4× recalls more than d_ff = 1×", at(FFN4), at("d_ff=1×"),
              True, 0.05, main=False, ceiling=0.95),
        Check(f"N = {big}: an FFN (4×) recalls more facts than a parameter-matched wider attention-only model "
              "(d_model 104, no FFN)", at(FFN4), at(WIDE), True, MATCHED_DELTA, main=False,
              ceiling=1 - MATCHED_DELTA),
    ]
    counts = "; ".join(f"{arm} {params[arm]:,}" + (f" ({params[arm] / params[FFN4] - 1:+.1%} of {FFN4})"
                                                     if arm in (DEEP, WIDE) else "") for arm in ARMS)
    setup = (f"Decoder-only models, 4 heads, Post-LN, embed_scale on; N random facts (a, b, c) → v over {SYMBOLS} "
             f"symbols (chance {1 / SYMBOLS:.3f}), a fresh table per seed; {spec.steps} AdamW steps of batch "
             f"{spec.batch_size} sampled from the N facts, {SWEEP_WORDS}, on "
             f"a table of its own: {lrs}; no weight decay; recall = accuracy on all N facts. 'No FFN' removes the "
             f"FFN sublayer (the residual passes the attention output on). Parameters: {counts}.")
    notes = ("Facts are random, so nothing generalises: recall measures storage. Without an FFN the embeddings, "
             "attention and output head still store some facts. The 3-layer attention-only arm decides the "
             "parameter question: same width, same embeddings and head as the 4× arm, with the FFN's parameters "
             "given to two more attention layers instead. The wider arm (d_model 104) is a side arm: its "
             "parameters go partly into the embedding and the head, which are themselves a lookup table.")
    return Outcome(variants, checks, setup, plots=[("ffn_capacity.png", "Facts recalled against parameters, per arm")],
                   notes=notes)
