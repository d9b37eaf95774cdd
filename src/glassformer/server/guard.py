"""What every request passes before it reaches the API: its size, its Host header.

`RequestGuard` is a plain ASGI middleware, so it sees the body as it arrives:

- Body limit on the bytes read. A Content-Length above the limit is refused at once; a chunked
  body (no Content-Length) is counted as it streams in and refused as soon as it passes the
  limit — it is never read or parsed whole. The body read is then replayed to the app.
- Text check. JSON can carry a lone UTF-16 surrogate (`"\ud800"`), which is no character: it cannot be
  encoded, tokenized or sent back. Any string of a JSON body — value or key, at any depth, of any
  endpoint, present or future — holding one is a 422 that says where, before a route sees it.
- Host check. A browser on a page from another site can be pointed at 127.0.0.1 through a DNS
  name it controls (DNS rebinding); such a request carries that name in its Host header, so
  anything but a loopback name (or one the user allowed with `serve --allowed-host`) is a 400.
"""

from __future__ import annotations

import json
from pathlib import Path

LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")


def host_name(header: str) -> str:
    """The host part of a Host header, lower-cased: `localhost:8000` -> `localhost`, `[::1]:80` -> `[::1]`."""
    value = header.strip().lower()
    if value.startswith("["):
        end = value.find("]")
        return value[:end + 1] if end > 0 else value
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


def scrub_paths(message: str, *folders: str | Path) -> str:
    """`message` with each folder (absolute and as given) replaced by its last name."""
    for folder in folders:
        p = Path(folder)
        for spelled in sorted({str(p.resolve()), str(p)}, key=len, reverse=True):
            if spelled not in (".", ""):
                message = message.replace(spelled, p.resolve().name or "runs")
    return message


def lone_surrogate(value, where: str = "body") -> str | None:
    """Where in a parsed JSON value a string holds a lone surrogate (`body.heads[0][0]`), or None."""
    stack = [(value, where)]
    while stack:  # iterative: a body nested 8,000 deep must not exhaust Python's stack
        v, at = stack.pop()
        if isinstance(v, str):
            try:
                v.encode("utf-8")
            except UnicodeEncodeError:
                return at
        elif isinstance(v, list):
            stack.extend((x, f"{at}[{i}]") for i, x in enumerate(v))
        elif isinstance(v, dict):
            for k, x in v.items():
                key = lone_surrogate(k, f"{at} key")
                if key:
                    return key
                stack.append((x, f"{at}.{k}"))
    return None


def _json_surrogate(body: bytes) -> str | None:
    try:
        parsed = json.loads(body)
    except (ValueError, RecursionError):  # not JSON: the route's own parser answers it
        return None
    return lone_surrogate(parsed)


async def _reply(send, status: int, detail: str) -> None:
    body = json.dumps({"detail": detail}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            (b"connection", b"close")]})
    await send({"type": "http.response.body", "body": body})


class RequestGuard:
    """ASGI middleware: refuse oversized bodies (counted), lone surrogates and foreign Host headers."""

    def __init__(self, app, max_body: int, allowed_hosts: tuple[str, ...] | None = LOOPBACK_NAMES):
        self.app, self.max_body = app, max_body
        self.allowed = None if allowed_hosts is None else {h.lower() for h in allowed_hosts}

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = {k.lower(): v for k, v in scope.get("headers", [])}
        if self.allowed is not None:
            host = host_name(headers.get(b"host", b"").decode("latin-1"))
            if host not in self.allowed:
                return await _reply(send, 400, f"Host header {host!r} is not one this server answers to "
                                               f"({', '.join(sorted(self.allowed))}); start it with "
                                               "`glassformer serve --allowed-host NAME` to add a name")
        size = headers.get(b"content-length")
        if size is not None and (not size.isdigit() or int(size) > self.max_body):
            shown = size.decode("latin-1")[:20]
            return await _reply(send, 413, f"request body is {shown} bytes; the limit is {self.max_body}")
        body, more = b"", True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body += message.get("body", b"")
            if len(body) > self.max_body:
                return await _reply(send, 413, f"request body passed {self.max_body} bytes (the limit) "
                                               "while being read")
            more = message.get("more_body", False)
        if b"\\u" in body:  # FastAPI reads a body with no content type as JSON too
            where = _json_surrogate(body)
            if where:
                return await _reply(send, 422, f"{where} holds a lone surrogate (a \\uD800-\\uDFFF escape "
                                               "with no partner), which is not a character; send valid Unicode text")
        replayed = False

        async def replay():
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()  # after the body: wait for the disconnect, as the server would send

        await self.app(scope, replay, send)
