"""Bad inputs to a model stop with one clear line, never a deep stack trace."""

import pytest
import torch

from glassformer import InputError, ModelConfig, build_model


def small(arch="encoder", **kw):
    return build_model(ModelConfig(arch=arch, vocab_size=20, d_model=8, n_heads=2, n_layers=1, d_ff=16, **kw))


def error(fn) -> str:
    with pytest.raises(InputError) as e:
        fn()
    assert "\n" not in str(e.value)
    return str(e.value)


def test_wrong_dtype():
    assert "integer tensor" in error(lambda: small()(torch.rand(1, 3)))


def test_wrong_rank_suggests_unsqueeze():
    assert "ids.unsqueeze(0)" in error(lambda: small()(torch.tensor([1, 2, 3])))


def test_not_a_tensor():
    assert "torch.Tensor" in error(lambda: small()([[1, 2, 3]]))


def test_id_outside_vocabulary():
    assert error(lambda: small()(torch.tensor([[1, 25]]))) == "token id 25 in ids is outside the vocabulary [0, 20)"
    assert "token id -1" in error(lambda: small()(torch.tensor([[-1, 2]])))


def test_empty():
    assert "is empty" in error(lambda: small()(torch.zeros(1, 0, dtype=torch.long)))


def test_longer_than_learned_table():
    m = small(pe="learned", max_len=4)
    assert "past the learned position table (max_len=4)" in error(lambda: m(torch.ones(1, 6, dtype=torch.long)))


def test_source_target_batch_mismatch():
    m = small("encoder-decoder")
    msg = error(lambda: m(torch.ones(2, 3, dtype=torch.long), torch.ones(3, 3, dtype=torch.long)))
    assert "batch size 2" in msg and "3" in msg


def test_padding_mask_checks():
    m = small()
    ids = torch.ones(2, 3, dtype=torch.long)
    assert "bool tensor" in error(lambda: m(ids, padding_mask=torch.zeros(2, 3)))
    assert "shape (2, 4)" in error(lambda: m(ids, padding_mask=torch.zeros(2, 4, dtype=torch.bool)))


def test_target_vocab_checked_separately():
    m = build_model(ModelConfig(arch="encoder-decoder", vocab_size=20, tgt_vocab_size=10, share_embeddings=False,
                                d_model=8, n_heads=2, n_layers=1, d_ff=16))
    assert "[0, 10)" in error(lambda: m(torch.ones(1, 3, dtype=torch.long), torch.full((1, 2), 15)))
