"""Shared by test_export_{cli,ctranslate2,onnx}.py: tiny runs trained by `glassformer train`.

Only the widths and the step count are given on the command line; everything structural (Pre- or
Post-LN, sinusoids, × sqrt(d_model), tied or separate embeddings and vocabularies, the tokenizers)
is what the task and its recipe choose.
"""

from __future__ import annotations

from cli_helpers import train_once
from glassformer.train.config import TrainConfig
from glassformer.train.tasks import raw_splits

SIZE = ["--d-model", "32", "--heads", "2", "--layers", "1", "--d-ff", "128", "--threads", "1", "--quiet"]
PAIRS = [("the cat eats the fish .", "le chat mange le poisson ."),
         ("a dog sees the bird on the hill .", "un chien voit l' oiseau sur la colline ."),
         ("my friend reads a long book .", "mon ami lit un long livre ."),
         ("the old man walks to the river .", "le vieil homme marche vers la rivière ."),
         ("we drink tea in the morning .", "nous buvons du thé le matin .")]
TASKS = {  # name: train arguments ({pairs}: a TSV of PAIRS, {text}: their English side as lines)
    "zh-en": ["--task", "zh-en", "--eval-size", "20"],
    "reverse": ["--task", "reverse", "--eval-size", "20"],  # a digit task: one vocabulary, shared embeddings
    "tsv-auto": ["--task", "tsv", "--data", "{pairs}"],  # auto: word tokens (closed vocabulary), Pre-LN
    "tsv-paper": ["--task", "tsv", "--data", "{pairs}", "--recipe", "paper", "--vocab-size", "120"],  # BPE, Post-LN
    "lm-auto": ["--task", "lm", "--data", "{text}", "--block-size", "32"],
    # a subword LM (`--tokenizer bpe`: measured against characters in docs/real-data.md)
    "lm-bpe": ["--task", "lm", "--data", "{text}", "--block-size", "32", "--tokenizer", "bpe", "--vocab-size", "80"],
    "lm-paper": ["--task", "lm", "--data", "{text}", "--recipe", "paper", "--block-size", "32"],
    # the auto LM given one part of its LLaMA block: the paper's block whole, Pre-LN (GPT-2's form)
    "lm-layernorm": ["--task", "lm", "--data", "{text}", "--block-size", "32", "--norm", "layernorm"],
}


def train_runs(root, names, steps: int = 8) -> dict:
    """{name: run folder} for the named TASKS, each trained for `steps` optimiser steps."""
    pairs, text = root / "pairs.tsv", root / "text.txt"
    pairs.write_text("".join(f"{e}\t{f}\n" for _ in range(12) for e, f in PAIRS), encoding="utf-8")
    text.write_text("\n".join(e for _ in range(12) for e, _ in PAIRS) + "\n", encoding="utf-8")
    out = {}
    for name in names:
        args = [a.format(pairs=pairs, text=text) for a in TASKS[name]]
        train_once(*args, "--max-steps", str(steps), "--eval-every", str(steps), "--out", str(root / name), *SIZE)
        out[name] = root / name
    return out


def held_out(ck, n: int = 8) -> list:
    """The first `n` held-out items of the run's own test split (pairs, or lines for an LM)."""
    return raw_splits(TrainConfig.from_dict(ck.meta["train_config"]))["test"][:n]
