"""Configuration errors: one line naming the field and the value (seed 003 §6's asserts, as real errors)."""

import dataclasses

import pytest

from glassformer import ConfigError, ModelConfig


def one_line_error(**kw) -> str:
    with pytest.raises(ConfigError) as e:
        ModelConfig(**kw)
    msg = str(e.value)
    assert "\n" not in msg
    return msg


def test_heads_must_divide_d_model():
    assert one_line_error(d_model=10, n_heads=3).startswith("d_model=10 is not divisible by n_heads=3")


def test_explicit_d_k_lifts_divisibility():
    cfg = ModelConfig(d_model=10, n_heads=3, d_k=4)
    assert cfg.head_dim == 4


@pytest.mark.parametrize("field,value", [
    ("activation", "tanh"), ("norm", "groupnorm"), ("pe", "fourier"), ("norm_position", "middle"),
    ("arch", "rnn"), ("pe_combine", "multiply"), ("attn_impl", "flash"),
])
def test_unknown_choice_names_field_and_value(field, value):
    msg = one_line_error(**{field: value})
    assert msg.startswith(f"{field}={value!r} is not one of")


@pytest.mark.parametrize("field,value", [
    ("d_model", 0), ("n_heads", -2), ("n_layers", 1.5), ("d_ff", "4"), ("vocab_size", True), ("max_len", 0),
])
def test_sizes_must_be_positive_integers(field, value):
    assert one_line_error(**{field: value}) == f"{field}={value!r} must be a positive integer"


def test_other_checks():
    assert "dropout=1.5" in one_line_error(dropout=1.5)
    assert "norm_eps=0" in one_line_error(norm_eps=0)
    assert "needs an even width" in one_line_error(d_model=9, n_heads=3, pe="sinusoidal")
    assert "pe='rope' needs an even d_k" in one_line_error(d_model=9, n_heads=3, pe="rope")
    assert "needs an absolute pe" in one_line_error(pe="rope", pe_combine="concat", d_pos=8)
    assert "needs 0 < d_pos < d_model" in one_line_error(pe_combine="concat")
    assert "set tie_embeddings=False" in one_line_error(arch="decoder", pe_combine="concat", d_pos=8)
    assert "pad_id=99" in one_line_error(vocab_size=50, pad_id=99)
    assert "tgt_vocab_size" in one_line_error(arch="decoder", tgt_vocab_size=10)
    assert "share_embeddings=True" in one_line_error(tgt_vocab_size=20, vocab_size=30)


def test_unknown_keys_rejected():
    with pytest.raises(ConfigError) as e:
        ModelConfig.from_dict({"d_model": 16, "n_heads": 2, "dmodel": 16})
    assert str(e.value).startswith("unknown config key(s): dmodel")
    with pytest.raises(ConfigError):
        ModelConfig().replace(heads=4)


def test_frozen_and_round_trip():
    cfg = ModelConfig(d_model=16, n_heads=2, pe="rope", norm="rmsnorm")
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.d_model = 32
    assert ModelConfig.from_json(cfg.to_json()) == cfg


def test_derived_defaults():
    post, pre = ModelConfig(norm_position="post"), ModelConfig(norm_position="pre")
    assert (post.use_final_norm, pre.use_final_norm) == (False, True)
    assert ModelConfig(d_model=512, n_heads=8).head_dim == 64  # §2.2: 512 / 8


@pytest.mark.parametrize("value", ["\n", -1, 1.5, True])
def test_bad_n_segments_is_one_line_with_the_value_shown(value):
    # found by tests/test_fuzz.py: the value was printed with str(), so a newline split the message
    with pytest.raises(ConfigError) as e:
        ModelConfig(arch="encoder", vocab_size=11, d_model=8, n_heads=2, n_segments=value)
    assert "\n" not in str(e.value) and f"n_segments={value!r} must be a whole number >= 0" in str(e.value)


@pytest.mark.parametrize("fields, words", [
    (dict(task="zh-en", data="mine.tsv"), "task='zh-en' trains on its own built-in data and does not read data='mine.tsv'"),
    (dict(task="copy", data="mine.tsv"), "task='copy' trains on its own built-in data"),
    (dict(task="lm", data="a.txt", stop_at=0.9), "stop_at=0.9 stops at an exact match, which a language model"),
    (dict(task="lm", data="a.txt", monitor="exact_match"), "monitor='exact_match' needs a translation task"),
])
def test_a_training_setting_the_task_does_not_use_is_refused(fields, words):
    """Every setting is honoured or refused (issue 31 §2): --data on a built-in task was ignored."""
    from glassformer.train import TrainConfig
    with pytest.raises(ConfigError) as e:
        TrainConfig(**fields)
    assert words in str(e.value) and "\n" not in str(e.value)
