"""A runs/ folder holding one tiny (untrained) zh→en checkpoint, for the explorer's API and browser tests."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

SRC = ["猫 吃 鱼", "狗 吃 肉", "猫 追 狗", "我 爱 你"]
TGT = ["the cat eats the fish", "the dog eats meat", "the cat chases the dog", "I love you"]


def tiny_translator(runs: Path, name: str = "tiny") -> Path:
    from glassformer.config import ModelConfig
    from glassformer.nn import build_model
    from glassformer.tokenize import build_tokenizer
    from glassformer.train.checkpoint import save_checkpoint

    src_tok, tgt_tok = build_tokenizer("word", SRC), build_tokenizer("word", TGT)
    cfg = ModelConfig(arch="encoder-decoder", vocab_size=src_tok.vocab_size, tgt_vocab_size=tgt_tok.vocab_size,
                      share_embeddings=False, d_model=16, n_heads=2, n_layers=1, d_ff=32,
                      pad_id=0, bos_id=1, eos_id=2)
    torch.manual_seed(0)
    save_checkpoint(runs / name, build_model(cfg).eval(), cfg, {"src": src_tok, "tgt": tgt_tok}, None,
                    {"task": "zh_en", "step": 0})
    return runs


@pytest.fixture(scope="module")
def runs_dir(tmp_path_factory):
    """A runs/ folder with the tiny translator, once per test module."""
    return tiny_translator(tmp_path_factory.mktemp("runs"))


@pytest.fixture(scope="module")
def client(runs_dir):
    """The explorer's API over that folder; a loopback Host (issue 16)."""
    from fastapi.testclient import TestClient

    from glassformer.server.app import create_app
    return TestClient(create_app(runs_dir), base_url="http://127.0.0.1:8000")
