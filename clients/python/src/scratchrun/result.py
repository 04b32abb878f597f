"""The result of a run and the events of a streamed one."""

from __future__ import annotations

import base64
import os
from dataclasses import dataclass, field
from pathlib import PurePosixPath, Path
from typing import Any, Literal, Mapping

from .errors import ScratchRunError


@dataclass
class Result:
    """How a run ended, as the server's result document has it.

    ``files`` are the returned files, decoded from base64 to bytes, by their
    sandbox path. ``outcome`` is ``success``, ``nonzero_exit``, ``timeout``,
    ``memory_limit`` or ``machine_memory``; ``facts`` says what the note
    says, as data (see docs/api.md). ``document`` is the whole JSON document.
    """

    exit_code: int
    stdout: str
    stderr: str
    outcome: str
    note: str
    facts: dict[str, Any]
    files: dict[str, bytes]
    execution_ms: int = 0
    state_purged: bool = False
    #: True when the server answered from its idempotency store (header
    #: Idempotency-Replayed): the result of an earlier request with the same key.
    replayed: bool = False
    document: dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_document(cls, doc: Mapping[str, Any]) -> Result:
        """Reads a result document (the 200 body of POST /v1/exec)."""
        files = {path: base64.b64decode(data) for path, data in (doc.get("files") or {}).items()}
        return cls(
            exit_code=int(doc.get("exit_code", 0)),
            stdout=str(doc.get("stdout", "")),
            stderr=str(doc.get("stderr", "")),
            outcome=str(doc.get("outcome", "")),
            note=str(doc.get("note", "")),
            facts=dict(doc.get("facts") or {}),
            files=files,
            execution_ms=int(doc.get("execution_ms", 0)),
            state_purged=bool(doc.get("state_purged", False)),
            document=dict(doc),
        )

    def save_files(self, directory: str | os.PathLike[str] = ".") -> list[Path]:
        """Writes the returned files into directory by base name, as
        ``scratchrun exec`` does, and returns their paths. Only the base
        name of a sandbox path is used, so no file lands outside directory."""
        out = []
        root = Path(directory)
        root.mkdir(parents=True, exist_ok=True)
        for sandbox_path, data in self.files.items():
            name = PurePosixPath(sandbox_path).name
            if name in ("", ".", "..") or "\\" in name:
                raise ValueError(f"returned file {sandbox_path!r}: no base name to save it as")
            target = root / name
            target.write_bytes(data)
            out.append(target)
        return out


EventType = Literal["started", "stdout", "stderr", "result", "error"]


@dataclass
class Event:
    """One event of a streamed run (POST /v1/exec with Accept:
    text/event-stream), in the order the server sent them.

    - ``started``: the sandbox runs the code; ``elapsed_ms`` since the server got the call.
    - ``stdout`` / ``stderr``: ``text``, a chunk as it was written.
    - ``result``: ``result``, the run's Result; the last event.
    - ``error``: ``error``, the failure that ended the run after the stream
      began (a ScratchRunError); the last event.
    """

    type: EventType
    id: int = 0
    text: str = ""
    elapsed_ms: int = 0
    result: Result | None = None
    error: ScratchRunError | None = None
    data: dict[str, Any] = field(default_factory=dict, repr=False)
