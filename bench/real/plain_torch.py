"""The plain-PyTorch baselines of the real-data benchmark: a standard recipe, nothing of glassformer's
model code (only its data files and its metric functions, so both arms are scored alike).

    python bench/real/plain_torch.py g2p DATA_DIR OUT.jsonl MINUTES
    python bench/real/plain_torch.py lm-en DATA_DIR OUT.jsonl MINUTES
    (also pinyin: Chinese phrase -> pinyin syllables, the same seq2seq as g2p)

- g2p: `torch.nn.Transformer` (d_model 128, 4 heads, 3+3 layers, d_ff 512, dropout 0.1, its
  default Post-LN), characters -> phonemes, AdamW 1e-3 with 400 warmup steps, batch 64,
  greedy decoding; valid sequence error every 100 steps, test WER/PER at the end.
- lm-en / lm-zh: a nanoGPT-style decoder (`nn.TransformerEncoder` with a causal mask,
  norm_first=True, learned positions; d_model 128, 4 layers, block 128, batch 64), characters,
  AdamW 1e-3 with 100 warmup steps (nanoGPT's shakespeare_char); valid bits per character every 100 steps, test bpc at the end.

One thread (`torch.set_num_threads(1)`) by default: it runs beside glassformer's arm with the same
share of a shared machine; `PLAIN_THREADS=N` for the sequential protocol (each arm alone on the
machine, `SEQUENTIAL=1 bash bench/real/run.sh`). Each line of OUT.jsonl: {"elapsed_s", "step", "split", metric...}.
"""

from __future__ import annotations

import json
import math
import os
import random
import sys
import time
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

from glassformer.train.error_rates import closest_references, scored_items, sequence_error_rate, token_error_rate

PAD, BOS, EOS, UNK = 0, 1, 2, 3


def vocab(symbols) -> dict[str, int]:
    out = {"<pad>": PAD, "<bos>": BOS, "<eos>": EOS, "<unk>": UNK}
    for s in sorted(set(symbols)):
        out.setdefault(s, len(out))
    return out


def warmup_rate(step: int, warmup: int = 400) -> float:
    return min(1.0, step / warmup)


def optimise(model, opt, sched, loss) -> None:
    """One AdamW step with gradient clipping at 1.0 and the warmup schedule."""
    opt.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    sched.step()


def pad(seqs: list[list[int]]) -> torch.Tensor:
    width = max(len(s) for s in seqs)
    return torch.tensor([s + [PAD] * (width - len(s)) for s in seqs])


# ---- grapheme to phoneme ----
class Seq2Seq(nn.Module):
    def __init__(self, n_src: int, n_tgt: int, d: int = 128):
        super().__init__()
        self.src_emb, self.tgt_emb, self.pos = nn.Embedding(n_src, d), nn.Embedding(n_tgt, d), nn.Embedding(64, d)
        self.core = nn.Transformer(d, 4, 3, 3, 512, 0.1, batch_first=True)
        self.out = nn.Linear(d, n_tgt)

    def embed(self, emb, x):
        return emb(x) + self.pos(torch.arange(x.shape[1]))

    def forward(self, src, tgt):
        mask = self.core.generate_square_subsequent_mask(tgt.shape[1])
        h = self.core(self.embed(self.src_emb, src), self.embed(self.tgt_emb, tgt), tgt_mask=mask,
                      src_key_padding_mask=src == PAD, tgt_key_padding_mask=tgt == PAD,
                      memory_key_padding_mask=src == PAD, tgt_is_causal=True)
        return self.out(h)

    @torch.no_grad()
    def greedy(self, src, max_len: int = 30) -> list[list[int]]:
        ys = torch.full((src.shape[0], 1), BOS)
        for _ in range(max_len):
            nxt = self(src, ys)[:, -1].argmax(-1, keepdim=True)
            ys = torch.cat([ys, nxt], 1)
            if (ys == EOS).any(1).all():
                break
        out = []
        for row in ys[:, 1:].tolist():
            out.append(row[:row.index(EOS)] if EOS in row else row)
        return out


def read_tsv(path: Path) -> list[tuple[str, str]]:
    return [tuple(line.rstrip("\n").split("\t")) for line in path.open(encoding="utf-8") if line.strip()]


def g2p(data: Path, log, minutes: float, name: str = "g2p") -> None:
    """Characters -> space-separated target words (CMUdict phonemes, or pinyin syllables)."""
    pairs = read_tsv(data / f"{name}-train.tsv")
    random.Random(0).shuffle(pairs)
    valid, train = pairs[:500], pairs[1000:]  # the same 5%-style hold-out idea as glassformer's
    test = read_tsv(data / f"{name}-test.tsv")
    sv = vocab(c for w, _ in train for c in w)
    tv = vocab(p for _, ph in train for p in ph.split())
    inv = {i: s for s, i in tv.items()}
    enc_s = lambda w: [sv.get(c, UNK) for c in w]  # noqa: E731
    enc_t = lambda p: [tv.get(x, UNK) for x in p.split()]  # noqa: E731
    model = Seq2Seq(len(sv), len(tv))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.98), weight_decay=0.01)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda i: warmup_rate(i + 1))

    def decode(items):
        model.eval()
        hyps = []
        for i in range(0, len(items), 256):
            chunk = items[i:i + 256]
            for ids in model.greedy(pad([enc_s(w) for w, _ in chunk])):
                hyps.append(" ".join(inv.get(t, "<unk>") for t in ids))
        model.train()
        return hyps, [p for _, p in items]

    start, step, best = time.monotonic(), 0, (2.0, None)
    rng = random.Random(0)
    while time.monotonic() - start < minutes * 60:
        batch = rng.sample(train, 64)
        src = pad([enc_s(w) for w, _ in batch])
        tgt = pad([[BOS] + enc_t(p) + [EOS] for _, p in batch])
        logits = model(src, tgt[:, :-1])
        optimise(model, opt, sched, F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt[:, 1:].reshape(-1),
                                                    ignore_index=PAD, label_smoothing=0.1))
        step += 1
        if step % 100 == 0:
            hyps, refs = decode(valid)
            ser = sequence_error_rate(hyps, refs)
            log({"step": step, "split": "valid", "ser": ser, "wer": token_error_rate(hyps, refs),
                 "elapsed_s": time.monotonic() - start})
            if ser < best[0]:
                best = (ser, {k: v.clone() for k, v in model.state_dict().items()})
    if best[1] is not None:
        model.load_state_dict(best[1])
    items = scored_items(test)  # a word with two pronunciations: right if either
    hyps, ref_lists = decode(items)
    refs = closest_references(hyps, ref_lists)
    log({"step": step, "split": "test", "n": len(refs), "ser": sequence_error_rate(hyps, refs),
         "per": token_error_rate(hyps, refs), "elapsed_s": time.monotonic() - start})


# ---- character language model ----
class Decoder(nn.Module):
    def __init__(self, n: int, d: int = 128, block: int = 128):
        super().__init__()
        self.emb, self.pos = nn.Embedding(n, d), nn.Embedding(block, d)
        layer = nn.TransformerEncoderLayer(d, 4, 512, 0.1, batch_first=True, norm_first=True)
        self.core = nn.TransformerEncoder(layer, 4, enable_nested_tensor=False)
        self.norm, self.out = nn.LayerNorm(d), nn.Linear(d, n)

    def forward(self, x):
        mask = nn.Transformer.generate_square_subsequent_mask(x.shape[1])
        h = self.core(self.emb(x) + self.pos(torch.arange(x.shape[1])), mask=mask, is_causal=True)
        return self.out(self.norm(h))


def char_stream(path: Path, v: dict[str, int]) -> list[int]:
    ids = []
    for line in path.open(encoding="utf-8"):
        ids += [v.get(c, UNK) for c in line.rstrip("\n")] + [EOS]  # a line end is one predicted symbol
    return ids


@torch.no_grad()
def bpc(model, ids: list[int], block: int = 128) -> float:
    """Bits per character over the whole stream, each symbol predicted once from up to `block` before it."""
    model.eval()
    total, count = 0.0, 0
    for i in range(0, len(ids) - 1, block):
        x = torch.tensor([ids[i:i + block + 1]])
        logits = model(x[:, :-1])
        total += float(F.cross_entropy(logits[0], x[0, 1:], reduction="sum"))
        count += x.shape[1] - 1
    model.train()
    return total / count / math.log(2)


def lm(lang: str, data: Path, log, minutes: float) -> None:
    lines = (data / f"{lang}-train.txt").read_text(encoding="utf-8").splitlines()
    v = vocab(c for line in lines for c in line)
    ids = char_stream(data / f"{lang}-train.txt", v)
    cut = len(ids) * 95 // 100
    train, valid = ids[:cut], ids[cut:cut + 50_000]
    test = char_stream(data / f"{lang}-test.txt", v)
    model = Decoder(len(v))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.95), weight_decay=0.1)
    # nanoGPT's shakespeare_char recipe warms up for 100 iterations (400 would spend most of a CPU budget there)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda i: warmup_rate(i + 1, 100))
    start, step, best, rng = time.monotonic(), 0, (99.0, None), random.Random(0)
    while time.monotonic() - start < minutes * 60:
        starts = [rng.randrange(len(train) - 129) for _ in range(64)]
        x = torch.tensor([train[s:s + 129] for s in starts])
        logits = model(x[:, :-1])
        optimise(model, opt, sched, F.cross_entropy(logits.reshape(-1, logits.shape[-1]), x[:, 1:].reshape(-1)))
        step += 1
        if step % 100 == 0:
            b = bpc(model, valid)
            log({"step": step, "split": "valid", "bpc": b, "elapsed_s": time.monotonic() - start})
            if b < best[0]:
                best = (b, {k: t.clone() for k, t in model.state_dict().items()})
    if best[1] is not None:
        model.load_state_dict(best[1])
    log({"step": step, "split": "test", "bpc": bpc(model, test), "elapsed_s": time.monotonic() - start})


def main(task: str, data: str, out: str, minutes: float) -> None:
    torch.set_num_threads(int(os.environ.get("PLAIN_THREADS", "1")))
    torch.manual_seed(0)
    f = Path(out).open("w", encoding="utf-8")

    def log(record: dict) -> None:
        f.write(json.dumps(record) + "\n")
        f.flush()

    if task in ("g2p", "pinyin"):
        g2p(Path(data), log, minutes, task)
    else:
        lm(task.removeprefix("lm-"), Path(data), log, minutes)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]))
