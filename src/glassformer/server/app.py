"""`glassformer serve`: a small web page over the tracer, and the JSON API behind it.

    GET  /               the explorer page (static/index.html; every asset served from here)
    GET  /api/models     the model names a request may use, and the input limits
    POST /api/trace      {"sentence": str, "model": str (optional)} -> tokens + trace + patterns,
                         and "unknown": the words the model never saw (read as [UNK]/<unk>), or null

The trace uses the hook names of `glassformer.trace` (`enc.{l}.attn.pattern`, `x0`, ...). Limits:
sentence length (characters and tokens) and request body size are capped; an unknown model is a
404 naming the choices; a model is picked from the registry's names only, never from a path.

Hardening (guard.py): the body limit counts the bytes actually read (a chunked body has no
Content-Length to trust); the Host header must be a loopback name unless the user opts out (a
page on another site cannot reach this server by DNS rebinding); answers never name a folder of
this machine; a malformed request is a 4xx, and anything unforeseen a 500 without details.
"""

from __future__ import annotations

import json
import threading
import time
from contextlib import contextmanager
from importlib import resources
from pathlib import Path
from typing import Iterator, Optional

from fastapi import FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse
from fastapi.staticfiles import StaticFiles
from pydantic import BaseModel, ConfigDict, Field

from ..errors import GlassformerError
from .guard import LOOPBACK_NAMES, RequestGuard, scrub_paths
from .explore import router as explore_router
from .models import DEFAULT_MODEL, ModelRegistry

MAX_CHARS = 1500
MAX_TOKENS = 256  # issue 14: a 256-token input renders in the page within a second
MAX_BODY = 16_384  # bytes: a request is one sentence and a model name


class TraceRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    sentence: str = Field(description=f"Text to trace, at most {MAX_CHARS} characters and {MAX_TOKENS} tokens.")
    model: Optional[str] = Field(default=None, description=f"A name from GET /api/models (default {DEFAULT_MODEL!r}).")


class CompactJSON(JSONResponse):
    """JSON without the spaces after separators: 10% less to send for a long input's patterns."""

    def render(self, content) -> bytes:
        return json.dumps(content, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode("utf-8")


def static_dir() -> Path:
    return Path(str(resources.files(__package__).joinpath("static")))


def create_app(runs_dir: str | Path = "runs", max_chars: int = MAX_CHARS, max_tokens: int = MAX_TOKENS,
               allowed_hosts: tuple[str, ...] | None = LOOPBACK_NAMES, precision: str = "fp32") -> FastAPI:
    """The explorer app; `allowed_hosts=None` turns the Host check off (`serve --allowed-host '*'`);
    `precision` is the weights' of the translations it shows (nn/precision.py)."""
    app = FastAPI(title="glassformer explorer",
                  description="Trace a sentence through a Transformer and see every attention pattern.",
                  version="0.1.0", docs_url=None, redoc_url=None)
    # /docs and /redoc would load Swagger/ReDoc from a CDN; the schema stays at /openapi.json
    registry = ModelRegistry(runs_dir, max_tokens=max_tokens, precision=precision)
    app.state.registry = registry
    app.mount("/static", StaticFiles(directory=static_dir()), name="static")
    app.include_router(explore_router(registry))  # lesson, neuron view, interventions, generation

    app.add_middleware(RequestGuard, max_body=MAX_BODY, allowed_hosts=allowed_hosts)

    @app.exception_handler(RequestValidationError)
    async def malformed(request: Request, exc: RequestValidationError) -> JSONResponse:
        # FastAPI's own answer echoes the input, and fails (a 500) when that input is not UTF-8
        detail = [{"loc": list(e.get("loc", ())), "msg": str(e.get("msg", "")), "type": str(e.get("type", ""))}
                  for e in exc.errors()]
        return JSONResponse({"detail": detail}, status_code=422)

    @app.exception_handler(Exception)
    async def unforeseen(request: Request, exc: Exception) -> JSONResponse:  # a bug: say so, show nothing
        return JSONResponse({"detail": "internal error while answering this request"}, status_code=500)

    @app.get("/", include_in_schema=False)
    def index() -> FileResponse:
        return FileResponse(static_dir() / "index.html", media_type="text/html")

    @app.get("/api/models")
    def models() -> dict:
        """Model names a trace request may use, the default, and the input limits."""
        from ..walkthrough.inputs import MAX_TOKENS as LESSON_TOKENS  # the lesson prints every number
        registry.refresh()
        return {"models": registry.describe(), "default": DEFAULT_MODEL,
                "limits": {"max_chars": max_chars, "max_tokens": max_tokens, "lesson_tokens": LESSON_TOKENS}}

    @app.post("/api/trace")
    def trace(req: TraceRequest) -> JSONResponse:
        """Run the sentence through the model; return tokens, the trace (patterns included),
        the positional encoding, the walkthrough's step tables, and for translators the
        translation with its cross-attention."""
        sentence = req.sentence
        if not sentence.strip():
            raise HTTPException(422, "sentence is empty; type at least one word")
        if len(sentence) > max_chars:
            raise HTTPException(422, f"sentence is {len(sentence)} characters; the limit is {max_chars}")
        name = req.model or DEFAULT_MODEL
        try:
            registry.check(name)
        except KeyError as e:
            raise HTTPException(404, str(e.args[0])) from None
        try:
            # straight to json.dumps: FastAPI's encoder walks every float (seconds at 256 tokens)
            return CompactJSON(registry.trace(name, sentence))
        except GlassformerError as e:
            raise HTTPException(422, scrub_paths(str(e), registry.runs_dir)) from None

    return app


@contextmanager
def running(app: FastAPI, host: str = "127.0.0.1", port: int = 0, timeout: float = 30.0) -> Iterator[str]:
    """Serve `app` from a background thread; yield its base URL; always stop it.

    port=0 asks the OS for a free port. Used by the tests (a real server on loopback).
    """
    import socket

    import uvicorn

    if port == 0:
        with socket.socket() as s:
            s.bind((host, 0))
            port = s.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + timeout
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            server.should_exit = True
            raise RuntimeError(f"the server did not start on {host}:{port}")
        time.sleep(0.05)
    try:
        yield f"http://{host}:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout)
