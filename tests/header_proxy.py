"""A trusted-header reverse proxy on loopback, as oauth2-proxy or an ingress with forward auth stands in
front of the dashboard: every request it forwards (the page's, its static files', and the WebSocket
upgrade the app's session runs on) carries the signed-in user's e-mail in one header, and a header of
that name sent by the browser itself is dropped. After a WebSocket upgrade, or a request whose body
length the proxy cannot know, the connection is piped as it is."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
from collections.abc import Iterator


def _rewrite(head: bytes, header: str, value: str) -> tuple[bytes, int | None, bool]:
    """The request head with the identity header set; its body length (None: unknown); whether the
    connection is upgraded (or otherwise no longer HTTP requests the proxy can delimit)."""
    lines = head.split(b"\r\n")
    name = header.lower().encode()
    kept = [line for line in lines[1:] if line and not line.lower().startswith(name + b":")]
    fields = {line.split(b":", 1)[0].strip().lower(): line.split(b":", 1)[1].strip() for line in kept if b":" in line}
    upgraded = fields.get(b"upgrade", b"").lower() == b"websocket" or b"transfer-encoding" in fields
    length = int(fields.get(b"content-length", b"0"))
    out = b"\r\n".join([lines[0], *kept, f"{header}: {value}".encode()]) + b"\r\n\r\n"
    return out, length, upgraded


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError):
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    with contextlib.suppress(ConnectionError, OSError):
        writer.close()


async def _serve(client_r, client_w, upstream: tuple[str, int], header: str, value: str) -> None:
    up_r, up_w = await asyncio.open_connection(*upstream)
    back = asyncio.ensure_future(_pipe(up_r, client_w))  # responses flow back in order, as they come
    with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
        while True:
            head = await client_r.readuntil(b"\r\n\r\n")
            out, length, upgraded = _rewrite(head, header, value)
            up_w.write(out)
            if upgraded:
                break
            if length:
                up_w.write(await client_r.readexactly(length))
            await up_w.drain()
        await up_w.drain()
        await _pipe(client_r, up_w)
    with contextlib.suppress(ConnectionError, OSError):
        up_w.close()
    await back


@contextlib.contextmanager
def header_proxy(upstream_url: str, header: str, value: str) -> Iterator[str]:
    """A proxy to `upstream_url` (http://host:port) on a free loopback port; yields its URL."""
    host, port = upstream_url.removeprefix("http://").split(":")
    loop = asyncio.new_event_loop()
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    started = threading.Event()

    async def main() -> asyncio.Server:
        server = await asyncio.start_server(
            lambda r, w: _serve(r, w, (host, int(port)), header, value), sock=sock, limit=1 << 20
        )
        started.set()
        return server

    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    server = asyncio.run_coroutine_threadsafe(main(), loop).result(timeout=10)
    started.wait(10)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        loop.call_soon_threadsafe(server.close)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)
