"""The resumable training state, stored so that reading it can never run code.

`--resume` needs the optimiser's moments, the schedule, the RNG states and the data position.
They used to be one pickle (`train_state.pt`, read with `torch.load(weights_only=False)`): a run
folder someone shared could run arbitrary code on `--resume`. Now the state is two files:

    train_state.safetensors   every tensor and array (safetensors: raw bytes and a JSON header)
    train_state.json          the structure, with {"__tensor__": "t3"} where a tensor goes

JSON has no tuples, no integer keys and no arrays, so those are spelled out
({"__tuple__": [...]}, {"__items__": [[key, value], ...]}, {"__ndarray__": "t4", "dtype": "uint32"}).

A `train_state.pt` of an older glassformer is still read, with `torch.load(weights_only=True)`
and an allow-list of the numpy globals an RNG state needs; a pickle asking for anything else is
refused with one line, before any of it runs.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..errors import InputError

STATE_TENSORS, STATE_JSON, LEGACY_STATE = "train_state.safetensors", "train_state.json", "train_state.pt"
FORMAT = "glassformer-train-state/1"


def _encode(obj: Any, tensors: dict[str, torch.Tensor]) -> Any:
    if isinstance(obj, torch.Tensor):
        name = f"t{len(tensors)}"
        tensors[name] = obj.detach().cpu().contiguous().clone()  # safetensors refuses shared storage
        return {"__tensor__": name}
    if isinstance(obj, np.ndarray):
        name = f"t{len(tensors)}"
        if obj.dtype.kind not in "biuf":
            raise TypeError(f"cannot store a numpy array of dtype {obj.dtype} in the train state")
        tensors[name] = torch.from_numpy(obj.astype(np.float64 if obj.dtype.kind == "f" else np.int64))
        return {"__ndarray__": name, "dtype": obj.dtype.str}
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, tuple):
        return {"__tuple__": [_encode(v, tensors) for v in obj]}
    if isinstance(obj, list):
        return [_encode(v, tensors) for v in obj]
    if isinstance(obj, dict):
        if all(isinstance(k, str) and not k.startswith("__") for k in obj):
            return {k: _encode(v, tensors) for k, v in obj.items()}
        return {"__items__": [[_encode(k, tensors), _encode(v, tensors)] for k, v in obj.items()]}
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    raise TypeError(f"cannot store a {type(obj).__name__} in the train state")


def _decode(obj: Any, tensors: dict[str, torch.Tensor], where: Path) -> Any:
    if isinstance(obj, list):
        return [_decode(v, tensors, where) for v in obj]
    if not isinstance(obj, dict):
        return obj
    if "__tensor__" in obj or "__ndarray__" in obj:
        name = obj.get("__tensor__", obj.get("__ndarray__"))
        if name not in tensors:
            raise InputError(f"{where} names tensor {name!r}, which {STATE_TENSORS} lacks; the checkpoint is corrupt")
        t = tensors[name]
        return t if "__tensor__" in obj else t.numpy().astype(np.dtype(obj["dtype"]))
    if "__tuple__" in obj:
        return tuple(_decode(v, tensors, where) for v in obj["__tuple__"])
    if "__items__" in obj:
        return {_decode(k, tensors, where): _decode(v, tensors, where) for k, v in obj["__items__"]}
    return {k: _decode(v, tensors, where) for k, v in obj.items()}


def write_state(folder: Path, state: dict) -> list[str]:
    """Write `state` into `folder`; return the names of the files written."""
    from safetensors.torch import save_file

    tensors: dict[str, torch.Tensor] = {}
    tree = _encode(state, tensors)
    save_file(tensors, str(folder / STATE_TENSORS), metadata={"format": FORMAT})
    (folder / STATE_JSON).write_text(json.dumps({"format": FORMAT, "state": tree}), encoding="utf-8")
    return [STATE_TENSORS, STATE_JSON]


def has_state(folder: Path) -> bool:
    return (folder / STATE_JSON).exists() or (folder / LEGACY_STATE).exists()


def read_state(folder: Path) -> dict:
    """The state written by `write_state` (or an older glassformer's pickle, read safely)."""
    if not (folder / STATE_JSON).exists():
        return _read_legacy(folder / LEGACY_STATE)
    from safetensors.torch import load_file

    path = folder / STATE_JSON
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise InputError(f"{path} is not valid JSON ({e}); the checkpoint is corrupt") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT or not isinstance(doc.get("state"), dict):
        raise InputError(f"{path} is not a glassformer train state (expected format {FORMAT!r}); "
                         "the checkpoint is corrupt or from a newer glassformer")
    try:
        tensors = load_file(str(folder / STATE_TENSORS))
    except FileNotFoundError:
        raise InputError(f"{folder / STATE_TENSORS} is missing; the checkpoint is incomplete") from None
    except Exception as e:  # safetensors raises several types for a damaged file
        raise InputError(f"{folder / STATE_TENSORS} could not be read ({type(e).__name__}); "
                         "the checkpoint is corrupt") from None
    return _decode(doc["state"], tensors, path)


def _legacy_globals() -> list:
    """What an older glassformer's pickle legitimately holds beyond tensors: numpy's RNG state."""
    core = getattr(np, "_core", None) or np.core
    return [core.multiarray._reconstruct, np.ndarray, np.dtype, type(np.dtype("uint32"))]


def _read_legacy(path: Path) -> dict:
    import pickle

    try:
        with torch.serialization.safe_globals(_legacy_globals()):
            state = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as e:  # weights_only refuses before running anything
        found = re.search(r"GLOBAL (\S+)", str(e))
        if found is None:  # not a pickle that names code, just bytes that are no pickle: damage, not malice
            raise InputError(f"{path} could not be read (not a pickled train state); the checkpoint is corrupt") from None
        wanted = found.group(1)
        raise InputError(f"{path} was refused unread: it asks to run code ({wanted}); a train state holds only "
                         "tensors and numbers, so do not resume from a folder you cannot trust") from None
    except Exception as e:
        raise InputError(f"{path} could not be read ({type(e).__name__}); the checkpoint is corrupt") from None
    if not isinstance(state, dict):
        raise InputError(f"{path} holds a {type(state).__name__}, not a train state; the checkpoint is corrupt")
    return state
