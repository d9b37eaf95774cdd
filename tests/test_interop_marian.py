"""MarianMTModel -> glassformer: equal logits (≤ 1e-4 fp32) on random weights, with source padding."""

import pytest
import torch
from transformers import MarianConfig, MarianMTModel

from glassformer.errors import InputError
from glassformer.interop import from_hf
from glassformer.nn.model import EncoderDecoder
from seq2seq_helpers import compare, generations, padded_batch, perturb

pytestmark = pytest.mark.usefixtures("one_thread")

TOL = 1e-4

# (d_model, heads, enc layers, dec layers, activation, scale_embedding, extra config)
CASES = {
    # Opus-MT's choices: swish, × sqrt(d_model); 5 heads of d_k = 6
    "opus_like_5heads": (30, 5, 2, 3, "swish", True, {}),
    "3heads_gelu_unscaled": (18, 3, 1, 1, "gelu", False, {}),
    # separate target vocabulary (decoder_vocab_size), tied to the decoder table; d_k = 12
    "separate_vocab": (36, 3, 2, 1, "relu", True,
                       {"share_encoder_decoder_embeddings": False, "decoder_vocab_size": 33}),
    "untied_head": (30, 3, 1, 2, "swish", True, {"tie_word_embeddings": False}),
}
VOCAB, PAD = 40, 32  # pad < 33 so it is valid on both sides of "separate_vocab"


def make(d_model, heads, n_enc, n_dec, act, scale, extra):
    config = MarianConfig(
        vocab_size=VOCAB, d_model=d_model, encoder_layers=n_enc, decoder_layers=n_dec,
        encoder_attention_heads=heads, decoder_attention_heads=heads,
        encoder_ffn_dim=2 * d_model + 1, decoder_ffn_dim=2 * d_model + 1,
        activation_function=act, scale_embedding=scale, max_position_embeddings=64,
        pad_token_id=PAD, decoder_start_token_id=PAD, eos_token_id=0,
        attn_implementation="eager", **extra)
    hf = MarianMTModel(config)
    # every parameter and final_logits_bias; the sinusoid tables are fixed, never trained
    n = perturb(hf, skip=("embed_positions",))
    assert n > 10
    return hf


@pytest.mark.parametrize("case", CASES)
def test_marian_logits_equal_hf(case):
    hf = make(*CASES[case])
    tgt_vocab = hf.config.decoder_vocab_size if "separate" in case else VOCAB
    src, mask, tgt = padded_batch(min(VOCAB, tgt_vocab), PAD, start=PAD)
    diffs = compare(hf, src, mask, tgt)
    assert max(diffs.values()) <= TOL, diffs


def test_marian_config_quirks():
    hf = make(*CASES["opus_like_5heads"])
    model = from_hf(hf)
    assert isinstance(model, EncoderDecoder)
    c = model.config
    assert (c.pe, c.activation, c.norm_position, c.embed_norm, c.embed_scale) == (
        "sinusoidal_half", "silu", "post", False, True)
    assert c.pad_id == c.start_id == PAD and c.head_bias and c.tie_embeddings and c.share_embeddings
    assert (c.n_layers, c.dec_layers, c.n_heads, c.head_dim) == (2, 3, 5, 6)
    # the position table HF uses is ours, row for row (positions counted from 0)
    table = hf.model.encoder.embed_positions.weight[:20]
    assert torch.allclose(model.pos(torch.arange(20)), table, atol=1e-6)
    assert torch.equal(model.head.b_U, hf.final_logits_bias[0])


def test_marian_trained_positions_are_refused():
    hf = make(*CASES["3heads_gelu_unscaled"])
    with torch.no_grad():
        hf.model.encoder.embed_positions.weight.add_(0.1)
    with pytest.raises(InputError, match="not the half-split sinusoid table"):
        from_hf(hf)


def test_marian_unequal_stacks_are_refused():
    config = MarianConfig(vocab_size=VOCAB, d_model=12, encoder_layers=1, decoder_layers=1,
                          encoder_attention_heads=3, decoder_attention_heads=2, encoder_ffn_dim=8,
                          decoder_ffn_dim=8, pad_token_id=PAD, max_position_embeddings=16)
    with pytest.raises(InputError, match="encoder attention_heads=3 but decoder attention_heads=2"):
        from_hf(MarianMTModel(config))


def test_marian_unknown_activation_is_refused():
    hf = make(*CASES["3heads_gelu_unscaled"])
    hf.config.activation_function = "quick_gelu"
    with pytest.raises(InputError, match="Marian activation 'quick_gelu' is not supported"):
        from_hf(hf)


@pytest.mark.parametrize("beams", (1, 3))
def test_marian_generate_equals_hf(beams):
    """Greedy and beam search through our KV cache pick HF's tokens, starting from <pad>."""
    hf = make(*CASES["opus_like_5heads"])
    src, mask, _ = padded_batch(VOCAB, PAD, start=PAD)
    ref, got = generations(hf, src, mask, PAD, beams)
    assert got[:, 0].eq(PAD).all()
    assert torch.equal(got, ref), (got, ref)
