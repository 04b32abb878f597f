"""Logic of the client that needs no server, and its installation."""

from __future__ import annotations

import http.server
import io
import json
import subprocess
import sys
import threading
import zipfile
from pathlib import Path

import pytest

import scratchrun
from scratchrun.client import request_body
from scratchrun.errors import from_document
from scratchrun.sessions import file_path, session_path
from scratchrun.sse import Message, read_messages

from conftest import CLIENT_ROOT


def test_sse_reader() -> None:
    raw = (
        b": keep-alive\n\n"
        b"id: 1\nevent: started\ndata: {\"elapsed_ms\": 5}\n\n"
        b"id: 2\r\nevent: stdout\r\ndata:{\"text\": \"a\"}\r\n\r\n"
        b"event: multi\ndata: x\ndata: y\n\n"
        b"id: 9\nevent: cut\ndata: never dispatched"
    )
    assert list(read_messages(io.BytesIO(raw))) == [
        Message("1", "started", '{"elapsed_ms": 5}'),
        Message("2", "stdout", '{"text": "a"}'),
        Message("2", "multi", "x\ny"),
    ]


def test_request_body() -> None:
    body = json.loads(
        request_body("c", "bash", {"/a": "t", "/b": b"\x00\xff"}, ["/r"], {"E": "1"}, 2000, None, "none")
    )
    assert body == {
        "runtime": "bash",
        "code": "c",
        "limits": {"timeout_ms": 2000},
        "env": {"E": "1"},
        "files": {"/a": "t"},
        "files_base64": {"/b": "AP8="},
        "return_files": ["/r"],
        "network": "none",
    }
    # Limits left out take the server's defaults: no "limits" at all.
    assert "limits" not in json.loads(request_body("c", "bash", None, None, None, None, None, None))


@pytest.mark.parametrize(
    "status,doc,cls",
    [
        (400, {"code": "invalid_request", "message": "limits.timeout_ms: x", "field": "limits.timeout_ms"}, scratchrun.BadRequest),
        (401, {"code": "unauthorized", "message": "no"}, scratchrun.Unauthorized),
        (429, {"code": "rate_limited", "message": "m", "reason": "key_rate", "limit": 2}, scratchrun.Refused),
        (503, {"code": "draining", "message": "m", "reason": "draining"}, scratchrun.Refused),
        (503, {"code": "draining", "message": "cut short"}, scratchrun.ServerError),
        (502, {"code": "worker_lost", "message": "m"}, scratchrun.WorkerLost),
        (409, {"code": "idempotency_key_reused", "message": "m"}, scratchrun.IdempotencyConflict),
        (409, {"code": "idempotency_unknown", "message": "m"}, scratchrun.IdempotencyConflict),
        (500, {"code": "internal", "message": "m"}, scratchrun.ServerError),
        (404, {"code": "session_not_found", "message": "m"}, scratchrun.SessionNotFound),
        (410, {"code": "session_ended", "message": "m"}, scratchrun.SessionEnded),
        (502, {"code": "session_lost", "message": "m"}, scratchrun.SessionLost),
        (429, {"code": "session_limit", "message": "m", "reason": "key_sessions"}, scratchrun.SessionLimit),
        (404, {"code": "file_not_found", "message": "m"}, scratchrun.SessionFileNotFound),
        (413, {"code": "file_too_large", "message": "m"}, scratchrun.FileTooLarge),
        (409, {"code": "fork_unsupported", "message": "m"}, scratchrun.ForkUnsupported),
    ],
)
def test_errors_by_code(status: int, doc: dict[str, object], cls: type[scratchrun.ScratchRunError]) -> None:
    err = from_document(status, json.dumps({"error": doc}).encode(), 7.0)
    assert type(err) is cls
    assert (err.status, err.code, err.retry_after) == (status, doc["code"], 7.0)
    assert err.field == doc.get("field", "") and err.reason == doc.get("reason", "")
    assert err.limit == doc.get("limit", 0)


def test_session_ended_says_how() -> None:
    doc = {"error": {"code": "session_ended", "message": "m", "ended": {"reason": "idle_ttl", "at": "2026-01-02T03:04:05Z", "state_purged": True}}}
    err = from_document(410, json.dumps(doc).encode())
    assert isinstance(err, scratchrun.SessionEnded) and err.ended is not None
    assert (err.ended.reason, err.ended.at, err.ended.state_purged) == ("idle_ttl", "2026-01-02T03:04:05Z", True)
    assert isinstance(from_document(410, b'{"error":{"code":"session_ended","message":"m"}}'), scratchrun.SessionEnded)


def test_session_routes_escape_each_segment() -> None:
    assert file_path("ses_a", "/tmp/dir with space/é#?.bin") == "/v1/sessions/ses_a/files/tmp/dir%20with%20space/%C3%A9%23%3F.bin"
    assert session_path("a/b?", "/exec") == "/v1/sessions/a%2Fb%3F/exec"
    with pytest.raises(ValueError):
        file_path("ses_a", "tmp/x")


def test_session_request_body_leaves_runtime_out() -> None:
    assert json.loads(request_body("c", None, None, None, None, 500, None, None)) == {"code": "c", "limits": {"timeout_ms": 500}}


def test_error_of_a_page_that_is_no_document() -> None:
    err = from_document(502, b"<html>Bad Gateway</html>")
    assert type(err) is scratchrun.ServerError  # a proxy's 502 is no lost worker
    assert "Bad Gateway" in err.message


def test_pip_installs_offline_in_a_fresh_venv(tmp_path: Path) -> None:
    """`pip install ./clients/python` with no index: the in-tree backend
    needs nothing downloaded."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    pip = subprocess.run(
        [str(venv / "bin" / "pip"), "install", "--no-index", "--no-cache-dir", str(CLIENT_ROOT)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert pip.returncode == 0, pip.stdout + pip.stderr
    out = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import scratchrun, os; print(scratchrun.__version__, os.path.dirname(scratchrun.__file__))"],
        capture_output=True,
        text=True,
        check=True,
        cwd=tmp_path,
        timeout=60,
    ).stdout.split()
    assert out[0] == scratchrun.__version__
    installed = Path(out[1])
    assert installed.is_relative_to(venv) and (installed / "py.typed").exists()


def test_wheel_and_sdist(tmp_path: Path) -> None:
    sys.path.insert(0, str(CLIENT_ROOT / "_build"))
    try:
        import backend  # type: ignore
    finally:
        sys.path.pop(0)
    wheel = tmp_path / backend.build_wheel(str(tmp_path))
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        meta = zf.read(f"scratchrun-{scratchrun.__version__}.dist-info/METADATA").decode()
    assert "scratchrun/client.py" in names and "scratchrun/py.typed" in names
    assert not [n for n in names if "__pycache__" in n]
    assert f"Version: {scratchrun.__version__}\n" in meta
    sdist = backend.build_sdist(str(tmp_path))
    assert sdist == f"scratchrun-{scratchrun.__version__}.tar.gz"


class _Recorder(http.server.BaseHTTPRequestHandler):
    """Answers every request with the server's script and records it."""

    script: list[tuple[int, dict[str, str], bytes]] = []
    seen: list[dict[str, str]] = []

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        type(self).seen.append(dict(self.headers))
        status, headers, body = type(self).script[min(len(type(self).seen), len(type(self).script)) - 1]
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST

    def log_message(self, *args: object) -> None:
        pass


def _serve(script: list[tuple[int, dict[str, str], bytes]]) -> tuple[str, type[_Recorder]]:
    handler = type("Handler", (_Recorder,), {"script": script, "seen": []})
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{srv.server_address[1]}", handler


def test_503_without_a_reason_is_not_retried_without_a_key() -> None:
    # A drain that cut a run short answers 503 with no reason: the code may
    # have run, and only a call with an idempotency key may be sent again.
    url, handler = _serve([(503, {"Content-Type": "application/json"}, b'{"error":{"code":"draining","message":"cut short"}}')])
    client = scratchrun.Client(url=url, api_key="sr_live_x", max_retries=3)
    with pytest.raises(scratchrun.ServerError):
        client.run("echo hi", runtime="bash")
    assert len(handler.seen) == 1


def test_the_key_never_follows_a_redirect() -> None:
    other, elsewhere = _serve([(200, {"Content-Type": "application/json"}, b"{}")])
    url, _ = _serve([(302, {"Location": other + "/v1/exec"}, b"")])
    client = scratchrun.Client(url=url, api_key="sr_live_secret", max_retries=0)
    with pytest.raises(scratchrun.ScratchRunError):
        client.run("echo hi", runtime="bash")
    assert all("sr_live_secret" not in str(h) for h in elsewhere.seen)


def test_session_result_document() -> None:
    doc = {
        "exit_code": 137,
        "stdout": "",
        "stderr": "",
        "outcome": "memory_limit",
        "state_purged": True,
        "files": {"/tmp/a": "AP8="},
        "session": {"id": "ses_x", "expires_at": "t", "interpreter": "restarted", "ended": {"reason": "memory_limit", "at": "t2", "state_purged": True}},
    }
    r = scratchrun.SessionResult.from_document(doc)
    assert (r.exit_code, r.outcome, r.files, r.document) == (137, "memory_limit", {"/tmp/a": b"\x00\xff"}, doc)
    assert (r.session.id, r.session.interpreter, r.session.between_calls_output_bytes) == ("ses_x", "restarted", 0)
    assert r.session.ended is not None and r.session.ended.reason == "memory_limit"
