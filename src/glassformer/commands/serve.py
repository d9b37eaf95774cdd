"""`glassformer serve`: the explorer page and its JSON API on http://HOST:PORT (loopback only by default).

    glassformer serve                                   # http://127.0.0.1:8000/, this machine only
    glassformer serve --host 0.0.0.0 --allow-remote     # every interface: an explicit opt-in

The port is bound before the URL is printed, so a port in use is one line, not a false URL.
Requests must name this server by a loopback Host (server/guard.py); `--allowed-host NAME` adds
a name, `--allowed-host '*'` turns the check off.
"""

from __future__ import annotations

import socket
from pathlib import Path
from typing import List, Optional

import typer

from ..errors import InputError
from ..server.guard import LOOPBACK_NAMES

LOOPBACK_ADDRESSES = ("127.0.0.1", "localhost", "::1")


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on host:port, or one line saying why there cannot be one."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror:
        raise InputError(f"--host {host!r} is not an address of this machine; use 127.0.0.1") from None
    family, _, _, _, address = infos[0]
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
        sock.listen(128)
    except OSError as e:
        sock.close()
        raise InputError(f"cannot listen on {host}:{port} ({e.strerror}); choose another --port"
                         + (" or stop the program using it" if e.errno == 98 else "")) from None
    return sock


def serve_forever(app, sock: socket.socket) -> None:
    import uvicorn
    uvicorn.Server(uvicorn.Config(app, log_level="warning")).run(sockets=[sock])


def register(app: typer.Typer) -> None:
    @app.command()
    def serve(
        host: str = typer.Option("127.0.0.1", help="Address to bind; the default keeps it on this machine."),
        port: int = typer.Option(8000, min=1, max=65535, help="TCP port."),
        runs: Path = typer.Option(Path("runs"), help="Folder whose checkpoints the page offers."),
        allow_remote: bool = typer.Option(False, "--allow-remote",
                                          help="Allow a --host other than loopback (other machines can connect)."),
        allowed_host: Optional[List[str]] = typer.Option(
            None, "--allowed-host", help="A Host name requests may use besides loopback ('*': any)."),
        precision: str = typer.Option("fp32", help="weights of the translations shown: fp32 | int8 | bf16 (the"
                                      " traces and step-by-step generation stay fp32: they show the module path)"),
    ) -> None:
        """Serve the explorer: type a sentence, pick a model, see every attention pattern."""
        from ..nn.precision import check as check_precision
        from ..server.app import create_app
        from ._arguments import check_runs_folder

        check_precision(precision, "--precision")
        check_runs_folder(runs)
        remote = host not in LOOPBACK_ADDRESSES
        if allow_remote and not remote:  # the opt-in asked for other machines, and this --host lets none in
            raise InputError(f"--allow-remote opts in to a --host other machines can reach, and --host {host} is this"
                             " machine only; give --host 0.0.0.0 (every interface) or this machine's address,"
                             " or drop --allow-remote")
        if remote and not allow_remote:
            raise InputError(f"--host {host} would let other machines reach the explorer; add --allow-remote "
                             "to mean it, or keep the default 127.0.0.1")
        names = list(allowed_host or [])
        if "*" in names:
            hosts = None
        else:
            hosts = (*LOOPBACK_NAMES, *names, *([host if ":" not in host else f"[{host}]"] if remote else []))
        sock = bind(host, port)
        if remote:
            typer.echo(f"warning: binding {host} exposes the explorer beyond this machine", err=True)
        if not runs.exists():  # said once the server is about to start, after every refusal
            typer.echo(f"note: no {runs}/ folder here yet, so the page offers the bundled models only; "
                       "train one with: glassformer train --out runs/NAME", err=True)
        shown = f"[{host}]" if ":" in host else host
        typer.echo(f"glassformer explorer on http://{shown}:{port}/ (API schema at /openapi.json)")
        try:
            serve_forever(create_app(runs, allowed_hosts=hosts, precision=precision), sock)
        finally:
            sock.close()
