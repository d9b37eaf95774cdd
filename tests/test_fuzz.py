"""Property-based fuzzing (hypothesis): configs, data readers and the HTTP API take anything.

The property everywhere: a bad input is refused with the project's one-line error (ConfigError,
InputError; a 4xx from the server) and a good one works; no other exception, no 500, no hang.
"""

from __future__ import annotations

import dataclasses
import json
import math

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from glassformer.config import ModelConfig
from glassformer.data.files import read_text, read_tsv
from glassformer.errors import ConfigError, GlassformerError, InputError
from glassformer.server.app import MAX_BODY, create_app
from glassformer.train.config import TrainConfig

ANY_VALUE = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-2 ** 70, max_value=2 ** 70),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=12),
    st.lists(st.integers(), max_size=3), st.dictionaries(st.text(max_size=3), st.integers(), max_size=2))
SMALL = dict(arch="encoder", vocab_size=11, d_model=8, n_heads=2, n_layers=1, d_ff=16)


def fields_of(cls, known_share=0.9):
    names = [f.name for f in dataclasses.fields(cls)]
    key = st.one_of(st.sampled_from(names), st.text(min_size=1, max_size=8))
    return st.dictionaries(key, ANY_VALUE, max_size=4)


@settings(max_examples=300, deadline=None)
@given(fields_of(ModelConfig))
def test_model_config_takes_anything(changes):
    try:
        cfg = ModelConfig.from_dict({**SMALL, **changes})
    except ConfigError as e:
        assert "\n" not in str(e) and str(e)
        return
    assert cfg.d_model >= 1 and cfg.n_heads >= 1 and cfg.head_dim >= 1  # what was accepted is sane
    for name in ("norm_eps", "pe_base", "rope_theta", "dropout"):
        assert math.isfinite(getattr(cfg, name))
    assert ModelConfig.from_json(cfg.to_json()) == cfg


@settings(max_examples=300, deadline=None)
@given(fields_of(TrainConfig))
def test_train_config_takes_anything(changes):
    try:
        cfg = TrainConfig.from_dict({"task": "copy", **changes})
    except ConfigError as e:
        assert "\n" not in str(e) and str(e)
        return
    for name in ("lr", "noam_factor", "eps", "weight_decay", "label_smoothing", "beta1", "beta2"):
        assert math.isfinite(getattr(cfg, name))
    assert TrainConfig.from_dict(json.loads(json.dumps(cfg.to_dict()))) == cfg


LINES = st.lists(st.one_of(st.binary(max_size=40), st.text(max_size=40).map(lambda s: s.encode("utf-8"))),
                 max_size=6)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(LINES, st.sampled_from([b"\n", b"\r\n", b"\t", b""]))
def test_readers_take_any_bytes(tmp_path, chunks, sep):
    path = tmp_path / "data"
    path.write_bytes(sep.join(chunks))
    for reader in (read_tsv, read_text):
        try:
            rows = list(reader(path))
        except InputError as e:
            assert "\n" not in str(e) and str(path) in str(e)
            continue
        assert rows  # an accepted file has content, and every row is what the format promises
        if reader is read_tsv:
            assert all(s.strip() and t.strip() and "\t" not in s + t for s, t in rows)
        else:
            assert all(line.strip() and "\n" not in line for line in rows)


def test_a_line_past_the_byte_limit_is_refused_without_reading_the_file(tmp_path, monkeypatch):
    monkeypatch.setenv("GLASSFORMER_MAX_LINE_BYTES", "100")
    (tmp_path / "one_line.txt").write_bytes(b"a" * 10_000_000)  # no newline at all
    with pytest.raises(InputError, match="line 1 is longer than 100 bytes"):
        list(read_text(tmp_path / "one_line.txt"))


# ---- the HTTP API ----
@pytest.fixture(scope="module")
def client(tmp_path_factory):
    runs = tmp_path_factory.mktemp("runs")
    return TestClient(create_app(runs), base_url="http://127.0.0.1:8000", raise_server_exceptions=False), runs


JSON_VALUE = st.recursive(st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False),
                                    st.text(max_size=20)),
                          lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner,
                                                                                      max_size=3), max_leaves=8)
BODIES = st.one_of(
    st.binary(max_size=200),
    JSON_VALUE.map(lambda v: json.dumps(v).encode()),
    st.fixed_dictionaries({"sentence": st.text(max_size=40)},
                          optional={"model": st.sampled_from(["walkthrough", "nope", "../x", "/etc", "run:x"]),
                                    "extra": JSON_VALUE}).map(lambda d: json.dumps(d).encode()))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=BODIES, content_type=st.sampled_from(["application/json", "text/plain", "", "application/x-www-form"]),
       path=st.sampled_from(["/api/trace", "/api/models", "/api/nothing", "/", "/static/../../etc/passwd"]),
       method=st.sampled_from(["POST", "GET", "PUT"]))
def test_api_answers_4xx_never_500(client, body, content_type, path, method):
    c, runs = client
    headers = {"content-type": content_type} if content_type else {}
    r = c.request(method, path, content=body, headers=headers)
    assert r.status_code < 500, (r.status_code, r.text[:300])
    assert str(runs) not in r.text and str(runs.resolve()) not in r.text  # no folder of this machine shown
    if r.status_code >= 400 and r.headers.get("content-type", "").startswith("application/json"):
        assert "detail" in r.json()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.text(st.characters(min_codepoint=33, max_codepoint=126), min_size=1, max_size=30))
def test_only_loopback_host_names_are_answered(client, host):
    c, _ = client
    r = c.get("/api/models", headers={"host": host})
    name = host.strip().lower()
    loopback = name.split(":")[0] in ("127.0.0.1", "localhost") and name.count(":") <= 1 \
        or name.startswith("[::1]") and (name == "[::1]" or name.startswith("[::1]:"))
    assert r.status_code == (200 if loopback else 400), (host, r.status_code)
