"""Batch-1 decoding with and without glassformer's own decode kernels (nn/gemv.py, issue 29): ~2 min.

The peer benchmark's two models (random weights, `glassformer.bench.peer`): the Marian-size translator
(d_model 512, 6 + 6 layers, vocabulary 8,000; 24 source tokens, 48 new) and the GPT-2-size LM (d_model
384, 6 layers; prompt 8, 128 new), greedy, in one process, four ways, interleaved (median of 11):

- *all*: the GEMV route where it is fastest, with its epilogue (φ, the residual Adds, Post-LN's
  LayerNorm done by the kernel on its output: `decode_gemm.EPILOGUE`) and the decode step's attention
  by `attend` (nn/attend.cpp, which also writes the step's key and value into the cache:
  `decode_step.OWN_ATTENTION`);
- *SDPA*: the same, attention by torch's scaled_dot_product_attention and the cache written by copy_;
- *no epilogue, SDPA*: the GEMV route's bare products, everything after them as operators;
- *PyTorch only*: the kernel refused (`gemv.usable` answering no): BLAS and oneDNN's routes.

Checks first that all four give Hugging Face's greedy tokens, then prints ms per token, and the route
each decode shape class took.

    .venv/bin/python bench/gemv_ab.py --threads 2
"""

import argparse

import torch

from glassformer.bench.harness import interleaved
from glassformer.bench.peer import EOS, FULL, gpt2_pair, marian_pair
from glassformer.generate import generate
from glassformer.nn import decode_gemm, decode_step, gemv as own
from glassformer.nn.prepared import prepared

ARMS = {"all": (True, True, True), "SDPA": (True, True, False), "no epilogue, SDPA": (True, False, False),
        "PyTorch only": (False, False, False)}  # (the kernel's route allowed, its epilogue, own attention)


def model_and_reference(kind: str, n: int):
    """(our model, the prompt or source, HF's greedy tokens) for one of the peer rows' models."""
    g = torch.Generator().manual_seed(1)
    if kind == "translator":
        ours, hf, _ = marian_pair(FULL)
        ids = torch.randint(2, FULL["marian"]["vocab"] - 1, (1, FULL["src_len"]), generator=g)
        ids[:, -1] = EOS
        ref = hf.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=n, do_sample=False, num_beams=1,
                          min_new_tokens=n)
        # both start with the decoder start token; Marian's generation config forces </s> as HF's last
        # token at max_new_tokens, so n − 1 tokens are compared
        return ours, ids, ref[:, :-1]
    ours, hf, _ = gpt2_pair(FULL)
    ids = torch.randint(1, FULL["gpt2"]["vocab"], (1, FULL["prompt"]), generator=g)
    return ours, ids, hf.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=n, do_sample=False)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=torch.get_num_threads())
    ap.add_argument("--repeats", type=int, default=11)
    args = ap.parse_args()
    if not own.available():
        raise SystemExit("the GEMV kernel is not built here: make setup (python -m glassformer.nn.gemv)")
    torch.set_num_threads(args.threads)
    real = own.usable
    for kind, n in (("translator", FULL["mt_new"]), ("lm", FULL["lm_new"])):
        ours, ids, ref = model_and_reference(kind, n)

        def arm(allowed: bool, epilogue: bool, attention: bool):
            def run():
                own.usable = real if allowed else (lambda *a: False)
                decode_gemm.EPILOGUE, decode_step.OWN_ATTENTION = epilogue, attention
                try:
                    # no stop at </s> (HF: none before n tokens), so every arm makes n tokens
                    return generate(ours, ids, max_new_tokens=n, strategy="greedy", eos_id=None)
                finally:
                    own.usable, decode_gemm.EPILOGUE, decode_step.OWN_ATTENTION = real, True, True
            return run

        arms = {name: arm(*flags) for name, flags in ARMS.items()}
        with torch.inference_mode(), prepared(ours):
            same = {name: torch.equal(run()[:, :ref.shape[1]], ref) for name, run in arms.items()}
            t = interleaved(arms, args.repeats, warmup=1)
        print(f"{kind}, {n} new tokens, {args.threads} threads; tokens = HF's: "
              + ", ".join(f"{name} {ok}" for name, ok in same.items()))
        for name, timing in t.items():
            print(f"  {name:20s} {timing.median / n * 1e3:.3f} ms/token")
    for row in decode_gemm.route_rows():
        print(f"  {row['K']:>5} -> {row['N']:<5} rows {row['rows']}: {row['winner']}")


if __name__ == "__main__":
    main()
