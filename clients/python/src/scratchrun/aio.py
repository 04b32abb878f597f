"""An asyncio face of the client, on the standard library alone.

Debian 12 packages httpx (0.23) and aiohttp (3.8), but the package takes
no dependency: each call of the synchronous Client runs in a worker thread
(asyncio.to_thread), which blocks no event loop and keeps one code path
for retries and streaming. A run waits mostly on the server, so a thread
per call in flight costs little.
"""

from __future__ import annotations

import asyncio
from typing import Any, AsyncIterator, Iterator, Mapping, Sequence

from .client import Client
from .result import Event, Result


def _next(events: Iterator[Event]) -> Event | None:
    return next(events, None)


class AsyncClient:
    """Client's calls as coroutines: ``await run(...)``, ``await
    runtimes()``, ``async for event in stream(...)``. Takes Client's
    arguments, or wraps a ``client`` given."""

    def __init__(self, url: str | None = None, api_key: str | None = None, *, client: Client | None = None, **options: Any) -> None:
        self.client = client or Client(url, api_key, **options)

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.client.close()

    async def run(
        self,
        code: str,
        runtime: str = "python3.13",
        *,
        files: Mapping[str, str | bytes] | None = None,
        return_files: Sequence[str] | None = None,
        env: Mapping[str, str] | None = None,
        timeout_ms: int | None = None,
        memory_mb: int | None = None,
        network: str | None = None,
        idempotency_key: str | None = None,
    ) -> Result:
        """Client.run in a worker thread."""
        return await asyncio.to_thread(
            self.client.run,
            code,
            runtime,
            files=files,
            return_files=return_files,
            env=env,
            timeout_ms=timeout_ms,
            memory_mb=memory_mb,
            network=network,
            idempotency_key=idempotency_key,
        )

    async def runtimes(self) -> dict[str, Any]:
        """Client.runtimes in a worker thread."""
        return await asyncio.to_thread(self.client.runtimes)

    async def stream(
        self,
        code: str,
        runtime: str = "python3.13",
        *,
        files: Mapping[str, str | bytes] | None = None,
        return_files: Sequence[str] | None = None,
        env: Mapping[str, str] | None = None,
        timeout_ms: int | None = None,
        memory_mb: int | None = None,
        network: str | None = None,
        idempotency_key: str | None = None,
    ) -> AsyncIterator[Event]:
        """Client.stream's events; each wait for the next runs in a worker thread."""
        events: Iterator[Event] = await asyncio.to_thread(
            self.client.stream,
            code,
            runtime,
            files=files,
            return_files=return_files,
            env=env,
            timeout_ms=timeout_ms,
            memory_mb=memory_mb,
            network=network,
            idempotency_key=idempotency_key,
        )
        try:
            while True:
                ev = await asyncio.to_thread(_next, events)
                if ev is None:
                    return
                yield ev
        finally:
            close = getattr(events, "close", None)
            if close is not None:
                await asyncio.to_thread(close)
