"""The client against a real `scratchrun serve` (the session fixture)."""

from __future__ import annotations

import hashlib
import logging
import threading
import time
import uuid
from pathlib import Path

import pytest

import scratchrun
from conftest import Server

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def client(server: Server, key: str = "main", **options: object) -> scratchrun.Client:
    return scratchrun.Client(server.url, server.keys[key], **options)  # type: ignore[arg-type]


def test_print(server: Server) -> None:
    r = client(server).run("print('hello from python')", runtime="python3.13")
    assert (r.exit_code, r.stdout, r.outcome) == (0, "hello from python\n", "success")
    assert r.state_purged


def test_env_from_environment(server: Server, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SCRATCHRUN_API_URL", server.url)
    monkeypatch.setenv("SCRATCHRUN_API_KEY", server.keys["main"])
    r = scratchrun.Client().run("echo $GREETING", runtime="bash", env={"GREETING": "hi"})
    assert r.stdout == "hi\n"


def test_returned_png_is_bytes(server: Server, tmp_path: Path) -> None:
    code = (
        "import matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\n"
        "plt.plot([1, 3, 2])\nplt.savefig('/tmp/plot.png')\n"
    )
    r = client(server).run(code, runtime="python3.13", return_files=["/tmp/plot.png"], timeout_ms=30000, memory_mb=512)
    assert r.exit_code == 0, r.stderr
    png = r.files["/tmp/plot.png"]
    assert isinstance(png, bytes) and png.startswith(PNG_MAGIC)
    saved = r.save_files(tmp_path / "out")
    assert saved == [tmp_path / "out" / "plot.png"]
    assert saved[0].read_bytes() == png


def test_binary_and_text_input_files(server: Server) -> None:
    blob = bytes(range(256)) * 4
    code = (
        "import hashlib\n"
        "print(hashlib.sha256(open('/tmp/in.bin', 'rb').read()).hexdigest())\n"
        "print(open('/tmp/in.txt').read())\n"
    )
    r = client(server).run(code, files={"/tmp/in.bin": blob, "/tmp/in.txt": "grüße"})
    assert r.exit_code == 0, r.stderr
    assert r.stdout == hashlib.sha256(blob).hexdigest() + "\ngrüße\n"


def test_timeout_is_124(server: Server) -> None:
    r = client(server).run("import time\ntime.sleep(60)", timeout_ms=1000)
    assert (r.exit_code, r.outcome) == (124, "timeout")
    assert r.facts["timed_out"] is True


def test_memory_limit_is_137(server: Server) -> None:
    info = client(server).runtimes()
    if "memory" in info.get("unenforced_limits", []):
        pytest.skip("this host does not enforce the memory limit")
    r = client(server).run("b = bytearray(400 * 1024 * 1024)\nb[::4096] = b'x' * len(b[::4096])", memory_mb=64)
    assert (r.exit_code, r.outcome) == (137, "memory_limit")
    assert r.facts["memory_limit_hit"] is True


def test_invalid_field_names_it(server: Server) -> None:
    with pytest.raises(scratchrun.BadRequest) as e:
        client(server).run("print(1)", timeout_ms=0)
    assert e.value.status == 400 and e.value.code == "invalid_request"
    assert e.value.field == "limits.timeout_ms"
    assert e.value.message.startswith("limits.timeout_ms: ")


def test_unknown_runtime_names_it(server: Server) -> None:
    with pytest.raises(scratchrun.BadRequest) as e:
        client(server).run("x", runtime="cobol85")
    assert (e.value.field, e.value.reason) == ("runtime", "unknown_runtime")


def test_unauthorized(server: Server) -> None:
    for key in ("", "sr_live_" + "A" * 43):
        with pytest.raises(scratchrun.Unauthorized) as e:
            scratchrun.Client(server.url, key).run("print(1)")
        assert (e.value.status, e.value.code) == (401, "unauthorized")


def test_runtimes(server: Server) -> None:
    info = client(server).runtimes()
    names = [rt["name"] for rt in info["runtimes"]]
    assert "python3.13" in names and "bash" in names


def test_refusal_retried_after_retry_after(server: Server, caplog: pytest.LogCaptureFixture) -> None:
    """A key with concurrency 1 and two calls at once: one of them is
    refused with 429 and Retry-After, waits that long and then runs."""
    caplog.set_level(logging.INFO, logger="scratchrun")
    c = client(server, "one", max_retries=10, max_retry_wait=60)
    results: list[scratchrun.Result] = []
    errors: list[BaseException] = []

    def call(code: str) -> None:
        try:
            results.append(c.run(code, runtime="bash", timeout_ms=6000))
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=call, args=(f"sleep 2; echo {n}",)) for n in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors
    assert sorted(r.stdout for r in results) == ["a\n", "b\n"]
    retried = [r.getMessage() for r in caplog.records if "retrying" in r.getMessage()]
    assert retried, "no call was refused and retried"
    # Every retry waited for the server's Retry-After; at least one was the
    # key's limit (the machine's admission may refuse a call too, with 429).
    assert all(m.startswith("scratchrun: 429 ") and "(retry after " in m for m in retried), retried
    assert any("429 concurrency_limited" in m for m in retried), retried


def test_refusal_over_max_retry_wait_raises(server: Server) -> None:
    """A Retry-After longer than the client waits raises Refused at once, with it."""
    c = client(server, "one", max_retry_wait=0.5)
    done = threading.Event()
    started = threading.Event()

    def long() -> None:
        try:
            for ev in client(server, "one").stream("echo up; sleep 3", runtime="bash", timeout_ms=10000):
                if ev.type == "stdout":
                    started.set()
        finally:
            done.set()
            started.set()

    t = threading.Thread(target=long)
    t.start()
    try:
        # The long call's first output says it runs (and holds the key's one slot).
        started.wait(timeout=60)
        assert not done.is_set(), "the long call ended before its output streamed"
        with pytest.raises(scratchrun.Refused) as e:
            c.run("echo 1", runtime="bash")
        assert (e.value.status, e.value.reason, e.value.limit) == (429, "key_concurrency", 1)
        assert e.value.retry_after is not None and e.value.retry_after > 0.5
    finally:
        t.join(timeout=60)


def test_stream_in_order(server: Server) -> None:
    # The code's sleeps space its writes out, so that each is a chunk of its own.
    code = (
        "import sys, time\n"
        "print('out1', flush=True); time.sleep(1)\n"
        "print('err1', file=sys.stderr, flush=True); time.sleep(1)\n"
        "print('out2', flush=True)\n"
    )
    events = list(client(server).stream(code, runtime="python3.13"))
    types = [e.type for e in events]
    assert types[0] == "started" and types[-1] == "result", types
    assert [e.id for e in events] == list(range(1, len(events) + 1))
    # A write may come in several chunks (python -u writes a print's end
    # apart): runs of one stream are joined before they are compared.
    runs: list[tuple[str, str]] = []
    for e in events:
        if e.type in ("stdout", "stderr"):
            if runs and runs[-1][0] == e.type:
                runs[-1] = (e.type, runs[-1][1] + e.text)
            else:
                runs.append((e.type, e.text))
    assert runs == [("stdout", "out1\n"), ("stderr", "err1\n"), ("stdout", "out2\n")]
    res = events[-1].result
    assert res is not None
    assert (res.exit_code, res.stdout, res.stderr) == (0, "out1\nout2\n", "err1\n")


def test_stream_refusal_before_run_raises(server: Server) -> None:
    with pytest.raises(scratchrun.BadRequest) as e:
        client(server).stream("print(1)", memory_mb=1)
    assert e.value.field == "limits.memory_mb"


def _usage_runs(server: Server, key_name: str) -> list[str]:
    """The usage rows of a key (`scratchrun keys usage --runs`), waiting a
    bounded while for the first, which the server writes as the run ends."""
    for _ in range(50):
        out = server.scratchrun("keys", "usage", "--runs", "--key", key_name, "--db", str(server.db))
        rows = out.strip().split("\n")[1:]
        if rows:
            return rows
        time.sleep(0.2)
    return []


IDEM_CODE = "import time, uuid\ntime.sleep(3)\nprint(uuid.uuid4())\n"


def test_idempotent_retry_after_dropped_connection(server: Server, caplog: pytest.LogCaptureFixture) -> None:
    """A socket timeout shorter than the run drops the connection; the
    client asks again with the same key and gets the first run's result:
    the uuid the code printed once."""
    caplog.set_level(logging.INFO, logger="scratchrun")
    key = str(uuid.uuid4())
    c = client(server, "idem", timeout=1.0, max_retries=60)
    r = c.run(IDEM_CODE, timeout_ms=20000, idempotency_key=key)
    assert r.exit_code == 0, r.stderr
    printed = uuid.UUID(r.stdout.strip())
    assert any("no answer within the timeout" in m.getMessage() for m in caplog.records), "the connection never dropped"
    # Asked again later, the same key and body answer the stored result.
    again = client(server, "idem").run(IDEM_CODE, timeout_ms=20000, idempotency_key=key)
    assert uuid.UUID(again.stdout.strip()) == printed
    assert again.replayed and r.replayed
    assert len(_usage_runs(server, "py-idem")) == 1
    # The same key with another body is refused, naming the header.
    with pytest.raises(scratchrun.IdempotencyConflict) as e:
        client(server, "idem").run("print(2)", idempotency_key=key)
    assert (e.value.status, e.value.code) == (409, "idempotency_key_reused")
    assert "Idempotency-Key" in e.value.message


def test_idempotent_stream_resumes_after_dropped_connection(server: Server, caplog: pytest.LogCaptureFixture) -> None:
    """A stream dropped mid-run (the socket timeout is shorter than the
    quiet part of the run) goes on after its last event: no event twice."""
    caplog.set_level(logging.INFO, logger="scratchrun")
    code = "import time, uuid\nprint(uuid.uuid4(), flush=True)\ntime.sleep(3)\nprint('end')\n"
    c = client(server, "idem-stream", timeout=1.0, max_retries=60, idempotency=True)
    events = list(c.stream(code, timeout_ms=20000))
    ids = [e.id for e in events]
    assert ids == sorted(set(ids)), ids
    assert events[-1].type == "result"
    res = events[-1].result
    assert res is not None and res.exit_code == 0
    streamed = "".join(e.text for e in events if e.type == "stdout")
    assert streamed == res.stdout
    assert any("no answer within the timeout" in m.getMessage() for m in caplog.records), "the connection never dropped"
    assert len(_usage_runs(server, "py-idem-stream")) == 1


def test_async_client(server: Server) -> None:
    import asyncio

    async def main() -> tuple[str, list[str]]:
        async with scratchrun.AsyncClient(server.url, server.keys["main"]) as ac:
            r = await ac.run("print('async')")
            types = [ev.type async for ev in ac.stream("print('s')")]
            return r.stdout, types

    stdout, types = asyncio.run(main())
    assert stdout == "async\n"
    assert types[-1] == "result"


def test_invalid_idempotency_key_names_the_header(server: Server) -> None:
    with pytest.raises(scratchrun.BadRequest) as e:
        client(server).run("print(1)", idempotency_key="has space")
    assert e.value.field == "Idempotency-Key"


def test_body_over_max_body_is_its_413(server: Server) -> None:
    """The server answers a body over --max-body (10 MiB) from its
    Content-Length and stops reading: the client still reads that answer,
    rather than reporting the reset that meets the rest of the body."""
    with pytest.raises(scratchrun.ScratchRunError) as e:
        client(server, max_retries=0).run("x", files={"/tmp/big": b"0" * (12 << 20)})
    assert (e.value.status, e.value.code) == (413, "body_too_large"), repr(e.value)


def test_result_not_replayed_without_a_key(server: Server) -> None:
    assert client(server).run("print(1)").replayed is False
