"""A lean HTTP/1.1 keep-alive transport for ``httpx2``, made for many small concurrent JSON calls.

Why: with 64 calls in flight, the default stack under the ``openai`` SDK (httpx2 -> httpcore2 -> h11 over anyio
streams) spends more CPU per call than toolwild itself: several event-loop round trips and two socket writes per
request, an event-driven parser fed a few bytes at a time and a pool scanned connection by connection. The SDK and
``httpx2.AsyncClient`` stay in charge of everything above the wire (URL, headers, auth, redirects, content decoding,
error mapping); this transport only replaces the wire: one :class:`asyncio.Protocol` per connection, each request
written with a single ``write``, the response head parsed straight from the receive buffer, and idle connections
reused last-in first-out.

Scope, on purpose: ``http://`` and ``https://`` (TLS through :mod:`ssl`, with httpx2's trust store), HTTP/1.1 only,
no proxies (the backend keeps httpx2's own transport when the environment names a proxy). Failures surface as the
``httpx2`` exceptions the SDK maps to its own: ``ConnectError``, ``ReadError``, ``WriteError`` and
``RemoteProtocolError`` become ``APIConnectionError``; ``ConnectTimeout``, ``ReadTimeout``, ``WriteTimeout`` and
``PoolTimeout`` become ``APITimeoutError``.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections import deque
from collections.abc import AsyncIterator, Mapping
from typing import Any, Final, cast

import httpx2

__all__ = ["PooledTransport"]

Origin = tuple[str, str, int]
Head = tuple[int, bytes, bytes, list[tuple[bytes, bytes]]]

_DEFAULT_PORTS: Final[dict[str, int]] = {"http": 80, "https": 443}
_IDEMPOTENT: Final = frozenset({"GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE"})
_MAX_HEAD: Final = 64 * 1024
"""Largest response head (status line and headers) accepted; also bounds a chunk-size line."""
_READ_HIGH: Final = 512 * 1024
_READ_LOW: Final = 64 * 1024
"""Reading pauses when more than ``_READ_HIGH`` unread bytes pile up (a slow consumer of a long stream) and resumes
below ``_READ_LOW``. Both exceed ``_MAX_HEAD``, so a paused connection can never leave a head or line unfinished."""
_HEX: Final = b"0123456789abcdefABCDEF"

# How a response body is delimited (RFC 9112, section 6.3).
_LENGTH, _CHUNKED, _UNTIL_CLOSE = 0, 1, 2


class _Stale(Exception):
    """A reused connection turned out closed before any byte of the response came back.

    ``sent`` tells whether the request had been written: if not, the server never saw it and any request may be
    sent again on a new connection; if so, only an idempotent one may.
    """

    def __init__(self, sent: bool) -> None:
        super().__init__("stale keep-alive connection")
        self.sent = sent


class _Connection(asyncio.Protocol):
    """One HTTP/1.1 connection: it buffers what arrives and wakes the one request waiting on it.

    Callbacks never parse: the request's coroutine parses from :attr:`buffer` when it runs, so a response that
    arrives in one segment costs one wake-up.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, origin: Origin) -> None:
        self.loop = loop
        self.origin = origin
        self.transport: asyncio.Transport | None = None
        self.buffer = bytearray()
        self.closed = False
        """No more bytes will arrive (EOF, connection lost or closed by us)."""
        self.error: BaseException | None = None
        self.served = 0
        """Responses read to their end on this connection; above 0 the connection is a reused one."""
        self.idle_since = 0.0
        self._waiter: asyncio.Future[bool] | None = None
        self._drain: asyncio.Future[bool] | None = None
        self._write_paused = False
        self._read_paused = False

    # -- asyncio.Protocol ----------------------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's transports do not subclass asyncio's

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        if len(self.buffer) > _READ_HIGH and not self._read_paused and self.transport is not None:
            self._read_paused = True
            self.transport.pause_reading()
        _resolve(self._waiter, True)

    def eof_received(self) -> bool:
        self.closed = True
        _resolve(self._waiter, True)
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.error = exc
        _resolve(self._waiter, True)
        _resolve(self._drain, True)

    def pause_writing(self) -> None:
        self._write_paused = True

    def resume_writing(self) -> None:
        self._write_paused = False
        _resolve(self._drain, True)

    # -- used by the transport -----------------------------------------------------------------------------------

    def reusable(self, loop: asyncio.AbstractEventLoop, now: float, expiry: float) -> bool:
        """Idle and still usable: open, on this event loop, nothing unsolicited received, not idle for too long."""
        return not self.closed and not self.buffer and self.loop is loop and now - self.idle_since < expiry

    def abort(self) -> None:
        """Drop the connection at once (its state is unknown or it will not be reused)."""
        self.closed = True
        if self.transport is not None:
            self.transport.abort()

    def close(self) -> None:
        """Close politely: anything still buffered for writing is flushed first."""
        self.closed = True
        if self.transport is not None:
            self.transport.close()

    def write(self, data: bytes) -> None:
        assert self.transport is not None
        self.transport.write(data)

    async def drain(self, timeout: float | None, request: httpx2.Request) -> None:
        """Wait while the kernel's send buffer is full (large request bodies only)."""
        while self._write_paused and not self.closed:
            fut = self.loop.create_future()
            self._drain = fut
            try:
                woken = await _wait(fut, timeout)
            finally:
                self._drain = None
            if not woken:
                raise httpx2.WriteTimeout("timed out writing the request", request=request)
        if self.closed:
            raise self.lost(request, "while the request was being sent", httpx2.WriteError)

    async def more(self, timeout: float | None, request: httpx2.Request) -> None:
        """Wait for more bytes or the end of the connection; ``ReadTimeout`` after ``timeout`` seconds of silence."""
        fut = self.loop.create_future()
        self._waiter = fut
        try:
            woken = await _wait(fut, timeout)
        finally:
            self._waiter = None
        if not woken:
            raise httpx2.ReadTimeout("timed out waiting for the server", request=request)

    def lost(
        self, request: httpx2.Request, when: str, error: type[httpx2.RequestError] = httpx2.RemoteProtocolError
    ) -> httpx2.RequestError:
        """The error for a connection that ended early: ``ReadError`` when the OS reported a failure (reset),
        else ``error`` (a clean close from the server is a protocol violation in the middle of a message)."""
        if self.error is not None:
            return httpx2.ReadError(f"connection lost {when}: {self.error!r}", request=request)
        return error(f"server closed the connection {when}", request=request)

    async def read_head(self, timeout: float | None, request: httpx2.Request) -> Head:
        """Read one response head (status line and headers)."""
        buf = self.buffer
        while (end := buf.find(b"\r\n\r\n")) < 0:
            if len(buf) > _MAX_HEAD:
                raise httpx2.RemoteProtocolError("response head too large", request=request)
            if self.closed:
                if not buf and self.served:
                    raise _Stale(sent=True)  # a clean close, or a reset because the server had closed first
                raise self.lost(request, "without sending a response" if not buf else "in the middle of a response")
            await self.more(timeout, request)
        head = bytes(buf[:end])
        del buf[: end + 4]
        return _parse_head(head, request)

    async def read_some(self, limit: int, timeout: float | None, request: httpx2.Request) -> bytes:
        """Up to ``limit`` bytes (``-1``: all buffered), waiting if none are buffered; ``b""`` at the end."""
        buf = self.buffer
        while not buf:
            if self.closed:
                return b""
            await self.more(timeout, request)
        if limit < 0 or limit >= len(buf):
            data = bytes(buf)
            buf.clear()
        else:
            data = bytes(buf[:limit])
            del buf[:limit]
        self._consumed()
        return data

    async def read_line(self, timeout: float | None, request: httpx2.Request) -> bytes:
        """One CRLF-terminated line of a chunked body (size line, chunk end or trailer), without the CRLF."""
        buf = self.buffer
        while (end := buf.find(b"\r\n")) < 0:
            if len(buf) > _MAX_HEAD:
                raise httpx2.RemoteProtocolError("chunked body: line too long", request=request)
            if self.closed:
                raise self.lost(request, "in the middle of a chunked body")
            await self.more(timeout, request)
        line = bytes(buf[:end])
        del buf[: end + 2]
        self._consumed()
        return line

    def _consumed(self) -> None:
        if self._read_paused and len(self.buffer) < _READ_LOW and self.transport is not None and not self.closed:
            self._read_paused = False
            self.transport.resume_reading()


def _resolve(fut: asyncio.Future[bool] | None, value: bool) -> None:
    if fut is not None and not fut.done():
        fut.set_result(value)


async def _wait(fut: asyncio.Future[bool], timeout: float | None) -> bool:
    """Await ``fut``; False if ``timeout`` seconds pass first. A bare timer is cheaper than ``asyncio.timeout``."""
    if timeout is None:
        return await fut
    timer = fut.get_loop().call_later(timeout, _resolve, fut, False)
    try:
        return await fut
    finally:
        timer.cancel()


def _parse_head(head: bytes, request: httpx2.Request) -> Head:
    lines = head.split(b"\r\n")
    version, _, rest = lines[0].partition(b" ")
    code, _, reason = rest.partition(b" ")
    if not version.startswith(b"HTTP/1.") or len(code) != 3 or not code.isdigit():
        raise httpx2.RemoteProtocolError(f"malformed status line {lines[0][:80]!r}", request=request)
    headers: list[tuple[bytes, bytes]] = []
    for line in lines[1:]:
        name, sep, value = line.partition(b":")
        if not sep or not name or b" " in name or b"\t" in name:
            raise httpx2.RemoteProtocolError(f"malformed header line {line[:80]!r}", request=request)
        headers.append((name, value.strip(b" \t")))
    return int(code), reason, version, headers


def _framing(request: httpx2.Request, head: Head) -> tuple[int, int, bool]:
    """How the body is delimited: (mode, content length, whether the connection may be reused afterwards)."""
    status, _, version, headers = head
    lengths: set[bytes] = set()
    codings: list[bytes] = []
    tokens: list[bytes] = []
    for name, value in headers:
        key = name.lower()
        if key == b"content-length":
            lengths.update(v.strip() for v in value.split(b","))
        elif key == b"transfer-encoding":
            codings += (v.strip().lower() for v in value.split(b","))
        elif key == b"connection":
            tokens += (v.strip().lower() for v in value.split(b","))
    keep_alive = b"close" not in tokens if version == b"HTTP/1.1" else b"keep-alive" in tokens
    if request.method == "HEAD" or status in (204, 304):
        return _LENGTH, 0, keep_alive
    if codings:
        # With both headers the message is suspect (RFC 9112 6.3): read it as chunked, then drop the connection.
        if codings[-1] == b"chunked":
            return _CHUNKED, 0, keep_alive and not lengths
        return _UNTIL_CLOSE, 0, False
    if lengths:
        if len(lengths) > 1 or not (value := lengths.pop()).isdigit():
            raise httpx2.RemoteProtocolError("invalid Content-Length", request=request)
        return _LENGTH, int(value), keep_alive
    return _UNTIL_CLOSE, 0, False


def _encode_head(request: httpx2.Request) -> bytes:
    """The request line and headers; CR or LF inside any of them (header injection) is refused."""
    raw = request.headers.raw
    parts = [request.method.encode("ascii"), b" ", request.url.raw_path, b" HTTP/1.1\r\n"]
    for name, value in raw:
        parts += (name, b": ", value, b"\r\n")
    parts.append(b"\r\n")
    head = b"".join(parts)
    lines = len(raw) + 2
    if head.count(b"\n") != lines or head.count(b"\r") != lines:
        raise httpx2.LocalProtocolError("CR or LF in the request line or a header", request=request)
    return head


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%b\r\n" % (len(data), data)


class _Body(httpx2.AsyncByteStream):
    """A response body, read from its connection as the caller iterates.

    The connection goes back to the pool as soon as the last byte is taken (before it is handed over), or is dropped
    if the caller stops early or anything fails: its position in the byte stream would be unknown.
    """

    def __init__(
        self,
        pool: PooledTransport,
        conn: _Connection | None,
        request: httpx2.Request,
        framing: tuple[int, int, bool],
        timeout: float | None,
    ) -> None:
        self._pool = pool
        self._conn: _Connection | None = conn
        self._request = request
        self._mode, self._length, self._keep_alive = framing
        self._timeout = timeout

    async def __aiter__(self) -> AsyncIterator[bytes]:
        conn = self._conn
        if conn is None:
            return
        try:
            if self._mode == _LENGTH:
                remaining = self._length
                while remaining:
                    data = await conn.read_some(remaining, self._timeout, self._request)
                    if not data:
                        raise conn.lost(self._request, f"with {remaining} bytes of the body still to come")
                    remaining -= len(data)
                    if not remaining:
                        self._finish(self._keep_alive)
                    yield data
                self._finish(self._keep_alive)
            elif self._mode == _CHUNKED:
                async for data in self._chunks(conn):
                    yield data
                self._finish(self._keep_alive)
            else:
                while data := await conn.read_some(-1, self._timeout, self._request):
                    yield data
                if conn.error is not None:
                    raise conn.lost(self._request, "in the middle of the body")
                self._finish(False)
        except BaseException:
            self._finish(False)
            raise

    async def _chunks(self, conn: _Connection) -> AsyncIterator[bytes]:
        timeout, request = self._timeout, self._request
        while True:
            line = await conn.read_line(timeout, request)
            text = line.split(b";", 1)[0].strip(b" \t")
            if not text or text.strip(_HEX):
                raise httpx2.RemoteProtocolError(f"chunked body: bad chunk size {line[:40]!r}", request=request)
            remaining = int(text, 16)
            if not remaining:
                while await conn.read_line(timeout, request):  # trailer fields, ignored, up to the empty line
                    pass
                return
            while remaining:
                data = await conn.read_some(remaining, timeout, request)
                if not data:
                    raise conn.lost(request, "in the middle of a chunk")
                remaining -= len(data)
                yield data
            if await conn.read_line(timeout, request):
                raise httpx2.RemoteProtocolError("chunked body: chunk not followed by CRLF", request=request)

    def _finish(self, reusable: bool) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            self._pool._release(conn, reusable)

    async def aclose(self) -> None:
        self._finish(False)


class PooledTransport(httpx2.AsyncBaseTransport):
    """HTTP/1.1 over asyncio with a keep-alive pool; pass it as ``httpx2.AsyncClient(transport=...)``.

    Args:
        max_connections: open connections at most, over all origins; more requests wait for one (``PoolTimeout``
            after the request's ``pool`` timeout).
        keepalive_expiry: an idle connection older than this many seconds is closed instead of reused (servers
            drop idle connections after a few seconds: uvicorn 5 s, nginx 75 s).
        ssl_context: for ``https://``; by default httpx2's (same trust store as the SDK's default client).

    A request whose reused connection turns out closed by the server before any reply is sent again on a new
    connection when that is safe: always if nothing had been written yet, else only for idempotent methods. A POST
    that may have reached the server fails with ``RemoteProtocolError`` and is left to the caller's retry policy.
    """

    def __init__(
        self, *, max_connections: int = 100, keepalive_expiry: float = 5.0, ssl_context: ssl.SSLContext | None = None
    ) -> None:
        if max_connections < 1:
            raise ValueError(f"max_connections must be at least 1, got {max_connections}")
        self._max = max_connections
        self._expiry = keepalive_expiry
        self._ssl = ssl_context
        self._idle: dict[Origin, list[_Connection]] = {}
        self._live: set[_Connection] = set()
        self._waiters: deque[asyncio.Future[bool]] = deque()
        self._closed = False

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        url = request.url
        scheme = url.scheme
        if scheme not in _DEFAULT_PORTS or not url.host:
            raise httpx2.UnsupportedProtocol(f"only http:// and https:// URLs are supported: {url}", request=request)
        origin = (scheme, url.host, url.port or _DEFAULT_PORTS[scheme])
        timeouts: Mapping[str, Any] = request.extensions.get("timeout") or {}
        read_timeout = timeouts.get("read")
        head = _encode_head(request)
        try:
            body: bytes | None = request.content
        except httpx2.RequestNotRead:
            body = None  # a streamed body: sent as it is produced, so it cannot be sent twice
        for attempt in (0, 1):
            conn = await self._acquire(origin, timeouts, request)
            try:
                await self._send(conn, head, body, request, timeouts.get("write"))
                response = await conn.read_head(read_timeout, request)
                while 100 <= response[0] < 200:
                    if response[0] == 101:
                        raise httpx2.RemoteProtocolError("unexpected 101 Switching Protocols", request=request)
                    response = await conn.read_head(read_timeout, request)  # an interim 1xx: skipped
                framing = _framing(request, response)
            except _Stale as stale:
                self._release(conn, False)
                if attempt == 0 and body is not None and (not stale.sent or request.method in _IDEMPOTENT):
                    continue
                raise httpx2.RemoteProtocolError("server closed a kept-alive connection", request=request) from None
            except BaseException:
                self._release(conn, False)
                raise
            status, reason, version, headers = response
            if framing[0] == _LENGTH and not framing[1]:
                self._release(conn, framing[2])  # no body: the connection is free at once
                stream = _Body(self, None, request, framing, read_timeout)
            else:
                stream = _Body(self, conn, request, framing, read_timeout)
            extensions = {"http_version": version, "reason_phrase": reason}
            return httpx2.Response(status, headers=headers, stream=stream, extensions=extensions)
        raise AssertionError("unreachable")

    async def aclose(self) -> None:
        """Close every connection, idle or in use; a response still being read fails with ``ReadError``."""
        self._closed = True
        for conn in list(self._live):
            conn.abort()
        self._live.clear()
        self._idle.clear()
        for fut in self._waiters:
            _resolve(fut, True)

    # -- pool ----------------------------------------------------------------------------------------------------

    async def _acquire(self, origin: Origin, timeouts: Mapping[str, Any], request: httpx2.Request) -> _Connection:
        loop = asyncio.get_running_loop()
        first = True
        while True:
            idle = self._idle.get(origin)
            now = time.monotonic()
            while idle:
                conn = idle.pop()
                if conn.reusable(loop, now, self._expiry):
                    return conn
                self._drop(conn)
            if len(self._live) >= self._max:
                self._evict_one_idle()
            if len(self._live) < self._max:
                return await self._connect(origin, timeouts.get("connect"), request)
            await self._wait_for_slot(timeouts.get("pool"), request, first)
            first = False

    async def _wait_for_slot(self, timeout: float | None, request: httpx2.Request, first: bool) -> None:
        fut: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        if first:
            self._waiters.append(fut)
        else:
            self._waiters.appendleft(fut)  # woken before but beaten to the slot: keep its place at the front
        try:
            woken = await _wait(fut, timeout)
        except BaseException:
            self._forget(fut)
            raise
        if not woken:
            self._forget(fut)
            raise httpx2.PoolTimeout("timed out waiting for a free connection", request=request)

    def _forget(self, fut: asyncio.Future[bool]) -> None:
        """A waiter gives up: remove it, and if it had been woken pass the wake-up on so no free slot is lost."""
        if fut in self._waiters:
            self._waiters.remove(fut)
        elif fut.done() and not fut.cancelled() and fut.result():
            self._wake_one()

    def _wake_one(self) -> None:
        while self._waiters:
            fut = self._waiters.popleft()
            if not fut.done():
                fut.set_result(True)
                return

    def _evict_one_idle(self) -> None:
        """At the connection limit, close an idle connection (of another origin) to make room."""
        for idle in self._idle.values():
            if idle:
                self._drop(idle.pop(0))
                return

    async def _connect(self, origin: Origin, timeout: float | None, request: httpx2.Request) -> _Connection:
        scheme, host, port = origin
        loop = asyncio.get_running_loop()
        context = self._ssl_context() if scheme == "https" else None
        hostname = host if context is not None else None
        placeholder = _Connection(loop, origin)  # holds the slot while connecting
        self._live.add(placeholder)
        try:
            async with asyncio.timeout(timeout):
                _, conn = await loop.create_connection(
                    lambda: _Connection(loop, origin), host, port, ssl=context, server_hostname=hostname
                )
        except BaseException as exc:
            self._live.discard(placeholder)
            self._wake_one()
            if isinstance(exc, TimeoutError):
                raise httpx2.ConnectTimeout(f"timed out connecting to {host}:{port}", request=request) from exc
            if isinstance(exc, OSError):  # refused, unreachable, DNS failure, TLS handshake (ssl.SSLError)
                raise httpx2.ConnectError(f"cannot connect to {host}:{port}: {exc}", request=request) from exc
            raise
        self._live.discard(placeholder)
        self._live.add(conn)
        return conn

    def _ssl_context(self) -> ssl.SSLContext:
        if self._ssl is None:
            context = httpx2.create_ssl_context()
            context.set_alpn_protocols(["http/1.1"])
            self._ssl = context
        return self._ssl

    async def _send(
        self, conn: _Connection, head: bytes, body: bytes | None, request: httpx2.Request, timeout: float | None
    ) -> None:
        if conn.closed:
            if conn.served:
                raise _Stale(sent=False)
            raise conn.lost(request, "before the request was sent", httpx2.WriteError)
        if body is not None:
            if len(body) < 256 * 1024:
                conn.write(head + body)  # one segment for the usual small JSON request
            else:
                conn.write(head)
                conn.write(body)
            await conn.drain(timeout, request)
            return
        chunked = request.headers.get("transfer-encoding", "").lower() == "chunked"
        conn.write(head)
        async for data in request.stream:  # type: ignore[union-attr]
            if data:
                conn.write(_chunk(data) if chunked else data)
                await conn.drain(timeout, request)
        if chunked:
            conn.write(b"0\r\n\r\n")
        await conn.drain(timeout, request)

    def _release(self, conn: _Connection, reusable: bool) -> None:
        """Return a connection after a response (to the idle list if ``reusable``), freeing its slot either way."""
        if reusable and not conn.closed and not self._closed and conn in self._live:
            conn.served += 1
            conn.idle_since = time.monotonic()
            self._idle.setdefault(conn.origin, []).append(conn)
        else:
            self._drop(conn)
        self._wake_one()

    def _drop(self, conn: _Connection) -> None:
        self._live.discard(conn)
        conn.abort()
