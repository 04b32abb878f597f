"""A request with a body that still reads the server's answer when the
server stops reading the body.

A server refuses a body over its --max-body (413 ``body_too_large``) or a
session file over its largest (413 ``file_too_large``) from the
Content-Length alone, answers at once and closes the connection: the rest
of the body then meets a reset. urllib treats the failed send as the whole
call's failure, so the 413 already in the socket's receive buffer would be
lost and the call would look like a dropped connection (which a call with
an idempotency key would even retry). Here a failed send stops sending and
the answer is read.
"""

from __future__ import annotations

import http.client
import ssl
import urllib.parse
import urllib.request
from typing import Mapping

_CHUNK = 64 << 10


def direct(url: str) -> bool:
    """Whether a request to url goes straight to its host (no proxy from
    the environment): only then is send used; through a proxy the client
    keeps urllib's way, which honours it."""
    host = urllib.parse.urlsplit(url).hostname or ""
    scheme = urllib.parse.urlsplit(url).scheme
    return scheme not in urllib.request.getproxies() or bool(urllib.request.proxy_bypass(host))


def send(method: str, url: str, headers: Mapping[str, str], data: bytes, timeout: float, context: ssl.SSLContext | None) -> http.client.HTTPResponse:
    """Sends method url with data and returns the answer, whatever its
    status. The connection is the answer's (``Connection: close``): closing
    the answer closes it."""
    u = urllib.parse.urlsplit(url)
    conn: http.client.HTTPConnection
    if u.scheme == "https":
        conn = http.client.HTTPSConnection(u.hostname or "", u.port, timeout=timeout, context=context)
    else:
        conn = http.client.HTTPConnection(u.hostname or "", u.port, timeout=timeout)
    try:
        conn.putrequest(method, u.path + ("?" + u.query if u.query else ""), skip_accept_encoding=True)
        for k, v in headers.items():
            conn.putheader(k, v)
        conn.putheader("Content-Length", str(len(data)))
        conn.putheader("Connection", "close")
        conn.endheaders()
        view = memoryview(data)
        try:
            for i in range(0, len(view), _CHUNK):
                conn.send(view[i : i + _CHUNK])
        except (BrokenPipeError, ConnectionResetError):
            # The server answered before it read it all: its answer says why.
            pass
        return conn.getresponse()
    except BaseException:
        conn.close()
        raise
