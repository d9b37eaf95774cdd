"""Generation with a window: each new token reads at most the last W tokens (generate(window=W)).

The reference is nanoGPT's loop, written here with the model's plain forward pass: crop the text
to its last W tokens (and the padding mask with it), run the whole crop, take the last logits."""

import pytest
import torch

from glassformer.config import ModelConfig
from glassformer.errors import InputError
from glassformer.generate import generate, sample_next
from glassformer.nn.model import build_model

pytestmark = pytest.mark.usefixtures("one_thread")
VOCAB, PAD, BOS, EOS = 23, 0, 1, 2


def _model(pe: str, arch: str = "decoder", max_len: int = 512, seed: int = 0):
    torch.manual_seed(seed)
    cfg = ModelConfig(arch=arch, vocab_size=VOCAB, d_model=16, n_heads=2, n_layers=2, d_ff=32, pe=pe,
                      max_len=max_len, pad_id=PAD, bos_id=BOS, eos_id=None if arch == "decoder" else EOS)
    model = build_model(cfg).eval()
    with torch.no_grad():  # a wider spread of logits: varied, non-repeating output
        for p in model.parameters():
            p.mul_(2.0)
    return model


def _reference(model, prompt, pad, n: int, window: int, pick):
    """nanoGPT's loop: the last `window` columns (and their padding) through the plain forward pass."""
    seq, pad = prompt.clone(), pad.clone()
    with torch.no_grad():
        for _ in range(n):
            crop, crop_pad = seq[:, -window:], pad[:, -window:]
            logits = model(crop, crop_pad if bool(crop_pad.any()) else None)[:, -1].float()
            logits[:, PAD] = float("-inf")  # generation never picks <pad>
            token = pick(logits)
            seq = torch.cat([seq, token[:, None]], dim=1)
            pad = torch.cat([pad, pad.new_zeros(pad.shape[0], 1)], dim=1)
    return seq


def _prompts(length: int, batch: int = 3, seed: int = 1):
    """Rows of ids 3..VOCAB-1, left-padded: row i has i pads (so the rows differ in length)."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(3, VOCAB, (batch, length), generator=g)
    pad = torch.zeros(batch, length, dtype=torch.bool)
    for i in range(batch):
        ids[i, :i], pad[i, :i] = PAD, True
    return ids, pad


@pytest.mark.parametrize("pe", ["sinusoidal", "learned", "rope", "alibi", "relative", "none"])
@pytest.mark.parametrize("prompt_len", [3, 11])
@pytest.mark.parametrize("use_cache", [True, False])
def test_greedy_window_equals_the_cropping_loop(pe, prompt_len, use_cache):
    window, n = 8, 20  # the text outgrows the window after a few tokens (or already in the prompt)
    model = _model(pe, max_len=window)
    ids, pad = _prompts(prompt_len)
    want = _reference(model, ids, pad, n, window, lambda logits: logits.argmax(-1))
    got = generate(model, ids, max_new_tokens=n, strategy="greedy", padding_mask=pad, window=window,
                   use_cache=use_cache)
    assert torch.equal(got, want)
    # the window is what reaches past the table: without it a learned table of 8 rows stops at 8 positions
    if pe == "learned" and prompt_len < window:
        assert generate(model, ids, max_new_tokens=n, padding_mask=pad).shape[1] == window
    elif pe == "learned":
        with pytest.raises(InputError, match="max_len=8"):
            generate(model, ids, max_new_tokens=n, padding_mask=pad)
    else:  # and the other encodings read positions 8..30, which changes the tokens
        assert not torch.equal(generate(model, ids, max_new_tokens=n, padding_mask=pad), want)


def test_sampling_window_equals_the_cropping_loop():
    model, window, n = _model("sinusoidal"), 6, 25
    ids, pad = _prompts(4)
    want = _reference(model, ids, pad, n, window,
                      lambda logits, g=torch.Generator().manual_seed(5): sample_next(logits, 0.9, 7, None, g))
    got = generate(model, ids, max_new_tokens=n, strategy="sample", temperature=0.9, top_k=7, padding_mask=pad,
                   window=window, generator=torch.Generator().manual_seed(5))
    assert torch.equal(got, want)


def test_a_window_the_text_never_reaches_changes_nothing():
    model = _model("rope")
    ids, pad = _prompts(5)
    for strategy in ("greedy", "beam"):
        plain = generate(model, ids, max_new_tokens=6, strategy=strategy, padding_mask=pad)
        assert torch.equal(generate(model, ids, max_new_tokens=6, strategy=strategy, padding_mask=pad, window=11),
                           plain)


@pytest.mark.parametrize("kwargs, arch, message", [
    (dict(window=0), "decoder", "window=0 must be a positive integer"),
    (dict(window=2.5), "decoder", "must be a positive integer"),
    (dict(window=9), "learned", "max_len=8"),
    (dict(window=4, strategy="beam"), "decoder", "'greedy' or 'sample' only"),
    (dict(window=4, precision="int8"), "decoder", "use precision='fp32'"),
    (dict(window=4), "encoder-decoder", "decoder-only"),
])
def test_a_window_generation_cannot_honour_stops_in_one_line(kwargs, arch, message):
    model = _model("learned", max_len=8) if arch == "learned" else _model("sinusoidal", arch=arch)
    with pytest.raises(InputError, match=message.replace("(", r"\(").replace(")", r"\)")):
        generate(model, torch.tensor([[3, 4, 5]]), max_new_tokens=6, **kwargs)
