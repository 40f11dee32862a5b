"""PooledTransport against real sockets on 127.0.0.1: framing, keep-alive, reconnects, timeouts and errors.

Most tests use a scripted asyncio server that writes exact bytes (split across writes, closed at chosen moments), as
only raw bytes can exercise chunk boundaries and badly timed closes; the last ones go end to end through the
``openai`` SDK and uvicorn, the way the backend uses the transport.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import ssl
import subprocess
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx2
import openai
import pytest
from fake_openai import FakeOpenAI, HttpError, Reply, serve

from toolwild.errors import TransientBackendError
from toolwild.llm.backends.openai_compat import OpenAIBackend
from toolwild.llm.backends.transport import PooledTransport
from toolwild.llm.types import ChatRequest

pytestmark = pytest.mark.anyio

Handler = Callable[["Peer"], Awaitable[None]]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@dataclass
class Peer:
    """The server side of one accepted connection, with helpers to read requests and write raw bytes."""

    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    index: int
    requests: list[tuple[bytes, bytes]] = field(default_factory=list)

    async def request(self) -> tuple[bytes, bytes] | None:
        """Read one request (head, body); None when the client closed the connection."""
        try:
            head = await self.reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError:
            return None
        lower = head.lower()
        if b"transfer-encoding: chunked" in lower:
            body = b""
            while size := int((await self.reader.readuntil(b"\r\n")).strip(), 16):
                body += await self.reader.readexactly(size + 2)
                body = body[:-2]
            await self.reader.readuntil(b"\r\n")
        else:
            length = 0
            for line in lower.split(b"\r\n"):
                if line.startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            body = await self.reader.readexactly(length)
        self.requests.append((head, body))
        return head, body

    async def send(self, *parts: bytes, pause: float = 0.0) -> None:
        for part in parts:
            self.writer.write(part)
            await self.writer.drain()
            if pause:
                await asyncio.sleep(pause)

    def close(self) -> None:
        self.writer.close()


@dataclass
class Server:
    url: str
    peers: list[Peer]


@contextlib.asynccontextmanager
async def raw_server(handler: Handler, ssl_context: ssl.SSLContext | None = None) -> AsyncIterator[Server]:
    """Serve ``handler`` (one call per accepted connection) on a free port of 127.0.0.1."""
    peers: list[Peer] = []
    tasks: set[asyncio.Task[None]] = set()

    async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = Peer(reader, writer, len(peers))
        peers.append(peer)
        # The handler runs in a task of its own, cancelled at the end of the test: cancelling the task asyncio made
        # for this callback would make asyncio log an error.
        task = asyncio.ensure_future(handler(peer))
        tasks.add(task)
        try:
            await task
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(accept, "127.0.0.1", 0, ssl=ssl_context)
    port = server.sockets[0].getsockname()[1]
    scheme = "https" if ssl_context else "http"
    try:
        yield Server(f"{scheme}://{'localhost' if ssl_context else '127.0.0.1'}:{port}", peers)
    finally:
        server.close()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def response(body: bytes = b"ok", *, status: bytes = b"200 OK", headers: bytes = b"") -> bytes:
    return b"HTTP/1.1 %b\r\nContent-Length: %d\r\n%b\r\n%b" % (status, len(body), headers, body)


async def keep_serving(peer: Peer) -> None:
    """Answer every request on the connection with its own body (or its request line for a GET)."""
    while (req := await peer.request()) is not None:
        head, body = req
        await peer.send(response(body or head.split(b"\r\n")[0]))


def client(**kw: object) -> httpx2.AsyncClient:
    timeout = kw.pop("timeout", 5.0)
    return httpx2.AsyncClient(transport=PooledTransport(**kw), timeout=timeout)  # type: ignore[arg-type]


# -- framing and keep-alive ------------------------------------------------------------------------------------------


async def test_content_length_bodies_reuse_one_connection() -> None:
    async with raw_server(keep_serving) as server, client() as http:
        for i in range(3):
            reply = await http.post(server.url + "/echo", content=b"body %d" % i)
            assert (reply.status_code, reply.content) == (200, b"body %d" % i)
        reply = await http.get(server.url + "/x?q=1")
        assert reply.content == b"GET /x?q=1 HTTP/1.1"
    assert len(server.peers) == 1


async def test_body_split_across_writes_is_reassembled() -> None:
    async def slow(peer: Peer) -> None:
        await peer.request()
        await peer.send(b"HTTP/1.1 200 OK\r\nContent-", b"Length: 10\r\n\r\n01234", b"56789", pause=0.02)
        await keep_serving(peer)

    async with raw_server(slow) as server, client() as http:
        assert (await http.get(server.url)).content == b"0123456789"
        assert (await http.post(server.url, content=b"again")).content == b"again"
    assert len(server.peers) == 1


async def test_chunked_body_with_extensions_and_trailers() -> None:
    async def chunked(peer: Peer) -> None:
        await peer.request()
        await peer.send(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;name=value\r\nhel",
            b"lo\r\n",
            b"7\r\n, world\r\n0\r\nX-Trailer: t\r\n\r\n",
            pause=0.02,
        )
        await keep_serving(peer)

    async with raw_server(chunked) as server, client() as http:
        assert (await http.get(server.url)).content == b"hello, world"
        assert (await http.post(server.url, content=b"next")).content == b"next"
    assert len(server.peers) == 1


async def test_streamed_response_arrives_before_it_ends() -> None:
    """A server-sent-events style body is handed over chunk by chunk, not only once complete."""
    release = asyncio.Event()

    async def events(peer: Peer) -> None:
        await peer.request()
        await peer.send(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n6\r\nfirst\n\r\n")
        await release.wait()
        await peer.send(b"7\r\nsecond\n\r\n0\r\n\r\n")

    async with raw_server(events) as server, client() as http:
        async with http.stream("GET", server.url) as reply:
            lines = reply.aiter_lines()
            assert await asyncio.wait_for(anext(lines), 2) == "first"
            release.set()
            assert [line async for line in lines] == ["second"]


async def test_body_until_close_and_no_body_statuses() -> None:
    async def varied(peer: Peer) -> None:
        await peer.request()
        await peer.send(b"HTTP/1.1 204 No Content\r\n\r\n")
        await peer.request()
        await peer.send(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n")  # a HEAD reply has no body
        await peer.request()
        await peer.send(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nConnection: close\r\n\r\nto the end")
        peer.close()

    async with raw_server(varied) as server, client() as http:
        assert (await http.get(server.url)).status_code == 204
        head = await http.head(server.url)
        assert (head.status_code, head.content) == (200, b"")
        assert (await http.get(server.url)).content == b"to the end"
    assert len(server.peers) == 1


async def test_streamed_request_body_is_sent_chunked() -> None:
    async def parts() -> AsyncIterator[bytes]:
        for part in (b"one ", b"two ", b"three"):
            yield part

    async with raw_server(keep_serving) as server, client() as http:
        assert (await http.post(server.url, content=parts())).content == b"one two three"


async def test_streamed_response_closed_early_drops_its_connection() -> None:
    async def partial_first(peer: Peer) -> None:
        if peer.index == 0:
            await peer.request()
            await peer.send(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nten bytes.")
            await asyncio.sleep(10)  # the other 90 bytes never come
        await keep_serving(peer)

    async with raw_server(partial_first) as server, client() as http:
        async with http.stream("GET", server.url) as reply:
            async for part in reply.aiter_raw():
                assert part == b"ten bytes."
                break
        assert (await http.post(server.url, content=b"fresh")).content == b"fresh"
    assert len(server.peers) == 2


async def test_body_read_to_its_end_frees_the_connection_before_the_last_chunk_is_taken() -> None:
    async with raw_server(keep_serving) as server, client() as http:
        async with http.stream("POST", server.url, content=b"x" * 20) as reply:
            async for _ in reply.aiter_raw():
                break  # the whole body came in one piece: the connection was already back in the pool
        assert (await http.post(server.url, content=b"reused")).content == b"reused"
    assert len(server.peers) == 1


# -- closed connections ----------------------------------------------------------------------------------------------


async def test_server_closing_between_requests_means_a_new_connection() -> None:
    async def one_each(peer: Peer) -> None:
        req = await peer.request()
        assert req is not None
        await peer.send(response(req[1]))  # keep-alive implied, but then closed
        peer.close()

    async with raw_server(one_each) as server, client() as http:
        for i in range(3):
            assert (await http.post(server.url, content=b"%d" % i)).content == b"%d" % i
            await asyncio.sleep(0.05)  # the close reaches the client while the connection is idle
    assert len(server.peers) == 3


async def drop_second_request(peer: Peer) -> None:
    """First connection: answer one request, then read the next and close without a word. Later ones: serve."""
    if peer.index > 0:
        await keep_serving(peer)
        return
    req = await peer.request()
    assert req is not None
    await peer.send(response(req[1]))
    await peer.request()
    peer.close()


async def test_idempotent_request_is_retried_once_on_a_new_connection() -> None:
    async with raw_server(drop_second_request) as server, client() as http:
        assert (await http.post(server.url, content=b"first")).content == b"first"
        assert (await http.get(server.url + "/again")).content == b"GET /again HTTP/1.1"
    assert len(server.peers) == 2


async def test_post_on_a_connection_closed_mid_request_is_a_clean_error() -> None:
    async with raw_server(drop_second_request) as server, client() as http:
        assert (await http.post(server.url, content=b"first")).content == b"first"
        with pytest.raises(httpx2.RemoteProtocolError):
            await http.post(server.url, content=b"second")
        assert (await http.post(server.url, content=b"third")).content == b"third"  # the pool recovers
    assert len(server.peers) == 2


async def test_close_in_the_middle_of_a_body_is_an_error() -> None:
    async def short(peer: Peer) -> None:
        await peer.request()
        await peer.send(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly this")
        peer.close()

    async with raw_server(short) as server, client() as http:
        with pytest.raises(httpx2.RemoteProtocolError):
            await http.get(server.url)


async def test_malformed_status_line_is_a_protocol_error() -> None:
    async def garbage(peer: Peer) -> None:
        await peer.request()
        await peer.send(b"SMTP ready\r\n\r\n")

    async with raw_server(garbage) as server, client() as http:
        with pytest.raises(httpx2.RemoteProtocolError):
            await http.get(server.url)


# -- timeouts, limits and refusals -----------------------------------------------------------------------------------


async def test_silent_server_is_a_read_timeout() -> None:
    async def silent(peer: Peer) -> None:
        await peer.request()
        await asyncio.sleep(10)

    async with raw_server(silent) as server, client(timeout=0.2) as http:
        with pytest.raises(httpx2.ReadTimeout):
            await http.get(server.url)


async def test_refused_connection_is_a_connect_error() -> None:
    async with raw_server(keep_serving) as server:
        url = server.url
    async with client() as http:
        with pytest.raises(httpx2.ConnectError):
            await http.get(url)


async def test_pool_limit_queues_requests_and_times_out() -> None:
    gate = asyncio.Event()

    async def gated(peer: Peer) -> None:
        while (req := await peer.request()) is not None:
            if req[1] == b"wait":
                await gate.wait()
            await peer.send(response(req[1]))

    async with raw_server(gated) as server, client(max_connections=1) as http:
        slow = asyncio.create_task(http.post(server.url, content=b"wait"))
        await asyncio.sleep(0.05)
        with pytest.raises(httpx2.PoolTimeout):
            await http.post(server.url, content=b"queued", timeout=httpx2.Timeout(5.0, pool=0.1))
        queued = asyncio.create_task(http.post(server.url, content=b"queued"))
        await asyncio.sleep(0.05)
        gate.set()
        assert [(await slow).content, (await queued).content] == [b"wait", b"queued"]
    assert len(server.peers) == 1


async def test_header_injection_is_refused() -> None:
    async with raw_server(keep_serving) as server, client() as http:
        with pytest.raises(httpx2.LocalProtocolError):
            await http.get(server.url, headers={"x-evil": "a\r\nx-injected: 1"})
        assert server.peers == [] or server.peers[0].requests == []


async def test_unsupported_scheme() -> None:
    async with client() as http:
        with pytest.raises(httpx2.UnsupportedProtocol):
            await http.get("ftp://127.0.0.1/file")


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command to make a certificate")
async def test_https_with_a_trusted_certificate(tmp_path: Path) -> None:
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        [
            *("openssl", "req", "-x509", "-nodes", "-days", "1", "-subj", "/CN=localhost"),
            *("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-addext", "subjectAltName=DNS:localhost"),
            *("-keyout", str(key), "-out", str(cert)),
        ],
        check=True,
        capture_output=True,
    )
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_ctx.load_cert_chain(cert, key)
    async with raw_server(keep_serving, server_ctx) as server:
        async with client(ssl_context=ssl.create_default_context(cafile=str(cert))) as http:
            for i in range(2):
                assert (await http.post(server.url, content=b"tls %d" % i)).content == b"tls %d" % i
        async with client() as http:  # the default trust store does not know this certificate
            with pytest.raises(httpx2.ConnectError):
                await http.get(server.url)
    assert len(server.peers) == 1  # both requests on one TLS connection; the refused handshake never got that far


# -- through the openai SDK ------------------------------------------------------------------------------------------


REQ = ChatRequest(messages=[{"role": "user", "content": "hi"}])


@pytest.fixture(autouse=True)
def _no_real_key(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)


async def test_backend_uses_the_pooled_transport_over_uvicorn() -> None:
    fake = FakeOpenAI([Reply(text="one"), HttpError(503, "busy"), Reply(text="three")] + [Reply(text="n")] * 8)
    async with serve(fake) as base_url:
        backend = OpenAIBackend(model="fake-model", base_url=base_url, max_connections=4)
        try:
            assert isinstance(backend._client._client._transport, PooledTransport)
            assert (await backend.complete(REQ)).text == "one"
            with pytest.raises(TransientBackendError) as info:
                await backend.complete(REQ)
            assert info.value.status == 503
            assert (await backend.complete(REQ)).text == "three"
            results = await asyncio.gather(*(backend.complete(REQ) for _ in range(8)))
            assert [r.text for r in results] == ["n"] * 8
        finally:
            await backend.aclose()


async def test_sdk_maps_transport_errors_to_its_own() -> None:
    async def silent(peer: Peer) -> None:
        await peer.request()
        await asyncio.sleep(10)

    async with raw_server(drop_second_request) as server:
        sdk = openai.AsyncOpenAI(api_key="k", base_url=server.url, max_retries=0, http_client=client())
        await sdk.post("/first", body={}, cast_to=bytes)
        with pytest.raises(openai.APIConnectionError) as info:
            await sdk.post("/second", body={}, cast_to=bytes)
        assert isinstance(info.value.__cause__, httpx2.RemoteProtocolError)
        await sdk.close()
    async with raw_server(silent) as server:
        sdk = openai.AsyncOpenAI(api_key="k", base_url=server.url, max_retries=0, http_client=client(), timeout=0.2)
        with pytest.raises(openai.APITimeoutError):
            await sdk.post("/x", body={}, cast_to=bytes)
        await sdk.close()


async def test_backend_keeps_httpx_transport_behind_a_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.invalid:3128")
    proxied = OpenAIBackend(model="m", base_url="https://api.example.com/v1")
    direct = OpenAIBackend(model="m", base_url="http://127.0.0.1:9/v1")  # no proxy named for http://
    monkeypatch.setenv("NO_PROXY", "api.example.com")
    bypassed = OpenAIBackend(model="m", base_url="https://api.example.com/v1")
    try:
        assert not isinstance(proxied._client._client._transport, PooledTransport)
        assert isinstance(direct._client._client._transport, PooledTransport)
        assert isinstance(bypassed._client._client._transport, PooledTransport)
    finally:
        for backend in (proxied, direct, bypassed):
            await backend.aclose()
