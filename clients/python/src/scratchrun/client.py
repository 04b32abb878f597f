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
from .errors import (
    ConnectionLost,
    Refused,
    ScratchRunError,
    ServerError,
    SessionEnd,
    SessionLimit,
    from_detail,
    from_document,
    parse_retry_after,
)
from .result import Event, Result
from .sessions import Session, SessionInfo, SessionResult, file_path, session_path
from .sse import read_messages
from . import upload

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
_JSON = "application/json"
_BYTES = "application/octet-stream"


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
        self._ssl_context = ssl_context

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
        return self._call("POST", "/v1/exec", body, key, self._bound(timeout_ms), _result_reader("/v1/exec", Result))

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
        return self._events("/v1/exec", resp, body, key, bound)

    def runtimes(self) -> dict[str, Any]:
        """GET /v1/runtimes: the server's runtimes, limits, isolation and
        admission (docs/api.md). Retried on a lost connection: it runs nothing."""

        def read(resp: http.client.HTTPResponse) -> dict[str, Any]:
            doc: dict[str, Any] = json.loads(resp.read())
            return doc

        return self._call("GET", "/v1/runtimes", None, None, self.timeout or MARGIN_SECONDS, read, safe=True)

    # Sessions (a server run with --sessions; docs/api.md, "Sessions").

    def open_session(
        self,
        runtime: str = "python3.13",
        *,
        timeout_ms: int | None = None,
        memory_mb: int | None = None,
        network: str | None = None,
        idle_ttl_ms: int | None = None,
        max_lifetime_ms: int | None = None,
        env: Mapping[str, str] | None = None,
        idempotency_key: str | None = None,
    ) -> Session:
        """Opens a session (POST /v1/sessions) and returns it; use it as a
        context manager to close it at the end. ``memory_mb`` is for all of
        its processes over its whole life, ``timeout_ms`` each call's
        default, ``env`` the base environment of every call. A lost
        connection is retried only with an idempotency key: without one
        the session may have opened, and a retry would open another."""
        doc: dict[str, Any] = {"runtime": runtime}
        limits = {k: v for k, v in (("timeout_ms", timeout_ms), ("memory_mb", memory_mb)) if v is not None}
        if limits:
            doc["limits"] = limits
        for name, value in (("network", network), ("idle_ttl_ms", idle_ttl_ms), ("max_lifetime_ms", max_lifetime_ms)):
            if value is not None:
                doc[name] = value
        if env:
            doc["env"] = dict(env)
        body = json.dumps(doc, separators=(",", ":")).encode()
        return self._session_info("/v1/sessions", body, self._key(idempotency_key))

    def sessions(self) -> list[SessionInfo]:
        """The caller's open sessions (GET /v1/sessions); retried: it changes nothing."""

        def read(resp: http.client.HTTPResponse) -> list[SessionInfo]:
            doc = json.loads(resp.read())
            return [SessionInfo.from_document(s) for s in doc.get("sessions") or []]

        return self._call("GET", "/v1/sessions", None, None, self.timeout or MARGIN_SECONDS, read, safe=True)

    def session(self, session_id: str) -> Session:
        """The key's open session ``session_id`` (GET /v1/sessions/{id}) as
        a Session, its ``info`` as the server has it now (``state``,
        ``memory_bytes``, ``expires_at``...): a handle on a session another
        process opened, say. SessionNotFound when no open session of this
        key has the id, SessionEnded (its ``ended``) once it ended; retried:
        it changes nothing."""
        return self._session_info(session_path(session_id), None, None, method="GET")

    def run_in_session(
        self,
        session_id: str,
        code: str,
        runtime: str | None = None,
        *,
        files: Mapping[str, str | bytes] | None = None,
        return_files: Sequence[str] | None = None,
        env: Mapping[str, str] | None = None,
        timeout_ms: int | None = None,
        idempotency_key: str | None = None,
    ) -> SessionResult:
        """Runs code in the session (POST /v1/sessions/{id}/exec), with its
        runtime unless ``runtime`` names one; retried as run is. The
        session's network and memory hold for every call in it."""
        body = request_body(code, runtime, files, return_files, env, timeout_ms, None, None)
        path = session_path(session_id, "/exec")
        return self._call("POST", path, body, self._key(idempotency_key), self._bound(timeout_ms), _result_reader(path, SessionResult))

    def stream_in_session(
        self,
        session_id: str,
        code: str,
        runtime: str | None = None,
        *,
        files: Mapping[str, str | bytes] | None = None,
        return_files: Sequence[str] | None = None,
        env: Mapping[str, str] | None = None,
        timeout_ms: int | None = None,
        idempotency_key: str | None = None,
    ) -> Iterator[Event]:
        """Runs code in the session as run_in_session does, and yields its
        events as stream does; the result event's ``result`` is a SessionResult."""
        body = request_body(code, runtime, files, return_files, env, timeout_ms, None, None)
        key = self._key(idempotency_key)
        bound = self._bound(timeout_ms)
        path = session_path(session_id, "/exec")
        resp = self._open_retrying("POST", path, body, key, bound, _SSE)
        return self._events(path, resp, body, key, bound)

    def read_session_file(self, session_id: str, path: str) -> bytes:
        """The bytes of the file at path (absolute) in the session (GET
        /v1/sessions/{id}/files/{path}); retried: it changes nothing."""
        return self._call(
            "GET", file_path(session_id, path), None, None, self.timeout or MARGIN_SECONDS, _read_bytes, safe=True, accept=_BYTES
        )

    def write_session_file(self, session_id: str, path: str, data: str | bytes) -> int:
        """Writes data (str as UTF-8) as the file at path (absolute) in the
        session, its missing parents made (PUT /v1/sessions/{id}/files/{path}),
        and returns the size written. Retried as a read is: writing the same
        bytes again leaves the same file."""
        raw = data.encode() if isinstance(data, str) else bytes(data)

        def read(resp: http.client.HTTPResponse) -> int:
            return int(json.loads(resp.read()).get("size", 0))

        return self._call(
            "PUT", file_path(session_id, path), raw, None, self.timeout or MARGIN_SECONDS, read, safe=True, content_type=_BYTES
        )

    def fork_session(self, session_id: str, *, idempotency_key: str | None = None) -> Session:
        """Opens a new session holding a copy of this one (POST
        /v1/sessions/{id}/fork; its ``forked_from`` names the parent);
        retried as open_session is. ForkUnsupported where the server's
        isolation cannot fork."""
        return self._session_info(session_path(session_id, "/fork"), b"{}", self._key(idempotency_key))

    def close_session(self, session_id: str) -> SessionEnd:
        """Ends the session and purges it (DELETE /v1/sessions/{id}): the
        answer says whether its teardown was verified. A lost connection is
        not retried: the retry would find the session ended."""

        def read(resp: http.client.HTTPResponse) -> SessionEnd:
            return SessionEnd.from_document(json.loads(resp.read()))

        return self._call("DELETE", session_path(session_id), None, None, self.timeout or MARGIN_SECONDS, read)

    def _session_info(self, path: str, body: bytes | None, key: str | None, method: str = "POST") -> Session:
        """A call answered with a SessionInfo; a GET is retried as any read."""

        def read(resp: http.client.HTTPResponse) -> Session:
            return Session(self, SessionInfo.from_document(json.loads(resp.read())))

        return self._call(method, path, body, key, self.timeout or MARGIN_SECONDS, read, safe=method == "GET")

    # Internals.

    def _key(self, given: str | None) -> str | None:
        if given is not None:
            return given
        return str(uuid.uuid4()) if self.idempotency else None

    def _bound(self, timeout_ms: int | None) -> float:
        if self.timeout is not None:
            return self.timeout
        return (timeout_ms or _UNKNOWN_TIMEOUT_MS) / 1000 + MARGIN_SECONDS

    def _open(
        self, method: str, path: str, body: bytes | None, key: str | None, bound: float, accept: str, content_type: str = _JSON
    ) -> http.client.HTTPResponse:
        """Sends one request; returns a 2xx response, raises the error of any other."""
        req = urllib.request.Request(self.url + path, data=body, method=method)
        req.add_header("Accept", accept)
        req.add_header("User-Agent", f"scratchrun-python/{__version__}")
        if body is not None:
            req.add_header("Content-Type", content_type)
        if self.api_key:
            req.add_header("Authorization", "Bearer " + self.api_key)
        if key is not None:
            req.add_header("Idempotency-Key", key)
        try:
            if body is not None and upload.direct(req.full_url):
                return _ok_or_raise(upload.send(method, req.full_url, dict(req.header_items()), body, bound, self._ssl_context))
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
        accept: str = _JSON,
        content_type: str = _JSON,
    ) -> T:
        """One call with its retries; read turns the 2xx response into the
        answer (reading the body can lose the connection too)."""
        attempt = 0
        while True:
            try:
                resp = self._open(method, path, body, key, bound, accept, content_type)
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
        if isinstance(err, SessionLimit):
            # Waiting frees none of the key's sessions: only closing one does.
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

    def _events(self, path: str, resp: http.client.HTTPResponse, body: bytes, key: str | None, bound: float) -> Iterator[Event]:
        """The events of resp; with a key, a lost connection is asked again
        and events already yielded (by their id) are skipped."""
        last = 0
        attempt = 0
        try:
            while True:
                try:
                    for ev in _read_events(resp, path, _result_factory(path)):
                        if ev.id and ev.id <= last:
                            continue
                        last = ev.id or last
                        yield ev
                        if ev.type in ("result", "error"):
                            return
                    raise ConnectionLost("the stream ended before its result")
                except (OSError, http.client.HTTPException, ConnectionLost) as e:
                    lost = e if isinstance(e, ConnectionLost) else _lost("POST", path, e)
                    if key is None:
                        raise lost from e
                    resp.close()
                    self._wait_or_raise(lost, attempt, retry_lost=True)
                    attempt += 1
                    resp = self._open_retrying("POST", path, body, key, bound, _SSE)
        finally:
            resp.close()


def request_body(
    code: str,
    runtime: str | None,
    files: Mapping[str, str | bytes] | None,
    return_files: Sequence[str] | None,
    env: Mapping[str, str] | None,
    timeout_ms: int | None,
    memory_mb: int | None,
    network: str | None,
) -> bytes:
    """The JSON body of POST /v1/exec (and of a call in a session, whose
    runtime may be None: the session's). A call encodes it once, so that
    its retries send the same bytes (what an idempotency key is checked
    against)."""
    doc: dict[str, Any] = {"runtime": runtime, "code": code} if runtime is not None else {"code": code}
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


def _ok_or_raise(resp: http.client.HTTPResponse) -> http.client.HTTPResponse:
    """resp if it is a 2xx, else (closed) the error it answers, as urllib's
    HTTPError is turned into one (a 3xx included: no redirect is followed)."""
    if 200 <= resp.status < 300:
        return resp
    with resp:
        try:
            data = resp.read()
        except (OSError, http.client.HTTPException):
            data = b""
    raise from_document(resp.status, data, parse_retry_after(resp.headers.get("Retry-After")))


def _read_bytes(resp: http.client.HTTPResponse) -> bytes:
    return resp.read()


def _lost(method: str, path: str, err: BaseException) -> ConnectionLost:
    what = "no answer within the timeout" if isinstance(err, (socket.timeout, TimeoutError)) else f"{type(err).__name__}: {err}"
    return ConnectionLost(f"{method} {path}: {what}")


def _is_sse(resp: http.client.HTTPResponse) -> bool:
    return resp.headers.get_content_type() == _SSE


R = TypeVar("R", bound=Result)


def _result_reader(path: str, cls: type[R]) -> Callable[[http.client.HTTPResponse], R]:
    """Reads the result of a 200 answer to POST path as a cls. A replay of
    a streamed request with the same idempotency key is the stored event
    stream: its result (or error) event is the answer."""

    def read(resp: http.client.HTTPResponse) -> R:
        for ev in _read_events(resp, path, cls.from_document):
            if isinstance(ev.result, cls):
                return ev.result
            if ev.error is not None:
                raise ev.error
        raise ConnectionLost(f"POST {path}: the stream ended before its result")

    return read


def _result_factory(path: str) -> Callable[[Mapping[str, Any]], Result]:
    """How the result document of a run at path is read: a session's has its account."""
    return Result.from_document if path == "/v1/exec" else SessionResult.from_document


def _read_events(resp: http.client.HTTPResponse, path: str, factory: Callable[[Mapping[str, Any]], Result]) -> Iterator[Event]:
    """The events of a 200 answer. A JSON answer (a replay of a request
    made without streaming) is one result event."""
    replayed = resp.headers.get("Idempotency-Replayed", "").lower() == "true"
    if not _is_sse(resp):
        yield _result_event(0, json.loads(resp.read()), replayed, factory)
        return
    for msg in read_messages(resp):
        try:
            ident = int(msg.id) if msg.id else 0
            data = json.loads(msg.data)
        except ValueError as e:
            raise ServerError(f"POST {path}: a stream event that is not JSON: {msg.data[:200]!r}") from e
        if not isinstance(data, dict):
            continue
        if msg.event == "started":
            yield Event("started", ident, elapsed_ms=int(data.get("elapsed_ms", 0)), data=data)
        elif msg.event in ("stdout", "stderr"):
            yield Event("stdout" if msg.event == "stdout" else "stderr", ident, text=str(data.get("text", "")), data=data)
        elif msg.event == "result":
            yield _result_event(ident, data, replayed, factory)
        elif msg.event == "error":
            yield Event("error", ident, error=_stream_error(data), data=data)
        # Other event types are a newer server's; skipped.


def _result_event(ident: int, doc: dict[str, Any], replayed: bool, factory: Callable[[Mapping[str, Any]], Result]) -> Event:
    res = factory(doc)
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
