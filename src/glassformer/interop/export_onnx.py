"""ONNX from the Hugging Face model, by torch.onnx (the dynamo exporter), checked in ONNX Runtime.

Files, in the layout ONNX Runtime users know from Optimum (names below; L layers, i = 0…L−1):

- a language model is `model.onnx`: (input_ids, attention_mask, position_ids,
  past_key_values.{i}.key/value) -> (logits, present.{i}.key/value). The first call passes a past
  of length 0; each later call passes the new token(s) and the presents it got back, with
  attention_mask covering past + new, so a step costs one token's work (seed 000 §6: the decoder
  only ever adds a row). position_ids lets a left-padded batch count from each row's first token.
  OpenAI GPT has no cache in `transformers`: its `model.onnx` is (input_ids, attention_mask) -> logits
  and recomputes the prefix.
- a translator is `encoder.onnx` (input_ids, attention_mask -> encoder_hidden_states), run once;
  `decoder.onnx` for the first step (decoder_input_ids, encoder_hidden_states, attention_mask ->
  logits, present.{i}.decoder.key/value, present.{i}.encoder.key/value); and
  `decoder_with_past.onnx` for every later step (decoder_input_ids, attention_mask,
  past_key_values.{i}.decoder.key/value, past_key_values.{i}.encoder.key/value -> logits,
  present.{i}.decoder.key/value). The cross-attention K/V (the `.encoder` ones) are computed once,
  in the first step, from the source (seed 000 §6.2: K, V come from the encoder's output).
- an encoder is `encoder.onnx` alone.

Batch, lengths and past lengths are dynamic axes.

The check runs ONNX Runtime on inputs of other shapes than the export's example (so a length
traced in as a constant would show): the whole sequence at once on a padded batch, and the same
sequences one token at a time through the past key values; every logit is compared with our model's.
"""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import numpy as np
import torch
from torch import nn

from ..errors import InputError
from .export_folder import CHECK_TOL, probe


def _layers(hf) -> int:
    c = hf.config
    for name in ("num_hidden_layers", "n_layer", "decoder_layers", "num_decoder_layers", "num_layers"):
        if getattr(c, name, None):
            return int(getattr(c, name))
    raise AssertionError(f"no layer count in {type(c).__name__}")


def _decoder_layers(hf) -> int:
    c = hf.config
    return int(getattr(c, "decoder_layers", None) or getattr(c, "num_decoder_layers", None) or c.num_layers)


def past_names(n_layers: int, side: str | None = None, prefix: str = "past_key_values") -> list[str]:
    """`prefix.{i}[.side].key`, `….value`, layer by layer (side: None, "decoder" or "encoder")."""
    mid = f".{side}" if side else ""
    return [f"{prefix}.{i}{mid}.{kv}" for i in range(n_layers) for kv in ("key", "value")]


def _flat(cache) -> list[torch.Tensor]:
    return [t for layer in cache.layers for t in (layer.keys, layer.values)]


def _pairs(flat) -> list[tuple[torch.Tensor, torch.Tensor]]:
    return [(flat[j], flat[j + 1]) for j in range(0, len(flat), 2)]


def has_cache(hf) -> bool:
    """OpenAI GPT is the one family here whose `transformers` class takes no past key values."""
    return type(hf).__name__ != "OpenAIGPTLMHeadModel"


class _LM(nn.Module):
    """One step of a decoder-only LM with its past: logits and the grown K/V of every layer."""

    def __init__(self, hf):
        super().__init__()
        self.hf = hf

    def forward(self, input_ids, attention_mask, position_ids, past):
        from transformers import DynamicCache
        cache = DynamicCache(ddp_cache_data=_pairs(past))
        out = self.hf(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
                      past_key_values=cache, use_cache=True)
        return (out.logits, *_flat(out.past_key_values))


class _LMNoCache(nn.Module):
    def __init__(self, hf):
        super().__init__()
        self.hf = hf

    def forward(self, input_ids, attention_mask):
        return self.hf(input_ids=input_ids, attention_mask=attention_mask, use_cache=False).logits


class _Encoder(nn.Module):
    def __init__(self, hf):
        super().__init__()
        self.hf = hf

    def forward(self, input_ids, attention_mask):
        enc = self.hf.get_encoder() if self.hf.config.is_encoder_decoder else self.hf  # BERT: the model itself
        return enc(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state


class _DecoderFirst(nn.Module):
    """The first decoding step: logits, the self-attention K/V so far and the cross-attention K/V."""

    def __init__(self, hf):
        super().__init__()
        self.hf = hf

    def forward(self, decoder_input_ids, encoder_hidden_states, attention_mask):
        out = self.hf(encoder_outputs=(encoder_hidden_states,), attention_mask=attention_mask,
                      decoder_input_ids=decoder_input_ids, use_cache=True)
        cache = out.past_key_values
        return (out.logits, *_flat(cache.self_attention_cache), *_flat(cache.cross_attention_cache))


class _DecoderWithPast(nn.Module):
    """A later step: the new token(s) against the kept self-attention K/V and the source's K/V."""

    def __init__(self, hf):
        super().__init__()
        self.hf = hf

    def forward(self, decoder_input_ids, attention_mask, past_self, past_cross):
        from transformers import DynamicCache, EncoderDecoderCache
        cache = EncoderDecoderCache(DynamicCache(ddp_cache_data=_pairs(past_self)),
                                    DynamicCache(ddp_cache_data=_pairs(past_cross)))
        # A filled cross cache is used as is (no projection); the layers still need a tensor of the
        # source's shape to know that cross-attention exists, so it gets zeros it never reads.
        key = past_cross[0]
        memory = key.new_zeros(key.shape[0], key.shape[2], self.hf.config.d_model)
        out = self.hf(encoder_outputs=(memory,), attention_mask=attention_mask,
                      decoder_input_ids=decoder_input_ids, past_key_values=cache, use_cache=True)
        return (out.logits, *_flat(out.past_key_values.self_attention_cache))


def _export(module: nn.Module, args: tuple, shapes: tuple, names: list[str], outputs: list[str], path: Path) -> None:
    """One graph; `shapes` names the dynamic axes of each argument (Dim.AUTO: the exporter ties equal ones)."""
    import logging
    import warnings
    onnx_log = logging.getLogger("torch.onnx")
    level = onnx_log.level
    onnx_log.setLevel(logging.ERROR)  # "torchvision is not installed" notices: nothing here uses it
    try:
        with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():  # progress and deprecations
            warnings.simplefilter("ignore")
            torch.onnx.export(module.eval(), args, str(path), input_names=names, output_names=outputs,
                              dynamic_shapes=shapes, dynamo=True, verbose=False, external_data=False)
    finally:
        onnx_log.setLevel(level)


def _kv_example(batch: int, length: int, n_layers: int, heads: int, head_dim: int, seed: int) -> tuple:
    g = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(batch, heads, length, head_dim, generator=g) for _ in range(2 * n_layers))


def _kv_geometry(hf) -> tuple[int, int]:
    """(K/V heads, head size) of the cache `transformers` keeps for this model."""
    c = hf.config
    d = getattr(c, "hidden_size", None) or getattr(c, "n_embd", None) or c.d_model
    heads = getattr(c, "num_attention_heads", None) or getattr(c, "n_head", None) or c.num_heads
    kv = getattr(c, "num_key_value_heads", None) or heads
    head_dim = getattr(c, "head_dim", None) or getattr(c, "d_kv", None) or d // heads
    return int(kv), int(head_dim)


def export_graphs(hf, cfg, folder: Path) -> list[str]:
    """Write the graphs of the module docstring for `hf` into `folder`; their file names."""
    auto = torch.export.Dim.AUTO
    bt = {0: auto, 1: auto}  # batch and length
    past_axes = {0: auto, 2: auto}  # batch and past length
    src, pad, tgt = probe(cfg)  # the export's example: batch 2, lengths 7 and 4
    mask = (~pad).long()
    if cfg.arch == "encoder":
        _export(_Encoder(hf), (src, mask), (bt, bt), ["input_ids", "attention_mask"], ["encoder_hidden_states"],
                folder / "encoder.onnx")
        return ["encoder.onnx"]
    heads, head_dim = _kv_geometry(hf)
    if cfg.arch == "decoder":
        if not has_cache(hf):
            _export(_LMNoCache(hf), (src, mask), (bt, bt), ["input_ids", "attention_mask"], ["logits"],
                    folder / "model.onnx")
            return ["model.onnx"]
        n = _layers(hf)
        new, past_len = src[:, :3], 4  # distinct sizes (batch 2, new 3, past 4), so no axis is tied by accident
        past = _kv_example(2, past_len, n, heads, head_dim, seed=1)
        full_mask = torch.ones(2, past_len + 3, dtype=torch.long)
        positions = torch.arange(past_len, past_len + 3).expand(2, 3)
        _export(_LM(hf), (new, full_mask, positions, past), (bt, bt, bt, tuple(past_axes for _ in past)),
                ["input_ids", "attention_mask", "position_ids", *past_names(n)], ["logits", *past_names(n, prefix="present")],
                folder / "model.onnx")
        return ["model.onnx"]
    n = _decoder_layers(hf)
    _export(_Encoder(hf), (src, mask), (bt, bt), ["input_ids", "attention_mask"], ["encoder_hidden_states"],
            folder / "encoder.onnx")
    memory = _Encoder(hf)(src, mask)
    _export(_DecoderFirst(hf), (tgt[:, :3], memory, mask), (bt, {0: auto, 1: auto}, bt),
            ["decoder_input_ids", "encoder_hidden_states", "attention_mask"],
            ["logits", *past_names(n, "decoder", "present"), *past_names(n, "encoder", "present")],
            folder / "decoder.onnx")
    past_self = _kv_example(2, 4, n, heads, head_dim, seed=2)
    past_cross = _kv_example(2, src.shape[1], n, heads, head_dim, seed=3)
    _export(_DecoderWithPast(hf), (tgt[:, 3:], mask, past_self, past_cross),
            (bt, bt, tuple(past_axes for _ in past_self), tuple(past_axes for _ in past_cross)),
            ["decoder_input_ids", "attention_mask", *past_names(n, "decoder"), *past_names(n, "encoder")],
            ["logits", *past_names(n, "decoder", "present")], folder / "decoder_with_past.onnx")
    return ["encoder.onnx", "decoder.onnx", "decoder_with_past.onnx"]


def write_onnx(model, folder: Path, tokenizers, write_hf) -> dict:
    try:
        import onnxruntime as ort
        import onnxscript  # noqa: F401  (the dynamo exporter needs it)
    except ImportError:
        raise InputError("--format onnx needs onnx, onnxscript and onnxruntime: pip install 'glassformer[dev]'") from None
    hf_dir = folder / "hf"
    report = write_hf(model, hf_dir, tokenizers)
    import transformers
    hf = getattr(transformers, report["class"]).from_pretrained(hf_dir, attn_implementation="eager").eval()
    with torch.no_grad():
        files = export_graphs(hf, model.config, folder)
    errors = onnx_errors(ort, model, folder)
    err = max(errors.values())
    if not err <= CHECK_TOL["onnx"]:
        raise InputError(f"ONNX Runtime's logits are {err:.2e} away from ours (allowed {CHECK_TOL['onnx']:g}); "
                         "nothing was written")
    report.update(format="onnx", hf_folder="hf", onnx_max_abs_logit_error=err, onnx_errors=errors,
                  past_key_values=model.config.arch != "encoder" and has_cache(hf), files=files)
    return report


class OnnxModel:
    """The exported graphs in ONNX Runtime sessions (one thread), run the way a deployment runs them."""

    def __init__(self, ort, folder: Path, arch: str):
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = 1
        self.arch = arch
        self.sessions = {p.stem: ort.InferenceSession(str(p), opts, providers=["CPUExecutionProvider"])
                         for p in folder.glob("*.onnx")}
        self.model = self.sessions.get("model")
        self.cached = self.model is not None and any(i.name == "position_ids" for i in self.model.get_inputs())

    def _past_names(self, session) -> list[str]:
        return [i.name for i in session.get_inputs() if i.name.startswith("past_key_values.")]

    def encode(self, src: np.ndarray, mask: np.ndarray) -> np.ndarray:
        return self.sessions["encoder"].run(None, {"input_ids": src, "attention_mask": mask})[0]

    def lm_step(self, ids: np.ndarray, mask: np.ndarray, positions: np.ndarray, past: list[np.ndarray] | None):
        """(logits, presents) for the new `ids`; `past` None is the first step (a past of length 0)."""
        inputs = [i for i in self.model.get_inputs() if i.name.startswith("past_key_values.")]
        names = [i.name for i in inputs]
        if past is None:  # each input's shape is (batch, kv heads, past, head dim)
            past = [np.zeros((ids.shape[0], i.shape[1], 0, i.shape[3]), np.float32) for i in inputs]
        out = self.model.run(None, {"input_ids": ids, "attention_mask": mask, "position_ids": positions,
                                    **dict(zip(names, past))})
        return out[0], out[1:]

    def decoder_first(self, tgt: np.ndarray, memory: np.ndarray, mask: np.ndarray):
        """(logits, self presents, cross presents) of the first target tokens."""
        out = self.sessions["decoder"].run(None, {"decoder_input_ids": tgt, "encoder_hidden_states": memory,
                                                  "attention_mask": mask})
        half = (len(out) - 1) // 2
        return out[0], out[1:1 + half], out[1 + half:]

    def decoder_next(self, tgt: np.ndarray, mask: np.ndarray, past_self: list, cross: list):
        session = self.sessions["decoder_with_past"]
        names = self._past_names(session)
        out = session.run(None, {"decoder_input_ids": tgt, "attention_mask": mask,
                                 **dict(zip(names, [*past_self, *cross]))})
        return out[0], out[1:]

    def full(self, src: torch.Tensor, mask: torch.Tensor, tgt: torch.Tensor | None = None) -> torch.Tensor:
        """The whole sequence in one call: logits (decoder-only, encoder-decoder) or final states (encoder)."""
        s, m = src.numpy(), mask.numpy()
        if self.arch == "decoder":
            if not self.cached:
                return torch.from_numpy(self.model.run(None, {"input_ids": s, "attention_mask": m})[0])
            positions = np.clip(np.cumsum(m, 1) - 1, 0, None)  # what transformers' generate() passes
            return torch.from_numpy(self.lm_step(s, m, positions, None)[0])
        memory = self.encode(s, m)
        if self.arch == "encoder":
            return torch.from_numpy(memory)
        return torch.from_numpy(self.decoder_first(tgt.numpy(), memory, m)[0])

    def stepwise(self, src: torch.Tensor, tgt: torch.Tensor | None = None, first: int = 2) -> torch.Tensor:
        """The same logits as `full` on an unpadded batch, but `first` tokens and then one at a time
        through the past key values."""
        if self.arch == "decoder":
            s = src.numpy()
            b, t = s.shape
            logits, past = self.lm_step(s[:, :first], np.ones((b, first), np.int64),
                                        np.arange(first)[None].repeat(b, 0), None)
            pieces = [logits]
            for j in range(first, t):
                logits, past = self.lm_step(s[:, j:j + 1], np.ones((b, j + 1), np.int64), np.full((b, 1), j), past)
                pieces.append(logits)
            return torch.from_numpy(np.concatenate(pieces, 1))
        m = np.ones(src.shape, np.int64)
        memory = self.encode(src.numpy(), m)
        y = tgt.numpy()
        logits, past, cross = self.decoder_first(y[:, :first], memory, m)
        pieces = [logits]
        for j in range(first, y.shape[1]):
            logits, past = self.decoder_next(y[:, j:j + 1], m, past, cross)
            pieces.append(logits)
        return torch.from_numpy(np.concatenate(pieces, 1))


@torch.no_grad()
def onnx_errors(ort, model, folder: Path) -> dict[str, float]:
    """Max |ONNX Runtime − ours| over the logits: whole sequences on a padded batch ("full") and,
    where there are past key values, the same model one token at a time ("stepwise")."""
    cfg = model.config
    g = torch.Generator().manual_seed(4)
    low = 4 if cfg.vocab_size > 8 else 0
    src = torch.randint(low, cfg.vocab_size, (3, 9), generator=g)  # other shapes than the export's example
    pad = torch.arange(9)[None] >= torch.tensor([9, 6, 2])[:, None]
    src = src.masked_fill(pad, cfg.pad_id if cfg.pad_id is not None else 0)
    tgt = torch.randint(low, cfg.out_vocab_size, (3, 6), generator=g)
    if cfg.start_id is not None:
        tgt[:, 0] = cfg.start_id
    onnx = OnnxModel(ort, folder, cfg.arch)
    got = onnx.full(src, (~pad).long(), tgt)
    errors = {}
    if cfg.arch == "encoder-decoder":
        ours = model(src, tgt, src_padding_mask=pad)
        errors["full"] = (got[..., :ours.shape[-1]] - ours).abs().max().item()
        unpadded = src.masked_fill(pad, low)
        ours = model(unpadded, tgt)
        errors["stepwise"] = (onnx.stepwise(unpadded, tgt)[..., :ours.shape[-1]] - ours).abs().max().item()
        return errors
    ours = model(src, padding_mask=pad)
    errors["full"] = (got[..., :ours.shape[-1]] - ours)[~pad].abs().max().item()
    if cfg.arch == "decoder" and onnx.cached:
        unpadded = src.masked_fill(pad, low)
        ours = model(unpadded)
        errors["stepwise"] = (onnx.stepwise(unpadded)[..., :ours.shape[-1]] - ours).abs().max().item()
    return errors
