"""What `lens`, `patch` and `ablate-heads` share: load a model, turn text into its inputs, score them.

A model is `minilm`, a run / checkpoint folder (config.json with "arch"), or a Hugging Face folder of
any family `glassformer.interop` converts (config.json with "model_type", weights in safetensors).
Text becomes the model's inputs the way each kind is used:
- encoder: the sentence's tokens; the score is the cosine of the output to the intact output;
- decoder: <bos> + the prompt; the score is the log-probability of the prompt's own next tokens;
- translator: the source sentence, and as target the model's own greedy translation of the clean
  source (teacher-forced); the score is the logit difference between the clean and the corrupted
  translation wherever they differ, else the log-probability of the clean translation.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import torch
from torch import nn

from ..errors import InputError

HF_CLASSES = {"bert": "BertModel", "gpt2": "GPT2LMHeadModel", "llama": "LlamaForCausalLM",
              "marian": "MarianMTModel", "bart": "BartForConditionalGeneration", "t5": "T5ForConditionalGeneration"}


@dataclass
class Specimen:
    name: str
    model: nn.Module
    encode: Callable[[str], list[int]]  # source text -> ids as the model was trained on them
    src_token: Callable[[int], str]
    tgt_token: Callable[[int], str]

    @property
    def arch(self) -> str:
        return self.model.config.arch


def load(spec: str) -> Specimen:
    """`minilm`, a glassformer run/checkpoint folder, or a Hugging Face folder."""
    if spec == "minilm":
        from .. import pretrained
        from ..unknown import minilm_encoder
        model, tok = pretrained.load("minilm")
        encoder = minilm_encoder(tok)
        return Specimen("minilm", model.eval(), lambda text: encoder(text).ids, _namer(tok.id_to_token),
                        _namer(tok.id_to_token))
    path = Path(spec)
    if path.is_dir() and not (path / "config.json").is_file() and any((path / d).is_dir() for d in ("best", "checkpoint")):
        from ..train.checkpoint import resolve
        path = resolve(path)  # a run folder: its best (or last) checkpoint
    cfg_file = path / "config.json"
    if not path.is_dir() or not cfg_file.is_file():
        raise InputError(f"--model {spec!r} is neither 'minilm' nor a folder with config.json; give minilm, "
                         "a run folder (runs/zh-en) or a Hugging Face folder")
    try:
        cfg = json.loads(cfg_file.read_text())
    except json.JSONDecodeError as e:
        raise InputError(f"{cfg_file} is not valid JSON ({e.msg} at line {e.lineno})") from None
    if "model_type" in cfg:
        return _hf_folder(path, cfg["model_type"])
    return _checkpoint(path)


def _namer(fn) -> Callable[[int], str]:
    return lambda i: str(fn(int(i)))


def _checkpoint(path: Path) -> Specimen:
    from ..train.checkpoint import load_checkpoint
    from ..unknown import unseen_line, unseen_pieces
    ck = load_checkpoint(path)
    src, tgt, arch = ck.src_tokenizer, ck.tgt_tokenizer or ck.src_tokenizer, ck.config.arch
    if src is None:
        raise InputError(f"{path} has no tokenizer files; it cannot read text")

    def encode(text: str) -> list[int]:
        ids = src.encode(text)
        if src.unk_id in ids:  # a piece the model never saw has no activations of its own to read
            pieces = unseen_pieces(src, text) or ["<unk>"]
            raise InputError(unseen_line(src, text, pieces, "source" if arch == "encoder-decoder" else "")
                             + "; give text made of pieces it was trained on (inspect reads them as <unk>)")
        if arch == "decoder" and src.bos_id is not None:
            ids = [src.bos_id] + ids
        return ids
    return Specimen(path.name, ck.model.eval(), encode, _namer(src.id_to_token), _namer(tgt.id_to_token))


def _hf_folder(path: Path, family: str) -> Specimen:
    if family not in HF_CLASSES:
        raise InputError(f"{path}: model_type={family!r} is not supported; use one of {', '.join(HF_CLASSES)}")
    if not any(path.glob("*.safetensors")):
        raise InputError(f"{path} has no .safetensors weights; save the model with safe_serialization")
    import transformers
    from ..interop import from_hf
    transformers.utils.logging.disable_progress_bar()
    hf = getattr(transformers, HF_CLASSES[family]).from_pretrained(str(path), local_files_only=True,
                                                                    use_safetensors=True).eval()
    try:
        tok = transformers.AutoTokenizer.from_pretrained(str(path), local_files_only=True)
    except (OSError, ValueError) as e:
        raise InputError(f"{path} has no usable tokenizer (tokenizer.json or vocab files): {e}") from None
    name = _namer(tok.convert_ids_to_tokens)
    from ..unknown import transformers_encoder
    encoder = transformers_encoder(tok)
    return Specimen(path.name, from_hf(hf).eval(), lambda text: encoder(text).ids, name, name)


@dataclass
class Prepared:
    """A model's inputs for one text, with labels for its positions."""

    inputs: tuple
    src_labels: list[str]
    tgt_labels: list[str]  # translator: the token each target position predicts; else the tokens
    next_ids: torch.Tensor | None  # (seq,) the tokens the positions should predict (decoder, translator)


def prepare(s: Specimen, text: str, target: torch.Tensor | None = None) -> Prepared:
    if not text.strip():
        raise InputError("the sentence is empty; give at least one word")
    ids = s.encode(text)
    if not ids:
        raise InputError(f"{text!r} gives no tokens for model {s.name}")
    x = torch.tensor([ids])
    src_labels = [s.src_token(i) for i in ids]
    if s.arch == "encoder":
        return Prepared((x,), src_labels, src_labels, None)
    if s.arch == "decoder":
        if len(ids) < 2:
            raise InputError(f"{text!r} is one token; a language model needs two to score a next token")
        return Prepared((x,), src_labels, src_labels[:-1], torch.tensor(ids[1:]))
    if target is None:
        target = s.model.generate(x, max_new_tokens=4 * len(ids) + 8)[0]
        eos = s.model.config.eos_id
        if eos is not None and (target == eos).any():
            target = target[: int((target == eos).nonzero()[0]) + 1]
    tgt_in, nxt = target[:-1], target[1:]
    return Prepared((x, tgt_in[None]), src_labels, [f"→{s.tgt_token(i)}" for i in nxt], nxt)


def translation(s: Specimen, p: Prepared) -> str:
    return " ".join(s.tgt_token(i) for i in p.next_ids if int(i) != s.model.config.eos_id)


def score(s: Specimen, clean: Prepared, corrupted: Prepared | None = None):
    """The metric (output -> one number per batch row) the commands report, and what it means."""
    if s.arch == "encoder":
        with torch.no_grad():
            ref = s.model(*clean.inputs)
        return (lambda out: torch.nn.functional.cosine_similarity(out, ref, dim=-1).mean(-1)), \
            "cosine to the clean output"
    good = clean.next_ids
    if corrupted is not None and corrupted.next_ids is not None and corrupted.next_ids.shape == good.shape:
        differ = (corrupted.next_ids != good).nonzero().flatten()
        if len(differ):
            bad = corrupted.next_ids[differ]
            return (lambda out: (out[:, differ, good[differ]] - out[:, differ, bad]).mean(-1)), \
                "logit(clean token) − logit(corrupted token) where the outputs differ"
    pos = torch.arange(len(good))
    return (lambda out: torch.log_softmax(out.float(), -1)[:, pos, good].mean(-1)), \
        "mean log p(clean next tokens)"


def write_json(path: Path, data: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, ensure_ascii=False, indent=1))
