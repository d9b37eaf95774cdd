"""Does the decoder cost an aligned transduction? An encoder-only tagger in plain PyTorch (issue 32).

    python bench/real/tagger.py pinyin DATA_DIR MINUTES [--dropout 0.2] [--d-model 128] [--layers 3]
                                [--threads 1] [--max-steps N] [--seed 0]

Pinyin is read one syllable per character, so a model need not generate: a Transformer encoder
(bidirectional self-attention over the phrase, the seed's §2 and §6 blocks, Pre-LN) with one
softmax over the syllables at each position reads every character in one pass, with no decoder
and no target-side history that could override a rare character's reading. If glassformer's
encoder-decoder lost pinyin to counting because of its decoder, this model would not; if both
plateau at the same point, the ceiling is the data (readings decided by words never seen).

Data: DATA_DIR/NAME-train.tsv and NAME-test.tsv as bench/real/prepare.py writes them; only pairs
whose characters and whitespace tokens have equal counts are kept (all of pinyin's). Recipe: AdamW
1e-3, betas (0.9, 0.98), weight decay 0.01, 400 warmup steps, the rate held, then a linear decay
to a tenth over the last fifth of the budget (glassformer's wsd decays to 0), batch 64 phrases of similar
length, clip 1.0, no label smoothing; the last weights are scored (exact match of whole phrases
on the test split, an unseen character counting as wrong). One thread by default. Prints one
JSON line: {"dataset", "steps", "seconds", "test_exact_match", "test_n", ...}.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
import time
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

PAD, UNK = 0, 1
BATCH, WARMUP, PEAK, DECAY_SHARE = 64, 400, 1e-3, 0.2


def aligned_pairs(path: Path) -> tuple[list[tuple[list[str], list[str]]], int]:
    """(the pairs whose characters and whitespace tokens have equal counts, the number of pairs)."""
    pairs = []
    for number, line in enumerate(path.open(encoding="utf-8"), 1):
        if line.strip():
            fields = line.rstrip("\n").split("\t")
            if len(fields) != 2:
                raise SystemExit(f"{path}:{number}: {len(fields)} tab-separated fields; a pair is SOURCE<tab>TARGET")
            pairs.append((list(fields[0]), fields[1].split()))
    return [(s, t) for s, t in pairs if len(s) == len(t)], len(pairs)


def index(symbols) -> dict[str, int]:
    out = {"<pad>": PAD, "<unk>": UNK}
    for s in symbols:
        out.setdefault(s, len(out))
    return out


class Tagger(nn.Module):
    """Token embedding (scaled by √d_model, seed 000 §3.4) plus a learned position table, a Pre-LN
    encoder stack, a final LayerNorm and one linear map to the target vocabulary per position."""

    def __init__(self, n_src: int, n_tgt: int, d_model: int, n_layers: int, dropout: float, max_len: int):
        super().__init__()
        self.d_model = d_model
        self.embed, self.pos = nn.Embedding(n_src, d_model), nn.Embedding(max_len, d_model)
        nn.init.normal_(self.embed.weight, std=d_model ** -0.5)  # so that × √d_model gives unit scale
        layer = nn.TransformerEncoderLayer(d_model, 4, 4 * d_model, dropout, batch_first=True, norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, n_layers, enable_nested_tensor=False)
        self.norm, self.head = nn.LayerNorm(d_model), nn.Linear(d_model, n_tgt)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.embed(x) * math.sqrt(self.d_model) + self.pos(torch.arange(x.shape[1]))
        return self.head(self.norm(self.encoder(h, src_key_padding_mask=x.eq(PAD))))


def tensors(batch, src_ids, tgt_ids) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(len(s) for s, _ in batch)
    x = [[src_ids.get(c, UNK) for c in s] + [PAD] * (width - len(s)) for s, _ in batch]
    y = [[tgt_ids.get(c, UNK) for c in t] + [PAD] * (width - len(t)) for _, t in batch]
    return torch.tensor(x), torch.tensor(y)


def rate(step: int, elapsed: float, budget: float) -> float:
    """wsd: warmup, the peak held, a linear decay to PEAK/10 over the budget's last fifth."""
    left = (budget - elapsed) / (DECAY_SHARE * budget)
    return PEAK * min(1.0, (step + 1) / WARMUP) * max(0.1, min(1.0, left))


def run(name: str, data: Path, minutes: float, d_model: int = 128, n_layers: int = 3, dropout: float = 0.2,
        max_steps: int | None = None, seed: int = 0) -> dict:
    torch.manual_seed(seed)
    rng = random.Random(seed)
    train, n_train = aligned_pairs(data / f"{name}-train.tsv")
    test, n_test = aligned_pairs(data / f"{name}-test.tsv")
    if len(train) * 2 < n_train:
        raise SystemExit(f"{name}: {len(train)} of {n_train} training pairs are aligned character by token;"
                         " a tagger needs most of them aligned (pinyin, transliteration)")
    src_ids = index(c for s, _ in train for c in s)
    tgt_ids = index(c for _, t in train for c in t)
    # the position table covers every phrase given (128 rows at least: the figures of docs/real-data.md)
    rows = max([128] + [len(s) for s, _ in train + test])
    model = Tagger(len(src_ids), len(tgt_ids), d_model, n_layers, dropout, max_len=rows)
    opt = torch.optim.AdamW(model.parameters(), PEAK, betas=(0.9, 0.98), weight_decay=0.01)
    ordered = sorted(train, key=lambda p: len(p[0]))  # batches of similar length: little padding
    batches = [ordered[i:i + BATCH] for i in range(0, len(ordered), BATCH)]
    budget, start, step = minutes * 60, time.monotonic(), 0
    model.train()
    while max_steps is None or step < max_steps:
        rng.shuffle(batches)
        for batch in batches:
            elapsed = time.monotonic() - start
            if elapsed >= budget or (max_steps is not None and step >= max_steps):
                break
            for group in opt.param_groups:
                group["lr"] = rate(step, elapsed, budget)
            x, y = tensors(batch, src_ids, tgt_ids)
            loss = F.cross_entropy(model(x).flatten(0, 1), y.flatten(), ignore_index=PAD)
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            step += 1
        else:
            continue
        break
    seconds = time.monotonic() - start
    model.eval()
    tgt_of = {i: t for t, i in tgt_ids.items()}
    right = 0
    with torch.no_grad():
        for i in range(0, len(test), 256):
            chunk = test[i:i + 256]
            x, _ = tensors(chunk, src_ids, tgt_ids)
            guess = model(x).argmax(-1)
            right += sum([tgt_of[int(k)] for k in guess[j, :len(s)]] == t and all(c in src_ids for c in s)
                         for j, (s, t) in enumerate(chunk))
    return {"dataset": name, "model": f"encoder tagger d_model {d_model} x {n_layers} layers, dropout {dropout}",
            "steps": step, "seconds": round(seconds, 1), "threads": torch.get_num_threads(),
            "test_exact_match": right / n_test, "test_n": n_test, "test_aligned": len(test)}


def cli(argv: list[str]) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("name")
    ap.add_argument("data", type=Path)
    ap.add_argument("minutes", type=float)
    ap.add_argument("--dropout", type=float, default=0.2)
    ap.add_argument("--d-model", type=int, default=128)
    ap.add_argument("--layers", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--max-steps", type=int)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    for path in (a.data / f"{a.name}-train.tsv", a.data / f"{a.name}-test.tsv"):
        if not path.is_file():
            ap.error(f"{path} does not exist: write it with `python bench/real/prepare.py {a.data} {a.name}`")
    for wrong, says in ((a.minutes <= 0, f"minutes {a.minutes:g}: give a positive number such as 10"),
                        (not 0 <= a.dropout < 1, f"--dropout {a.dropout:g}: give a rate in [0, 1), such as 0.2"),
                        (a.d_model < 4 or a.d_model % 4, f"--d-model {a.d_model}: give a multiple of the 4 heads"),
                        (a.layers < 1, f"--layers {a.layers}: give at least 1"),
                        (a.threads < 1, f"--threads {a.threads}: give at least 1"),
                        (a.max_steps is not None and a.max_steps < 1, f"--max-steps {a.max_steps}: give at least 1")):
        if wrong:
            ap.error(says)
    torch.set_num_threads(a.threads)
    result = run(a.name, a.data, a.minutes, a.d_model, a.layers, a.dropout, a.max_steps, a.seed)
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    cli(sys.argv[1:])
