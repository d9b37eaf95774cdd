"""§3.1: self-attention is blind to word order; positional encoding is what lets 猫 追 狗 ≠ 狗 追 猫.

zh→en translation on the bundled corpus (`glassformer.data.zh_en`), whose held-out test split is
made of role-reversed pairs (A verb B / B verb A, neither direction seen in training). Without a
positional encoding the encoder output is permutation-equivariant and cross-attention sums over
the memory, so both members of a pair get the *same* translation: at most one of the two can be
right. Greedy decoding, exact match.
"""

from __future__ import annotations

import random

from ..config import ModelConfig
from ..nn import build_model
from .base import Context, Outcome
from .report import mean_curve, smooth, step_plot
from .runner import PAD, BOS, EOS, TrainSpec, greedy_translate, seq2seq_batch, seq2seq_loss, set_seed, train
from .verdict import Check, Variant

ID = "pe-order"
SECTION = "seed 000 §3.1"
CLAIM = ("Self-attention is permutation-equivariant: Attention(P·X) = P·Attention(X). Without "
         "positional information 猫追狗 and 狗追猫 differ only in the order of rows, so a model "
         "that cannot perceive word order cannot handle language; position must be injected.")
SEEDS = 5

ENCODINGS = ("none", "sinusoidal")


def _data(quick: bool):
    from ..data.zh_en import role_reversed_pairs, zh_en_splits
    from ..tokenize import build_tokenizer
    splits = zh_en_splits(seed=0)
    src_tok = build_tokenizer("word", [s for s, _ in splits["train"]])
    tgt_tok = build_tokenizer("word", [t for _, t in splits["train"]])
    assert (src_tok.pad_id, src_tok.bos_id, src_tok.eos_id) == (PAD, BOS, EOS)
    enc = lambda pairs: [(src_tok.encode(s), tgt_tok.encode(t)) for s, t in pairs]  # noqa: E731
    test = splits["test"]
    pairs = role_reversed_pairs(test)
    if quick:
        pairs = pairs[:16]
        test = [ex for p in pairs for ex in p]
    return enc(splits["train"]), enc(test), pairs, src_tok, tgt_tok, test


def run(ctx: Context) -> Outcome:
    train_ids, test_ids, pairs, src_tok, tgt_tok, test = _data(ctx.quick)
    spec = TrainSpec(steps=ctx.pick(30, 500), batch_size=64, lr=2e-3, warmup=ctx.pick(10, 100),
                     label_smoothing=0.1)
    encodings = ENCODINGS
    index = {src: i for i, (src, _) in enumerate(test)}
    variants, curves, examples = [], {}, {}
    for pe in encodings:
        cfg = ModelConfig(arch="encoder-decoder", vocab_size=src_tok.vocab_size,
                          tgt_vocab_size=tgt_tok.vocab_size, share_embeddings=False, d_model=64,
                          n_heads=4, n_layers=2, d_ff=256, pe=pe, pad_id=PAD, bos_id=BOS, eos_id=EOS,
                          dropout=0.0)
        exact, both, same, losses = [], [], [], []
        for seed in ctx.seeds:
            set_seed(seed)
            model = build_model(cfg)
            rng = random.Random(seed)
            result = train(model, lambda step: seq2seq_batch(rng.sample(train_ids, spec.batch_size)),
                           seq2seq_loss(spec.label_smoothing), spec)
            losses.append(result.losses)
            outputs = [tgt_tok.decode(o) for o in greedy_translate(model, [s for s, _ in test_ids])]
            right = [o == ref for o, (_, ref) in zip(outputs, test)]
            exact.append(sum(right) / len(right))
            pair_idx = [(index[a[0]], index[b[0]]) for a, b in pairs]
            both.append(sum(right[i] and right[j] for i, j in pair_idx) / len(pair_idx))
            same.append(sum(outputs[i] == outputs[j] for i, j in pair_idx) / len(pair_idx))
            if seed == ctx.seeds[0]:
                i, j = pair_idx[0]
                examples[pe] = [(test[i][0], outputs[i]), (test[j][0], outputs[j])]
        ctx.log(f"pe={pe}: exact match {[round(x, 3) for x in exact]}, identical pairs {same}")
        variants += [Variant(f"pe={pe}: exact match", "exact match on role-reversed test sentences", exact),
                     Variant(f"pe={pe}: both right", "pairs with both members right", both),
                     Variant(f"pe={pe}: identical", "pairs translated identically", same)]
        curves[f"pe={pe}"] = smooth(mean_curve(losses))
    step_plot(ctx.out_dir / "pe_order_loss.png", curves,
              "training loss (label-smoothed, mean over seeds)", "zh→en with and without positional encoding")
    checks = [
        Check("sinusoidal PE translates role-reversed sentences, no PE cannot", "pe=sinusoidal: exact match", "pe=none: exact match",
              True, 0.2),
        Check("with PE both members of a pair can be right; without, at most one",
              "pe=sinusoidal: both right", "pe=none: both right", True, 0.5),
        Check("without PE a sentence and its role reversal get the same translation",
              "pe=none: identical", "pe=sinusoidal: identical", True, 0.5, main=False),
    ]
    ex = "; ".join(f"pe={pe}: " + " / ".join(f"{s} → “{o}”" for s, o in pairs_)
                   for pe, pairs_ in examples.items())
    setup = (f"Encoder-decoder, d_model 64, 4 heads, 2+2 layers, d_ff 256, word-level vocabularies "
             f"({src_tok.vocab_size} zh, {tgt_tok.vocab_size} en), {len(train_ids)} training pairs, "
             f"{spec.steps} steps of batch {spec.batch_size}, peak lr {spec.lr}, warmup {spec.warmup}, "
             f"label smoothing {spec.label_smoothing}; test: {len(test)} held-out sentences = "
             f"{len(pairs)} role-reversed pairs; greedy decoding, exact match. Example ({ex}).")
    return Outcome(variants, checks, setup,
                   plots=[("pe_order_loss.png", "zh→en training loss with and without positional encoding")])
