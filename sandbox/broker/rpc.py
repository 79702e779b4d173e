"""The sandbox's inter-broker channel: JSON lines over TCP on each broker's address, port
``settings.REPLICATION_PORT``.

Real brokers replicate with Fetch requests and talk to the controller with ControlledShutdown
and AlterPartition requests. The sandbox carries those exchanges as one JSON object per line
(request) answered by one JSON object per line (response), in order, on a persistent connection.
Simulated topics move offsets and sizes only (``fetch``); topics with real records move the record
batches themselves, base64-encoded (``record_fetch``, a long poll: its handler is a coroutine that
answers when there is data or after a maximum wait). Clients never see this port.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
from collections.abc import Awaitable, Callable

log = logging.getLogger(__name__)

LINE_LIMIT_BYTES = 64 * 1024 * 1024  # one JSON line may carry record batches (asyncio's default is 64 KiB)

Handler = Callable[[dict], "dict | Awaitable[dict]"]


async def serve(host: str, port: int, handler: Handler) -> asyncio.AbstractServer:
    """Start answering JSON-line requests with ``handler(request) -> response`` (both dicts; the
    handler may return an awaitable of the response, e.g. a long poll)."""

    async def on_connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while line := await reader.readline():
                try:
                    response = handler(json.loads(line))
                    if inspect.isawaitable(response):
                        response = await response
                except Exception as exc:  # a bad request must not kill the channel
                    log.exception("rpc handler failed")
                    response = {"error": str(exc)}
                writer.write(json.dumps(response).encode() + b"\n")
                await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass  # CancelledError at shutdown: swallowed, Python 3.11's start_server logs it otherwise
        finally:
            writer.close()

    return await asyncio.start_server(on_connection, host, port, reuse_address=True, limit=LINE_LIMIT_BYTES)


class RpcClient:
    """Calls other brokers' channels; one persistent connection per address, one call at a time."""

    def __init__(self, port: int, timeout_s: float = 2.0) -> None:
        self.port = port
        self.timeout_s = timeout_s
        self._connections: dict[str, tuple[asyncio.StreamReader, asyncio.StreamWriter]] = {}
        self._locks: dict[str, asyncio.Lock] = {}

    async def call(self, host: str, request: dict) -> dict:
        """Send ``request`` to the broker at ``host`` and return its response.

        Raises:
            ConnectionError / TimeoutError: the broker is unreachable or slow (callers retry).
        """
        lock = self._locks.setdefault(host, asyncio.Lock())
        async with lock:
            try:
                reader, writer = self._connections.get(host) or await asyncio.wait_for(
                    asyncio.open_connection(host, self.port, limit=LINE_LIMIT_BYTES), self.timeout_s
                )
                self._connections[host] = (reader, writer)
                writer.write(json.dumps(request).encode() + b"\n")
                await writer.drain()
                line = await asyncio.wait_for(reader.readline(), self.timeout_s)
                if not line:
                    raise ConnectionError(f"{host}: channel closed")
                return json.loads(line)
            except (OSError, TimeoutError):
                self.drop(host)
                raise

    def drop(self, host: str) -> None:
        conn = self._connections.pop(host, None)
        if conn:
            conn[1].close()

    def close(self) -> None:
        for host in list(self._connections):
            self.drop(host)
