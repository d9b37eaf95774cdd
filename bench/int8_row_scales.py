"""Would a scale per activation row make the int8 decode step nearer fp32? (issue 29, 2026-12-04)

fbgemm's dynamic int8 product rounds a call's activations with one scale for all its rows. The
variant measured here divides each row by its own max |x| before the call and multiplies the output
back (each row then uses the 8 bits' whole range; the bias is added after). Both are compared with
the fp32 step on the peer benchmark's two models (bench/peer.py, same random weights), teacher-forced
on random tokens for 48 steps at 8 and 64 rows: the mean relative error of the logits and the top-1
agreement. Not kept in nn/precision.py: docs/benchmarks.md has the numbers.

    .venv/bin/python bench/int8_row_scales.py
"""

import torch

from glassformer.bench import peer
from glassformer.nn import decode_step, precision
from glassformer.nn.prepared import derived, prepared

_plain = precision.LowPrecisionGemm._call


def _row_scaled(self, route, x2):
    if route != "fbgemm" or x2.shape[0] == 1:
        return _plain(self, route, x2)
    packed = derived(self.owner, f"int8 fbgemm rows {self.name}", [self.W],
                     lambda: precision._fbgemm_pack(*precision.quantize(self.W), None))
    m = x2.abs().amax(dim=1, keepdim=True).clamp_(min=torch.finfo(x2.dtype).tiny)
    y = torch.ops.quantized.linear_dynamic(x2 / m, packed, not precision.full_range_exact())
    return y.mul_(m) if self.b is None else torch.addcmul(self.b, y, m)


def logits(model, kind: str, rows: int, steps: int, translator: bool) -> torch.Tensor:
    g = torch.Generator().manual_seed(rows)
    seq = torch.randint(2, 7999, (rows, steps), generator=g)
    cache = model.new_cache(steps + 2)
    if translator:
        src = torch.randint(2, 7999, (rows, 24), generator=g)
        src[:, -1] = peer.EOS
        step = decode_step.prepared(model, cache, None, *model.encode(src), precision=kind)
    else:
        step = decode_step.prepared(model, cache, precision=kind)
    return torch.stack([step(seq[:, t], cache).clone() for t in range(steps)])


def main() -> None:
    torch.set_num_threads(1)
    precision.FORCE_INT8 = "fbgemm"
    with torch.inference_mode():
        for name, make in (("lm", peer.gpt2_pair), ("translator", peer.marian_pair)):
            model = make(peer.FULL)[0]
            with prepared(model):
                for rows in (8, 64):
                    ref = logits(model, "fp32", rows, 48, name == "translator")
                    for label, call in (("one scale per call", _plain), ("a scale per row", _row_scaled)):
                        precision.LowPrecisionGemm._call = call
                        q = logits(model, "int8", rows, 48, name == "translator")
                        err = ((q - ref).norm(dim=-1) / ref.norm(dim=-1)).mean().item()
                        top1 = (q.argmax(-1) == ref.argmax(-1)).float().mean().item()
                        print(f"{name}, {rows} rows, {label}: relative error {err:.4f}, top-1 {top1:.4f}", flush=True)
                    precision.LowPrecisionGemm._call = _plain


if __name__ == "__main__":
    main()
