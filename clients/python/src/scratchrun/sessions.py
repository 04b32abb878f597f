"""Sessions: a sandbox kept across calls (a server run with ``--sessions``).

Its files, processes and, for Python and Node, variables persist from one
call in it to the next, until it is closed, idle past its idle TTL or past
its lifetime (docs/api.md, "Sessions"). ``Client.run`` still gets a fresh
sandbox each call. The calls are Client's (``open_session``, ``sessions``,
``session``, ``run_in_session``...); a Session is one session's handle on them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterator, Mapping, Sequence
from urllib.parse import quote

from .errors import SessionEnd, SessionEnded, SessionNotFound
from .result import Event, Result

if TYPE_CHECKING:
    from .client import Client


@dataclass
class SessionInfo:
    """An open session as the server describes it (POST and GET
    /v1/sessions, a fork's answer).

    ``interpreter`` says what of the interpreter persists between calls
    (``python``, ``node``, ``bash``, ``none``) and ``fork`` what a fork
    copies (``memory``, ``files``, ``none``). Times are RFC 3339 strings,
    as sent; ``document`` is the whole JSON.
    """

    id: str
    runtime: str
    network: str
    limits: dict[str, int]
    idle_ttl_ms: int
    max_lifetime_ms: int
    created_at: str
    last_used_at: str
    expires_at: str
    lifetime_ends_at: str
    state: str
    memory_bytes: int
    interpreter: str
    fork: str
    forked_from: str = ""
    document: dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_document(cls, doc: Mapping[str, Any]) -> SessionInfo:
        """Reads a SessionInfo document."""
        return cls(
            id=str(doc.get("id", "")),
            runtime=str(doc.get("runtime", "")),
            network=str(doc.get("network", "")),
            limits={str(k): int(v) for k, v in (doc.get("limits") or {}).items()},
            idle_ttl_ms=int(doc.get("idle_ttl_ms", 0)),
            max_lifetime_ms=int(doc.get("max_lifetime_ms", 0)),
            created_at=str(doc.get("created_at", "")),
            last_used_at=str(doc.get("last_used_at", "")),
            expires_at=str(doc.get("expires_at", "")),
            lifetime_ends_at=str(doc.get("lifetime_ends_at", "")),
            state=str(doc.get("state", "")),
            memory_bytes=int(doc.get("memory_bytes", 0)),
            interpreter=str(doc.get("interpreter", "")),
            fork=str(doc.get("fork", "")),
            forked_from=str(doc.get("forked_from", "")),
            document=dict(doc),
        )


@dataclass
class SessionCallInfo:
    """What a call in a session says of the session: its ``id``, when it
    now expires, ``interpreter``: ``kept`` (the variables of earlier calls
    are there), ``started`` or ``restarted`` (they are gone); ``ended`` when
    this call ended the session (its memory limit, say), and the bytes its
    processes wrote between calls (dropped)."""

    id: str
    expires_at: str
    interpreter: str = ""
    ended: SessionEnd | None = None
    between_calls_output_bytes: int = 0

    @classmethod
    def from_document(cls, doc: Mapping[str, Any]) -> SessionCallInfo:
        """Reads the ``session`` of a call's result."""
        ended = doc.get("ended")
        return cls(
            id=str(doc.get("id", "")),
            expires_at=str(doc.get("expires_at", "")),
            interpreter=str(doc.get("interpreter", "")),
            ended=SessionEnd.from_document(ended) if isinstance(ended, dict) else None,
            between_calls_output_bytes=int(doc.get("between_calls_output_bytes", 0)),
        )


@dataclass
class SessionResult(Result):
    """A call in a session's result: a Result (``state_purged`` False while
    the session goes on) and ``session``, the session's account."""

    session: SessionCallInfo = field(default_factory=lambda: SessionCallInfo("", ""))

    @classmethod
    def from_document(cls, doc: Mapping[str, Any]) -> SessionResult:
        """Reads the 200 body of POST /v1/sessions/{id}/exec."""
        base = Result.from_document(doc)
        fields = {f: getattr(base, f) for f in base.__dataclass_fields__}
        return cls(**fields, session=SessionCallInfo.from_document(doc.get("session") or {}))


def session_path(session_id: str, rest: str = "") -> str:
    """The route of a session: its id escaped as one path segment."""
    return "/v1/sessions/" + quote(session_id, safe="") + rest


def file_path(session_id: str, path: str) -> str:
    """The route of a session's file at path (absolute in the sandbox),
    each of its segments escaped: a space, ``#`` or ``?`` in a name stays
    in the name, and a ``/`` only ever separates directories."""
    if not path.startswith("/"):
        raise ValueError(f"session file {path!r}: the path must be absolute")
    return session_path(session_id, "/files/" + "/".join(quote(p, safe="") for p in path[1:].split("/")))


class Session:
    """One open session: ``run``, ``stream``, ``read_file``, ``write_file``,
    ``fork``, ``refresh`` and ``close``, each a call of its Client with this id.

    As a context manager it closes the session on leaving (an error
    included), so that its sandbox does not wait out its idle TTL; one
    that has ended already is left as it is::

        with client.open_session("python3.13") as s:
            s.run("x = 41")
            print(s.run("print(x + 1)").stdout)  # 42
    """

    def __init__(self, client: Client, info: SessionInfo) -> None:
        self.client = client
        #: The session as the server last described it: when it opened (or
        #: forked, or was looked up), or at the last refresh().
        self.info = info
        #: How it ended, once close() returned.
        self.end: SessionEnd | None = None

    @property
    def id(self) -> str:
        """The session's id (``ses_...``)."""
        return self.info.id

    def __repr__(self) -> str:
        return f"Session(id={self.id!r}, runtime={self.info.runtime!r})"

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.end is not None:
            return
        try:
            self.close()
        except (SessionEnded, SessionNotFound):
            # Already over (its idle TTL, the server): nothing left to close.
            pass

    def refresh(self) -> SessionInfo:
        """Asks the server for the session as it is now (Client.session)
        and keeps the answer in ``info``; raises SessionEnded once it ended."""
        self.info = self.client.session(self.id).info
        return self.info

    def run(
        self,
        code: str,
        runtime: str | None = None,
        *,
        files: Mapping[str, str | bytes] | None = None,
        return_files: Sequence[str] | None = None,
        env: Mapping[str, str] | None = None,
        timeout_ms: int | None = None,
        idempotency_key: str | None = None,
    ) -> SessionResult:
        """Client.run_in_session with this session."""
        return self.client.run_in_session(
            self.id,
            code,
            runtime,
            files=files,
            return_files=return_files,
            env=env,
            timeout_ms=timeout_ms,
            idempotency_key=idempotency_key,
        )

    def stream(
        self,
        code: str,
        runtime: str | None = None,
        *,
        files: Mapping[str, str | bytes] | None = None,
        return_files: Sequence[str] | None = None,
        env: Mapping[str, str] | None = None,
        timeout_ms: int | None = None,
        idempotency_key: str | None = None,
    ) -> Iterator[Event]:
        """Client.stream_in_session with this session."""
        return self.client.stream_in_session(
            self.id,
            code,
            runtime,
            files=files,
            return_files=return_files,
            env=env,
            timeout_ms=timeout_ms,
            idempotency_key=idempotency_key,
        )

    def read_file(self, path: str) -> bytes:
        """Client.read_session_file with this session."""
        return self.client.read_session_file(self.id, path)

    def write_file(self, path: str, data: str | bytes) -> int:
        """Client.write_session_file with this session."""
        return self.client.write_session_file(self.id, path, data)

    def fork(self, *, idempotency_key: str | None = None) -> Session:
        """Client.fork_session with this session: a new Session."""
        return self.client.fork_session(self.id, idempotency_key=idempotency_key)

    def close(self) -> SessionEnd:
        """Client.close_session with this session; remembered in ``end``."""
        self.end = self.client.close_session(self.id)
        return self.end
