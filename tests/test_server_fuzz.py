"""Issue 31 §3: any value JSON can carry, in any field of any request, is answered with a 4xx that says
what was wrong, or with a 2xx — never a 500.

The bodies are generated from the server's own OpenAPI schema (every POST endpoint, every field), so an
endpoint or field added later is fuzzed with no change here. Each field gets, at random, a value of its
own kind near or past its limits, or any JSON value at all: text with lone surrogates and control
characters, integers past 64 bits, floats at ±1e308, NaN (Starlette's parser accepts the token),
booleans, nulls, nested lists and objects.
"""

from __future__ import annotations

import json
import math

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from explorer_helpers import tiny_translator
from glassformer.server.app import create_app

# text as a request can spell it: every code point, lone surrogates (Cs) included
ANY_CHAR = st.characters(codec=None, categories=None)
TEXT = st.text(ANY_CHAR, max_size=12) | st.sampled_from(["\ud800", "\udfff cat", "猫 \ud83d", "a\x00b", "\x1b[2J", ""])
SCALARS = (st.none() | st.booleans() | st.integers(min_value=-(2**70), max_value=2**70)
           | st.sampled_from([0, -1, 2**31, 2**63, 10**30]) | st.floats(allow_nan=True, allow_infinity=False)
           | st.sampled_from([1e308, -1e308, 5e-324, math.nan]) | TEXT)
ANY_JSON = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=3)
                        | st.dictionaries(TEXT, inner, max_size=3), max_leaves=6)


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    import torch

    from glassformer.server import explore
    threads, steps = torch.get_num_threads(), explore.MAX_NEW_TOKENS
    torch.set_num_threads(1)  # a 16-wide model: a second thread only waits, and on a loaded machine spins
    explore.MAX_NEW_TOKENS = 3  # /api/intervene decodes this many tokens before and after
    yield create_app(tiny_translator(tmp_path_factory.mktemp("runs")))
    torch.set_num_threads(threads)
    explore.MAX_NEW_TOKENS = steps


@pytest.fixture(scope="module")
def client(app):
    return TestClient(app, base_url="http://127.0.0.1:8000", raise_server_exceptions=False)


def _request_schemas(app) -> dict[str, dict]:
    """path -> the JSON schema of its request body, resolved, for every POST endpoint."""
    spec = app.openapi()
    components = spec.get("components", {}).get("schemas", {})
    out = {}
    for path, ops in spec["paths"].items():
        body = ops.get("post", {}).get("requestBody")
        if body:
            ref = body["content"]["application/json"]["schema"]["$ref"]
            out[path] = components[ref.rsplit("/", 1)[-1]]
    return out


def _own_kind(prop: dict) -> st.SearchStrategy:
    """A value of the field's own kind, at or past its limits (what a careless client sends)."""
    kinds = [prop] + prop.get("anyOf", [])
    for kind in kinds:
        if "enum" in kind:
            return st.sampled_from(kind["enum"]) | TEXT
        t = kind.get("type")
        if t == "integer":
            lo, hi = kind.get("minimum", -10), kind.get("maximum", 10**6)
            edges = st.sampled_from([lo - 1, lo, hi, hi + 1, 2**32, 2**63, 2**64, 10**30, -(2**63) - 1])
            return edges | edges | edges | st.integers(lo, hi)
        if t == "number":
            edges = st.sampled_from([0.0, -0.0, 1e-300, 5e-324, 1e308, kind.get("maximum", 1.0), math.nan])
            return edges | edges | edges | st.floats()
        if t == "boolean":
            return st.booleans()
        if t == "string":
            return TEXT | st.sampled_from(["猫 吃 鱼", "the cat", "walkthrough", "run:tiny", "enc.0.attn",
                                           "dec.0.self_attn", "x" * 3000])
        if t == "array":
            return st.lists(st.lists(TEXT | st.integers(-2, 2**64), max_size=3) | TEXT, max_size=3)
    return ANY_JSON


@st.composite
def _body(draw, schema: dict) -> dict:
    """A request that would be valid but for one or two fields: each of those gets a value of its own
    kind at or past its limits, or any JSON value at all. One bad field at a time reaches the code
    behind the checks of the others (a body wrong everywhere stops at the first check)."""
    props = schema.get("properties", {})
    body = {"sentence": draw(st.sampled_from(["猫 吃 鱼", "猫", "the cat"])),
            # mostly the translator: it reaches every route (an encoder stops /api/generate early)
            "model": draw(st.sampled_from(["run:tiny", "run:tiny", "run:tiny", "walkthrough"]))}
    for name in draw(st.lists(st.sampled_from(sorted(props)), min_size=1, max_size=2, unique=True)):
        body[name] = draw(_own_kind(props[name]) | _own_kind(props[name]) | ANY_JSON)
    for name in ("strategy", "stream"):  # both ways, so each route of /api/generate is reached
        if name in props and name not in body:
            body[name] = draw(_own_kind(props[name]))
    if draw(st.integers(0, 9)) == 0:
        body[draw(TEXT)] = draw(ANY_JSON)  # a key the schema does not know
    return body


def _post(client, path: str, body) -> tuple[int, bytes]:
    # json.dumps writes lone surrogates as \ud800 escapes: valid JSON that no UTF-8 encoder refuses
    r = client.post(path, content=json.dumps(body).encode(), headers={"content-type": "application/json"})
    return r.status_code, r.content


def test_every_post_endpoint_is_fuzzed(app):
    assert set(_request_schemas(app)) >= {"/api/trace", "/api/lesson", "/api/neuron", "/api/intervene",
                                         "/api/generate"}


@pytest.mark.parametrize("path", ["/api/trace", "/api/lesson", "/api/neuron", "/api/intervene", "/api/generate"])
def test_no_request_body_gets_a_500(app, client, path):
    schema = _request_schemas(app)[path]

    @settings(max_examples=60, deadline=None, derandomize=True,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(_body(schema))
    def check(body):
        status, content = _post(client, path, body)
        assert status < 500, (path, body, content[:300])
        if status >= 400:
            detail = json.loads(content)["detail"]
            assert detail  # a message saying what was wrong, never an empty answer
    check()


@pytest.mark.parametrize("raw", [
    b'{"sentence": "\\ud800 cat"}', b'{"sentence": "\\udfff"}', b'{"sentence": "\\ud83d\\ude00 cat"}',
    b'{"sentence": "a", "model": "\\ud800"}', b'[' * 3000 + b']' * 3000, b'{"sentence": ' + b'[' * 3000 + b']' * 3000 + b'}',
    b'{"sentence": NaN}', b'{"sentence": "cat"', b'\xff\xfe{}', b'"just a string"', b'null', b'12',
])
@pytest.mark.parametrize("path", ["/api/trace", "/api/lesson", "/api/generate"])
def test_malformed_bodies_are_4xx(client, path, raw):
    r = client.post(path, content=raw, headers={"content-type": "application/json"})
    if raw == b'{"sentence": "\\ud83d\\ude00 cat"}':  # a surrogate *pair* is one valid character
        assert r.status_code in (200, 422), r.text
        return
    assert 400 <= r.status_code < 500, (raw[:40], r.status_code, r.text[:200])
    assert r.json()["detail"]


ODD_VALUES = [None, True, False, -1, 0, 2**31, 2**32, 2**63, 2**64, 10**30, -(10**30), 0.5, -0.0, 1e308, -1e308,
              5e-324, math.nan, "", "\ud800", "猫\x00", "x" * 3000, [], [[]], [["enc.0.attn", 2**64]], {}, {"a": [1]}]


def _edges(prop: dict) -> list:
    """The limits of a field's own kind, read off its schema, and one step past each."""
    out = []
    for kind in [prop] + prop.get("anyOf", []):
        for bound in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
            if bound in kind:
                b = kind[bound]
                step = 1 if kind.get("type") == "integer" else 1e-9
                out += [int(b) if kind.get("type") == "integer" else b, b - step, b + step]
        out += list(kind.get("enum", []))
    return out


def _one_bad_field_bodies(app):
    for path, schema in sorted(_request_schemas(app).items()):
        props = schema.get("properties", {})
        strategies = props["strategy"]["enum"] if "strategy" in props else [None]
        for name in sorted(props):
            for i, value in enumerate(_edges(props[name]) + ODD_VALUES):
                body = {"sentence": "猫 吃 鱼", "model": "run:tiny"}
                if "max_new_tokens" in props:
                    body["max_new_tokens"] = 2  # the checks, not the decoding, are under test
                strategy = strategies[i % len(strategies)]  # each strategy in turn
                if strategy is not None:
                    body["strategy"] = strategy
                body[name] = value
                yield path, body


def test_every_field_at_every_limit_and_every_odd_value(app, client):
    """Deterministic sweep: each field of each endpoint, alone, at the limits its schema states and at
    each odd JSON value; every other field valid (each strategy of /api/generate in turn)."""
    failures, n = [], 0
    for path, body in _one_bad_field_bodies(app):
        n += 1
        status, content = _post(client, path, body)
        if status >= 500 or (status >= 400 and not json.loads(content).get("detail")):
            failures.append((path, body, status, content[:200]))
    assert n > 400
    assert not failures, failures[:5]


@pytest.mark.parametrize("field, value", [("seed", 2**64), ("seed", 10**30), ("temperature", 1e-300),
                                          ("temperature", 5e-324), ("length_penalty", 0.0), ("beam_size", 8)])
@pytest.mark.parametrize("strategy", ["greedy", "sample", "beam"])
def test_generate_at_its_limits(client, strategy, field, value):
    """The cases the fuzzer first found (seed past 64 bits, a temperature whose quotient overflows)."""
    status, content = _post(client, "/api/generate", {"sentence": "猫 吃 鱼", "model": "run:tiny",
                                                      "strategy": strategy, field: value})
    assert status in (200, 422), content[:300]
    if status == 422:
        assert field in content.decode()  # the refusal names the field
    else:
        answer = json.loads(content)
        assert all(math.isfinite(s["p"]) for s in answer["steps"] if "p" in s)


def test_a_lone_surrogate_is_named(client):
    r = client.post("/api/trace", content=b'{"sentence": "\\ud800 cat"}', headers={"content-type": "application/json"})
    assert r.status_code == 422
    assert "surrogate" in json.dumps(r.json()["detail"])
