"""The exceptions of the client, one class per kind of answer.

The server's error document is ``{"error": {"code", "message", ...}}``; a
400 names the request ``field``, a refusal its ``reason`` (and ``limit``
for a key's limit) and a 429 or 503 carries ``Retry-After``. Classes go by
the code, so that callers catch what they can act on without parsing the
message.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Mapping


class ScratchRunError(Exception):
    """Any error of the client: an error answer of the server, or no answer.

    ``status`` is the HTTP status (0 when there was no answer), ``code`` and
    ``message`` the server's error document, ``document`` all of it.
    """

    def __init__(
        self,
        message: str,
        *,
        status: int = 0,
        code: str = "",
        reason: str = "",
        field: str = "",
        limit: int = 0,
        retry_after: float | None = None,
        document: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.code = code
        self.reason = reason
        self.field = field
        self.limit = limit
        self.retry_after = retry_after
        self.document: Mapping[str, Any] = document or {}

    def __str__(self) -> str:
        head = f"{self.status} {self.code}: " if self.status else ""
        tail = f" (retry after {self.retry_after:g}s)" if self.retry_after else ""
        return f"{head}{self.message}{tail}"


class BadRequest(ScratchRunError):
    """400 ``invalid_request``: ``field`` names the request field at fault
    (``limits.timeout_ms``, ``runtime`` for an unknown runtime)."""


class Unauthorized(ScratchRunError):
    """401: the API key is missing, unknown or revoked."""


class Forbidden(ScratchRunError):
    """403: a foreign Origin, or a Host the server does not answer."""


class Refused(ScratchRunError):
    """429 or 503: the call was refused before anything of it ran.

    ``reason`` says why (``memory``, ``cpu``, ``at_capacity``, ``queue_full``,
    ``key_rate``, ``key_concurrency``, ``draining``, ``no_workers``),
    ``retry_after`` when to retry in seconds (None when the server gave no
    estimate), ``limit`` the key's limit that was hit. The client already
    retried it as its options allow.
    """


class WorkerLost(ScratchRunError):
    """502 ``worker_lost``: a cluster's worker was lost with the call; the
    code may have run. Not retried (unless an idempotency key makes that safe)."""


class IdempotencyConflict(ScratchRunError):
    """409: ``idempotency_key_reused`` (the key was used with another body)
    or ``idempotency_unknown`` (the first request with the key ended without
    an answer; the code may have run, and it is not run again)."""


class ServerError(ScratchRunError):
    """A failure of the server or its sandbox (``internal``, a 5xx), also one
    that ended a stream after it began."""


@dataclass
class SessionEnd:
    """How and when a session ended: the answer of closing it, and what
    SessionEnded says of a session used after its end.

    ``reason`` is ``deleted``, ``idle_ttl``, ``max_lifetime``,
    ``memory_limit``, ``memory_pressure``, ``timeout_unseparable``,
    ``sandbox_lost``, ``operator``, ``server_shutdown`` or ``server_restart``;
    ``at`` the RFC 3339 time; ``state_purged`` whether the teardown of its
    sandbox was verified.
    """

    reason: str
    at: str
    state_purged: bool
    document: dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_document(cls, doc: Mapping[str, Any]) -> SessionEnd:
        """Reads a SessionEnd document (DELETE's answer, an error's ``ended``)."""
        return cls(
            reason=str(doc.get("reason", "")),
            at=str(doc.get("at", "")),
            state_purged=bool(doc.get("state_purged", False)),
            document=dict(doc),
        )


class SessionNotFound(ScratchRunError):
    """404 ``session_not_found``: no open session has this id for this
    API key (another key's session gets the same answer, on purpose)."""


class SessionEnded(ScratchRunError):
    """410 ``session_ended``: the session ended; ``ended`` says why (its
    ``reason``: ``deleted``, ``idle_ttl``, ``max_lifetime``...) and when. Its
    files and state are gone: open a new one."""

    @property
    def ended(self) -> SessionEnd | None:
        """The error document's ``ended``, None when the server sent none."""
        doc = self.document.get("error", {}).get("ended")
        return SessionEnd.from_document(doc) if isinstance(doc, dict) else None


class SessionLost(ScratchRunError):
    """502 ``session_lost``: the cluster worker holding the session was
    lost, and the session with it. A call in it may have run."""


class SessionLimit(Refused):
    """429 ``session_limit`` (reason ``key_sessions``): the key has its
    maximum of open sessions. It has no Retry-After and is not retried:
    close one first."""


class SessionFileNotFound(ScratchRunError):
    """404 ``file_not_found``: the session holds no regular file at the path."""


class FileTooLarge(ScratchRunError):
    """413 ``file_too_large``: a write over the server's largest file
    (nothing was written), or a read of a file larger than a run may return."""


class ForkUnsupported(ScratchRunError):
    """409 ``fork_unsupported``: the server's isolation level cannot fork a session."""


class ConnectionLost(ScratchRunError):
    """No answer: the connection failed, dropped or timed out. Without an
    idempotency key the code may or may not have run."""


_BY_CODE: dict[str, type[ScratchRunError]] = {
    "invalid_request": BadRequest,
    "unauthorized": Unauthorized,
    "forbidden": Forbidden,
    "at_capacity": Refused,
    "rate_limited": Refused,
    "concurrency_limited": Refused,
    "draining": Refused,
    "no_workers": Refused,
    "worker_lost": WorkerLost,
    "idempotency_key_reused": IdempotencyConflict,
    "idempotency_unknown": IdempotencyConflict,
    "internal": ServerError,
    "session_not_found": SessionNotFound,
    "session_ended": SessionEnded,
    "session_lost": SessionLost,
    "session_limit": SessionLimit,
    "file_not_found": SessionFileNotFound,
    "file_too_large": FileTooLarge,
    "fork_unsupported": ForkUnsupported,
}

_BY_STATUS: dict[int, type[ScratchRunError]] = {
    400: BadRequest,
    401: Unauthorized,
    403: Forbidden,
    409: IdempotencyConflict,
    429: Refused,
    503: Refused,
}


def parse_retry_after(value: str | None) -> float | None:
    """Seconds of a Retry-After header; None when absent or not a number
    (an HTTP date is not sent by ScratchRun servers)."""
    if not value:
        return None
    try:
        seconds = float(value.strip())
    except ValueError:
        return None
    return seconds if seconds >= 0 else None


def from_document(status: int, body: bytes, retry_after: float | None = None) -> ScratchRunError:
    """The exception for an error answer: its status, body and Retry-After.

    A body that is no error document (a proxy's page) still gives an
    exception by status, its text as the message.
    """
    detail: Mapping[str, Any] = {}
    document: Mapping[str, Any] = {}
    try:
        parsed = json.loads(body)
        if isinstance(parsed, dict) and isinstance(parsed.get("error"), dict):
            document = parsed
            detail = parsed["error"]
    except ValueError:
        pass
    return from_detail(status, detail, retry_after, document, body)


def from_detail(
    status: int,
    detail: Mapping[str, Any],
    retry_after: float | None = None,
    document: Mapping[str, Any] | None = None,
    body: bytes = b"",
) -> ScratchRunError:
    """The exception for an error document's ``error`` object."""
    code = str(detail.get("code", ""))
    message = str(detail.get("message", "")) or body.decode("utf-8", "replace").strip()[:500] or f"HTTP {status}"
    cls = _BY_CODE.get(code) or _BY_STATUS.get(status) or (ServerError if status >= 500 else ScratchRunError)
    if status == 503 and not detail.get("reason"):
        # Only a refusal names its reason, and only a refusal ran nothing:
        # a 503 without one (a drain that cut the run short, a proxy whose
        # upstream died mid-request) may have run the code.
        cls = ServerError
    limit = detail.get("limit", 0)
    return cls(
        message,
        status=status,
        code=code,
        reason=str(detail.get("reason", "")),
        field=str(detail.get("field", "")),
        limit=limit if isinstance(limit, int) else 0,
        retry_after=retry_after,
        document=document if document is not None else {"error": dict(detail)},
    )
