"""How much input glassformer accepts, and what this machine can hold: one place for every limit.

Attention costs memory quadratic in the sequence length (seed 000 §1: the (seq, seq) score
matrix per head), so one 500,000-token line asks for terabytes and one 200,000-token sentence
takes hours to decode. Every entry point (the data readers, translate, generate, eval, inspect,
the server) checks its input here and stops with one line that says the limit and how to
change it, instead of allocating, hanging or truncating silently.

    GLASSFORMER_MAX_TOKENS      tokens in one sequence (default 1024)
    GLASSFORMER_MAX_LINE_BYTES  bytes in one line of a data file (default 1 MB)
"""

from __future__ import annotations

import math
import os

from .errors import ConfigError, InputError

DEFAULTS = {"GLASSFORMER_MAX_TOKENS": 1024, "GLASSFORMER_MAX_LINE_BYTES": 1_000_000}


def _limit(name: str) -> int:
    raw = os.environ.get(name)
    if raw is None:
        return DEFAULTS[name]
    if not raw.strip().isdigit() or int(raw) < 1:
        raise ConfigError(f"{name}={raw!r} must be a positive whole number (default {DEFAULTS[name]})")
    return int(raw)


def max_tokens() -> int:
    return _limit("GLASSFORMER_MAX_TOKENS")


def max_line_bytes() -> int:
    return _limit("GLASSFORMER_MAX_LINE_BYTES")


def check_tokens(n: int, what: str, limit: int | None = None, how: str | None = None) -> None:
    """Stop when `what` has more than `limit` tokens (default: GLASSFORMER_MAX_TOKENS)."""
    limit = max_tokens() if limit is None else limit
    if n > limit:
        how = how or "set GLASSFORMER_MAX_TOKENS to raise it"
        raise InputError(f"{what} is {n} tokens; the limit is {limit} ({how})")


def check_positions(n: int, config, what: str, how: str = "give a shorter input") -> None:
    """A learned position table has `max_len` rows (§3): a longer sequence has no position to read."""
    if config.pe == "learned" and n > config.max_len:
        raise InputError(f"{what} needs {n} positions; this model's learned position table has "
                         f"max_len={config.max_len} rows ({how})")


def check_finite(name: str, value, low: float | None = None, high: float | None = None) -> None:
    """A number from a user: finite, and inside [low, high] where given."""
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    ok = ok and (low is None or value >= low) and (high is None or value <= high)
    if not ok:
        where = "" if low is None and high is None else f" in [{low if low is not None else '-inf'}, " \
                                                        f"{high if high is not None else 'inf'}]"
        raise ConfigError(f"{name}={value!r} must be a finite number{where}")


# ---- memory: refuse a model this machine cannot hold, before allocating it ----
def layer_weights(d_model: int, d_ff: int, attn_width: int | None = None, glu: bool = False) -> tuple[int, int]:
    """(attention, FFN) weight matrices of one layer: W_Q, W_K, W_V, W_O (d_model · attn_width each,
    attn_width = heads · d_k, d_model by default) and the FFN's W_1, W_2 (and a GLU's gate), d_model · d_ff each."""
    attn_width = d_model if attn_width is None else attn_width
    return 4 * d_model * attn_width, (3 if glu else 2) * d_model * d_ff


def parameter_estimate(config) -> int:
    """About how many parameters `build_model(config)` allocates (embeddings, attention, FFN)."""
    from .config import GATED  # (config imports this module at its top)
    d = config.d_model
    attn, ffn = layer_weights(d, config.d_ff, config.n_heads * config.head_dim,
                              glu=config.activation in GATED)
    enc = config.n_layers * (attn + ffn) if config.arch != "decoder" else 0
    dec_layers = config.dec_layers if config.arch != "encoder" else 0
    cross = attn if config.arch == "encoder-decoder" else 0
    dec = dec_layers * (attn + cross + ffn)
    embed = config.vocab_size * d + (config.out_vocab_size * d if config.arch == "encoder-decoder" else 0)
    head = 0 if config.tie_embeddings else config.out_vocab_size * d
    pos = config.max_len * d if config.pe == "learned" else 0
    return enc + dec + embed + head + pos


def physical_memory() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def check_model_fits(config, bytes_per_param: int = 4) -> None:
    """Stop when the weights alone would not fit in this machine's memory (float32: 4 bytes each)."""
    need = parameter_estimate(config) * bytes_per_param
    have = physical_memory()
    if have is not None and need > have:
        raise ConfigError(f"this model has about {parameter_estimate(config):,} parameters "
                          f"({need / 2**30:,.1f} GiB of weights) but this machine has {have / 2**30:,.1f} GiB "
                          f"of memory; choose a smaller d_model, d_ff, n_layers or vocab_size")


def check_device(device: str) -> None:
    """A CUDA device only where this PyTorch build and machine have one."""
    import torch

    if not isinstance(device, str) or not (device == "cpu" or device == "cuda" or device.startswith("cuda:")):
        raise ConfigError(f"device={device!r} must be cpu, cuda or cuda:N")
    if device.startswith("cuda"):
        if not torch.cuda.is_available():
            raise ConfigError(f"device={device!r}: this PyTorch build or machine has no CUDA GPU; use --device cpu")
        index = device.partition(":")[2]
        if index and (not index.isdigit() or int(index) >= torch.cuda.device_count()):
            raise ConfigError(f"device={device!r}: this machine has {torch.cuda.device_count()} CUDA device(s), "
                              f"cuda:0..cuda:{torch.cuda.device_count() - 1}")
