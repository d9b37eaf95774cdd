"""The plain-PyTorch baselines of the real-data benchmark: a standard recipe, nothing of glassformer's
model code (only its data files and its metric functions, so both arms are scored alike).

    python bench/real/plain_torch.py g2p DATA_DIR OUT.jsonl MINUTES
    python bench/real/plain_torch.py lm-en DATA_DIR OUT.jsonl MINUTES
    (any NAME with DATA_DIR/NAME-train.tsv and NAME-test.tsv is a seq2seq task like g2p: pinyin,
    kana, num-en, date-fr; lm-X reads X-train.txt and X-test.txt)
    python bench/real/plain_torch.py kana DATA_DIR OUT.jsonl 2,5,10   (marks: one run of 10 minutes,
    the test split scored at 2, 5 and 10 minutes of training, the clock stopped while it is scored)

The recipe does not depend on the budget (a constant rate after warmup, the best validation
checkpoint kept), so one run scored at each mark is the same as a run per budget.

- g2p: `torch.nn.Transformer` (d_model 128, 4 heads, 3+3 layers, d_ff 512, dropout 0.1, its
  default Post-LN), characters -> phonemes (target words: whitespace tokens where most targets
  have a space, else characters), AdamW 1e-3 with 400 warmup steps, batch 64,
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
        self.src_emb, self.tgt_emb, self.pos = nn.Embedding(n_src, d), nn.Embedding(n_tgt, d), nn.Embedding(128, d)
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
        max_len = min(max_len, 126)
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


class Clock:
    """Training time: wall time less the time spent scoring the test split at the marks."""

    def __init__(self):
        self.start, self.paused = time.monotonic(), 0.0

    def elapsed(self) -> float:
        return time.monotonic() - self.start - self.paused

    def pause(self, fn):
        t = time.monotonic()
        fn()
        self.paused += time.monotonic() - t


def at_marks(marks: list[float], clock: Clock, step_fn, score_test, model, state: dict) -> None:
    """Run step_fn until the last mark; at each mark (minutes) score the test split with the best
    validation weights so far (state["best"][1]; the last ones if none), clock stopped."""

    def scored(m: float, elapsed: float) -> None:
        now = {k: v.clone() for k, v in model.state_dict().items()}
        if state["best"][1] is not None:
            model.load_state_dict(state["best"][1])
        score_test(m, elapsed)
        model.load_state_dict(now)

    pending = sorted(marks)
    while pending:
        if clock.elapsed() >= pending[0] * 60:
            m, now = pending.pop(0), clock.elapsed()
            clock.pause(lambda: scored(m, now))
            continue
        step_fn()


def g2p(data: Path, log, marks: list[float], name: str = "g2p") -> None:
    """Characters -> target words (CMUdict phonemes, pinyin syllables...) or target characters."""
    pairs = read_tsv(data / f"{name}-train.tsv")
    random.Random(0).shuffle(pairs)
    n_valid = max(1, min(500, len(pairs) // 10))  # 500 (and 500 unused) from 10,000 pairs up
    valid, train = pairs[:n_valid], pairs[2 * n_valid:]  # the same 5%-style hold-out idea as glassformer's
    test = read_tsv(data / f"{name}-test.tsv")
    words = sum(" " in p for _, p in train) * 2 >= len(train)  # most targets have spaces: word tokens
    split = str.split if words else list
    join = " ".join if words else "".join
    sv = vocab(c for w, _ in train for c in w)
    tv = vocab(p for _, ph in train for p in split(ph))
    inv = {i: s for s, i in tv.items()}
    longest = max(len(split(p)) for _, p in train) + 5
    enc_s = lambda w: [sv.get(c, UNK) for c in w][:126]  # noqa: E731
    enc_t = lambda p: [tv.get(x, UNK) for x in split(p)][:125]  # noqa: E731
    model = Seq2Seq(len(sv), len(tv))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.98), weight_decay=0.01)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda i: warmup_rate(i + 1))

    def decode(items):
        model.eval()
        hyps = []
        for i in range(0, len(items), 256):
            chunk = items[i:i + 256]
            for ids in model.greedy(pad([enc_s(w) for w, _ in chunk]), longest):
                hyps.append(join(inv.get(t, "<unk>") for t in ids))
        model.train()
        return hyps, [p for _, p in items]

    clock, state = Clock(), {"step": 0, "best": (2.0, None)}
    rng = random.Random(0)

    def step():
        batch = rng.sample(train, min(64, len(train)))
        src = pad([enc_s(w) for w, _ in batch])
        tgt = pad([[BOS] + enc_t(p) + [EOS] for _, p in batch])
        logits = model(src, tgt[:, :-1])
        optimise(model, opt, sched, F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt[:, 1:].reshape(-1),
                                                    ignore_index=PAD, label_smoothing=0.1))
        state["step"] += 1
        if state["step"] % 100 == 0:
            hyps, refs = decode(valid)
            ser = sequence_error_rate(hyps, refs)
            log({"step": state["step"], "split": "valid", "ser": ser, "wer": token_error_rate(hyps, refs),
                 "elapsed_s": clock.elapsed()})
            if ser < state["best"][0]:
                state["best"] = (ser, {k: v.clone() for k, v in model.state_dict().items()})

    def score_test(minutes: float, elapsed: float):
        items = scored_items(test)  # a word with two pronunciations: right if either
        hyps, ref_lists = decode(items)
        refs = closest_references(hyps, ref_lists)
        log({"step": state["step"], "split": "test", "minutes": minutes, "n": len(refs),
             "ser": sequence_error_rate(hyps, refs), "per": token_error_rate(hyps, refs), "elapsed_s": elapsed})

    at_marks(marks, clock, step, score_test, model, state)


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


def lm(lang: str, data: Path, log, marks: list[float]) -> None:
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
    clock, state, rng = Clock(), {"step": 0, "best": (99.0, None)}, random.Random(0)
    block = min(128, len(train) - 2)

    def step():
        starts = [rng.randrange(len(train) - block - 1) for _ in range(64)]
        x = torch.tensor([train[s:s + block + 1] for s in starts])
        logits = model(x[:, :-1])
        optimise(model, opt, sched, F.cross_entropy(logits.reshape(-1, logits.shape[-1]), x[:, 1:].reshape(-1)))
        state["step"] += 1
        if state["step"] % 100 == 0:
            b = bpc(model, valid)
            log({"step": state["step"], "split": "valid", "bpc": b, "elapsed_s": clock.elapsed()})
            if b < state["best"][0]:
                state["best"] = (b, {k: t.clone() for k, t in model.state_dict().items()})

    def score_test(minutes: float, elapsed: float):
        log({"step": state["step"], "split": "test", "minutes": minutes, "bpc": bpc(model, test), "elapsed_s": elapsed})

    at_marks(marks, clock, step, score_test, model, state)


def main(task: str, data: str, out: str, marks: list[float]) -> None:
    torch.set_num_threads(int(os.environ.get("PLAIN_THREADS", "1")))
    torch.manual_seed(0)
    f = Path(out).open("w", encoding="utf-8")

    def log(record: dict) -> None:
        f.write(json.dumps(record) + "\n")
        f.flush()

    if task.startswith("lm-"):
        lm(task.removeprefix("lm-"), Path(data), log, marks)
    else:
        g2p(Path(data), log, marks, task)


def _marks(text: str) -> list[float]:
    import argparse
    try:
        marks = [float(m) for m in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not minutes such as 10 or 2,5,10") from None
    if not marks or any(not m > 0 for m in marks):
        raise argparse.ArgumentTypeError(f"{text!r}: every mark must be a positive number of minutes")
    return sorted(marks)


def cli(argv: list[str] | None = None) -> None:
    import argparse
    ap = argparse.ArgumentParser(description="A plain-PyTorch baseline of the real-data benchmark.")
    ap.add_argument("task", help="a dataset name: g2p, pinyin, kana, ... or lm-X")
    ap.add_argument("data", help="the folder bench/real/prepare.py wrote")
    ap.add_argument("out", help="the JSON-lines file to write")
    ap.add_argument("minutes", type=_marks, help="minutes of training, or marks such as 2,5,10")
    args = ap.parse_args(argv)
    if not Path(args.data).is_dir():
        ap.error(f"{args.data!r} is not a folder; run bench/real/prepare.py DATA first")
    main(args.task, args.data, args.out, args.minutes)


if __name__ == "__main__":
    cli()
