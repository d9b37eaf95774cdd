"""Checkpoints: weights, config, tokenizers and training state, written atomically.

A checkpoint is one folder:

    model.safetensors   the weights (safetensors: no pickle, tied tensors stored once)
    config.json         ModelConfig.to_dict()
    src_tokenizer.json  tgt_tokenizer.json   (or tokenizer.json for a language model)
    meta.json           task, step, metrics, training config
    train_state.json    optional, for --resume: optimiser, schedule, RNG states, data position
    train_state.safetensors   (their tensors; see train_state.py: nothing in either can run code)

Atomicity: everything is written into a fresh sibling folder and fsync'd; then the old folder
is renamed aside, the new one renamed into place, and the old one removed. A kill at any
instant leaves either the old or the new checkpoint complete: if it lands between the two
renames, `load_checkpoint` (and the next save) take the folder set aside.

A run folder (`runs/demo/`) holds `checkpoint/` (latest, resumable) and `best/` (best held-out
score); `load_checkpoint` accepts the run folder and picks `best/`, else `checkpoint/`.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from torch import nn

from ..config import ModelConfig
from ..errors import GlassformerError, InputError
from ..limits import check_device
from . import train_state

WEIGHTS, CONFIG, META = "model.safetensors", "config.json", "meta.json"
TOKENIZER_FILES = {"src": "src_tokenizer.json", "tgt": "tgt_tokenizer.json", "lm": "tokenizer.json"}


@dataclass
class Checkpoint:
    """What `load_checkpoint` returns; the model is in eval mode."""

    path: Path
    model: nn.Module
    config: ModelConfig
    src_tokenizer: Any = None
    tgt_tokenizer: Any = None  # the same object as src_tokenizer for language models
    meta: dict = field(default_factory=dict)

    @property
    def tokenizer(self):
        return self.src_tokenizer


def trained_window(meta: dict) -> int | None:
    """The windows a language model from `glassformer train` read (its block_size), from a checkpoint's
    meta; None for any other model. Generation past it reads at most that many tokens (`generate(window=)`)."""
    if meta.get("task") != "lm":
        return None
    return (meta.get("train_config") or {}).get("block_size")


def _aside(path: Path) -> Path:
    return path.parent / f".{path.name}.old"


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _fsync_file(path: Path) -> None:
    with open(path, "rb") as f:
        os.fsync(f.fileno())


def _recover(path: Path) -> None:
    """Finish an interrupted swap: the complete folder set aside goes back into place."""
    old = _aside(path)
    if old.exists():
        if path.exists():
            shutil.rmtree(old, ignore_errors=True)  # the swap had finished: `old` is stale
        else:
            os.rename(old, path)


def _tokenizer_files(tokenizers: dict[str, Any]) -> dict[str, Any]:
    unknown = sorted(set(tokenizers) - set(TOKENIZER_FILES))
    if unknown:
        raise InputError(f"unknown tokenizer role(s) {', '.join(unknown)}; use src, tgt or lm")
    return {TOKENIZER_FILES[role]: tok for role, tok in tokenizers.items() if tok is not None}


def save_checkpoint(dir: str | Path, model: nn.Module, config: ModelConfig,
                    tokenizers: dict[str, Any] | None = None, state: dict | None = None,
                    meta: dict | None = None) -> Path:
    """Write a complete checkpoint to `dir`, replacing any previous one atomically."""
    from safetensors.torch import save_model

    path = Path(dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    _recover(path)
    for stale in path.parent.glob(f".{path.name}.tmp-*"):  # left by a save that was killed
        shutil.rmtree(stale, ignore_errors=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.tmp-", dir=path.parent))
    os.chmod(tmp, 0o755)  # mkdtemp makes it private; a checkpoint is ordinary data
    try:
        files = [WEIGHTS, CONFIG, META]
        save_model(model, str(tmp / WEIGHTS), metadata={"format": "pt"})  # shared tensors stored once
        (tmp / CONFIG).write_text(config.to_json(), encoding="utf-8")
        tok_files = _tokenizer_files(tokenizers or {})
        for name, tok in tok_files.items():
            tok.save(tmp / name)
            files.append(name)
        meta = dict(meta or {})
        meta["tokenizers"] = sorted(tok_files)
        meta["shared_tokenizer"] = bool(tokenizers) and tokenizers.get("src") is not None \
            and tokenizers.get("src") is tokenizers.get("tgt")
        (tmp / META).write_text(json.dumps(meta, indent=2, ensure_ascii=False), encoding="utf-8")
        if state is not None:
            files += train_state.write_state(tmp, state)
        for name in files:
            _fsync_file(tmp / name)
        _fsync_dir(tmp)
        old = _aside(path)
        if path.exists():
            os.rename(path, old)
        os.rename(tmp, path)  # the commit point
        _fsync_dir(path.parent)
        shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return path


def resolve(path: str | Path) -> Path:
    """The checkpoint folder for `path`: itself, or a run folder's best/ or checkpoint/."""
    p = Path(path)
    if not p.exists() and _aside(p).exists():
        return _aside(p)  # killed between the two renames of a save: the old one is complete
    if (p / CONFIG).exists() or (p / WEIGHTS).exists():
        return p
    for sub in ("best", "checkpoint"):
        q = p / sub
        if (q / CONFIG).exists() or (_aside(q) / CONFIG).exists():
            return q if (q / CONFIG).exists() else _aside(q)
    if not p.exists():
        raise InputError(f"checkpoint folder {p} does not exist; pass a run folder written by "
                         "`glassformer train --out DIR`")
    raise InputError(f"{p} is not a glassformer checkpoint (no {CONFIG} or {WEIGHTS}); pass a run "
                     "folder written by `glassformer train --out DIR`")


def _read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(f"checkpoint file {path} is missing; the checkpoint is incomplete") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise InputError(f"checkpoint file {path} is not valid JSON ({e}); the checkpoint is corrupt") from None


def read_meta(dir: str | Path) -> dict:
    """A checkpoint's meta.json (task, step, metrics) without loading its weights."""
    return _read_json(resolve(dir) / META)


def load_checkpoint(dir: str | Path, device: str = "cpu") -> Checkpoint:
    """Load a checkpoint (or a run folder's best one). A missing or corrupt one: InputError."""
    from safetensors.torch import load_model

    from ..nn import build_model

    check_device(device)
    path = resolve(dir)
    config_data = _read_json(path / CONFIG)
    try:
        config = ModelConfig.from_dict(config_data)
    except GlassformerError as e:
        raise InputError(f"{path / CONFIG}: {e}") from None
    except TypeError as e:
        raise InputError(f"{path / CONFIG} is not a model config ({e})") from None
    meta = _read_json(path / META)
    if not isinstance(meta, dict):
        raise InputError(f"{path / META} holds a {type(meta).__name__}, not an object; the checkpoint is corrupt")
    model = build_model(config)
    weights = path / WEIGHTS
    if not weights.exists():
        raise InputError(f"checkpoint file {weights} is missing; the checkpoint is incomplete")
    _check_shapes(model, weights)
    try:
        missing, unexpected = load_model(model, str(weights), strict=False, device=device)
    except Exception as e:  # safetensors raises several types for a damaged file
        raise InputError(f"{weights} could not be read ({type(e).__name__}: {str(e).splitlines()[0]});"
                         " the checkpoint is corrupt") from None
    if missing or unexpected:
        raise InputError(f"{weights} does not match {CONFIG}: missing {sorted(missing)[:3]}, "
                         f"unexpected {sorted(unexpected)[:3]}")
    bad = next((k for k, t in model.state_dict().items() if t.is_floating_point() and not t.isfinite().all()), None)
    if bad is not None:  # NaN weights would answer every question with NaN or nonsense
        raise InputError(f"{weights}: {bad} holds NaN or infinite values; this checkpoint cannot be used "
                         "(take best/ or an earlier one)")
    model.to(device).eval()
    src, tgt = _load_tokenizers(path, meta)
    return Checkpoint(path=path, model=model, config=config, src_tokenizer=src, tgt_tokenizer=tgt, meta=meta)


def _check_shapes(model: nn.Module, weights: Path) -> None:
    """Name the first tensor whose stored shape differs from the one config.json builds."""
    from safetensors import safe_open

    try:
        with safe_open(str(weights), framework="pt") as f:
            stored = {k: tuple(f.get_slice(k).get_shape()) for k in f.keys()}
    except Exception:  # a damaged header: reported as corrupt by the load that follows
        return
    for name, t in model.state_dict().items():
        if name in stored and stored[name] != tuple(t.shape):
            raise InputError(f"{weights} does not match {CONFIG}: {name} has shape {list(stored[name])} in the "
                             f"weights but {list(t.shape)} in a model built from {CONFIG}; the two files come "
                             "from different models")


def _load_tokenizers(path: Path, meta: dict):
    names = meta.get("tokenizers", [])
    if not names:
        return None, None
    from ..tokenize import load_tokenizer

    def load(name):
        try:
            return load_tokenizer(path / name)
        except GlassformerError:
            raise
        except Exception as e:
            raise InputError(f"{path / name} could not be read ({type(e).__name__}); "
                             "the checkpoint is corrupt") from None

    if TOKENIZER_FILES["lm"] in names:
        tok = load(TOKENIZER_FILES["lm"])
        return tok, tok
    src = load(TOKENIZER_FILES["src"])
    tgt = src if meta.get("shared_tokenizer") else load(TOKENIZER_FILES["tgt"])
    return src, tgt


def load_train_state(dir: str | Path, required: tuple[str, ...] = ()) -> dict:
    """The resumable training state (optimiser, schedule, RNG, data position) of a checkpoint.

    Read without unpickling anything (train_state.py); a state lacking one of `required` is refused.
    """
    p = resolve(dir)
    if not train_state.has_state(p):
        raise InputError(f"no resumable state in {p} (no {train_state.STATE_JSON}); "
                         "start a new run without --resume")
    state = train_state.read_state(p)
    missing = [k for k in required if k not in state]
    if missing:
        raise InputError(f"the train state in {p} lacks {', '.join(missing)}; the checkpoint is incomplete "
                         "or from another program, so it cannot be resumed")
    return state
