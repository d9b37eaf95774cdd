"""Invariances every Transformer must satisfy (seed §3.1, §7.5), checked on all three architectures."""

import itertools

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from glassformer import ModelConfig, build_model, hooks, run_with_trace

PES = ["sinusoidal", "sinusoidal_half", "learned", "relative", "rope", "alibi", "none"]


def model_for(arch, pe="sinusoidal", **kw):
    base = dict(arch=arch, vocab_size=30, d_model=12, n_heads=3, n_layers=2, d_ff=24, pe=pe, pad_id=0)
    base.update(kw)
    return build_model(ModelConfig(**base)).eval()


def run(model, ids, tgt=None, **kw):
    if model.config.arch == "encoder-decoder":
        return model(ids, tgt if tgt is not None else ids, **kw)
    return model(ids, **kw)


# ---- §3.1: without positions, attention cannot see word order ----
def test_attention_is_permutation_equivariant():
    """Attention(PX) = P·Attention(X) for the multi-head attention module itself."""
    attn = model_for("encoder").enc[0].attn
    x = torch.randn(1, 6, 12)
    perm = torch.randperm(6)
    assert torch.allclose(attn(x[:, perm]), attn(x)[:, perm], atol=1e-6)


@pytest.mark.parametrize("norm", ["layernorm", "batchnorm", "rmsnorm"])
def test_encoder_without_pe_is_permutation_equivariant(norm):
    m = model_for("encoder", pe="none", norm=norm)
    ids = torch.randint(1, 30, (2, 7))
    perm = torch.randperm(7)
    assert torch.allclose(m(ids[:, perm]), m(ids)[:, perm], atol=1e-5)


def test_encoder_with_pe_is_not():
    m = model_for("encoder", pe="sinusoidal")
    ids = torch.tensor([[5, 6, 7]])
    assert not torch.allclose(m(ids[:, [2, 1, 0]]), m(ids)[:, [2, 1, 0]], atol=1e-3)


# ---- causality: changing future tokens never changes earlier outputs ----
@pytest.mark.parametrize("arch,pe", list(itertools.product(["decoder", "encoder-decoder"], PES)))
def test_causality(arch, pe):
    m = model_for(arch, pe)
    src = torch.randint(1, 30, (2, 5))
    tgt = torch.randint(1, 30, (2, 6))
    changed = tgt.clone()
    changed[:, 4:] = torch.randint(1, 30, (2, 2))
    a = m(tgt) if arch == "decoder" else m(src, tgt)
    b = m(changed) if arch == "decoder" else m(src, changed)
    assert torch.allclose(a[:, :4], b[:, :4], atol=1e-6)
    assert not torch.allclose(a[:, 4:], b[:, 4:], atol=1e-4)


# ---- padding: a padded batch equals each sequence alone ----
@pytest.mark.parametrize("arch,pe", list(itertools.product(["encoder", "decoder", "encoder-decoder"], PES)))
@pytest.mark.parametrize("side", ["right", "left"])
def test_padded_batch_equals_each_sequence_alone(arch, pe, side):
    m = model_for(arch, pe)
    seqs = [torch.randint(1, 30, (n,)) for n in (6, 3, 4)]
    width = 6

    def pad(s):
        p = torch.zeros(width - len(s), dtype=torch.long)
        return torch.cat([s, p] if side == "right" else [p, s])
    batch = torch.stack([pad(s) for s in seqs])
    out = run(m, batch)
    for row, s in enumerate(seqs):
        alone = run(m, s[None])[0]
        real = slice(0, len(s)) if side == "right" else slice(width - len(s), width)
        assert torch.allclose(out[row, real], alone, atol=1e-5), (row, side)


def test_padded_keys_get_exactly_zero_attention():
    m = model_for("encoder-decoder")
    src = torch.tensor([[4, 5, 6, 0, 0]])
    _, trace = run_with_trace(m, src, torch.tensor([[1, 7, 8]]), names=["**.pattern"])
    assert set(trace) >= {"enc.0.attn.pattern", "dec.1.cross_attn.pattern"}
    for name in ("enc.0.attn.pattern", "enc.1.attn.pattern", "dec.0.cross_attn.pattern"):
        assert torch.equal(trace[name][..., 3:], torch.zeros_like(trace[name][..., 3:]))
    causal = trace["dec.0.self_attn.pattern"][0, :, 0, 1:]  # first target token sees only itself
    assert torch.equal(causal, torch.zeros_like(causal))


@settings(max_examples=25, deadline=None)
@given(lengths=st.lists(st.integers(1, 7), min_size=1, max_size=4), seed=st.integers(0, 10_000))
def test_padding_property(lengths, seed):
    """Hypothesis: any batch of lengths, right-padded, matches the sequences run alone."""
    torch.manual_seed(seed)
    m = model_for("decoder", "rope", n_layers=1)
    seqs = [torch.randint(1, 30, (n,)) for n in lengths]
    width = max(lengths)
    batch = torch.stack([torch.cat([s, torch.zeros(width - len(s), dtype=torch.long)]) for s in seqs])
    out = m(batch)
    for row, s in enumerate(seqs):
        assert torch.allclose(out[row, :len(s)], m(s[None])[0], atol=1e-5)


@settings(max_examples=25, deadline=None)
@given(n=st.integers(2, 8), seed=st.integers(0, 10_000))
def test_pattern_rows_are_distributions(n, seed):
    torch.manual_seed(seed)
    m = model_for("encoder", n_layers=1)
    _, tr = run_with_trace(m, torch.randint(1, 30, (1, n)), names=["enc.0.attn.pattern"])
    p = tr["enc.0.attn.pattern"]
    assert torch.allclose(p.sum(-1), torch.ones(1, 3, n), atol=1e-6) and (p >= 0).all()


# ---- the fast path (fused QKV + SDPA) equals the explicit math to 1e-5 ----
CONFIGS = [
    dict(arch=a, pe=pe, norm_position=np_, activation=act, norm=norm)
    for a, pe, np_, act, norm in [
        ("encoder", "sinusoidal", "post", "gelu_tanh", "layernorm"),
        ("encoder", "relative", "pre", "relu", "rmsnorm"),
        ("encoder", "alibi", "post", "swiglu", "layernorm"),
        ("decoder", "rope", "pre", "swiglu", "rmsnorm"),
        ("decoder", "learned", "post", "gelu", "layernorm"),
        ("decoder", "alibi", "pre", "geglu", "layernorm"),
        ("encoder-decoder", "sinusoidal", "post", "relu", "layernorm"),
        ("encoder-decoder", "relative", "pre", "geglu", "rmsnorm"),
        ("encoder-decoder", "rope", "pre", "silu", "layernorm"),
        ("encoder-decoder", "none", "post", "gelu", "batchnorm"),
    ]
]


@pytest.mark.parametrize("kw", CONFIGS, ids=lambda k: "-".join(k.values()))
def test_fast_path_equals_math(kw):
    fast = model_for(**kw, attn_impl="fast")
    math_ = build_model(fast.config.replace(attn_impl="math")).eval()
    math_.load_state_dict(fast.state_dict())
    ids = torch.randint(1, 30, (3, 9))
    ids[1, 6:] = 0
    tgt = torch.randint(1, 30, (3, 5))
    a, b = run(fast, ids, tgt), run(math_, ids, tgt)
    assert (a - b).abs().max().item() < 1e-5


def test_scaling_off_is_unscaled():
    """scale_scores=False (T5): `scaled` equals `scores` (plus bias) exactly."""
    m = model_for("encoder", pe="none", scale_scores=False, n_layers=1)
    _, tr = run_with_trace(m, torch.tensor([[3, 4, 5]]), names=["enc.0.attn.scores", "enc.0.attn.scaled"])
    assert torch.equal(tr["enc.0.attn.scores"], tr["enc.0.attn.scaled"])


# ---- tracing changes nothing; hooks can patch ----
def test_trace_equals_untraced_and_zeroing_a_head():
    m = model_for("encoder-decoder")
    src, tgt = torch.randint(1, 30, (1, 5)), torch.randint(1, 30, (1, 4))
    plain = m(src, tgt)
    traced, trace = run_with_trace(m, src, tgt)
    assert torch.allclose(plain, traced, atol=1e-6) and "probs" in trace and "logits" in trace

    def zero_head_1(z, name):
        z = z.clone()
        z[:, 1] = 0
        return z
    with hooks(m, {"enc.0.attn.z": zero_head_1}):
        _, patched = run_with_trace(m, src, tgt, names=["enc.0.attn.concat"])
    concat = patched["enc.0.attn.concat"]
    assert torch.equal(concat[..., 4:8], torch.zeros_like(concat[..., 4:8]))  # head 1's d_k slice
    assert torch.allclose(m(src, tgt), plain)  # hooks gone after the context


# ---- KV cache: incremental logits equal the full recomputation ----
@pytest.mark.parametrize("arch,pe", list(itertools.product(["decoder", "encoder-decoder"], PES)))
def test_cached_logits_equal_full(arch, pe):
    m = model_for(arch, pe, norm_position="pre")
    src = torch.randint(1, 30, (2, 5))
    src[1, 3:] = 0
    ids = torch.randint(1, 30, (2, 8))
    full = m(ids) if arch == "decoder" else m(src, ids)
    cache = m.new_cache(capacity=4)  # small capacity: the buffers must grow
    if arch == "decoder":
        step = lambda t: m(t, cache=cache)
    else:
        memory, src_pad = m.encode(src)
        step = lambda t: m.decode(t, memory, src_pad, cache=cache)
    parts = [step(ids[:, :3])] + [step(ids[:, t:t + 1]) for t in range(3, 8)]
    assert (torch.cat(parts, 1) - full).abs().max().item() < 1e-5


def test_cache_reorder_for_beams():
    m = model_for("decoder", "alibi")
    ids = torch.randint(1, 30, (3, 6))
    cache = m.new_cache()
    m(ids[:, :4], cache=cache)
    cache.reorder(torch.tensor([2, 2, 0]))
    nxt = m(ids[[2, 2, 0], 4:5], cache=cache)
    assert torch.allclose(nxt[:, 0], m(ids[[2, 2, 0], :5])[:, -1], atol=1e-5)
