"""LLaMA -> glassformer: logits equal Hugging Face's LlamaForCausalLM (random weights, no download)."""

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from glassformer.errors import InputError
from glassformer.interop import from_hf
from interop_helpers import max_diff, perturb, right_padded

TOL = 1e-4
VOCAB = 60


def make_llama(hidden=30, heads=5, kv=5, head_dim=None, layers=2, tie=False, attn_bias=False, mlp_bias=False,
               theta=10000.0, act="silu", **kw):
    cfg = LlamaConfig(vocab_size=VOCAB, hidden_size=hidden, num_attention_heads=heads, num_key_value_heads=kv,
                      head_dim=head_dim, num_hidden_layers=layers, intermediate_size=2 * hidden + 1,
                      tie_word_embeddings=tie, attention_bias=attn_bias, mlp_bias=mlp_bias, rope_theta=theta,
                      hidden_act=act, max_position_embeddings=64, rms_norm_eps=1e-5, attn_implementation="eager", **kw)
    hf = LlamaForCausalLM(cfg).eval()
    perturb(hf)
    return hf


# (d_model, heads, kv heads, head_dim, layers, tied, attention_bias, mlp_bias, rope_theta)
CONFIGS = [
    (30, 5, 5, None, 2, False, False, False, 10000.0),  # MHA, d_k = 6
    (36, 6, 2, None, 1, True, True, True, 500.0),  # GQA 3:1, every bias, tied head
    (30, 5, 1, 8, 3, False, True, False, 10000.0),  # MQA, explicit head_dim != d_model / heads
    (24, 3, 3, 12, 4, True, False, True, 100.0),  # 3 heads of 12, gate/up/down biases
]


@pytest.mark.parametrize("hidden,heads,kv,head_dim,layers,tie,ab,mb,theta", CONFIGS)
def test_logits_equal_hf_with_padding(hidden, heads, kv, head_dim, layers, tie, ab, mb, theta):
    hf = make_llama(hidden, heads, kv, head_dim, layers, tie, ab, mb, theta)
    ours = from_hf(hf)
    ids, pad = right_padded(VOCAB, lengths=(9, 6, 3))
    with torch.no_grad():
        ref = hf(ids, attention_mask=(~pad).long()).logits
        got = ours(ids, padding_mask=pad)
    assert got.shape == ref.shape
    diff = max_diff(got, ref, pad)
    print(f"llama {hf.config.hidden_size}/{hf.config.num_attention_heads} heads: max abs diff {diff:.2e}")  # pytest -s
    assert diff <= TOL
    assert ref[~pad].abs().max() > 1.0


def test_left_padding_and_kv_cache_equal_hf():
    """Left padding with HF position_ids = glassformer's (padding does not count), then cached steps."""
    hf = make_llama(30, 5, 1, 8, 2)
    ours = from_hf(hf)
    ids, pad = right_padded(VOCAB, lengths=(10, 7))
    ids, pad = ids.flip(1), pad.flip(1)
    keep = (~pad).long()
    with torch.no_grad():
        ref = hf(ids, attention_mask=keep, position_ids=(keep.cumsum(1) - 1).clamp(min=0)).logits
        got = ours(ids, padding_mask=pad)
        assert max_diff(got, ref, pad) <= TOL
        cache = ours.new_cache()
        steps = [ours(ids[:, :7], padding_mask=pad[:, :7], cache=cache)]
        steps += [ours(ids[:, t:t + 1], cache=cache) for t in range(7, 10)]
    assert max_diff(torch.cat(steps, dim=1), ref, pad) <= TOL


def test_config_mirrors_llama():
    cfg = from_hf(make_llama(30, 5, 1, 8, 2, theta=500.0)).config
    assert (cfg.arch, cfg.norm, cfg.norm_position, cfg.use_final_norm, cfg.pe, cfg.activation) == \
        ("decoder", "rmsnorm", "pre", True, "rope", "swiglu")
    assert (cfg.head_dim, cfg.rope_theta, cfg.norm_eps, cfg.attn_bias, cfg.ffn_bias, cfg.tie_embeddings) == \
        (8, 500.0, 1e-5, False, False, False)


def test_gqa_heads_share_keys():
    """Query heads served by one K/V head get identical W_K and W_V copies (3 query heads per group)."""
    ours = from_hf(make_llama(36, 6, 2))
    W_K = ours.dec[0].self_attn.W_K
    assert torch.equal(W_K[0], W_K[2]) and torch.equal(W_K[3], W_K[5]) and not torch.equal(W_K[2], W_K[3])


@pytest.mark.parametrize("kw,needle", [
    ({"rope_scaling": {"rope_type": "linear", "factor": 2.0}}, "rope scaling"),
    ({"act": "tanh"}, "hidden_act='tanh' is not supported"),
])
def test_unsupported_llama_stops_with_one_line(kw, needle):
    hf = make_llama(**kw)
    with pytest.raises(InputError) as e:
        from_hf(hf)
    assert needle in str(e.value) and "\n" not in str(e.value)
