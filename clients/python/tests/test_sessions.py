"""Sessions against the real `scratchrun serve --sessions` (the session fixture)."""

from __future__ import annotations

import hashlib
import logging
import uuid

import pytest

import scratchrun
from conftest import SESSIONS_PER_KEY, Server


def client(server: Server, key: str, **options: object) -> scratchrun.Client:
    return scratchrun.Client(server.url, server.keys[key], **options)  # type: ignore[arg-type]


def test_session_keeps_state_and_closes(server: Server) -> None:
    """Variables persist from one call to the next; leaving the with block
    closes the session, and a call after that says how it ended."""
    c = client(server, "ses-life")
    with c.open_session("python3.13", idle_ttl_ms=60000) as s:
        assert s.id.startswith("ses_") and s.info.idle_ttl_ms == 60000 and s.info.interpreter == "python"
        assert [i.id for i in c.sessions()] == [s.id]
        first = s.run("x = 41")
        assert first.exit_code == 0 and first.state_purged is False and first.session.id == s.id
        r = s.run("print(x + 1)")
        assert (r.exit_code, r.stdout, r.session.interpreter) == (0, "42\n", "kept")
        assert isinstance(r, scratchrun.SessionResult) and r.session.expires_at
        # Another runtime in the same sandbox: the file the Python call wrote is there.
        s.run("open('/tmp/from-python', 'w').write('py')")
        assert s.run("cat /tmp/from-python", runtime="bash").stdout == "py"
    assert s.end is not None and (s.end.reason, s.end.state_purged) == ("deleted", True)
    assert c.sessions() == []
    with pytest.raises(scratchrun.SessionEnded) as e:
        c.run_in_session(s.id, "print(x)")
    assert (e.value.status, e.value.code) == (410, "session_ended")
    assert e.value.ended is not None and e.value.ended.reason == "deleted"
    with pytest.raises(scratchrun.SessionEnded):
        c.close_session(s.id)
    # Leaving the block of a session that ended already raises nothing.
    with scratchrun.Session(c, s.info):
        pass


def test_session_not_found_for_another_key(server: Server) -> None:
    with client(server, "ses-life").open_session("bash") as s:
        other = client(server, "main")
        for call in (
            lambda: other.run_in_session(s.id, "true"),
            lambda: other.read_session_file(s.id, "/tmp/x"),
            lambda: other.fork_session(s.id),
            lambda: other.close_session(s.id),
        ):
            with pytest.raises(scratchrun.SessionNotFound) as e:
                call()
            assert (e.value.status, e.value.code) == (404, "session_not_found")
        # The owner's session was untouched by all of that.
        assert s.run("echo still").stdout == "still\n"


def test_session_look_up(server: Server) -> None:
    """GET /v1/sessions/{id}: the key's open session as it is now; another
    key's is not found; an ended one says how it ended."""
    c = client(server, "ses-get")
    with c.open_session("python3.13", idle_ttl_ms=60000) as s:
        found = c.session(s.id)
        assert isinstance(found, scratchrun.Session) and found.id == s.id
        info = found.info
        assert (info.runtime, info.idle_ttl_ms, info.interpreter, info.state) == ("python3.13", 60000, "python", "idle")
        assert info.expires_at and info.memory_bytes > 0
        # A handle from the look-up is the session's: its variables are there.
        s.run("x = 41")
        assert found.run("print(x + 1)").stdout == "42\n"
        before = s.info
        assert s.refresh() is s.info and s.info is not before and s.info.id == s.id

        with pytest.raises(scratchrun.SessionNotFound) as nf:
            client(server, "main").session(s.id)
        assert (nf.value.status, nf.value.code) == (404, "session_not_found")
    with pytest.raises(scratchrun.SessionEnded) as e:
        c.session(s.id)
    assert (e.value.status, e.value.code) == (410, "session_ended")
    assert e.value.ended is not None and e.value.ended.reason == "deleted"
    with pytest.raises(scratchrun.SessionEnded):
        s.refresh()


def test_session_files_binary_at_escaped_paths(server: Server) -> None:
    """Bytes go in and out exactly, at a path whose segments need escaping
    (a space, #, ?, a non-ASCII letter), and the code in the session sees them."""
    blob = bytes(range(256)) * 64
    path = "/tmp/dir with space/é#?.bin"
    with client(server, "ses-files").open_session("python3.13") as s:
        assert s.write_file(path, blob) == len(blob)
        assert s.read_file(path) == blob
        r = s.run(f"import hashlib\nprint(hashlib.sha256(open({path!r}, 'rb').read()).hexdigest())")
        assert r.stdout == hashlib.sha256(blob).hexdigest() + "\n", r.stderr
        s.write_file("/tmp/text.txt", "grüße")
        assert s.read_file("/tmp/text.txt") == "grüße".encode()
        s.run("open('/tmp/made.bin', 'wb').write(bytes([0, 255, 10, 13]))")
        assert s.read_file("/tmp/made.bin") == b"\x00\xff\n\r"

        with pytest.raises(scratchrun.SessionFileNotFound) as nf:
            s.read_file("/tmp/none")
        assert (nf.value.status, nf.value.code) == (404, "file_not_found")
        # Over the server's largest file (8 MiB by default): nothing written.
        with pytest.raises(scratchrun.FileTooLarge) as big:
            s.write_file("/tmp/big.bin", b"\x00" * (9 << 20))
        assert (big.value.status, big.value.code) == (413, "file_too_large")
        with pytest.raises(scratchrun.SessionFileNotFound):
            s.read_file("/tmp/big.bin")
        with pytest.raises(ValueError):
            s.read_file("tmp/relative")


def test_session_fork_copies_files(server: Server) -> None:
    c = client(server, "ses-fork")
    with c.open_session("bash") as parent:
        parent.write_file("/tmp/state", "parent")
        with parent.fork() as child:
            assert child.id != parent.id and child.info.forked_from == parent.id
            assert child.read_file("/tmp/state") == b"parent"
            child.write_file("/tmp/state", "child")
            assert parent.read_file("/tmp/state") == b"parent"
            assert sorted(i.id for i in c.sessions()) == sorted([parent.id, child.id])


def test_session_idempotency_keys(server: Server) -> None:
    """A key on the POSTs: the same open answers the same session, the
    same call in it runs once (a counter in the session says so)."""
    c = client(server, "ses-idem")
    key = str(uuid.uuid4())
    with c.open_session("python3.13", idempotency_key=key) as s:
        again = c.open_session("python3.13", idempotency_key=key)
        assert again.id == s.id
        assert len(c.sessions()) == 1
        s.run("n = 0")
        call = str(uuid.uuid4())
        first = s.run("n += 1\nprint(n)", idempotency_key=call)
        second = s.run("n += 1\nprint(n)", idempotency_key=call)
        assert (first.stdout, first.replayed) == ("1\n", False)
        assert (second.stdout, second.replayed) == ("1\n", True)
        assert second.session.id == s.id
        assert s.run("print(n)").stdout == "1\n"
        # Client(idempotency=True) sends a key of its own on each POST.
        auto = client(server, "ses-idem", idempotency=True)
        assert auto.run_in_session(s.id, "n += 1\nprint(n)").stdout == "2\n"


def test_session_limit_is_not_retried(server: Server, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="scratchrun")
    c = client(server, "ses-limit", max_retries=5)
    opened = [c.open_session("bash") for _ in range(SESSIONS_PER_KEY)]
    try:
        with pytest.raises(scratchrun.SessionLimit) as e:
            c.open_session("bash")
        assert isinstance(e.value, scratchrun.Refused)
        assert (e.value.status, e.value.code, e.value.reason) == (429, "session_limit", "key_sessions")
        assert not [r for r in caplog.records if "retrying" in r.getMessage()]
    finally:
        for s in opened:
            s.close()
    # Closed, they make room again.
    c.open_session("bash").close()


def test_session_stream(server: Server) -> None:
    with client(server, "ses-stream").open_session("python3.13") as s:
        s.run("greeting = 'hi'")
        events = list(s.stream("import time\nprint(greeting, flush=True)\ntime.sleep(0.5)\nprint('end')"))
        assert [e.type for e in events][0] == "started" and events[-1].type == "result"
        res = events[-1].result
        assert isinstance(res, scratchrun.SessionResult)
        assert (res.stdout, res.session.id) == ("hi\nend\n", s.id)
        assert "".join(e.text for e in events if e.type == "stdout") == "hi\nend\n"
