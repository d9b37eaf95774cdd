"""Low-precision weights in the prepared decode step (nn/precision.py, issue 29 §3), against
independent references: the explicit-math model recomputing the whole prefix without a cache, once
with the fp32 weights and once with the weights quantised here by hand (W ≈ s·q per output channel,
or W rounded to bf16). Weights are perturbed away from the initialisation (gains off 1, biases off 0).

Tolerances, relative to the largest |logit| of the step:
- int8 weight-only kernels (int8pack, dequant) against the hand-dequantised model: 1e-4 (float32
  rounding: the same arithmetic);
- fbgemm (activations rounded to 8 bits too, 7 where the CPU's sums could saturate) against the
  hand-dequantised model and against fp32: 12% (measured up to 8.5%: these perturbed random models amplify rounding);
- the weight-only int8 kernels against fp32: 8%; bf16 against fp32 and the bf16-rounded model: 4%.
Greedy agreement is measured on small trained models (random ones decide by near-ties).
"""

from __future__ import annotations

import copy

import pytest
import torch

from glassformer.config import ModelConfig
from glassformer.errors import InputError
from glassformer.generate import generate
from glassformer.nn import build_model, decode_step, precision
from glassformer.nn.decode_step import DecodeStep
from glassformer.nn.prepared import prepared
from cli_helpers import run
from explorer_helpers import tiny_translator

pytestmark = pytest.mark.usefixtures("one_thread")
VOCAB, PAD, BOS, EOS = 64, 0, 1, 2
KERNELS = [("int8", k) for k in precision.INT8_ROUTES] + [("bf16", "bf16")]
TOL_FP32 = {"int8": 0.08, "bf16": 0.04}


def model_of(arch: str, attn_impl: str = "fast", seed: int = 3, spread: float = 2.0):
    cfg = ModelConfig(arch=arch, vocab_size=VOCAB, d_model=64, n_heads=4, n_layers=2, d_ff=128, dropout=0.0,
                      pad_id=PAD, bos_id=BOS, eos_id=EOS, attn_impl=attn_impl, tie_embeddings=False,
                      norm_position="pre", pe="sinusoidal", activation="gelu")
    torch.manual_seed(seed)
    model = build_model(cfg).eval()
    g = torch.Generator().manual_seed(seed + 3)
    with torch.no_grad():
        for name, p in model.named_parameters():
            r = torch.randn(p.shape, generator=g)
            p.copy_(1 + 0.3 * r if name.endswith("gamma") else 0.3 * r if p.dim() == 1
                    else spread * r * p.shape[-1] ** -0.5)
    return model


def by_hand(model, kind: str):
    """A copy whose decoder-side weight matrices are what `kind` stores: s·q with s per output
    channel (the (in, out) matrices' columns, a head's (d_model, d_k) columns), or bf16-rounded.
    Embeddings and the encoder stay fp32, as the prepared step leaves them."""
    out = copy.deepcopy(model)
    with torch.no_grad():
        for name, p in out.named_parameters():
            if not name.rsplit(".", 1)[-1].startswith("W_") or name.startswith(("enc.", "embed", "src_embed", "dec_embed")) \
                    or name.endswith("W_E"):
                continue
            if kind == "bf16":
                p.copy_(p.to(torch.bfloat16).float())
            else:
                s = p.abs().amax(dim=-2, keepdim=True) / 127
                p.copy_(torch.round(p / s).clamp(-127, 127) * s)
    return out


def step_logits(model, arch: str, kind: str, kernel: str, monkeypatch) -> tuple[list, list]:
    """(prepared-step logits, the teacher-forced token prefixes) over 6 steps of a batch of 3."""
    monkeypatch.setattr(precision, "FORCE_INT8", kernel if kind == "int8" else None)
    g = torch.Generator().manual_seed(5)
    src = torch.randint(3, VOCAB, (3, 7), generator=g)
    got, prefixes = [], []
    with torch.inference_mode(), prepared(model):
        cache = model.new_cache(16)
        if arch == "encoder-decoder":
            memory, src_pad = model.encode(src)
            step = decode_step.prepared(model, cache, None, memory, src_pad, precision=kind)
            seq = torch.full((3, 1), BOS)
        else:
            # from an empty cache: a prompt would run the module path, in fp32, into the cache
            seq = src[:, :1]
            step = decode_step.prepared(model, cache, precision=kind)
        assert step is not None
        for _ in range(6):
            got.append(step(seq[:, -1], cache))
            prefixes.append(seq.clone())
            seq = torch.cat([seq, torch.randint(3, VOCAB, (3, 1), generator=g)], dim=1)
    return got, [(src, p) for p in prefixes]


def recompute(model, arch: str, inputs) -> torch.Tensor:
    with torch.inference_mode():
        src, prefix = inputs
        return (model(src, prefix) if arch == "encoder-decoder" else model(prefix))[:, -1]


def rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).abs().max() / b.abs().max())


@pytest.mark.parametrize("kind,kernel", KERNELS)
@pytest.mark.parametrize("arch", ["decoder", "encoder-decoder"])
def test_low_precision_logits_against_fp32_and_by_hand(arch, kind, kernel, monkeypatch):
    model = model_of(arch)
    fp32, quantised = model_of(arch, "math"), by_hand(model_of(arch, "math"), kind)
    before = precision.CALLS[kernel]
    got, inputs = step_logits(model, arch, kind, kernel, monkeypatch)
    assert precision.CALLS[kernel] > before  # the low-precision products ran
    for logits, inp in zip(got, inputs):
        ref32, refq = recompute(fp32, arch, inp), recompute(quantised, arch, inp)
        assert rel(logits, ref32) <= (0.12 if kernel == "fbgemm" else TOL_FP32[kind])
        assert rel(refq, ref32) > 1e-4  # the precision changes something: the comparisons below can fail
        if kernel in ("int8pack", "dequant"):
            assert rel(logits, refq) <= 1e-4
        elif kernel == "fbgemm":
            assert rel(logits, refq) <= 0.12
        else:  # bf16: activations rounded too, so nearer the bf16 weights' model than fp32 is enough
            assert rel(logits, refq) <= 0.04


def affine_sequences(g: torch.Generator, n: int, length: int) -> torch.Tensor:
    """x_{t+1} = 5·x_t + 4 (mod the 61 content ids): a rule a tiny model learns in seconds."""
    cols = [torch.randint(3, VOCAB, (n, 1), generator=g)]
    for _ in range(length - 1):
        cols.append((cols[-1] * 5 + 4) % (VOCAB - 3) + 3)
    return torch.cat(cols, dim=1)


def trained(arch: str):
    """A small model trained to near-zero loss: its greedy choices are decided, not near-ties (a
    random model's are, and any rounding flips them). The LM continues the rule; the translator
    reverses its 8-token source."""
    model = model_of(arch, seed=3, spread=1.0).train()
    opt = torch.optim.Adam(model.parameters(), lr=5e-3)
    g = torch.Generator().manual_seed(0)
    for _ in range(80 if arch == "decoder" else 160):
        x = affine_sequences(g, 32, 16)
        if arch == "decoder":
            logits, target = model(x[:, :-1]), x[:, 1:]
        else:
            src = x[:, :8]
            tgt = torch.cat([torch.full((32, 1), BOS), src.flip(1)], dim=1)
            logits, target = model(src, tgt[:, :-1]), tgt[:, 1:]
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, VOCAB), target.reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
    return model.eval()


@pytest.mark.parametrize("kernel", precision.INT8_ROUTES)
@pytest.mark.parametrize("arch", ["decoder", "encoder-decoder"])
def test_int8_greedy_tokens_agree_with_fp32(arch, kernel, monkeypatch, trained_models):
    """≥ 95% of greedy tokens equal fp32's, position by position (every kernel), on a trained model
    whose fp32 top-1 margins are checked to be wide (median > 1 logit): not near-ties."""
    model = trained_models[arch]
    monkeypatch.setattr(precision, "FORCE_INT8", kernel)
    ids = affine_sequences(torch.Generator().manual_seed(9), 8, 6 if arch == "decoder" else 8)
    kw = dict(max_new_tokens=10 if arch == "decoder" else 8, strategy="greedy", eos_id=None)
    ref, got = generate(model, ids, **kw), generate(model, ids, precision="int8", **kw)
    start = 1 if arch == "encoder-decoder" else ids.shape[1]
    agree = float((ref[:, start:] == got[:, start:]).float().mean())
    assert agree >= 0.95, agree
    with torch.inference_mode():
        logits = model(ids, ref[:, :-1]) if arch == "encoder-decoder" else model(ref[:, :-1])
        top2 = logits[:, start - 1:].topk(2, dim=-1).values
    assert float((top2[..., 0] - top2[..., 1]).median()) > 1.0


@pytest.fixture(scope="module")
def trained_models():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return {arch: trained(arch) for arch in ("decoder", "encoder-decoder")}
    finally:
        torch.set_num_threads(before)


def test_beam_and_sampling_take_the_low_precision_path():
    model = model_of("encoder-decoder")
    src = torch.randint(3, VOCAB, (2, 5), generator=torch.Generator().manual_seed(1))
    for kw in (dict(strategy="beam", beam_size=3), dict(strategy="sample", generator=torch.Generator().manual_seed(2))):
        before = sum(precision.CALLS.values())
        out = generate(model, src, max_new_tokens=6, eos_id=None, precision="bf16", **kw)
        assert out.shape == (2, 7) and sum(precision.CALLS.values()) > before


def test_optimizer_step_after_quantised_generation_gives_the_new_models_tokens():
    """No quantised copy outlives the weights: after a step, int8 tokens are those of a fresh copy
    of the updated model (which never had one), and differ from before the step."""
    model = model_of("decoder")
    ids = torch.randint(3, VOCAB, (4, 5), generator=torch.Generator().manual_seed(4))
    kw = dict(max_new_tokens=12, strategy="greedy", eos_id=None, precision="int8")
    before = generate(model, ids, **kw)
    opt = torch.optim.Adam(model.parameters(), lr=0.05, fused=True)
    model.train()
    loss = model(ids).logsumexp(-1).mean() - model(ids)[..., 5].mean()
    loss.backward()
    opt.step()
    model.eval()
    after = generate(model, ids, **kw)
    fresh = generate(copy.deepcopy(model), ids, **kw)
    assert torch.equal(after, fresh) and not torch.equal(after, before)


def test_a_files_batches_quantise_each_weight_once(monkeypatch):
    """`translate_ids` (batches of a chunk) and `translate_lines` (chunks of a file) hold one prepared
    scope: every weight is quantised once for the whole file, not once per batch, and the tokens are
    those of translating each batch on its own (nothing can change the weights in between)."""
    from glassformer import streaming
    from glassformer.train.evaluate import translate_ids

    model = model_of("encoder-decoder")
    g = torch.Generator().manual_seed(7)
    sources = [torch.randint(3, VOCAB, (int(n),), generator=g).tolist() for n in torch.randint(2, 9, (9,), generator=g)]
    quantised = []
    real = precision.quantize
    monkeypatch.setattr(precision, "quantize", lambda W: quantised.append(tuple(W.shape)) or real(W))
    monkeypatch.setattr(precision, "FORCE_INT8", "dequant")
    alone = [translate_ids(model, [s], max_new_tokens=6, precision="int8")[0] for s in sources[:3]]
    per_translation = len(quantised) // 3  # each translation alone quantises every weight it reads
    assert per_translation > 0 and quantised == quantised[:per_translation] * 3
    quantised.clear()
    batched = translate_ids(model, sources, batch_size=2, max_new_tokens=6, precision="int8")  # 5 batches
    assert len(quantised) == per_translation and batched[:3] == alone

    class Policy:  # ids as text: "5 7 9"
        def encode(self, text):
            return [int(t) for t in text.split()]

    class Tok:
        def decode(self, ids):
            return " ".join(map(str, ids))
    monkeypatch.setattr(streaming, "CHUNK", 4)  # 3 chunks
    monkeypatch.setattr(streaming, "_decode", lambda m, ids, beam, device, prec: translate_ids(
        m, ids, beam, batch_size=2, max_new_tokens=6, precision=prec))
    quantised.clear()
    lines = [(" ".join(map(str, s)), None) for s in sources]
    records = list(streaming.translate_lines(model, Policy(), Tok(), lines, precision="int8"))
    assert len(quantised) == per_translation
    assert [r["translation"] for r in records] == [" ".join(map(str, ids)) for ids in batched]


def test_bad_precision_is_refused_in_one_line():
    model = model_of("decoder")
    with pytest.raises(InputError, match=r"precision='int4' is not a precision; use fp32, bf16, int8"):
        generate(model, [3, 4], precision="int4")
    with pytest.raises(InputError, match="prepared decode step"):
        generate(model, [3, 4], precision="int8", use_cache=False)


def test_cli_precision_flag_is_honoured(tmp_path, monkeypatch, capsys):
    """translate (greedy and beam) with --precision int8 runs the int8 products (counted), fp32
    none; a wrong value is one line from translate, generate and eval."""
    runs = tiny_translator(tmp_path)
    ckpt = str(runs / "tiny")
    for argv in (["translate", "--ckpt", ckpt, "猫 吃 鱼"], ["translate", "--ckpt", ckpt, "--beam", "2", "狗 吃 肉"]):
        counts = []
        for p in ("fp32", "int8"):
            before = sum(precision.CALLS.values())
            code, out, err = run(monkeypatch, capsys, *argv, "--precision", p)
            assert code == 0, err
            counts.append(sum(precision.CALLS.values()) - before)
        assert counts[0] == 0 and counts[1] > 0, (argv[0], counts)
    for command in ("translate", "generate", "eval"):
        code, out, err = run(monkeypatch, capsys, command, "--ckpt", ckpt, "--prompt" if command == "generate"
                             else "--beam", "x" if command == "generate" else "1", "--precision", "fp16")
        assert code != 0 and "--precision fp16 is not a precision; use fp32, bf16, int8" in err
        assert "Traceback" not in err


def test_serve_precision_decodes_the_shown_translation_in_int8(tmp_path, monkeypatch, capsys):
    """`serve --precision int8`: the trace's translation runs the int8 products (counted)."""
    import socket

    from fastapi.testclient import TestClient

    from glassformer.commands import serve
    runs = tiny_translator(tmp_path)
    seen = {}
    monkeypatch.setattr(serve, "bind", lambda host, port: socket.socket())
    monkeypatch.setattr(serve, "serve_forever", lambda app, sock: seen.update(app=app))
    code, _, err = run(monkeypatch, capsys, "serve", "--runs", str(runs), "--precision", "int8")
    assert code == 0, err
    before = sum(precision.CALLS.values())
    r = TestClient(seen["app"], base_url="http://127.0.0.1:8000").post(
        "/api/trace", json={"sentence": "猫 吃 鱼", "model": "run:tiny"})
    assert r.status_code == 200 and "translation" in r.json()
    assert sum(precision.CALLS.values()) > before
    # the served model holds one prepared scope: a second request quantises nothing again
    quantised = []
    real = precision.quantize
    monkeypatch.setattr(precision, "quantize", lambda W: quantised.append(tuple(W.shape)) or real(W))
    client = TestClient(seen["app"], base_url="http://127.0.0.1:8000")
    again = [client.post("/api/trace", json={"sentence": s, "model": "run:tiny"}) for s in ("猫 吃 鱼", "鱼 吃 猫")]
    assert [a.status_code for a in again] == [200, 200] and quantised == []
    assert again[0].json()["translation"] == r.json()["translation"]
    code, _, err = run(monkeypatch, capsys, "serve", "--runs", str(runs), "--precision", "int4")
    assert code != 0 and "--precision int4 is not a precision" in err


WORST_CASE = """
import torch
from glassformer.nn import precision
from glassformer.nn.prepared import prepared
from torch import nn
K, N = 96, 8
owner = nn.Module()
W = torch.ones(K, N)                       # quantised: q = 127 everywhere, s = 1/127
x = torch.ones(3, K)                       # quantised: 255 everywhere at 8 bits, 127 at 7
gemm = precision.LowPrecisionGemm(W, None, owner, "W", "int8")
gemm.route = "fbgemm"
with torch.inference_mode(), prepared(owner):
    y = gemm(x)
print(precision.full_range_exact(), float((y - K).abs().max()))
"""


@pytest.mark.skipif("fbgemm" not in precision.INT8_ROUTES, reason="this torch build has no fbgemm")
@pytest.mark.parametrize("isa", [None, "AVX2"])
def test_fbgemm_activations_never_saturate(isa):
    """The worst case for AVX2's 16-bit pair sums (every activation at the top of its range, every
    weight at +127) gives y = K exactly (by hand: 96 ones times 96 ones), with fbgemm's kernels as
    this CPU has them and capped to AVX2 (FBGEMM_ENABLE_INSTRUCTIONS), where full 8-bit
    activations would saturate to about half (so the check must turn reduce_range on there)."""
    import os
    import subprocess
    import sys
    env = dict(os.environ)
    env.pop("FBGEMM_ENABLE_INSTRUCTIONS", None)
    if isa:
        env["FBGEMM_ENABLE_INSTRUCTIONS"] = isa
    out = subprocess.run([sys.executable, "-c", WORST_CASE], env=env, capture_output=True, text=True, check=True)
    full, err = out.stdout.split()
    assert float(err) < 1e-3
    if isa == "AVX2":
        assert full == "False"  # AVX2 saturates at 8 bits: 7-bit activations


def test_an_lm_is_scored_at_its_precision_through_the_step(monkeypatch):
    """An LM's held-out loss at --precision int8 (train.evaluate.mean_loss_stepped): teacher-forced
    through the prepared step. At fp32 it equals the module path's forward loss (`mean_loss`) over
    overlapping scored windows of different lengths (skips and padding ignored); at int8 (the
    weight-only dequant kernel) the forward loss of the model quantised by hand; and the precision
    changes the loss, so both comparisons can fail."""
    from glassformer.train.batching import windows
    from glassformer.train.evaluate import mean_loss, mean_loss_stepped
    model = model_of("decoder")
    g = torch.Generator().manual_seed(5)
    stream = torch.randint(3, VOCAB, (300,), generator=g).tolist()
    held_out = windows(stream, 40, stride=24)
    assert {len(w[0]) for w in held_out} != {41} and any(w.skip for w in held_out)  # a short last window, skips
    fp32 = mean_loss(model, held_out, batch_size=3)
    assert mean_loss_stepped(model, held_out, "fp32", batch_size=3) == pytest.approx(fp32, rel=1e-5)
    monkeypatch.setattr(precision, "FORCE_INT8", "dequant")
    before = precision.CALLS["dequant"]
    int8 = mean_loss_stepped(model, held_out, "int8", batch_size=3)
    assert precision.CALLS["dequant"] > before
    assert int8 == pytest.approx(mean_loss(by_hand(model_of("decoder", "math"), "int8"), held_out), rel=1e-4)
    assert abs(int8 - fp32) > 1e-4 * fp32
