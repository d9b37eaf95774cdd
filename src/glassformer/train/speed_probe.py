"""The speed probe: how many tokens a minute a model trains on this machine, now (issue 32 §4).

The auto recipe (train/recipe.py) counts the passes over the data a time budget allows, and
decides dropout from them; a constant rate (400k tokens a minute, measured once on an AVX2
machine, stood there before) is some other machine's. So a few seconds of training steps of the
run's own model are timed at start-up, as the trainer takes them: its loss with the run's label
smoothing, the gradient clip, fused AdamW, the run's precision and threads (docs/real-data.md,
"What the speed probe timed": without the clip, the label smoothing and with dropout the run did
not have, the probe's passes were 0.52-1.32x those the runs made; now 0.74-1.17x).
"""

from __future__ import annotations

import time
from typing import Any

PROBE_SECONDS = 1.5
PROBE_CHUNKS = 3  # timed in this many chunks, the median kept (issue 32: 1.5 s probes of one model varied ±15%)


def measure_tokens_per_minute(fields: dict[str, Any], lm: bool, lengths: tuple[int, int], batch: int,
                              threads: int | None, seconds: float = PROBE_SECONDS, bf16: bool = False,
                              vocab: int = 256, label_smoothing: float = 0.0,
                              clip_norm: float | None = 1.0, device: str = "cpu") -> float:
    """Source + target tokens a minute that the model of `fields` trains on here: forward, backward
    and a fused AdamW step on random batches of the data's typical lengths (`lengths`), after one
    step that is not timed, with the trainer's loss (`label_smoothing`) and gradient clip (`clip_norm`:
    the CLI's default of 1.0; None: no clip, as `--clip-norm 0` trains), in the precision the run will
    use (`bf16`: the loop's CPU autocast); the median of PROBE_CHUNKS chunks of `seconds` / PROBE_CHUNKS
    (at most 20 steps each). No padding, so an upper bound on what the bucketed batches give. `vocab`:
    the output layer's rows, where known (an LM's subword vocabulary: 8,000 rows cost a d_model-128
    model more than its blocks); 256 stands for a translator's, whose sizes are not known yet. `device`:
    where the run trains (a GPU run timed on the CPU would count a fraction of its passes)."""
    import contextlib

    import torch

    from ..config import ModelConfig
    from ..nn import build_model

    before = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        src_len, tgt_len = lengths
        # the run's model as given (position encoding, attention path, activation, norm...), but the
        # probe's own vocabulary, special ids and lengths
        own = ("arch", "vocab_size", "tgt_vocab_size", "pad_id", "bos_id", "eos_id", "decoder_start_id", "max_len")
        cfg = ModelConfig(arch="decoder" if lm else "encoder-decoder", vocab_size=vocab, pad_id=0, bos_id=1,
                          eos_id=2, max_len=max(src_len, tgt_len) + 2,
                          **{"norm_position": "pre", **{k: v for k, v in fields.items() if k not in own}})
        with torch.random.fork_rng():  # the run's own seeding is untouched
            torch.manual_seed(0)
            model = build_model(cfg).to(device).train()
            opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
            ids = lambda n: torch.randint(3, vocab, (batch, n), device=device)  # noqa: E731
            kind = device.split(":")[0]
            # a GPU runs the step after the call returns: the clock is read once its work is done
            sync = torch.cuda.synchronize if kind == "cuda" else (lambda: None)

            def step() -> None:
                opt.zero_grad(set_to_none=True)
                cast = torch.autocast(kind, dtype=torch.bfloat16) if bf16 else contextlib.nullcontext()
                with cast:  # the trainer's loss (train/evaluate.py batch_loss), its clip and its AdamW
                    args = dict(targets=ids(tgt_len), reduction="sum", ignore_index=0, label_smoothing=label_smoothing)
                    loss = model(ids(tgt_len), **args) if lm else model(ids(src_len), ids(tgt_len), **args)
                loss.backward()
                if clip_norm:
                    torch.nn.utils.clip_grad_norm_(model.parameters(), clip_norm)
                opt.step()
            step()
            sync()
            rates = []  # steps a second in each chunk: the median, as one busy moment skews a mean
            for _ in range(PROBE_CHUNKS):
                steps, start = 0, time.perf_counter()
                while steps < 1 or (time.perf_counter() - start < seconds / PROBE_CHUNKS and steps < 20):
                    step()
                    steps += 1
                sync()
                rates.append(steps / (time.perf_counter() - start))
    finally:
        torch.set_num_threads(before)
    return 60.0 * sorted(rates)[len(rates) // 2] * batch * (src_len + tgt_len)
