"""ONNX from the Hugging Face model, by torch.onnx (the dynamo exporter), checked in ONNX Runtime.

Files: a language model is `model.onnx` (input_ids, attention_mask -> logits); a translator is
`encoder.onnx` (input_ids, attention_mask -> encoder_hidden_states) and `decoder.onnx`
(decoder_input_ids, encoder_hidden_states, attention_mask -> logits), so a caller encodes once and
runs the decoder on the growing target; an encoder is `encoder.onnx` alone. Batch and lengths are
dynamic axes. The graphs recompute the whole prefix at each step (no past key values).

The check runs ONNX Runtime on inputs of other shapes than the export's example (so a length
traced in as a constant would show) and compares with our model's logits.
"""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import torch
from torch import nn

from ..errors import InputError
from .export_folder import CHECK_TOL, probe


class _LM(nn.Module):
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


class _Decoder(nn.Module):
    def __init__(self, hf):
        super().__init__()
        self.hf = hf

    def forward(self, decoder_input_ids, encoder_hidden_states, attention_mask):
        return self.hf(encoder_outputs=(encoder_hidden_states,), attention_mask=attention_mask,
                       decoder_input_ids=decoder_input_ids, use_cache=False).logits


def _export(module: nn.Module, args: tuple, names: list[str], output: str, path: Path) -> None:
    """One graph; every input's batch and length axes dynamic (Dim.AUTO: the exporter ties equal ones)."""
    import logging
    import warnings
    auto = torch.export.Dim.AUTO
    shapes = {name: {i: auto for i in range(a.dim() - (a.dim() == 3))} for name, a in zip(names, args)}
    onnx_log = logging.getLogger("torch.onnx")
    level = onnx_log.level
    onnx_log.setLevel(logging.ERROR)  # "torchvision is not installed" notices: nothing here uses it
    try:
        with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():  # progress and deprecations
            warnings.simplefilter("ignore")
            torch.onnx.export(module.eval(), args, str(path), input_names=names, output_names=[output],
                              dynamic_shapes=shapes, dynamo=True, verbose=False, external_data=False)
    finally:
        onnx_log.setLevel(level)


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
    cfg = model.config
    src, pad, tgt = probe(cfg)  # the export's example: batch 2, lengths 7 and 5
    mask = (~pad).long()
    with torch.no_grad():
        if cfg.arch == "decoder":
            _export(_LM(hf), (src, mask), ["input_ids", "attention_mask"], "logits", folder / "model.onnx")
        else:
            _export(_Encoder(hf), (src, mask), ["input_ids", "attention_mask"], "encoder_hidden_states",
                    folder / "encoder.onnx")
        if cfg.arch == "encoder-decoder":
            memory = _Encoder(hf)(src, mask)
            _export(_Decoder(hf), (tgt, memory, mask), ["decoder_input_ids", "encoder_hidden_states", "attention_mask"],
                    "logits", folder / "decoder.onnx")
    err = onnx_error(ort, model, folder)
    if not err <= CHECK_TOL["onnx"]:
        raise InputError(f"ONNX Runtime's logits are {err:.2e} away from ours (allowed {CHECK_TOL['onnx']:g}); "
                         "nothing was written")
    report.update(format="onnx", hf_folder="hf", onnx_max_abs_logit_error=err,
                  files=sorted(p.name for p in folder.glob("*.onnx")))
    return report


def run_onnx(ort, folder: Path, arch: str, src: torch.Tensor, mask: torch.Tensor, tgt: torch.Tensor | None = None):
    """Logits (decoder-only, encoder-decoder) or final states (encoder) from the ONNX files."""
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1

    def session(name):
        return ort.InferenceSession(str(folder / name), opts, providers=["CPUExecutionProvider"])

    feed = {"input_ids": src.numpy(), "attention_mask": mask.numpy()}
    if arch == "decoder":
        return torch.from_numpy(session("model.onnx").run(None, feed)[0])
    memory = session("encoder.onnx").run(None, feed)[0]
    if arch == "encoder":
        return torch.from_numpy(memory)
    out = session("decoder.onnx").run(None, {"decoder_input_ids": tgt.numpy(), "encoder_hidden_states": memory,
                                             "attention_mask": mask.numpy()})[0]
    return torch.from_numpy(out)


@torch.no_grad()
def onnx_error(ort, model, folder: Path) -> float:
    cfg = model.config
    g = torch.Generator().manual_seed(4)
    low = 4 if cfg.vocab_size > 8 else 0
    src = torch.randint(low, cfg.vocab_size, (3, 9), generator=g)  # other shapes than the export's example
    pad = torch.arange(9)[None] >= torch.tensor([9, 6, 2])[:, None]
    src = src.masked_fill(pad, cfg.pad_id if cfg.pad_id is not None else 0)
    tgt = torch.randint(low, cfg.out_vocab_size, (3, 4), generator=g)
    if cfg.start_id is not None:
        tgt[:, 0] = cfg.start_id
    got = run_onnx(ort, folder, cfg.arch, src, (~pad).long(), tgt)
    if cfg.arch == "encoder-decoder":
        ours = model(src, tgt, src_padding_mask=pad)
        return (got[..., :ours.shape[-1]] - ours).abs().max().item()
    ours = model(src, padding_mask=pad)
    return (got[..., :ours.shape[-1]] - ours)[~pad].abs().max().item()
