"""Each component against an independent reference: the seed's printed numbers, NumPy by hand, torch, HF."""

import math

import numpy as np
import pytest
import torch

from glassformer import ModelConfig, build_model
from glassformer.nn import ALiBi, BatchNorm, LayerNorm, RMSNorm, SinusoidalPE
from glassformer.nn.feedforward import FeedForward
from glassformer.nn.positional import RotaryEmbedding, alibi_slopes, apply_rotary, t5_bucket


def test_layernorm_seed_example():
    """Seed §5.2: x = [2, 8, -4, -6], γ = [1.2, 0.8, 1.0, 1.5], β = [0.1, -0.1, 0, 0.2]."""
    ln = LayerNorm(4, eps=1e-12)
    with torch.no_grad():
        ln.gamma.copy_(torch.tensor([1.2, 0.8, 1.0, 1.5]))
        ln.beta.copy_(torch.tensor([0.1, -0.1, 0.0, 0.2]))
    y = ln(torch.tensor([[2.0, 8.0, -4.0, -6.0]]))[0].detach()
    assert np.allclose(y.numpy(), [0.538, 1.069, -0.730, -1.444], atol=1e-3)  # the seed's rounding


def pe_by_hand(pos: int, d: int) -> list[float]:
    """§3.2 with the math module: PE(pos, 2i) = sin(pos/10000^(2i/d)), PE(pos, 2i+1) = cos(...)."""
    out = []
    for j in range(d):
        angle = pos / 10000 ** ((j - j % 2) / d)
        out.append(math.sin(angle) if j % 2 == 0 else math.cos(angle))
    return out


def test_sinusoidal_pe_pos_1_and_2_d12():
    pe = SinusoidalPE(12)(torch.arange(3))
    for pos in (0, 1, 2):
        assert np.allclose(pe[pos].numpy(), pe_by_hand(pos, 12), atol=1e-6)
    # The seed's listing is right in dims 0, 1, 3 and has typos in dims 2 and 4 (0.2338, 0.0096).
    assert np.allclose(pe[1, [0, 1, 3]].numpy(), [0.8415, 0.5403, 0.9769], atol=1e-4)
    assert np.allclose(pe[2, [0, 1, 3]].numpy(), [0.9093, -0.4161, 0.9086], atol=1e-4)
    assert abs(pe[1, 2].item() - 0.2338) > 0.01 and abs(pe[1, 4].item() - 0.0096) > 0.01


def test_float_positions_never_integer_division():
    """Seed 003 §3: an integer arange makes every angle 0 in integer arithmetic; ours never is."""
    pe = SinusoidalPE(16)(torch.arange(5, dtype=torch.int32))
    assert pe[1:, 0].abs().min() > 0.1


def test_half_split_layout_is_marian():
    d, pos = 8, 3
    half = SinusoidalPE(d, layout="half")(torch.tensor([pos]))[0].numpy()
    freqs = [pos / 10000 ** (2 * j / d) for j in range(d // 2)]
    assert np.allclose(half, [math.sin(f) for f in freqs] + [math.cos(f) for f in freqs], atol=1e-6)


def test_fixed_linear_map_between_offsets():
    """§3.3: for each offset k one matrix M_k (built from the trig identity, independent of pos)
    maps PE(pos) to PE(pos+k) for every pos."""
    d = 16
    pe = SinusoidalPE(d)(torch.arange(600)).double().numpy()
    for k in (1, 5, 17, 100):
        M = np.zeros((d, d))
        for i in range(d // 2):
            w = k / 10000 ** (2 * i / d)
            # sin(a+w) = sin a cos w + cos a sin w;  cos(a+w) = cos a cos w − sin a sin w
            # (row vectors [sin a, cos a] multiply M from the left)
            M[2 * i:2 * i + 2, 2 * i:2 * i + 2] = [[math.cos(w), -math.sin(w)], [math.sin(w), math.cos(w)]]
        assert np.abs(pe[:-k] @ M - pe[k:]).max() < 1e-5


@pytest.mark.parametrize("arch", ["decoder", "encoder-decoder"])
@pytest.mark.parametrize("embed_scale", [True, False])
def test_learned_positions_start_at_the_tokens_scale(arch, embed_scale):
    """A learned table is added to the token vectors, so it starts at their size (std ≈ 1 with the
    √d_model scale, d^-1/2 without), not GPT-2's 0.02, beside which positions start 50× weaker than
    the tokens (num-en, 600 steps: 14% against 87% test exact match, docs/real-data.md)."""
    d = 64
    cfg = ModelConfig(arch=arch, vocab_size=50, tgt_vocab_size=40 if arch == "encoder-decoder" else None,
                      d_model=d, n_heads=4, n_layers=1, d_ff=128, pe="learned", max_len=400, share_embeddings=False,
                      embed_scale=embed_scale)
    torch.manual_seed(0)
    model = build_model(cfg)
    for prefix in ("", "dec_") if arch == "encoder-decoder" else ("",):
        embed, pos = getattr(model, f"{prefix}embed"), getattr(model, f"{prefix}pos")
        tokens = embed(torch.arange(embed.W_E.shape[0])).detach().numpy()  # what the table is added to
        table = pos(torch.arange(cfg.max_len)).detach().numpy()
        assert np.std(table) == pytest.approx(np.std(tokens), rel=0.15)
        assert np.std(table) == pytest.approx(1.0 if embed_scale else d ** -0.5, rel=0.05)


def test_gelu_tanh_is_seed_formula():
    x = np.linspace(-5, 5, 101)
    seed = 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))
    ffn = FeedForward(1, 1, "gelu_tanh")
    assert np.allclose(ffn.phi(torch.tensor(x)).numpy(), seed, atol=1e-7)


@pytest.mark.parametrize("activation,fn", [
    ("relu", lambda a: np.maximum(a, 0)),
    ("gelu", lambda a: 0.5 * a * (1 + np.vectorize(math.erf)(a / math.sqrt(2)))),
    ("silu", lambda a: a / (1 + np.exp(-a))),
])
def test_ffn_by_hand(activation, fn):
    ffn = FeedForward(6, 24, activation)
    with torch.no_grad():
        ffn.b_1.normal_(), ffn.b_2.normal_()
    x = torch.randn(2, 3, 6)
    W1, b1, W2, b2 = (t.detach().double().numpy() for t in (ffn.W_1, ffn.b_1, ffn.W_2, ffn.b_2))
    ref = fn(x.double().numpy() @ W1 + b1) @ W2 + b2
    assert np.abs(ffn(x).detach().numpy() - ref).max() < 1e-5


def test_swiglu_by_hand():
    ffn = FeedForward(6, 10, "swiglu", bias=False)
    x = torch.randn(4, 6).double()
    W1, WG, W2 = (t.detach().double().numpy() for t in (ffn.W_1, ffn.W_G, ffn.W_2))
    g = x.numpy() @ WG
    ref = ((g / (1 + np.exp(-g))) * (x.numpy() @ W1)) @ W2
    assert np.abs(ffn(x.float()).detach().double().numpy() - ref).max() < 1e-5


def test_rmsnorm_by_hand():
    n = RMSNorm(5, eps=1e-6)
    with torch.no_grad():
        n.gamma.normal_()
    x = torch.randn(3, 5)
    xn = x.double().numpy()
    ref = n.gamma.detach().double().numpy() * xn / np.sqrt((xn ** 2).mean(-1, keepdims=True) + 1e-6)
    assert np.abs(n(x).detach().numpy() - ref).max() < 1e-6


def test_batchnorm_ignores_padding():
    """§5.3: statistics over the real (sentence, position) cells only."""
    bn = BatchNorm(4)
    x = torch.randn(2, 5, 4)
    pad = torch.tensor([[False] * 5, [False, False, True, True, True]])
    real = torch.cat([x[0], x[1, :2]]).double().numpy()
    ref = (real - real.mean(0)) / np.sqrt(real.var(0) + 1e-5)
    y = bn(x, pad)
    assert np.abs(torch.cat([y[0], y[1, :2]]).detach().numpy() - ref).max() < 1e-5
    x2 = x.clone()
    x2[1, 2:] = 1e6  # garbage in padding changes nothing for real positions
    y2 = BatchNorm(4)(x2, pad)
    assert torch.allclose(y2[0], y[0], atol=1e-6) and torch.allclose(y2[1, :2], y[1, :2], atol=1e-6)
    n = real.shape[0]
    assert np.allclose(bn.running_var.numpy(), 0.9 + 0.1 * real.var(0) * n / (n - 1), atol=1e-5)


def test_alibi_slopes_from_the_paper():
    assert np.allclose(alibi_slopes(8).numpy(), [2 ** -(i + 1) for i in range(8)])
    bias = ALiBi(8)(torch.arange(4)[None], torch.arange(4)[None])
    assert bias.shape == (1, 8, 4, 4) and bias[0, 0, 3, 0].item() == pytest.approx(-3 * 0.5)


def test_t5_buckets_match_hugging_face():
    from transformers.models.t5.modeling_t5 import T5Attention
    rel = torch.arange(-300, 300)[None, :]
    for bidirectional in (True, False):
        ref = T5Attention._relative_position_bucket(rel, bidirectional=bidirectional, num_buckets=32, max_distance=128)
        assert torch.equal(t5_bucket(rel, bidirectional, 32, 128), ref)


def test_rope_matches_complex_rotation_and_depends_on_offset_only():
    d = 8
    x = torch.randn(1, 1, 6, d).double()
    cos, sin = RotaryEmbedding(d)(torch.arange(6)[None])
    got = apply_rotary(x.float(), cos, sin).double()
    # independent: pair (x_i, x_{i+d/2}) as a complex number, multiplied by e^{i·pos·θ_i}
    theta = 1.0 / 10000 ** (np.arange(0, d, 2) / d)
    z = x[0, 0, :, : d // 2].numpy() + 1j * x[0, 0, :, d // 2:].numpy()
    rot = z * np.exp(1j * np.arange(6)[:, None] * theta)
    ref = np.concatenate([rot.real, rot.imag], -1)
    assert np.abs(got[0, 0].numpy() - ref).max() < 1e-5
    q, k = torch.randn(d), torch.randn(d)

    def dot_at(m, n):
        c, s = RotaryEmbedding(d)(torch.tensor([[m, n]]))
        both = apply_rotary(torch.stack([q, k])[None, None], c, s)[0, 0]
        return float(both[0] @ both[1])
    assert dot_at(3, 7) == pytest.approx(dot_at(10, 14), abs=1e-4)


def test_variance_of_dot_product_is_d_k():
    """§1.5: Var(q·k) = d_k for unit-variance q, k; ÷√d_k brings it back to 1 (read from our hooks)."""
    for d_k in (16, 64, 256):
        cfg = ModelConfig(arch="encoder", vocab_size=4, d_model=d_k, n_heads=1, n_layers=1, d_ff=4, pe="none")
        model = build_model(cfg)
        attn = model.enc[0].attn
        with torch.no_grad():
            attn.W_Q.copy_(torch.eye(d_k)[None]), attn.W_K.copy_(torch.eye(d_k)[None])
            attn.b_Q.zero_(), attn.b_K.zero_()
        x = torch.randn(64, 32, d_k)  # unit-variance q = k inputs
        from glassformer import hooks
        got = {}

        def keep(t, name):
            got[name.rsplit(".", 1)[1]] = t

        with hooks(model, {"enc.0.attn.scores": keep, "enc.0.attn.scaled": keep}):
            attn(x)
        off = ~torch.eye(32, dtype=torch.bool)  # q_i·k_j for i ≠ j: independent vectors
        assert got["scores"][..., off].var().item() == pytest.approx(d_k, rel=0.1)
        assert got["scaled"][..., off].var().item() == pytest.approx(1.0, rel=0.1)
