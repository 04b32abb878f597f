"""Client of the ScratchRun API: run untrusted code in fresh sandboxes.

    import scratchrun
    client = scratchrun.Client()  # SCRATCHRUN_API_URL, SCRATCHRUN_API_KEY
    result = client.run("print(1)", runtime="python3.13")
    print(result.stdout)

See clients/python/README.md and docs/api.md.
"""

from ._version import __version__
from .aio import AsyncClient
from .client import DEFAULT_URL, Client
from .errors import (
    BadRequest,
    ConnectionLost,
    FileTooLarge,
    Forbidden,
    ForkUnsupported,
    IdempotencyConflict,
    Refused,
    ScratchRunError,
    ServerError,
    SessionEnd,
    SessionEnded,
    SessionFileNotFound,
    SessionLimit,
    SessionLost,
    SessionNotFound,
    Unauthorized,
    WorkerLost,
)
from .result import Event, EventType, Result
from .sessions import Session, SessionCallInfo, SessionInfo, SessionResult

__all__ = [
    "AsyncClient",
    "BadRequest",
    "Client",
    "ConnectionLost",
    "DEFAULT_URL",
    "Event",
    "EventType",
    "FileTooLarge",
    "Forbidden",
    "ForkUnsupported",
    "IdempotencyConflict",
    "Refused",
    "Result",
    "ScratchRunError",
    "ServerError",
    "Session",
    "SessionCallInfo",
    "SessionEnd",
    "SessionEnded",
    "SessionFileNotFound",
    "SessionInfo",
    "SessionLimit",
    "SessionLost",
    "SessionNotFound",
    "SessionResult",
    "Unauthorized",
    "WorkerLost",
    "__version__",
]
