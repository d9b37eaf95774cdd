"""Held-out text is scored in overlapping windows (train/batching.windows): every character once,
each with at least half a window of context — checked against the windows' definition by hand and
against the model's own log-probabilities summed target by target with torch."""

from __future__ import annotations

import math
from types import SimpleNamespace

import torch
from hypothesis import given, settings, strategies as st

from glassformer.config import ModelConfig
from glassformer.nn import build_model
from glassformer.tokenize import build_tokenizer
from glassformer.train.batching import BatchStream, ShiftingWindows, windows
from glassformer.train.evaluate import evaluate
from glassformer.train.tasks import TaskData, encode_split


@settings(max_examples=200, deadline=None)
@given(n=st.integers(2, 300), block=st.integers(1, 40), data=st.data())
def test_every_target_is_scored_once_with_at_least_half_a_window_before_it(n, block, data):
    stride = data.draw(st.integers(1, block))
    stream = list(range(100, 100 + n))
    seen = []
    for w in windows(stream, block, stride):
        ids = w[0]
        start = stream.index(ids[0])
        assert ids == stream[start:start + block + 1] and len(ids) >= 2
        for p in range(w.skip, len(ids) - 1):  # target ids[p + 1], read after p + 1 tokens of the window
            j = start + p + 1
            seen.append(j)
            assert p + 1 >= min(j, block - stride + 1)
    assert sorted(seen) == list(range(1, n)) and len(seen) == len(set(seen))


def test_no_stride_keeps_the_training_windows():
    stream = list(range(20))
    assert [w[0] for w in windows(stream, 6)] == [stream[0:7], stream[6:13], stream[12:19], stream[18:20]]


@settings(max_examples=300, deadline=None)
@given(n=st.integers(2, 400), block=st.integers(1, 40), seed=st.integers(0, 5), epoch=st.integers(0, 60))
def test_training_windows_are_the_text_cut_whole_at_one_offset_per_epoch(n, block, seed, epoch):
    # by hand: window i of an epoch is the stream's block + 1 tokens from offset + i·block, the offset
    # below a window (0 in the first epoch), and every window whole once the text holds two
    stream = list(range(1000, 1000 + n))
    cut = ShiftingWindows(stream, block, seed).at_epoch(epoch)
    got = [cut[i][0] for i in range(len(cut))]
    offset = got[0][0] - 1000
    assert 0 <= offset < block and (epoch > 0 or offset == 0)
    assert got == [stream[offset + i * block:offset + i * block + block + 1] for i in range(len(cut))]
    assert all(len(w) >= 2 for w in got)
    if n - 1 >= 2 * block:
        assert len(cut) == (n - 1) // block - 1 and all(len(w) == block + 1 for w in got)


def test_the_trainer_reads_each_epoch_at_its_own_offset():
    # through the trainer's batching (loop.next_micro_batches): the rows of one epoch's batches are the
    # text at one offset, and later epochs move it — a target is read after other context each pass
    from glassformer.train.loop import next_micro_batches

    stream = list(range(5, 5 + 16 * 40 + 1))  # 40 windows of 16 at offset 0, 39 at every offset
    cut = ShiftingWindows(stream, 16, seed=0)
    batches = BatchStream([(17,)] * len(cut), batch_size=13, seed=0)
    config = ModelConfig(arch="decoder", vocab_size=1000, d_model=8, n_heads=2, n_layers=1, d_ff=16, pad_id=0)
    offsets: dict[int, set] = {}
    for _ in range(3 * 3 + 1):  # 3 batches an epoch (39 windows), into the fourth epoch
        (b,) = next_micro_batches(batches, cut, config, SimpleNamespace(accum_steps=1))
        for row in b["inp"].tolist():
            start = row[0] - 5
            assert row == stream[start:start + 16]
            offsets.setdefault(batches.epoch, set()).add(start % 16)
    assert all(len(found) == 1 for found in offsets.values())
    assert offsets[0] == {0} and len(set().union(*offsets.values())) > 2


def test_held_out_loss_and_bits_per_character_are_the_models_own_log_probabilities():
    """`evaluate` on overlapping windows = the mean over every character of −log p(char | the window
    before it), computed here window by window with log_softmax; bpc divides by the characters."""
    lines = ["the cat eats fish", "a dog barks at the moon", "猫吃鱼", "fish"] * 6
    tok = build_tokenizer("char", lines)
    cfg = ModelConfig(arch="decoder", vocab_size=tok.vocab_size, d_model=32, n_heads=4, n_layers=2, d_ff=64,
                      dropout=0.0, pad_id=0, bos_id=1, eos_id=2, max_len=64)
    torch.manual_seed(0)
    model = build_model(cfg).eval()
    block = 16
    examples = encode_split("lm", lines, tok, tok, block, held_out=True)
    assert any(w.skip for w in examples)
    data = TaskData("lm", "lm", {"test": lines}, tok, tok)
    data.encoded["test"] = examples
    got = evaluate(model, data, "test")
    total, count = 0.0, 0
    with torch.no_grad():
        for w in examples:
            ids = torch.tensor([w[0]])
            logp = torch.log_softmax(model(ids[:, :-1]).double(), dim=-1)[0]
            for p in range(w.skip, ids.shape[1] - 1):
                total -= float(logp[p, ids[0, p + 1]])
                count += 1
    stream_targets = sum(len(tok.encode(line, add_special=True)) for line in lines) - 1
    assert count == stream_targets
    assert math.isclose(got["loss"], total / count, rel_tol=1e-5)
    chars = sum(len(line) + 1 for line in lines)
    assert math.isclose(got["bpc"], total / math.log(2) / chars, rel_tol=1e-5)


def test_bits_per_character_only_where_the_tokenizer_charges_every_character():
    """A word tokenizer reads an unseen word as one <unk> and a run of spaces as one: its loss is not a
    cost for every character, so no bits per character (the note says why); char and subwords get them."""
    train = ["the cat eats fish", "a dog barks at the moon"] * 6
    test = ["the  cat barks", "a zebra eats the fish"]  # "zebra" unseen, a double space
    for kind, measured in (("word", False), ("char", True), ("bpe", True), ("unigram", True)):
        tok = build_tokenizer(kind, train, vocab_size=40 if kind in ("bpe", "unigram") else None)
        cfg = ModelConfig(arch="decoder", vocab_size=tok.vocab_size, d_model=16, n_heads=2, n_layers=1, d_ff=32,
                          pad_id=0, bos_id=1, eos_id=2, max_len=64)
        data = TaskData("lm", "lm", {"test": test}, tok, tok)
        data.encoded["test"] = encode_split("lm", test, tok, tok, 16, held_out=True)
        got = evaluate(build_model(cfg).eval(), data, "test")
        assert ("bpc" in got) == measured and ("bpc_note" in got) != measured, kind
        if not measured:
            assert "word tokenizer reads an unseen word as one <unk>" in got["bpc_note"]
