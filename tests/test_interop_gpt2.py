"""GPT-2 -> glassformer: logits equal Hugging Face's GPT2LMHeadModel (random weights, no download)."""

import pytest
import torch
from transformers import GPT2Config, GPT2LMHeadModel, GPT2Model

from glassformer.errors import InputError
from glassformer.interop import from_hf
from interop_helpers import max_diff, perturb, right_padded

TOL = 1e-4
VOCAB = 60


def make_gpt2(hidden=30, heads=5, layers=2, act="gelu_new", tie=True, inner=None, cls=GPT2LMHeadModel, **kw):
    cfg = GPT2Config(vocab_size=VOCAB, n_embd=hidden, n_head=heads, n_layer=layers, n_positions=24,
                     activation_function=act, n_inner=inner, tie_word_embeddings=tie, bos_token_id=1,
                     eos_token_id=2, attn_implementation="eager", **kw)
    hf = cls(cfg).eval()
    perturb(hf)
    return hf


# (d_model, n_heads, layers, activation, tied head, d_ff): d_k = 6, 12, 8, 6
CONFIGS = [(30, 5, 2, "gelu_new", True, None), (36, 3, 1, "gelu_new", False, 50),
           (32, 4, 3, "relu", True, 70), (42, 7, 4, "gelu", True, None)]


@pytest.mark.parametrize("hidden,heads,layers,act,tie,inner", CONFIGS)
def test_logits_equal_hf_with_padding(hidden, heads, layers, act, tie, inner):
    hf = make_gpt2(hidden, heads, layers, act, tie, inner)
    ours = from_hf(hf)
    assert (ours.head.W_U is None) == tie  # tied: logits use W_E itself
    ids, pad = right_padded(VOCAB, lengths=(9, 6, 3))
    with torch.no_grad():
        ref = hf(ids, attention_mask=(~pad).long()).logits
        got = ours(ids, padding_mask=pad)
    assert got.shape == ref.shape
    diff = max_diff(got, ref, pad)
    print(f"gpt2 {hf.config.hidden_size}/{hf.config.num_attention_heads} heads: max abs diff {diff:.2e}")  # pytest -s
    assert diff <= TOL
    assert ref[~pad].abs().max() > 1.0


def test_unscaled_scores_and_left_padding():
    """scale_attn_weights=False maps to scale_scores=False; left padding equals HF given the
    positions glassformer uses (padding does not count), passed as position_ids."""
    hf = make_gpt2(36, 3, 2, scale_attn_weights=False)
    ours = from_hf(hf)
    assert ours.config.scale_scores is False
    ids, pad = right_padded(VOCAB, lengths=(8, 5, 2))
    ids, pad = ids.flip(1), pad.flip(1)
    keep = (~pad).long()
    with torch.no_grad():
        ref = hf(ids, attention_mask=keep, position_ids=(keep.cumsum(1) - 1).clamp(min=0)).logits
        got = ours(ids, padding_mask=pad)
    assert max_diff(got, ref, pad) <= TOL


def test_kv_cache_steps_equal_hf_full_pass():
    hf = make_gpt2(30, 5, 2)
    ours = from_hf(hf)
    ids = torch.randint(0, VOCAB, (2, 10), generator=torch.Generator().manual_seed(4))
    with torch.no_grad():
        ref = hf(ids).logits
        cache = ours.new_cache()
        steps = [ours(ids[:, :6], cache=cache)] + [ours(ids[:, t:t + 1], cache=cache) for t in range(6, 10)]
    assert max_diff(torch.cat(steps, dim=1), ref) <= TOL


def test_base_model_hidden_state_is_traced_final_norm():
    hf = make_gpt2(36, 3, 2, cls=GPT2Model)
    ours = from_hf(hf)
    ids, pad = right_padded(VOCAB, lengths=(7, 4))
    with torch.no_grad():
        ref = hf(ids, attention_mask=(~pad).long()).last_hidden_state
        _, trace = ours.run_with_trace(ids, padding_mask=pad, names=["dec_norm"])
    assert max_diff(trace["dec_norm"], ref, pad) <= TOL


def test_config_mirrors_gpt2():
    cfg = from_hf(make_gpt2(30, 5, 2)).config
    assert (cfg.arch, cfg.norm_position, cfg.use_final_norm, cfg.pe, cfg.activation) == \
        ("decoder", "pre", True, "learned", "gelu_tanh")
    assert (cfg.head_dim, cfg.d_ff, cfg.max_len, cfg.tie_embeddings, cfg.bos_id, cfg.eos_id) == (6, 120, 24, True, 1, 2)


@pytest.mark.parametrize("flag", ["scale_attn_by_inverse_layer_idx", "reorder_and_upcast_attn", "add_cross_attention"])
def test_unsupported_flags_stop_with_one_line(flag):
    hf = make_gpt2(**{flag: True})
    with pytest.raises(InputError) as e:
        from_hf(hf)
    assert f"{flag}=True is not supported" in str(e.value) and "\n" not in str(e.value)
