"""What a forward pass pays when derived weight copies are not kept (nn/prepared.py, issue 27).

Outside a `prepared(model)` scope every fast-path call rebuilds the fused W_QKV = [W_Q | W_K | W_V]
(one cat of the per-head parameters); inside one it is built once. This times the same eval forward
both ways, interleaved in one process (bench/harness.py's ABBA rule), for three sizes, plus one
module-path decoding step at batch 1 (an encoder-decoder's, the path translation takes), where the
rebuilt copy is a larger share of the work:

    .venv/bin/python bench/prepared_cost.py            # prints one row per case, as markdown
"""

from __future__ import annotations

import torch

from glassformer.bench.harness import interleaved
from glassformer.config import ModelConfig
from glassformer.nn import build_model
from glassformer.nn.prepared import prepared

CASES = [  # (label, model config fields, batch, tokens)
    ("recipe size: d_model 128, 4+4 layers", dict(d_model=128, n_heads=4, n_layers=4, d_ff=512), 64, 24),
    ("d_model 256, 4+4 layers", dict(d_model=256, n_heads=4, n_layers=4, d_ff=1024), 64, 24),
    ("Marian size: d_model 512, 6+6 layers", dict(d_model=512, n_heads=8, n_layers=6, d_ff=2048), 16, 24),
]


def _forward(model, src, tgt):
    with torch.inference_mode():
        return model(src, tgt)


def _step(model, memory, tgt, cache):
    with torch.inference_mode():
        cache.length = 0  # overwrite the same position: one step's work every call
        return model.decode(tgt, memory, cache=cache)


def main() -> None:
    torch.manual_seed(0)
    print("| case | kept (ms) | rebuilt every call (ms) | cost of rebuilding |")
    print("|---|---:|---:|---:|")
    for label, fields, batch, n in CASES:
        model = build_model(ModelConfig(arch="encoder-decoder", vocab_size=8000, dropout=0.0, **fields)).eval()
        src = torch.randint(4, 8000, (batch, n))
        tgt = torch.randint(4, 8000, (batch, n))
        rows = {"forward": (lambda: _forward(model, src, tgt)), }
        with torch.inference_mode():
            memory, _ = model.encode(src[:1])
        cache = model.new_cache(4)
        rows["decode step, batch 1"] = lambda: _step(model, memory, tgt[:1, :1], cache)
        for what, fn in rows.items():
            def kept(fn=fn):
                with prepared(model):
                    for _ in range(10):
                        fn()

            def rebuilt(fn=fn):
                for _ in range(10):
                    fn()
            t = interleaved({"kept": kept, "rebuilt": rebuilt}, repeats=9, warmup=2)
            a, b = t["kept"].median / 10, t["rebuilt"].median / 10
            print(f"| {label}, {what} ({batch if what == 'forward' else 1} × {n if what == 'forward' else 1}) "
                  f"| {a * 1e3:.3f} | {b * 1e3:.3f} | {b / a - 1:+.1%} |")


if __name__ == "__main__":
    main()
