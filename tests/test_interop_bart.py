"""BartForConditionalGeneration -> glassformer: equal logits (≤ 1e-4 fp32) on random weights."""

import pytest
import torch
from transformers import BartConfig, BartForConditionalGeneration

from glassformer.errors import InputError
from glassformer.interop import from_hf
from seq2seq_helpers import compare, generations, padded_batch, perturb

pytestmark = pytest.mark.usefixtures("one_thread")

TOL = 1e-4
VOCAB, PAD, BOS, EOS = 40, 1, 0, 2

# (d_model, heads, enc layers, dec layers, activation, scale_embedding, extra config)
CASES = {
    "3heads_dk5_scaled": (15, 3, 1, 2, "gelu", True, {}),
    "5heads_relu": (30, 5, 3, 1, "relu", False, {}),
    # transformers unties everything: separate source/target tables and a free output matrix
    "untied_dk12": (36, 3, 2, 2, "gelu", False, {"tie_word_embeddings": False}),
}


def make(d_model, heads, n_enc, n_dec, act, scale, extra):
    config = BartConfig(
        vocab_size=VOCAB, d_model=d_model, encoder_layers=n_enc, decoder_layers=n_dec,
        encoder_attention_heads=heads, decoder_attention_heads=heads,
        encoder_ffn_dim=2 * d_model + 3, decoder_ffn_dim=2 * d_model + 3,
        activation_function=act, scale_embedding=scale, max_position_embeddings=16,
        pad_token_id=PAD, bos_token_id=BOS, eos_token_id=EOS, decoder_start_token_id=EOS,
        attn_implementation="eager", **extra)
    hf = BartForConditionalGeneration(config)
    # all of it: position tables (offset rows included), layernorm_embedding, final_logits_bias
    assert perturb(hf) > 10
    return hf


@pytest.mark.parametrize("case", CASES)
def test_bart_logits_equal_hf(case):
    hf = make(*CASES[case])
    src, mask, tgt = padded_batch(VOCAB, PAD, start=EOS)
    diffs = compare(hf, src, mask, tgt)
    assert max(diffs.values()) <= TOL, diffs


def test_bart_config_and_position_offset():
    hf = make(*CASES["3heads_dk5_scaled"])
    model = from_hf(hf)
    c = model.config
    assert (c.pe, c.embed_norm, c.norm_position, c.activation, c.embed_scale, c.head_dim) == (
        "learned", True, "post", "gelu", True, 5)
    assert (c.pad_id, c.bos_id, c.eos_id, c.start_id) == (PAD, BOS, EOS, EOS)
    # position p is HF row p + 2; the decoder has its own table and its own embedding norm
    assert torch.equal(model.pos.W_pos, hf.model.encoder.embed_positions.weight[2:])
    assert torch.equal(model.dec_pos.W_pos, hf.model.decoder.embed_positions.weight[2:])
    assert torch.equal(model.dec_embed_norm.gamma, hf.model.decoder.layernorm_embedding.weight)
    assert model.config.max_len == 16


def test_bart_long_input_stops_at_position_table():
    hf = make(*CASES["3heads_dk5_scaled"])
    model = from_hf(hf)
    src = torch.full((1, 17), 5)
    with pytest.raises(InputError, match="position 16 is past the learned position table"):
        model(src, torch.tensor([[EOS]]))


def test_bart_unequal_ffn_is_refused():
    config = BartConfig(vocab_size=VOCAB, d_model=12, encoder_layers=1, decoder_layers=1,
                        encoder_attention_heads=3, decoder_attention_heads=3, encoder_ffn_dim=8,
                        decoder_ffn_dim=10, max_position_embeddings=16)
    with pytest.raises(InputError, match="encoder ffn_dim=8 but decoder ffn_dim=10"):
        from_hf(BartForConditionalGeneration(config))


@pytest.mark.parametrize("beams", (1, 3))
def test_bart_generate_equals_hf(beams):
    hf = make(*CASES["3heads_dk5_scaled"])
    src, mask, _ = padded_batch(VOCAB, PAD, start=EOS)
    ref, got = generations(hf, src, mask, PAD, beams)
    assert got[:, 0].eq(EOS).all()  # BART starts decoding from </s>
    assert torch.equal(got, ref), (got, ref)
