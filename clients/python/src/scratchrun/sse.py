"""A reader of server-sent events (the WHATWG EventSource format) from a
binary stream: what POST /v1/exec answers with Accept: text/event-stream."""

from __future__ import annotations

from dataclasses import dataclass
from typing import IO, Iterator


@dataclass
class Message:
    """One dispatched event: its ``id`` ("" when it had none), ``event``
    name ("message" when it had none) and ``data`` (data lines joined by
    newlines)."""

    id: str
    event: str
    data: str


def read_messages(stream: IO[bytes]) -> Iterator[Message]:
    """Yields the events of stream as they complete (at each blank line).

    Comment lines (``: keep-alive``) are skipped; an event cut off by the
    end of the stream is dropped, as EventSource drops it.
    """
    ident = ""
    event = ""
    data: list[str] = []
    has_data = False
    while True:
        raw = stream.readline()
        if not raw:
            return
        line = raw.decode("utf-8", "replace").rstrip("\r\n")
        if line == "":
            if has_data:
                yield Message(ident, event or "message", "\n".join(data))
            event, data, has_data = "", [], False
            continue
        if line.startswith(":"):
            continue
        name, sep, value = line.partition(":")
        if sep and value.startswith(" "):
            value = value[1:]
        if name == "data":
            data.append(value)
            has_data = True
        elif name == "event":
            event = value
        elif name == "id" and "\0" not in value:
            # The last event ID persists across events, as EventSource keeps it.
            ident = value
