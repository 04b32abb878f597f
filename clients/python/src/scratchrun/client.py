"""The synchronous client of the ScratchRun HTTP API (docs/api.md)."""

from __future__ import annotations

import base64
import http.client
import json
import logging
import os
import socket
import ssl
import time
import urllib.error
import urllib.request
import uuid
from typing import Any, Callable, Iterator, Mapping, Sequence, TypeVar

from ._version import __version__
from .errors import ConnectionLost, Refused, ScratchRunError, ServerError, from_detail, from_document, parse_retry_after
from .result import Event, Result
from .sse import read_messages

log = logging.getLogger("scratchrun")

T = TypeVar("T")

#: Where the client goes when neither url nor SCRATCHRUN_API_URL says:
#: ``scratchrun serve``'s default address.
DEFAULT_URL = "http://127.0.0.1:8722"

#: What a call may take beyond the run's own timeout: the server's queue
#: wait, starting the sandbox, returning files.
MARGIN_SECONDS = 60.0

#: The run's timeout assumed when the call does not set timeout_ms: the
#: largest the hosted API allows (the server's default is lower).
_UNKNOWN_TIMEOUT_MS = 30000

_SSE = "text/event-stream"


class Client:
    """A client of one ScratchRun server. Safe to share between threads.

    ``url`` defaults to $SCRATCHRUN_API_URL (else http://127.0.0.1:8722) and
    ``api_key`` to $SCRATCHRUN_API_KEY (none: a server without keys).

    ``timeout`` is the socket timeout in seconds (connecting, and each wait
    for bytes); None gives each call its run's timeout plus 60 s, since the
    server answers a run only when it has ended.

    Refusals (429, 503) are retried up to ``max_retries`` times after the
    server's Retry-After, unless that is longer than ``max_retry_wait``
    seconds (then the Refused is raised at once). A lost connection is
    retried only for a call with an idempotency key: the ``idempotency_key``
    of the call, or one the client makes for every call when
    ``idempotency=True``. With a key the server runs the code at most once
    and answers a retry with the first run's result.
    """

    def __init__(
        self,
        url: str | None = None,
        api_key: str | None = None,
        *,
        timeout: float | None = None,
        max_retries: int = 3,
        max_retry_wait: float = 60.0,
        idempotency: bool = False,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self.url = (url or os.environ.get("SCRATCHRUN_API_URL") or DEFAULT_URL).rstrip("/")
        self.api_key = api_key if api_key is not None else os.environ.get("SCRATCHRUN_API_KEY", "")
        self.timeout = timeout
        self.max_retries = max_retries
        self.max_retry_wait = max_retry_wait
        self.idempotency = idempotency
        handlers: list[urllib.request.BaseHandler] = [_NoRedirect()]
        if ssl_context is not None:
            handlers.append(urllib.request.HTTPSHandler(context=ssl_context))
        self._opener = urllib.request.build_opener(*handlers)

    def __repr__(self) -> str:
        return f"Client(url={self.url!r})"  # never the key

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Nothing to release (every call has its own connection); here for
        ``with`` and for symmetry with other clients."""

    # The API.

    def run(
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
        """Runs code in a fresh sandbox and returns its Result once it ended.

        ``files`` are written into the sandbox before the run: str as text,
        bytes as binary. ``return_files`` are read after it and come back in
        ``Result.files`` as bytes. Limits left None take the server's
        defaults. Raises a ScratchRunError subclass for an error answer.
        """
        body = request_body(code, runtime, files, return_files, env, timeout_ms, memory_mb, network)
        key = self._key(idempotency_key)
        return self._call("POST", "/v1/exec", body, key, self._bound(timeout_ms), _read_result)

    def stream(
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
    ) -> Iterator[Event]:
        """Runs code as run does, and yields its events as the server sends
        them: ``started``, ``stdout`` and ``stderr`` chunks in the order
        written, then ``result`` (or ``error``, for a run that failed after
        it began).

        The call is sent, and refusals retried, before this returns: errors
        before the run (BadRequest, Unauthorized, Refused...) raise here. A
        connection lost during the stream raises ConnectionLost from the
        iterator, unless the call has an idempotency key: then the client
        asks again and goes on after the last event it had (the server
        replays the stream, or waits for the run). Closing the iterator
        early closes the connection, which ends the run (without a key).
        """
        body = request_body(code, runtime, files, return_files, env, timeout_ms, memory_mb, network)
        key = self._key(idempotency_key)
        bound = self._bound(timeout_ms)
        resp = self._open_retrying("POST", "/v1/exec", body, key, bound, _SSE)
        return self._events(resp, body, key, bound)

    def runtimes(self) -> dict[str, Any]:
        """GET /v1/runtimes: the server's runtimes, limits, isolation and
        admission (docs/api.md). Retried on a lost connection: it runs nothing."""

        def read(resp: http.client.HTTPResponse) -> dict[str, Any]:
            doc: dict[str, Any] = json.loads(resp.read())
            return doc

        return self._call("GET", "/v1/runtimes", None, None, self.timeout or MARGIN_SECONDS, read, safe=True)

    # Internals.

    def _key(self, given: str | None) -> str | None:
        if given is not None:
            return given
        return str(uuid.uuid4()) if self.idempotency else None

    def _bound(self, timeout_ms: int | None) -> float:
        if self.timeout is not None:
            return self.timeout
        return (timeout_ms or _UNKNOWN_TIMEOUT_MS) / 1000 + MARGIN_SECONDS

    def _open(self, method: str, path: str, body: bytes | None, key: str | None, bound: float, accept: str) -> http.client.HTTPResponse:
        """Sends one request; returns a 2xx response, raises the error of any other."""
        req = urllib.request.Request(self.url + path, data=body, method=method)
        req.add_header("Accept", accept)
        req.add_header("User-Agent", f"scratchrun-python/{__version__}")
        if body is not None:
            req.add_header("Content-Type", "application/json")
        if self.api_key:
            req.add_header("Authorization", "Bearer " + self.api_key)
        if key is not None:
            req.add_header("Idempotency-Key", key)
        try:
            resp: http.client.HTTPResponse = self._opener.open(req, timeout=bound)
            return resp
        except urllib.error.HTTPError as e:
            with e:
                try:
                    data = e.read()
                except (OSError, http.client.HTTPException):
                    data = b""
                raise from_document(e.code, data, parse_retry_after(e.headers.get("Retry-After"))) from None
        except (OSError, http.client.HTTPException) as e:
            raise _lost(method, path, e) from e

    def _open_retrying(
        self, method: str, path: str, body: bytes | None, key: str | None, bound: float, accept: str, safe: bool = False
    ) -> http.client.HTTPResponse:
        attempt = 0
        while True:
            try:
                return self._open(method, path, body, key, bound, accept)
            except ScratchRunError as e:
                self._wait_or_raise(e, attempt, retry_lost=safe or key is not None)
            attempt += 1

    def _call(
        self,
        method: str,
        path: str,
        body: bytes | None,
        key: str | None,
        bound: float,
        read: Callable[[http.client.HTTPResponse], T],
        safe: bool = False,
    ) -> T:
        """One call with its retries; read turns the 2xx response into the
        answer (reading the body can lose the connection too)."""
        attempt = 0
        while True:
            try:
                resp = self._open(method, path, body, key, bound, "application/json")
                with resp:
                    try:
                        return read(resp)
                    except (OSError, http.client.HTTPException) as e:
                        raise _lost(method, path, e) from e
            except ScratchRunError as e:
                self._wait_or_raise(e, attempt, retry_lost=safe or key is not None)
            attempt += 1

    def _wait_or_raise(self, err: ScratchRunError, attempt: int, retry_lost: bool) -> None:
        """Sleeps before the next attempt if err may be retried, else raises it."""
        if attempt >= self.max_retries:
            raise err
        if isinstance(err, Refused) and err.status in (429, 503):
            wait = err.retry_after if err.retry_after is not None else min(2.0**attempt, 10.0)
            if wait > self.max_retry_wait:
                raise err
        elif isinstance(err, ConnectionLost) and retry_lost:
            wait = min(0.25 * 2**attempt, 2.0)
        else:
            raise err
        log.info("scratchrun: %s; retrying in %gs (attempt %d of %d)", err, wait, attempt + 2, self.max_retries + 1)
        time.sleep(wait)

    def _events(self, resp: http.client.HTTPResponse, body: bytes, key: str | None, bound: float) -> Iterator[Event]:
        """The events of resp; with a key, a lost connection is asked again
        and events already yielded (by their id) are skipped."""
        last = 0
        attempt = 0
        try:
            while True:
                try:
                    for ev in _read_events(resp):
                        if ev.id and ev.id <= last:
                            continue
                        last = ev.id or last
                        yield ev
                        if ev.type in ("result", "error"):
                            return
                    raise ConnectionLost("the stream ended before its result")
                except (OSError, http.client.HTTPException, ConnectionLost) as e:
                    lost = e if isinstance(e, ConnectionLost) else _lost("POST", "/v1/exec", e)
                    if key is None:
                        raise lost from e
                    resp.close()
                    self._wait_or_raise(lost, attempt, retry_lost=True)
                    attempt += 1
                    resp = self._open_retrying("POST", "/v1/exec", body, key, bound, _SSE)
        finally:
            resp.close()


def request_body(
    code: str,
    runtime: str,
    files: Mapping[str, str | bytes] | None,
    return_files: Sequence[str] | None,
    env: Mapping[str, str] | None,
    timeout_ms: int | None,
    memory_mb: int | None,
    network: str | None,
) -> bytes:
    """The JSON body of POST /v1/exec. A call encodes it once, so that its
    retries send the same bytes (what an idempotency key is checked against)."""
    doc: dict[str, Any] = {"runtime": runtime, "code": code}
    limits: dict[str, int] = {}
    if timeout_ms is not None:
        limits["timeout_ms"] = timeout_ms
    if memory_mb is not None:
        limits["memory_mb"] = memory_mb
    if limits:
        doc["limits"] = limits
    if env:
        doc["env"] = dict(env)
    text = {p: c for p, c in (files or {}).items() if isinstance(c, str)}
    binary = {p: base64.b64encode(c).decode("ascii") for p, c in (files or {}).items() if isinstance(c, (bytes, bytearray))}
    if text:
        doc["files"] = text
    if binary:
        doc["files_base64"] = binary
    if return_files:
        doc["return_files"] = list(return_files)
    if network is not None:
        doc["network"] = network
    return json.dumps(doc, separators=(",", ":")).encode()


def _lost(method: str, path: str, err: BaseException) -> ConnectionLost:
    what = "no answer within the timeout" if isinstance(err, (socket.timeout, TimeoutError)) else f"{type(err).__name__}: {err}"
    return ConnectionLost(f"{method} {path}: {what}")


def _is_sse(resp: http.client.HTTPResponse) -> bool:
    return resp.headers.get_content_type() == _SSE


def _read_result(resp: http.client.HTTPResponse) -> Result:
    """The Result of a 200 answer. A replay of a streamed request with the
    same idempotency key is the stored event stream: its result (or error)
    event is the answer."""
    for ev in _read_events(resp):
        if ev.result is not None:
            return ev.result
        if ev.error is not None:
            raise ev.error
    raise ConnectionLost("POST /v1/exec: the stream ended before its result")


def _read_events(resp: http.client.HTTPResponse) -> Iterator[Event]:
    """The events of a 200 answer. A JSON answer (a replay of a request
    made without streaming) is one result event."""
    replayed = resp.headers.get("Idempotency-Replayed", "").lower() == "true"
    if not _is_sse(resp):
        yield _result_event(0, json.loads(resp.read()), replayed)
        return
    for msg in read_messages(resp):
        try:
            ident = int(msg.id) if msg.id else 0
            data = json.loads(msg.data)
        except ValueError as e:
            raise ServerError(f"POST /v1/exec: a stream event that is not JSON: {msg.data[:200]!r}") from e
        if not isinstance(data, dict):
            continue
        if msg.event == "started":
            yield Event("started", ident, elapsed_ms=int(data.get("elapsed_ms", 0)), data=data)
        elif msg.event in ("stdout", "stderr"):
            yield Event("stdout" if msg.event == "stdout" else "stderr", ident, text=str(data.get("text", "")), data=data)
        elif msg.event == "result":
            yield _result_event(ident, data, replayed)
        elif msg.event == "error":
            yield Event("error", ident, error=_stream_error(data), data=data)
        # Other event types are a newer server's; skipped.


def _result_event(ident: int, doc: dict[str, Any], replayed: bool) -> Event:
    res = Result.from_document(doc)
    res.replayed = replayed
    return Event("result", ident, result=res, data=doc)


def _stream_error(data: Mapping[str, Any]) -> ScratchRunError:
    detail = data.get("error")
    if not isinstance(detail, dict):
        detail = {"code": "internal", "message": str(data)}
    err = from_detail(0, detail, document=data)
    if isinstance(err, Refused):
        # The run had begun: a drain that cancels it is no refusal of a
        # call that never ran.
        err = ServerError(err.message, code=err.code, reason=err.reason, document=data)
    return err


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """Follows no redirect: urllib's would send the Authorization header,
    the API key, on to wherever the redirect points (another host, or plain
    http). A ScratchRun server never redirects; a 3xx is answered as an
    error of its status."""

    def redirect_request(self, req: urllib.request.Request, fp: Any, code: int, msg: str, headers: Any, newurl: str) -> None:
        return None
