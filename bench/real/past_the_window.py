"""Held-out bits per character of a trained LM at positions past the windows it trained on.

    python bench/real/past_the_window.py RUN TEST.txt [--length 256] [--rows 24]

`glassformer train --task lm` cuts the text into windows of block_size tokens, so the model only
ever reads positions 0..block_size-1. This scores `--rows` stretches of `--length` tokens of held-out
text (read as training read it: <bos> line <eos>, lines one after another) two ways and prints the
bits per character by block of positions:

- whole: the stretch in one forward pass, so targets past block_size sit at positions never trained;
- window: each target past block_size read from the block_size tokens before it, at positions
  0..block_size-1 — what `generate(window=block_size)` (the `glassformer generate` default) does.

Both agree on the first block (the same forward pass). One JSON line per run on stdout.
"""

from __future__ import annotations

import argparse
import json
import math

import torch
import torch.nn.functional as F

from glassformer.train.checkpoint import load_checkpoint


def held_out_stretches(tok, path: str, length: int, rows: int) -> torch.Tensor:
    """(rows, length + 1) ids spread evenly over the file's token stream."""
    stream: list[int] = []
    for line in open(path, encoding="utf-8").read().splitlines():
        stream.extend(tok.encode(line, add_special=True))
    step = (len(stream) - length - 1) // rows
    if step < 1:
        raise SystemExit(f"{path} has {len(stream)} tokens: too few for {rows} stretches of {length + 1}")
    return torch.tensor([stream[i * step:i * step + length + 1] for i in range(rows)])


def log_probs(model, inp: torch.Tensor, tgt: torch.Tensor, window: int) -> tuple[torch.Tensor, torch.Tensor]:
    """log p(target) per position: the whole stretch at once, and each target past `window` from its window."""
    with torch.inference_mode():
        whole = F.log_softmax(model(inp).float(), -1).gather(-1, tgt[..., None])[..., 0]
        windowed = whole.clone()
        for t in range(window, inp.shape[1]):
            last = model(inp[:, t - window + 1:t + 1])[:, -1].float()
            windowed[:, t] = F.log_softmax(last, -1).gather(-1, tgt[:, t:t + 1])[:, 0]
    return whole, windowed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run", help="a run folder (or checkpoint folder) of `glassformer train --task lm`")
    ap.add_argument("text", help="held-out text, one line per item as in training")
    ap.add_argument("--length", type=int, default=256, help="tokens per scored stretch")
    ap.add_argument("--rows", type=int, default=24, help="stretches scored")
    args = ap.parse_args()
    torch.set_num_threads(1)
    ck = load_checkpoint(args.run)
    window = ck.meta["train_config"]["block_size"]
    ids = held_out_stretches(ck.src_tokenizer, args.text, args.length, args.rows)
    whole, windowed = log_probs(ck.model, ids[:, :-1], ids[:, 1:], window)
    bits = lambda lp: round(float(-lp.mean() / math.log(2)), 3)  # noqa: E731
    out = {"run": args.run, "pe": ck.config.pe, "block_size": window, "targets_per_block": args.rows * window}
    for lo in range(0, args.length, window):
        out[f"{lo}-{lo + window - 1}"] = {"whole": bits(whole[:, lo:lo + window]),
                                          "window": bits(windowed[:, lo:lo + window])}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
