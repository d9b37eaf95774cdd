"""Greedy decoding: glassformer's decoder-only LM against Hugging Face GPT-2, same random weights.

A 6-layer, 384-wide, 6-head GPT-2 (≈14M parameters with an 8000-token vocabulary) is built from
a config, converted with `interop.from_hf`, and both generate 256 new tokens greedily with a KV
cache, never stopping early. The tokens must be identical: same weights, same argmax. A second
comparison runs glassformer with and without its cache (the cache turns each step from a forward
over the whole prefix into one over the new token, seed 000 §8).

Batch 1 is also held against this machine's own limit, measured in the same run (issue 11): one
matrix-vector pass over all parameters per token (`harness.weight_stream`), timed interleaved with
the decode loop; the fraction is that pass's time per token over the loop's.
"""

from __future__ import annotations

import copy

import torch

from .harness import compare, interleaved, step_weights, top_ops, weight_stream

FULL = dict(n_layer=6, n_embd=384, n_head=6, vocab=8000, prompt=8, new_tokens=256, batches=(1, 8), repeats=3,
            cache_repeats=3)
QUICK = dict(n_layer=2, n_embd=64, n_head=2, vocab=500, prompt=4, new_tokens=12, batches=(1, 2), repeats=2,
             cache_repeats=2)


def gpt2_pair(p: dict):
    from transformers import GPT2Config, GPT2LMHeadModel

    from ..interop import from_hf
    torch.manual_seed(0)
    # no end-of-sequence token: neither side can stop early, both generate every token asked for
    cfg = GPT2Config(n_layer=p["n_layer"], n_embd=p["n_embd"], n_head=p["n_head"], vocab_size=p["vocab"],
                     n_positions=512, bos_token_id=None, eos_token_id=None)
    hf = GPT2LMHeadModel(cfg).eval()
    hf.generation_config.pad_token_id = 0  # required by HF's generate; unused, no row finishes
    return from_hf(hf).eval(), hf


def run(quick: bool = False) -> dict:
    from ..generate import generate

    p = QUICK if quick else FULL
    ours, hf = gpt2_pair(p)
    n = p["new_tokens"]
    out = {"params": {k: v for k, v in p.items() if "repeats" not in k},
           "model_params": sum(t.numel() for t in ours.parameters())}
    g = torch.Generator().manual_seed(1)
    with torch.inference_mode():
        for batch in p["batches"]:
            ids = torch.randint(1, p["vocab"], (batch, p["prompt"]), generator=g)
            decode_of = lambda m: lambda: generate(m, ids, max_new_tokens=n, strategy="greedy", eos_id=None)  # noqa: E731
            ours_fn = decode_of(ours)
            hf_fn = lambda: hf.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=n,  # noqa: E731
                                        do_sample=False, num_beams=1, use_cache=True)
            outs: dict = {}
            res = compare(ours_fn, hf_fn, work=batch * n, repeats=p["repeats"], warmup=0,
                          names=("glassformer", "HF GPT-2"), outputs=outs)
            a, b = outs["glassformer"], outs["HF GPT-2"]
            res["identical_tokens"] = bool(a.shape == b.shape and torch.equal(a, b))
            res["new_tokens"] = int(a.shape[1] - ids.shape[1])
            if batch == p["batches"][0]:
                res["profile"] = top_ops(ours_fn)
            if batch == 1:
                res["bound"] = streaming_bound(ours, decode_of, n, res, p["repeats"])
            out[f"batch_{batch}"] = res
            # the same with one thread: a decode step is a chain of tiny kernels, and on a shared
            # machine every two-thread parallel region can wait for a descheduled thread
            threads = torch.get_num_threads()
            torch.set_num_threads(1)
            try:
                one = compare(ours_fn, hf_fn, work=batch * n, repeats=p["repeats"], warmup=0,
                              names=("glassformer", "HF GPT-2"))
            finally:
                torch.set_num_threads(threads)
            out[f"batch_{batch}_1_thread"] = one
        ids = torch.randint(1, p["vocab"], (1, p["prompt"]), generator=g)
        cached = lambda: generate(ours, ids, max_new_tokens=n, eos_id=None, use_cache=True)  # noqa: E731
        uncached = lambda: generate(ours, ids, max_new_tokens=n, eos_id=None, use_cache=False)  # noqa: E731
        outs = {}
        res = compare(cached, uncached, work=n, repeats=p["cache_repeats"], warmup=0,
                      names=("cache", "no cache"), outputs=outs)
        res["identical_tokens"] = bool(torch.equal(outs["cache"], outs["no cache"]))
        out["cache_vs_no_cache"] = res
    return out


def step_products(model) -> list:
    """The products of one batch-1 decode step of a decoder-only model, in the step's order (per
    layer W_QKV, W_O, W_1, W_2; then the head), each a `_Gemm` on the route the generations before
    measured for it (nn/decode_gemm.py), with an input row of its width."""
    from ..nn.decode_step import DecodeStep
    step = DecodeStep(model)
    gemms = [g for layer in step.layers for g in (layer.qkv, layer.W_O, layer.W_1, layer.W_2)] + [step.head]
    return [(g, torch.randn(1, g.W.shape[0])) for g in gemms]


def streaming_bound(model, decode_of, new_tokens: int, res: dict, repeats: int) -> dict:
    """Batch-1 decoding as a fraction of the weight-streaming bound, both timed interleaved.

    The loop is timed inside one `prepared` scope (nn/prepared.py), as a loaded model decodes:
    what a generation pays once (fused and contiguous weight copies) is not a per-token cost; the
    same generation without the scope, on a copy of the model (scopes are per module), is timed
    too (`decode_s_per_token_unprepared`). `decode_of(model)` gives the generation to time. The pass
    streams only the weights a step reads whole (`harness.step_weights`), by the fastest read this
    machine has (`harness.weight_stream`). Where the last-level cache holds them the pass is not a
    memory bound, and the result says so (`in_cache`).

    Where the time between the pass and the loop goes, measured in the same rounds: the step's
    products alone, one after another on their routes with nothing between them (`step_products`),
    and a sum over each of their matrices in the same order (the pass, cut into the step's pieces).
    The loop minus the products is what lies between them (attention, norms, activation, residual
    adds, Python); the products over the per-matrix sums is how near their kernels read at the
    speed of memory."""
    from ..nn.decode_gemm import last_level_cache_bytes
    from ..nn.prepared import prepared
    kernel, stream = weight_stream(model)

    def passes():  # one pass per generated token: the same work, at the memory's speed
        for _ in range(new_tokens):
            stream()

    twin = copy.deepcopy(model)
    with prepared(model):
        decode_of(model)()  # every product's route measured (the loop's first step does it otherwise)
        products = step_products(model)

        def products_alone():
            for _ in range(new_tokens):
                for gemm, x in products:
                    gemm(x, None)

        def matrix_sums():
            for _ in range(new_tokens):
                for gemm, _x in products:
                    gemm.W.sum()

        t = interleaved({"decode": decode_of(model), "stream": passes, "decode, unprepared": decode_of(twin),
                         "products": products_alone, "matrix sums": matrix_sums},
                        max(repeats, 5), warmup=1)  # at least 5: the sides drift apart over a few seconds
    per_token = {name: timing.median / new_tokens for name, timing in t.items()}
    weight_bytes = 4 * sum(p.numel() for p in step_weights(model))
    l3 = last_level_cache_bytes(default=None)  # the size the decode step itself goes by
    hf_per_token = res["HF GPT-2"]["median_s"] / new_tokens
    # the bound is the fastest read of these bytes measured: one pass over them all, or the same
    # bytes read matrix by matrix in the step's order (on the AVX-512 EPYC the latter was sometimes
    # faster: 0.97 against 1.21 ms, 2026-12-03), so no figure is relative to a slower read
    bound = min(per_token["stream"], per_token["matrix sums"])
    return {"stream_s_per_token": per_token["stream"], "decode_s_per_token": per_token["decode"],
            "decode_s_per_token_unprepared": per_token["decode, unprepared"],
            "stream_GB_per_s": weight_bytes / per_token["stream"] / 1e9, "weight_bytes": weight_bytes,
            "l3_bytes": l3, "in_cache": l3 is not None and weight_bytes <= l3, "stream_kernel": kernel,
            "bound_s_per_token": bound,
            "bound_read": "one pass" if bound == per_token["stream"] else "matrix by matrix",
            "fraction": bound / per_token["decode"],
            "products_s_per_token": per_token["products"], "matrix_sums_s_per_token": per_token["matrix sums"],
            "product_bytes": 4 * sum(gemm.W.numel() for gemm, _x in products),
            "product_routes": sorted({gemm.route for gemm, _x in products}),
            "fraction_unprepared": bound / per_token["decode, unprepared"],
            "hf_fraction": bound / hf_per_token}
