"""Live generation in the explorer: the steps streamed one JSON line at a time equal decoding in one go.

References: `glassformer.generate` (cached decoding, its own sampler with the same seed, and
`glassformer.beam`'s beam search) for the tokens; the model's plain forward pass for the probabilities.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from explorer_helpers import client, runs_dir  # noqa: F401 (fixtures)


SENTENCE = "猫 追 狗"


@pytest.fixture(scope="module")
def tiny(runs_dir):
    from glassformer.train.checkpoint import load_checkpoint
    ck = load_checkpoint(runs_dir / "tiny")
    return ck, torch.tensor([ck.src_tokenizer.encode(SENTENCE)])


def _stream(client, **body) -> list[dict]:
    with client.stream("POST", "/api/generate", json={"sentence": SENTENCE, "model": "run:tiny", "stream": True,
                                                      **body}) as r:
        assert r.status_code == 200 and r.headers["content-type"] == "application/x-ndjson"
        lines = [json.loads(line) for line in r.iter_lines() if line]
    assert lines[0]["event"] == "start" and lines[-1]["event"] == "done"
    assert [e["index"] for e in lines[1:-1]] == list(range(len(lines) - 2)) and {e["event"] for e in lines[1:-1]} == {"step"}
    return lines


def test_streamed_sampling_equals_generate_with_the_same_seed(client, tiny):
    from glassformer.generate import generate
    ck, src = tiny
    lines = _stream(client, strategy="sample", temperature=1.7, seed=5, max_new_tokens=8, top_k=3)
    ref = generate(ck.model, src, max_new_tokens=8, strategy="sample", temperature=1.7,
                   generator=torch.Generator().manual_seed(5))[0].tolist()
    steps = lines[1:-1]
    assert [s["id"] for s in steps] == ref[1:] and lines[-1]["ids"] == ref
    assert len(set(ref[1:])) > 1  # a sampled sentence, not one token repeated
    with torch.no_grad():  # each step's top 3 at temperature 1.7, from the plain forward pass
        probs = torch.softmax(ck.model(src, torch.tensor([ref[:-1]])).double() / 1.7, dim=-1)[0]
    for i, s in enumerate(steps):
        np.testing.assert_allclose([t["p"] for t in s["top"]], probs[i].topk(3).values.numpy(), atol=1e-5)
        assert np.allclose(np.array(s["attention"]["dec.0.cross_attn.pattern"]).sum(-1), 1.0, atol=1e-6)


def test_streamed_greedy_equals_generate(client, tiny):
    from glassformer.generate import generate
    ck, src = tiny
    lines = _stream(client, max_new_tokens=5)
    ref = generate(ck.model, src, max_new_tokens=5, strategy="greedy")[0].tolist()
    assert [s["id"] for s in lines[1:-1]] == ref[1:] and lines[-1]["ids"] == ref


def test_streamed_beam_tree_grows_into_beam_search(client, tiny):
    from glassformer.generate import generate
    ck, src = tiny
    lines = _stream(client, strategy="beam", beam_size=3, max_new_tokens=5)
    ref = generate(ck.model, src, max_new_tokens=5, strategy="beam", beam_size=3, length_penalty=1.0)[0].tolist()
    done = lines[-1]
    assert done["ids"] == ref
    streamed = [n for s in lines[1:-1] for n in s["nodes"]]
    assert streamed == done["tree"]["nodes"][1:]  # the tree, one step's nodes per line
    assert all(n["step"] == s["index"] + 1 for s in lines[1:-1] for n in s["nodes"])


def test_a_model_that_cannot_generate_is_refused_before_streaming(client):
    r = client.post("/api/generate", json={"sentence": SENTENCE, "stream": True})
    assert r.status_code == 422
    assert r.json()["detail"] == ("model 'walkthrough' is an encoder and cannot generate; "
                                  "pick a translator or a language model (run:...)")
