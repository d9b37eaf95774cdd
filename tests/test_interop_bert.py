"""BERT -> glassformer: hidden states equal Hugging Face's BertModel (random weights, no download)."""

import pytest
import torch
from transformers import BertConfig, BertForMaskedLM, BertModel

from glassformer.errors import InputError
from glassformer.interop import from_hf
from interop_helpers import max_diff, perturb, right_padded

TOL = 1e-4
VOCAB = 50


def make_bert(hidden=30, heads=5, layers=2, act="gelu", impl="eager", types=2, cls=BertModel, **kw):
    cfg = BertConfig(vocab_size=VOCAB, hidden_size=hidden, num_attention_heads=heads, num_hidden_layers=layers,
                     intermediate_size=2 * hidden + 3, hidden_act=act, max_position_embeddings=16,
                     type_vocab_size=types, layer_norm_eps=1e-12, attn_implementation=impl, **kw)
    hf = cls(cfg).eval()
    perturb(hf)
    return hf


# (d_model, n_heads, layers, activation, HF attention, token types): d_k = 6, 12, 8, 6 (odd head counts)
CONFIGS = [(30, 5, 2, "gelu", "eager", 3), (36, 3, 1, "gelu_new", "sdpa", 2),
           (32, 4, 3, "relu", "eager", 1), (42, 7, 4, "gelu", "sdpa", 2)]


@pytest.mark.parametrize("hidden,heads,layers,act,impl,types", CONFIGS)
def test_hidden_states_equal_hf_with_padding_and_segments(hidden, heads, layers, act, impl, types):
    hf = make_bert(hidden, heads, layers, act, impl, types)
    ours = from_hf(hf)
    ids, pad = right_padded(VOCAB, lengths=(9, 6, 2))
    seg = torch.randint(0, types, ids.shape, generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        ref = hf(ids, attention_mask=(~pad).long(), token_type_ids=seg).last_hidden_state
        got = ours(ids, padding_mask=pad, segment_ids=seg)
    assert got.shape == ref.shape
    diff = max_diff(got, ref, pad)
    print(f"bert {hf.config.hidden_size}/{hf.config.num_attention_heads} heads: max abs diff {diff:.2e}")  # pytest -s
    assert diff <= TOL
    assert ref[~pad].abs().max() > 1.0  # the comparison is not between near-zero tensors


def test_every_layer_matches_hf_hidden_states():
    """Traced x0 (embeddings after LayerNorm) and enc.{l}.out equal HF's hidden_states tuple."""
    hf = make_bert(36, 3, 3, "gelu", "eager", 2)
    ours = from_hf(hf)
    ids, pad = right_padded(VOCAB, lengths=(8, 5))
    with torch.no_grad():
        ref = hf(ids, attention_mask=(~pad).long(), output_hidden_states=True).hidden_states
        _, trace = ours.run_with_trace(ids, padding_mask=pad, names=["x0", "enc.*.out"])
    assert list(trace) == ["x0", "enc.0.out", "enc.1.out", "enc.2.out"]
    for mine, theirs in zip(trace.values(), ref):
        assert max_diff(mine, theirs, pad) <= TOL


def test_pad_id_masks_padding_without_an_explicit_mask():
    """pad_token_id becomes pad_id: model(ids) masks [PAD] keys like HF given attention_mask."""
    hf = make_bert()
    ours = from_hf(hf)
    assert ours.config.pad_id == 0
    ids, pad = right_padded(VOCAB, lengths=(7, 4))
    with torch.no_grad():
        ref = hf(ids, attention_mask=(~pad).long()).last_hidden_state
        got = ours(ids)
    assert max_diff(got, ref, pad) <= TOL


def test_config_mirrors_bert():
    cfg = from_hf(make_bert(30, 5, 2, "gelu_new")).config
    assert (cfg.arch, cfg.norm_position, cfg.pe, cfg.embed_norm, cfg.use_final_norm) == \
        ("encoder", "post", "learned", True, False)
    assert (cfg.d_model, cfg.n_heads, cfg.head_dim, cfg.n_layers, cfg.d_ff) == (30, 5, 6, 2, 63)
    assert (cfg.activation, cfg.norm_eps, cfg.max_len, cfg.n_segments) == ("gelu_tanh", 1e-12, 16, 2)


def test_masked_lm_converts_its_encoder():
    hf = make_bert(cls=BertForMaskedLM)
    ours = from_hf(hf)
    ids, pad = right_padded(VOCAB, lengths=(6, 6))
    with torch.no_grad():
        ref = hf.bert(ids).last_hidden_state
        got = ours(ids)
    assert max_diff(got, ref) <= TOL


@pytest.mark.parametrize("kw,needle", [
    ({"hidden_act": "tanh"}, "hidden_act='tanh' is not supported"),
    ({"is_decoder": True}, "is_decoder"),
])
def test_unsupported_bert_flags_stop_with_one_line(kw, needle):
    hf = make_bert(**{"act": kw.pop("hidden_act", "gelu")}, **kw)
    with pytest.raises(InputError) as e:
        from_hf(hf)
    assert needle in str(e.value) and "\n" not in str(e.value)


def test_unknown_class_is_refused():
    with pytest.raises(InputError, match="cannot convert Linear; supported: .*BertModel"):
        from_hf(torch.nn.Linear(2, 2))
