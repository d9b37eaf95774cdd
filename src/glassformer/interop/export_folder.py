"""Write an exported model to a folder: Hugging Face, CTranslate2 or ONNX, atomically and checked.

Every format is built in a fresh sibling folder (`.NAME.tmp-*`) and renamed into place only when
complete and checked, so an interrupted or failed export leaves nothing behind and never touches
an existing folder; with `force` the old folder is renamed aside first and removed after the swap.

The checks read the written files back: `transformers` (AutoModel classes, AutoTokenizer) for
hf, CTranslate2's own runtime for ctranslate2, ONNX Runtime for onnx, each against our model.
`ctranslate2`, `onnx`, `onnxruntime` are imported here only, when that format is asked for.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path

import torch

from ..errors import InputError
from .export import Export, to_hf
from .hf_tokenizers import to_fast

FORMATS = ("hf", "ctranslate2", "onnx")
REPORT = "glassformer_export.json"
TARGET_TOKENIZER = "target_tokenizer"  # a translator's target side, when it has its own vocabulary
CHECK_TOL = {"hf": 1e-4, "onnx": 1e-4}


def check_out(out: str | Path, force: bool) -> Path:
    """The output folder, refused (one line) if it exists without `force` or is not a folder."""
    p = Path(out)
    if p.exists() and not p.is_dir():
        raise InputError(f"--out {p} is a file; give a folder path to export into")
    if p.exists() and not force:
        raise InputError(f"--out {p} already exists; pass --force to replace it, or choose another folder")
    return p


@contextmanager
def atomic_folder(out: Path):
    """Yield a temporary sibling folder; on success it replaces `out`, on any exit by error it is removed."""
    out.parent.mkdir(parents=True, exist_ok=True)
    for stale in out.parent.glob(f".{out.name}.tmp-*"):  # left by an export that was killed
        shutil.rmtree(stale, ignore_errors=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.tmp-", dir=out.parent))
    os.chmod(tmp, 0o755)
    try:
        yield tmp
        aside = out.parent / f".{out.name}.old"
        if out.exists():
            shutil.rmtree(aside, ignore_errors=True)
            os.rename(out, aside)
        os.rename(tmp, out)  # the commit point
        shutil.rmtree(aside, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _sides(tokenizers: dict | None, arch: str):
    """(main tokenizer, separate target tokenizer or None, lm?) from a checkpoint's tokenizers."""
    if not tokenizers:
        return None, None, arch == "decoder"
    if "lm" in tokenizers:
        return tokenizers["lm"], None, True
    src, tgt = tokenizers.get("src"), tokenizers.get("tgt")
    return src, (tgt if tgt is not None and tgt is not src else None), False


def probe(cfg, seed: int = 0):
    """A right-padded batch of ordinary ids (no special token inside) and decoder inputs from the start."""
    g = torch.Generator().manual_seed(seed)
    low = 4 if cfg.vocab_size > 8 else 0
    lengths = (7, 4)
    src = torch.randint(low, cfg.vocab_size, (2, 7), generator=g)
    pad = torch.arange(7)[None] >= torch.tensor(lengths)[:, None]
    src = src.masked_fill(pad, cfg.pad_id if cfg.pad_id is not None else 0)
    tgt = torch.randint(low, cfg.out_vocab_size, (2, 5), generator=g)
    if cfg.start_id is not None:
        tgt[:, 0] = cfg.start_id
    return src, pad, tgt


@torch.no_grad()
def logits_error(model, hf) -> float:
    """Max |ours − the exported model| on the probe batch (real positions, real vocabulary)."""
    cfg = model.config
    src, pad, tgt = probe(cfg)
    mask = (~pad).long()
    if cfg.arch == "encoder":
        ref, ours = hf(src, attention_mask=mask).last_hidden_state[~pad], model(src, padding_mask=pad)[~pad]
    elif cfg.arch == "decoder":
        ref, ours = hf(src, attention_mask=mask).logits[~pad], model(src, padding_mask=pad)[~pad]
    else:
        ref = hf(input_ids=src, attention_mask=mask, decoder_input_ids=tgt).logits
        ours = model(src, tgt, src_padding_mask=pad)
    return (ref[..., :ours.shape[-1]] - ours).abs().max().item()


@contextmanager
def quiet_transformers():
    """No progress bars or generation-config notices from transformers while exporting (one-line output)."""
    from transformers.utils import logging as hf_logging
    level, bars = hf_logging.get_verbosity(), hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        hf_logging.set_verbosity(level)
        if bars:
            hf_logging.enable_progress_bar()


def _write_hf(model, folder: Path, tokenizers: dict | None) -> dict:
    with quiet_transformers():
        return _write_hf_quietly(model, folder, tokenizers)


def _write_hf_quietly(model, folder: Path, tokenizers: dict | None) -> dict:
    hf = to_hf(model, tokenizers)
    ex: Export = hf.glassformer_export
    hf.save_pretrained(folder)
    main, target, lm = _sides(tokenizers, model.config.arch)
    if main is not None:
        to_fast(main, lm).save_pretrained(folder)
    if target is not None:
        to_fast(target).save_pretrained(folder / TARGET_TOKENIZER)
    reloaded = type(hf).from_pretrained(folder).eval()  # the files, not the object in memory
    err = logits_error(model, reloaded)
    if not err <= CHECK_TOL["hf"]:
        raise InputError(f"the exported {ex.family} folder computes logits {err:.2e} away from the model "
                         f"(allowed {CHECK_TOL['hf']:g}); nothing was written")
    return {"format": "hf", "family": ex.family, "class": type(hf).__name__, "notes": ex.notes,
            "real_target_vocab": ex.real_tgt_vocab, "max_abs_logit_error": err,
            "target_tokenizer": TARGET_TOKENIZER if target is not None else None}


def save(model, out: str | Path, fmt: str = "hf", tokenizers: dict | None = None, force: bool = False,
         int8: bool = False, source: str | None = None) -> dict:
    """Export `model` (with its tokenizers) to `out` in `fmt`; return what was written and measured."""
    if fmt not in FORMATS:
        raise InputError(f"--format {fmt!r} is not one of {', '.join(FORMATS)}")
    if int8 and fmt != "ctranslate2":
        raise InputError(f"--int8 applies to --format ctranslate2 only, not {fmt}")
    out = check_out(out, force)
    with quiet_transformers(), atomic_folder(out) as tmp:
        if fmt == "hf":
            report = _write_hf(model, tmp, tokenizers)
        elif fmt == "ctranslate2":
            from .export_ct2 import write_ctranslate2
            report = write_ctranslate2(model, tmp, tokenizers, int8, _write_hf)
        else:
            from .export_onnx import write_onnx
            report = write_onnx(model, tmp, tokenizers, _write_hf)
        report["source"] = source
        (tmp / REPORT).write_text(json.dumps(report, indent=2, ensure_ascii=False), encoding="utf-8")
    return report
