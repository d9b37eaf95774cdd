"""What each training task reads, how it tokenizes, and the model it starts from.

Two kinds of task:
- sequence-to-sequence (zh-en, copy, reverse, sort, add, tsv): (source, target) text pairs for
  the encoder-decoder translator of Figure 1;
- language modelling (lm): lines of text for a decoder-only model, cut into windows.

`load_task(cfg)` returns a `TaskData` with train/valid/test splits, tokenizers fitted on the
training split only, and the encoded examples; `default_model_config` gives the small model
each task starts from (every field can be overridden from the command line).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, Sequence

from ..config import ModelConfig
from ..errors import InputError
from ..limits import check_tokens
from ..tokenize import build_tokenizer
from .batching import ShiftingWindows, windows
from .config import DIGIT_TASKS  # one list, beside TASKS

DIGIT_SIZES = {"train": 10000, "valid": 500, "test": 500}
DEFAULT_TOKENIZER = {"zh-en": ("jieba", "word"), "tsv": ("bpe", "bpe"), "lm": ("char", "char"),
                     **{t: ("word", "word") for t in DIGIT_TASKS}}
DEFAULT_VOCAB = {"bpe": 2000, "unigram": 2000}


@dataclass
class TaskData:
    """Raw and encoded splits plus the tokenizers (src is tgt when they are shared)."""

    task: str
    kind: str  # "seq2seq" or "lm"
    raw: dict[str, list]
    src_tok: Any
    tgt_tok: Any
    encoded: dict[str, list[tuple]] = field(default_factory=dict)

    @property
    def tokenizers(self) -> dict[str, Any]:
        if self.kind == "lm":
            return {"lm": self.src_tok}
        return {"src": self.src_tok, "tgt": self.tgt_tok}


def _held_out_size(n: int, what: str, path: str) -> int:
    """How many of a user's n items each of valid and test holds: 5% (at least 1, at most 1000)."""
    if n < 3:
        raise InputError(f"{path} has {n} {what}; need at least 3 (train, valid and test)")
    return max(1, min(1000, n // 20))


def _holdout(items: list, seed: int, what: str, path: str) -> dict[str, list]:
    """Shuffle a user's pairs deterministically; `_held_out_size` each for valid, test."""
    k = _held_out_size(len(items), what, path)
    items = list(items)
    random.Random(seed).shuffle(items)
    return {"valid": items[:k], "test": items[k:2 * k], "train": items[2 * k:]}


def _holdout_runs(lines: list[str], seed: int, path: str) -> dict[str, list]:
    """A language model's text keeps its order: `_held_out_size` lines each for valid and test, drawn as
    runs of consecutive lines (about 20 runs a split), and the rest trains in the file's order. A text
    wrapped into lines (a manual's paragraphs, a book) is read across its line ends as it was written:
    shuffled lines gave each line an unrelated one before it in training, so the model could not learn what
    a previous line tells, and held-out lines had their paragraph's other lines in training. Measured:
    docs/real-data.md, "An LM's text kept in order"."""
    k = _held_out_size(len(lines), "lines", path)
    run = max(1, k // 20)
    starts = list(range(0, len(lines), run))
    random.Random(seed).shuffle(starts)
    drawn = [i for start in starts for i in range(start, min(start + run, len(lines)))]
    split = dict.fromkeys(drawn[:k], "valid") | dict.fromkeys(drawn[k:2 * k], "test")
    return {name: [line for i, line in enumerate(lines) if split.get(i, "train") == name]
            for name in ("valid", "test", "train")}


# How an LM's text is split, recorded in each checkpoint's meta.json: "runs" (`_holdout_runs`). An LM
# checkpoint whose meta has no "lm_split" was trained before that split existed, on its lines shuffled one
# by one (`_holdout`); `eval` without --data and `--resume` rebuild that split for it, so its test lines
# are still ones it never trained on.
LM_SPLIT = "runs"


def lm_split_of(meta: dict) -> str:
    """The LM split a checkpoint was trained with: "runs", or "shuffled" for one saved before "runs"."""
    return meta.get("lm_split", "shuffled")


def raw_splits(cfg, lm_split: str = LM_SPLIT) -> dict[str, list]:
    """The task's text: lists of (source, target) pairs, or of lines for lm (split as `lm_split` says)."""
    if cfg.task == "zh-en":
        from ..data.zh_en import zh_en_splits
        return zh_en_splits(seed=cfg.seed)
    if cfg.task in DIGIT_TASKS:
        from ..data.tasks import make_task
        train = make_task(cfg.task, DIGIT_SIZES["train"], seed=cfg.seed)
        seen = {s for s, _ in train}
        out = {"train": train}
        for i, split in enumerate(("valid", "test"), start=1):
            pool = make_task(cfg.task, DIGIT_SIZES[split] * 3, seed=cfg.seed + 1000 * i)
            out[split] = [p for p in pool if p[0] not in seen][:DIGIT_SIZES[split]]
        return out
    if cfg.task == "tsv":
        from ..data.files import read_tsv
        return _holdout(list(read_tsv(cfg.data)), cfg.seed, "sentence pairs", cfg.data)
    from ..data.files import read_text
    lines = list(read_text(cfg.data))
    if lm_split == "shuffled":
        return _holdout(lines, cfg.seed, "lines", cfg.data)
    return _holdout_runs(lines, cfg.seed, cfg.data)


def _vocab(cfg, kind: str) -> int | None:
    """--vocab-size, else the default for subword kinds (char and word then keep every symbol)."""
    return cfg.vocab_size or DEFAULT_VOCAB.get(kind)


def build_tokenizers(cfg, raw: dict[str, list]):
    """(src, tgt) tokenizers fitted on the training split; one shared object when sides share symbols."""
    src_kind, tgt_kind = DEFAULT_TOKENIZER[cfg.task]
    if cfg.tokenizer is not None:  # "bpe" for both sides, or "char/word" for source/target
        src_kind, _, tgt_kind = cfg.tokenizer.partition("/")
        tgt_kind = tgt_kind or src_kind
    size = _vocab(cfg, src_kind)
    train = raw["train"]
    if cfg.task == "lm":
        tok = build_tokenizer(src_kind, train, vocab_size=size)
        return tok, tok
    if cfg.task in DIGIT_TASKS:  # the same digits on both sides: one vocabulary, shared embeddings
        tok = build_tokenizer(src_kind, [t for pair in train for t in pair], vocab_size=size)
        return tok, tok
    src = build_tokenizer(src_kind, [s for s, _ in train], vocab_size=size,
                          lang="zh" if cfg.task == "zh-en" else None)
    tgt = build_tokenizer(tgt_kind, [t for _, t in train], vocab_size=_vocab(cfg, tgt_kind),
                          lang="en" if cfg.task == "zh-en" else None)
    return src, tgt


def _clip(text: str, n: int = 30) -> str:
    return repr(text if len(text) <= n else text[:n] + "…")


def encode_split(kind: str, items: list, src_tok, tgt_tok, block_size: int, held_out: bool = False,
                 seed: int = 0) -> Sequence[tuple]:
    """Id tuples: (src_ids, tgt_ids) per pair, or (window,) for a language model — windows that
    overlap by half where the split is `held_out` (validation, test: `batching.windows`), else cut
    afresh every epoch from `seed` (training: `batching.ShiftingWindows`)."""
    if kind == "seq2seq":
        pairs = [(src_tok.encode(s), tgt_tok.encode(t)) for s, t in items]
        for (s, t), (src, tgt) in zip(items, pairs):  # the decoder also reads <bos>, predicts <eos>
            check_tokens(max(len(src), len(tgt) + 1), f"the pair {_clip(s)} → {_clip(t)}")
        return pairs
    check_tokens(block_size + 1, f"--block-size {block_size} (+1 for the shifted target)")
    stream: list[int] = []
    for line in items:
        stream.extend(src_tok.encode(line, add_special=True))  # <bos> line <eos>: lines stay apart
    if held_out:
        return windows(stream, block_size, max(1, block_size // 2))
    return ShiftingWindows(stream, block_size, seed)


def load_task(cfg, tokenizers: tuple | None = None, lm_split: str = LM_SPLIT) -> TaskData:
    """Splits, tokenizers (fitted here unless given, e.g. restored for --resume) and encodings."""
    raw = raw_splits(cfg, lm_split)
    src, tgt = tokenizers if tokenizers is not None else build_tokenizers(cfg, raw)
    kind = "lm" if cfg.task == "lm" else "seq2seq"
    data = TaskData(cfg.task, kind, raw, src, tgt)
    for split, items in raw.items():
        data.encoded[split] = encode_split(kind, items, src, tgt, cfg.block_size, held_out=split != "train",
                                           seed=cfg.seed)
    if not data.encoded["train"]:
        raise InputError(f"task {cfg.task}: the training split is empty after tokenization")
    return data


# The small models each task starts from (2 CPU cores: minutes, not hours).
TASK_MODELS: dict[str, dict[str, Any]] = {
    "zh-en": dict(d_model=64, n_heads=4, n_layers=2, d_ff=256, dropout=0.1),
    "tsv": dict(d_model=128, n_heads=4, n_layers=3, d_ff=512, dropout=0.1),
    "lm": dict(d_model=128, n_heads=4, n_layers=4, d_ff=512, dropout=0.1),
    **{t: dict(d_model=64, n_heads=4, n_layers=2, d_ff=256, dropout=0.0) for t in DIGIT_TASKS},
}


# Intra-op threads for the built-in tasks: their matrices (d_model 64, ~10 tokens) are too small
# to gain from a second thread, and on a busy machine spinning threads make each step many
# times slower (measured: 600 zh-en steps in 43 s with 1 thread vs ~80 s for 60 steps with 2,
# 2 cores at load 13). User data (tsv, lm) keeps PyTorch's default. --threads overrides.
TASK_THREADS = {"zh-en": 1, **{t: 1 for t in DIGIT_TASKS}}


def default_model_config(data: TaskData, **overrides: Any) -> ModelConfig:
    """The task's model with vocabulary sizes and special ids from its tokenizers; overrides win."""
    src, tgt = data.src_tok, data.tgt_tok
    fields: dict[str, Any] = dict(TASK_MODELS[data.task], norm_position="post", embed_scale=True,
                                  pad_id=src.pad_id, bos_id=src.bos_id, eos_id=src.eos_id)
    if data.kind == "lm":
        fields.update(arch="decoder", vocab_size=src.vocab_size)
    else:
        shared = src is tgt
        fields.update(arch="encoder-decoder", vocab_size=src.vocab_size,
                      tgt_vocab_size=None if shared else tgt.vocab_size, share_embeddings=shared)
    fields.update({k: v for k, v in overrides.items() if v is not None})
    return ModelConfig(**fields)


def task_for_checkpoint(meta: dict, src_tok, tgt_tok, data_path: str | None = None) -> TaskData:
    """The held-out data a checkpoint is scored on: a user's file, else its task's own splits."""
    from .config import TrainConfig
    cfg = TrainConfig.from_dict(meta["train_config"])
    kind = "lm" if cfg.task == "lm" else "seq2seq"
    if data_path is None:
        return load_task(cfg, (src_tok, tgt_tok), lm_split_of(meta))
    if kind == "lm":
        from ..data.files import read_text
        items: list = list(read_text(data_path))
    else:
        from ..data.files import read_tsv
        items = list(read_tsv(data_path))
    data = TaskData(cfg.task, kind, {"test": items}, src_tok, tgt_tok)
    data.encoded["test"] = encode_split(kind, items, src_tok, tgt_tok, cfg.block_size, held_out=True)
    return data
