"""A real `scratchrun serve` on loopback for the client's tests.

The binary is $SCRATCHRUN_BIN, else built from this checkout with
`go build ./cmd/scratchrun`. The server gets a throwaway --db with keys
from `scratchrun keys create` and offers sessions (--sessions), and is
stopped by SIGTERM at the end: its drain ends any sandbox still running
(an open session's included), and the pytest session fails if it does
not exit cleanly or leaves a process it started. The tests need root (sandboxes) and the installed images,
as the Go tests that start the binary do.
"""

from __future__ import annotations

import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pytest

HERE = Path(__file__).resolve().parent
CLIENT_ROOT = HERE.parent
REPO = CLIENT_ROOT.parent.parent

# The package under test is this checkout's, not an installed copy.
sys.path.insert(0, str(CLIENT_ROOT / "src"))

#: The keys of the session tests, one each.
SESSION_KEYS = ("ses-life", "ses-get", "ses-files", "ses-fork", "ses-idem", "ses-limit", "ses-stream")
SESSIONS_PER_KEY = 2

_KEY_LINE = re.compile(r"^sr_[A-Za-z0-9_-]+$")
_LISTENING = re.compile(r"listening on (http://127\.0\.0\.1:\d+)")


@dataclass
class Server:
    """The running server: its URL, database and keys by name."""

    url: str
    binary: str
    db: Path
    keys: dict[str, str]
    logs: list[str]

    def scratchrun(self, *args: str) -> str:
        """Runs the binary with args and returns its stdout (failing on a nonzero exit)."""
        p = subprocess.run([self.binary, *args], capture_output=True, text=True, timeout=120)
        assert p.returncode == 0, f"scratchrun {' '.join(args)}: exit {p.returncode}: {p.stderr}"
        return p.stdout


def _binary(tmp: Path) -> str:
    given = os.environ.get("SCRATCHRUN_BIN")
    if given:
        return given
    go = shutil.which("go") or "/usr/local/go/bin/go"
    out = tmp / "scratchrun"
    subprocess.run([go, "build", "-o", str(out), "./cmd/scratchrun"], cwd=REPO, check=True, timeout=600)
    return str(out)


def _create_key(binary: str, db: Path, name: str, *extra: str) -> str:
    p = subprocess.run(
        [binary, "keys", "create", "--name", name, "--db", str(db), *extra], capture_output=True, text=True, timeout=120
    )
    assert p.returncode == 0, f"keys create: exit {p.returncode}: {p.stderr}"
    key = p.stdout.rstrip("\n").split("\n")[-1]
    assert _KEY_LINE.match(key), f"last line of keys create is {key!r}, not a key alone"
    return key


def _stat(pid: int) -> tuple[int, str, str] | None:
    """(ppid, state, start time) of a process, None when it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2 :].split()
    return int(fields[1]), fields[0], fields[19]


def _descendants(root: int) -> dict[int, str]:
    """The live descendants of root, by pid, with their start times (so
    that a pid used again is not taken for the same process)."""
    parent: dict[int, int] = {}
    start: dict[int, str] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (st := _stat(int(entry))) is not None and st[1] != "Z":
            parent[int(entry)], start[int(entry)] = st[0], st[2]
    out: dict[int, str] = {}
    frontier = [root]
    while frontier:
        p = frontier.pop()
        for child, pp in parent.items():
            if pp == p and child not in out:
                out[child] = start[child]
                frontier.append(child)
    return out


def _left(procs: dict[int, str]) -> list[int]:
    """Those of procs still alive (a zombie is not: it holds nothing)."""
    return [pid for pid, t in procs.items() if (st := _stat(pid)) is not None and st[2] == t and st[1] != "Z"]


@pytest.fixture(scope="session")
def server() -> Iterator[Server]:
    if os.geteuid() != 0:
        pytest.skip("the client's tests start sandboxes: run them as root (scripts/test.sh does)")
    with tempfile.TemporaryDirectory(prefix="scratchrun-py-") as d:
        tmp = Path(d)
        binary = _binary(tmp)
        db = tmp / "keys.db"
        keys = {
            "main": _create_key(binary, db, "py-main"),
            # One call in flight at a time: a second one is refused with 429.
            "one": _create_key(binary, db, "py-one", "--concurrency", "1"),
            # Only the idempotency tests use these, so that their usage rows are theirs.
            "idem": _create_key(binary, db, "py-idem"),
            "idem-stream": _create_key(binary, db, "py-idem-stream"),
            # The session tests' (tests/test_sessions.py): each test its own
            # key, so that the key's maximum of open sessions is its own.
            **{name: _create_key(binary, db, "py-" + name) for name in SESSION_KEYS},
        }
        # Sessions on (POST /v1/exec is the same with them), at most
        # SESSIONS_PER_KEY open per key: the limit's test opens that many.
        env = dict(os.environ, SCRATCHRUN_SESSIONS_PER_KEY=str(SESSIONS_PER_KEY))
        proc = subprocess.Popen(
            [binary, "serve", "--addr", "127.0.0.1:0", "--db", str(db), "--sessions"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        logs: list[str] = []
        found: queue.Queue[str] = queue.Queue(maxsize=1)

        def read_stderr() -> None:
            assert proc.stderr is not None
            for line in proc.stderr:
                logs.append(line)
                m = _LISTENING.search(line)
                if m and found.empty():
                    found.put(m.group(1))

        reader = threading.Thread(target=read_stderr, daemon=True)
        reader.start()
        try:
            try:
                url = found.get(timeout=120)
            except queue.Empty:
                pytest.fail("scratchrun serve did not say where it listens:\n" + "".join(logs))
            yield Server(url=url, binary=binary, db=db, keys=keys, logs=logs)
        finally:
            # Whatever the server started (helpers, sandboxes) must end with it.
            children = _descendants(proc.pid)
            proc.send_signal(signal.SIGTERM)
            try:
                code = proc.wait(timeout=90)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                pytest.fail("scratchrun serve did not exit after SIGTERM:\n" + "".join(logs))
            reader.join(timeout=10)
            assert code == 0, f"scratchrun serve exited {code}:\n" + "".join(logs)
            assert not _left(children), f"processes of scratchrun serve left after it exited: {_left(children)}"
