"""§6.3 (the FFN "thinks", stores what attention gathered): the FFN as a memory of facts.

Geva et al. 2021 read each FFN as key–value memories: W_1's columns are keys matched against
the input, W_2's rows the values written back. If that is where a Transformer stores facts,
the number of random facts a model can memorise should grow with d_ff. The task: N random
facts (a, b) → v, with a, b, v drawn from 64 symbols (no rule to learn, only a table); the model
reads "a b" and must output v at b. One layer, d_model 64, d_ff ∈ {0 (no FFN), 64, 256};
N = 256, 1024, 4096; recall is measured on the N training facts themselves.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .base import Context, Outcome, run_tagging, tiny_config
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
WIDTHS = (("no FFN", 0), ("d_ff=1×", 1), ("d_ff=4×", 4))


@dataclass(frozen=True)
class FactsTask:
    """N random facts (a, b) -> v; a row is [a, b] with the target v at position 1."""

    n_facts: int
    seed: int
    n_symbols: int = SYMBOLS

    @property
    def vocab_size(self) -> int:
        return FIRST_SYMBOL + self.n_symbols

    @property
    def chance(self) -> float:
        return 1.0 / self.n_symbols

    def table(self) -> tuple[torch.Tensor, torch.Tensor]:
        gen = torch.Generator().manual_seed(self.seed)
        keys = torch.randperm(self.n_symbols ** 2, generator=gen)[:self.n_facts]  # distinct (a, b)
        ids = torch.stack([keys // self.n_symbols, keys % self.n_symbols], 1) + FIRST_SYMBOL
        values = torch.randint(0, self.n_symbols, (self.n_facts,), generator=gen) + FIRST_SYMBOL
        targets = torch.full_like(ids, IGNORE)
        targets[:, 1] = values
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


def run(ctx: Context) -> Outcome:
    sizes = ctx.pick((256,), (256, 1024, 4096))
    spec = TrainSpec(steps=ctx.pick(50, 3000), batch_size=128, lr=3e-3, warmup=ctx.pick(10, 100), weight_decay=0.0)
    variants, series = [], {}
    for name, mult in WIDTHS:
        cfg = tiny_config(FIRST_SYMBOL + SYMBOLS, n_layers=1, d_ff=max(mult, 1) * 64)
        means = []
        for n in sizes:
            recalls = []
            for seed in ctx.seeds:
                task = FactsTask(n, seed=seed)

                def one_run():
                    r = run_tagging(cfg, task, spec, seed, {"facts": task.all_facts()}, model=_model(cfg, mult > 0))
                    return {"recall": r.metrics["facts"]["accuracy"], "params": r.params}
                out = ctx.memo(f"{name.replace(' ', '_')}.N{n}.s{seed}", one_run)
                recalls.append(out["recall"])
            ctx.log(f"{name}, N={n}: recall {[round(x, 3) for x in recalls]} ({out['params']} parameters)")
            variants.append(Variant(f"{name}, N={n}", "fraction of the N facts recalled", recalls))
            means.append(sum(recalls) / len(recalls))
        series[f"{name} ({out['params']} params)"] = (list(sizes), means)
    line_plot(ctx.out_dir / "ffn_capacity.png", series, "facts N", "fraction recalled (mean over seeds)",
              "Memorising random facts: 1 layer, d_model 64", logx=True)
    big = sizes[-1]
    checks = [
        Check(f"N = {big}: an FFN of 4× recalls more facts than no FFN", f"d_ff=4×, N={big}", f"no FFN, N={big}",
              True, 0.1, ceiling=0.9, published="Geva et al. 2021: FFN layers act as key–value memories"),
        Check(f"N = {big}: d_ff = 4× recalls more than d_ff = 1×", f"d_ff=4×, N={big}", f"d_ff=1×, N={big}",
              True, 0.05, main=False, ceiling=0.95),
    ]
    setup = (f"Decoder-only model, 1 layer, d_model 64, 4 heads, embed_scale on; N random facts (a, b) → v "
             f"over {SYMBOLS} symbols (chance {1 / SYMBOLS:.3f}), a fresh table per seed; {spec.steps} AdamW "
             f"steps of batch {spec.batch_size} sampled from the N facts, peak lr {spec.lr}, no weight decay; "
             "recall = accuracy on all N facts. 'No FFN' zeroes the FFN sublayer (its parameters are "
             "still counted in the model's size).")
    notes = ("Facts are random, so nothing generalises: recall measures storage. Without an FFN the "
             "embeddings, attention and output head still store some facts.")
    return Outcome(variants, checks, setup, plots=[("ffn_capacity.png", "Facts recalled against N, per FFN width")],
                   notes=notes)
