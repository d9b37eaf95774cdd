"""T5ForConditionalGeneration -> glassformer: equal logits (≤ 1e-4 fp32) on random weights."""

import pytest
import torch
from torch import nn
from transformers import T5Config, T5ForConditionalGeneration

from glassformer.errors import InputError
from glassformer.interop import from_hf
from seq2seq_helpers import compare, generations, padded_batch, perturb

pytestmark = pytest.mark.usefixtures("one_thread")

TOL = 1e-4
VOCAB, PAD, EOS = 40, 0, 1

# (d_model, d_kv, heads, enc layers, dec layers, feed_forward_proj, buckets, max_distance, extra)
# Sources are 11 tokens long: distances reach past max_distance, so the log buckets are used.
CASES = {
    "relu_3heads_dkv6": (20, 6, 3, 2, 1, "relu", 8, 10, {}),
    "geglu_5heads_dkv5": (16, 5, 5, 1, 3, "gated-gelu", 6, 7, {}),
    # T5 v1.1 style: tie_word_embeddings=False means "do not rescale before the head"
    "v1_1_no_rescale": (24, 7, 3, 3, 2, "gated-gelu", 32, 128, {"tie_word_embeddings": False}),
    "gated_silu": (18, 6, 3, 1, 1, "gated-silu", 8, 16, {}),
}


def make(d_model, d_kv, heads, n_enc, n_dec, ff, buckets, max_distance, extra):
    config = T5Config(
        vocab_size=VOCAB, d_model=d_model, d_kv=d_kv, d_ff=2 * d_model + 1, num_layers=n_enc,
        num_decoder_layers=n_dec, num_heads=heads, feed_forward_proj=ff,
        relative_attention_num_buckets=buckets, relative_attention_max_distance=max_distance,
        layer_norm_epsilon=1e-6, pad_token_id=PAD, eos_token_id=EOS, decoder_start_token_id=PAD,
        attn_implementation="eager", **extra)
    hf = T5ForConditionalGeneration(config)
    assert perturb(hf) > 10  # RMSNorm gains, both relative-bias tables, every projection
    return hf


@pytest.mark.parametrize("case", CASES)
def test_t5_logits_equal_hf(case):
    hf = make(*CASES[case])
    src, mask, tgt = padded_batch(VOCAB, PAD, start=PAD)
    diffs = compare(hf, src, mask, tgt)
    assert max(diffs.values()) <= TOL, diffs


def test_t5_untied_head_that_hf_rescales():
    """An lm_head untied by hand while HF still scales by d_model^-0.5: the scale goes into W_U."""
    hf = make(*CASES["relu_3heads_dkv6"])
    hf.lm_head.weight = nn.Parameter(torch.randn(VOCAB, 20))
    assert hf.config.scale_decoder_outputs
    src, mask, tgt = padded_batch(VOCAB, PAD, start=PAD)
    diffs = compare(hf, src, mask, tgt)
    assert max(diffs.values()) <= TOL, diffs
    assert not from_hf(hf).config.tie_embeddings


def test_t5_config_quirks():
    hf = make(*CASES["geglu_5heads_dkv5"])
    c = from_hf(hf).config
    assert (c.scale_scores, c.pe, c.norm, c.norm_position, c.use_final_norm) == (
        False, "relative", "rmsnorm", "pre", True)
    assert (c.attn_bias, c.ffn_bias, c.head_dim, c.n_heads * c.head_dim, c.activation) == (
        False, False, 5, 25, "geglu")
    assert (c.rel_buckets, c.rel_max_distance, c.tie_embeddings, c.tied_head_rescale) == (6, 7, True, True)
    assert (c.n_layers, c.dec_layers, c.pad_id, c.start_id, c.eos_id) == (1, 3, PAD, PAD, EOS)
    c11 = from_hf(make(*CASES["v1_1_no_rescale"])).config
    assert c11.tie_embeddings and not c11.tied_head_rescale


def test_t5_gelu_gate_is_wi_0():
    """geglu: act(x·W_G) ⊙ x·W_1 with W_G = wi_0ᵀ, W_1 = wi_1ᵀ (swapping them changes the output)."""
    hf = make(*CASES["geglu_5heads_dkv5"])
    model = from_hf(hf)
    ffn = hf.encoder.block[0].layer[-1].DenseReluDense
    assert torch.equal(model.enc[0].ffn.W_G, ffn.wi_0.weight.T)
    assert torch.equal(model.enc[0].ffn.W_1, ffn.wi_1.weight.T)


def test_t5_unsupported_gate_is_refused():
    hf = make(*CASES["gated_silu"])
    hf.config.dense_act_fn = "tanh"
    with pytest.raises(InputError, match="feed_forward_proj='gated-silu' is not supported"):
        from_hf(hf)


@pytest.mark.parametrize("beams", (1, 3))
def test_t5_generate_equals_hf(beams):
    """(Equal layer counts: transformers 5's own T5 cache fails when the decoder has more layers.)"""
    hf = make(*CASES["gated_silu"])
    src, mask, _ = padded_batch(VOCAB, PAD, start=PAD)
    ref, got = generations(hf, src, mask, PAD, beams)
    assert len(set(got[:, 1:].flatten().tolist())) > 3  # not a degenerate repetition
    assert torch.equal(got, ref), (got, ref)
