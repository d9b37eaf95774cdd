"""glassformer tokenizers as `transformers` fast tokenizers that give the same ids.

- bpe, unigram: already a `tokenizers` object (Metaspace words), taken as it is;
- char: a word-level vocabulary over single characters (whitespace included), pre-tokenized by
  splitting off every character, decoded by joining them back (Fuse);
- word: the same vocabulary, split on whitespace like `str.split()`, decoded with spaces;
- jieba: `tokenizers` has no dictionary segmenter, so jieba's cut cannot be reproduced. The folder
  holds the word vocabulary split on whitespace: it gives our ids for text whose words are already
  separated by spaces (the bundled zh-en corpus is; a word our tokenizer knows is never cut), and
  `<unk>` for an unsegmented run that is not one vocabulary word. Segment such text first
  (`" ".join(jieba.cut(text))`); tokenizer_config.json says so under `glassformer_pre_segmentation`.

A language model's tokenizer puts <bos> in front, as `glassformer generate` does with a prompt;
a translator's source side adds nothing, as training encoded it.
"""

from __future__ import annotations

from ..errors import InputError
from ..tokenize import SPECIALS

PAD, BOS, EOS, UNK = SPECIALS


def _word_level(tok):
    from tokenizers import Tokenizer, models
    vocab = {t: i for i, t in enumerate(tok.vocab)}
    return Tokenizer(models.WordLevel(vocab, unk_token=UNK))


def backend(tok, lm: bool = False):
    """A `tokenizers.Tokenizer` that encodes as `tok` does (see the module docstring for jieba)."""
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, pre_tokenizers, processors
    if tok.kind in ("bpe", "unigram"):
        hf = Tokenizer.from_str(tok.hf.to_str())
    elif tok.kind == "char":
        hf = _word_level(tok)
        hf.pre_tokenizer = pre_tokenizers.Split(Regex("."), behavior="isolated")
        hf.decoder = decoders.Fuse()
    elif tok.kind in ("word", "jieba"):
        hf = _word_level(tok)
        hf.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    else:
        raise InputError(f"cannot export a {tok.kind!r} tokenizer; known kinds: bpe, unigram, char, word, jieba")
    hf.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in SPECIALS])
    if lm:
        hf.post_processor = processors.TemplateProcessing(single=f"{BOS} $A", special_tokens=[(BOS, tok.bos_id)])
    return hf


def to_fast(tok, lm: bool = False):
    """`transformers.PreTrainedTokenizerFast` with our special tokens (pad/bos/eos/unk = 0/1/2/3)."""
    from transformers import PreTrainedTokenizerFast
    # char/word/jieba read "<unk>" typed in a text as its characters (or as the word "<unk>"), never as the
    # special token; `tokenizers` matches added tokens in raw text unless told to split them
    literal = tok.kind in ("char", "word", "jieba")
    fast = PreTrainedTokenizerFast(tokenizer_object=backend(tok, lm), pad_token=PAD, bos_token=BOS,
                                   eos_token=EOS, unk_token=UNK, clean_up_tokenization_spaces=False,
                                   split_special_tokens=literal)
    if tok.kind == "jieba":
        fast.init_kwargs["glassformer_pre_segmentation"] = (
            "jieba: separate words by spaces before encoding; an unsegmented run that is not one vocabulary word "
            "reads as <unk>")
    return fast
