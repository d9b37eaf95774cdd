"""What `inspect` and `serve` can look inside: MiniLM, a glassformer checkpoint, or a local HF folder.

Whatever the source, the model is a glassformer model (converted by `glassformer.interop` when it
comes from Hugging Face), so every pattern shown is computed by our own attention code and read at
the hook `enc.{l}.attn.pattern` (`dec.{l}.self_attn.pattern` for decoder-only models).
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable

import numpy as np
import torch
from torch import nn

from ..errors import InputError
from ..limits import check_positions, check_tokens
from ..trace import run_with_trace

SPECIAL_TOKENS = {"[CLS]", "[SEP]", "<s>", "</s>", "<bos>", "<eos>", "<|endoftext|>"}
HF_FAMILIES = {"bert": "BertModel", "gpt2": "GPT2LMHeadModel"}


def _nothing_unseen(text: str) -> list[str]:
    return []


@dataclass
class Subject:
    """A model ready to inspect: its glassformer module and how to turn text into its tokens."""

    name: str
    model: nn.Module
    kind: str  # "encoder" | "decoder" | "encoder-decoder"
    tokenize: Callable[[str], tuple[list[int], list[str]]]  # text -> (ids, the model's own tokens)
    tgt_tokenizer: object | None = None  # encoder-decoder checkpoints: for the translation
    meta: dict = field(default_factory=dict)
    # the pieces of a text its tokenizer reads as the unknown token, and the warning's line about them:
    # `tokenize` warns on stderr once per piece (the CLI); the explorer shows them on its page (`unknown`)
    unseen: Callable[[str], list[str]] = _nothing_unseen
    unseen_note: Callable[[list[str]], str] | None = None

    def unknown(self, text: str) -> dict | None:
        """{"pieces": what `text` has that the model never saw, "note": the warning}, or None."""
        pieces = self.unseen(text)
        return {"pieces": pieces, "note": self.unseen_note(pieces)} if pieces else None

    @property
    def causal(self) -> bool:
        return self.kind == "decoder"

    @property
    def pattern_hook(self) -> str:
        """Self-attention pattern hook of every layer (the trace issue's names)."""
        return "dec.*.self_attn.pattern" if self.kind == "decoder" else "enc.*.attn.pattern"

    def encode(self, text: str) -> tuple[list[int], list[str]]:
        if not isinstance(text, str) or not text.strip():
            raise InputError("the sentence is empty; give at least one word")
        ids, tokens = self.tokenize(text)
        if not ids:
            raise InputError(f"{text!r} gives no tokens for model {self.name}")
        check_tokens(len(ids), f"the sentence {text[:30]!r}{'…' if len(text) > 30 else ''}")
        check_positions(len(ids), self.model.config, f"the sentence ({len(ids)} tokens)")
        return list(ids), list(tokens)

    def special_positions(self, tokens: list[str]) -> list[int]:
        """Positions of [CLS]/[SEP]-like tokens (the keys Clark et al. call no-op sinks)."""
        return [i for i, t in enumerate(tokens) if t in SPECIAL_TOKENS]

    def sep_positions(self, tokens: list[str]) -> list[int]:
        return [i for i in self.special_positions(tokens) if i > 0]

    @torch.no_grad()
    def trace(self, text: str, names: Iterable[str]) -> tuple[list[str], dict[str, torch.Tensor]]:
        """Run one sentence and return (tokens, traced tensors by hook name)."""
        ids, tokens = self.encode(text)
        x = torch.tensor([ids])
        if self.kind == "encoder-decoder":
            start = self.model.config.start_id or 0
            _, tr = run_with_trace(self.model, x, torch.tensor([[start]]), names=list(names))
        else:
            _, tr = run_with_trace(self.model, x, names=list(names))
        return tokens, tr

    def patterns(self, text: str) -> tuple[list[str], np.ndarray]:
        """(tokens, patterns (layer, head, seq, seq)) for one sentence."""
        tokens, tr = self.trace(text, [self.pattern_hook])
        P = torch.stack([t[0] for t in tr.values()]).float().numpy()
        return tokens, P


def load_subject(spec: str) -> Subject:
    """`minilm`, a checkpoint directory (config.json + meta.json), or a local HF folder."""
    if spec == "minilm":
        return _minilm()
    path = Path(spec)
    if not path.is_dir():
        raise InputError(f"--model {spec!r} is neither 'minilm' nor a folder; give minilm, a "
                         "checkpoint directory under runs/, or a Hugging Face folder with config.json")
    cfg_file = path / "config.json"
    if not cfg_file.is_file() and any((path / sub / "config.json").is_file() for sub in ("best", "checkpoint")):
        return _checkpoint(path)  # a run folder, as translate and eval accept it: its best/ model
    if not cfg_file.is_file():
        raise InputError(f"{path} has no config.json; a checkpoint or Hugging Face folder needs one")
    try:
        cfg = json.loads(cfg_file.read_text())
    except json.JSONDecodeError as e:
        raise InputError(f"{cfg_file} is not valid JSON ({e.msg} at line {e.lineno})") from None
    if "model_type" in cfg:
        return _hf_folder(path, cfg)
    if "arch" in cfg:
        return _checkpoint(path)
    raise InputError(f"{cfg_file} has neither 'model_type' (Hugging Face) nor 'arch' (glassformer)")


@functools.lru_cache(maxsize=1)
def _minilm() -> Subject:
    """Loaded once per process: the CLI, the server and the analysis share one (read-only) model."""
    from .. import pretrained
    from ..unknown import minilm_encoder
    model, tok = pretrained.load("minilm")
    model.eval()
    # max_length=None: never truncate silently; Subject.encode refuses what 512 positions cannot hold
    encoder = minilm_encoder(tok, max_length=None)  # a word no WordPiece covers: [UNK] and one warning

    def tokenize(text: str):
        enc = encoder(text)
        return enc.ids, enc.tokens
    return Subject("minilm", model, "encoder", tokenize, unseen=encoder.unseen, unseen_note=encoder.warnings.note)


def _hf_tokenizer(path: Path):
    """The folder's own tokenizer — tokenizer.json through `tokenizers`, else transformers' files —
    as (tokenize, its SpanEncoder) for `Subject`."""
    from ..unknown import SpanEncoder, SpanWarnings, transformers_encoder
    if (path / "tokenizer.json").is_file():
        from tokenizers import Tokenizer
        tok = Tokenizer.from_file(str(path / "tokenizer.json"))
        tok.no_truncation()
        tok.no_padding()
        unk = getattr(tok.model, "unk_token", None)  # byte-level BPE (GPT-2) has none: nothing is unknown
        encoder = SpanEncoder(tok.encode, SpanWarnings(tok.get_vocab_size(), str(unk), tok.token_to_id(unk) if unk else None))

        def tokenize(text: str):
            enc = encoder(text)
            return enc.ids, enc.tokens
        return tokenize, encoder
    from transformers import AutoTokenizer
    try:
        hf_tok = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
    except (OSError, ValueError) as e:
        raise InputError(f"{path} has no usable tokenizer (tokenizer.json or vocab files): {e}") from None
    encoder = transformers_encoder(hf_tok)

    def tokenize(text: str):
        ids = encoder(text).ids
        return ids, hf_tok.convert_ids_to_tokens(ids)
    return tokenize, encoder


def _hf_folder(path: Path, cfg: dict) -> Subject:
    family = cfg.get("model_type")
    if family not in HF_FAMILIES:
        raise InputError(f"{path}: model_type={family!r} is not supported here; "
                         f"use a {' or '.join(HF_FAMILIES)} folder")
    if not any(path.glob("*.safetensors")):
        raise InputError(f"{path} has no .safetensors weights; save the model with safe_serialization")
    import transformers
    from ..interop import from_hf
    transformers.utils.logging.disable_progress_bar()  # one line per command, not a progress bar
    cls = getattr(transformers, HF_FAMILIES[family])
    hf = cls.from_pretrained(str(path), local_files_only=True, use_safetensors=True).eval()
    model = from_hf(hf).eval()
    kind = "encoder" if family == "bert" else "decoder"
    tokenize, encoder = _hf_tokenizer(path)
    return Subject(path.name, model, kind, tokenize, unseen=encoder.unseen, unseen_note=encoder.warnings.note)


def _checkpoint(path: Path) -> Subject:
    from ..train.checkpoint import load_checkpoint
    ck = load_checkpoint(path)
    model, src = ck.model.eval(), ck.src_tokenizer

    arch = ck.config.arch
    from ..unknown import UnknownPolicy, unseen_pieces
    policy = UnknownPolicy(src, side="source" if arch == "encoder-decoder" else "")  # <unk> + one warning

    def tokenize(text: str):
        policy.check(text)
        if arch == "encoder-decoder":  # sources are trained without <bos>/<eos> (train.tasks)
            ids = src.encode(text)
        elif arch == "decoder":  # a prompt: <bos> then the text, no <eos>
            ids = ([src.bos_id] if src.bos_id is not None else []) + src.encode(text)
        else:
            ids = src.encode(text, add_special=True)
        return ids, [src.id_to_token(i) for i in ids]
    return Subject(path.name, model, ck.config.arch, tokenize, tgt_tokenizer=ck.tgt_tokenizer,
                   meta=dict(ck.meta), unseen=lambda text: unseen_pieces(src, text), unseen_note=policy.note)
