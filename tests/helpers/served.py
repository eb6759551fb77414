"""`codefu serve` as the tests run it: a real server process on a free loopback port, in a temporary folder
of its own ($TMPDIR: the judge's sandboxes and Ray's session live under it), so that every process it
started can be found by that folder's name, and none may be left once it stops."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path

START_TIMEOUT_S = 180  # a local Ray and Serve on 2 busy cores


@dataclass
class Served:
    proc: subprocess.Popen
    url: str
    tmp: str  # the server's $TMPDIR
    log: Path
    token: str | None = None
    stopped_code: int | None = None

    def post(self, path: str, body, token: str | None = "default", timeout: float = 120):
        """(status, JSON answer, headers) of a POST; body may be an object or raw bytes."""
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        request = urllib.request.Request(self.url + path, data=data, method="POST")
        request.add_header("Content-Type", "application/json")
        token = self.token if token == "default" else token
        if token is not None:
            request.add_header("Authorization", f"Bearer {token}")
        return _send(request, timeout)

    def get(self, path: str, token: str | None = "default"):
        request = urllib.request.Request(self.url + path)
        token = self.token if token == "default" else token
        if token is not None:
            request.add_header("Authorization", f"Bearer {token}")
        return _send(request, 60, raw=path == "/metrics")

    def upload(
        self, path: str, declared: int, sent: bytes = b"", token: str | None = "default"
    ) -> socket.socket:
        """A raw connection that has sent a POST's headers (Content-Length `declared`) and the first bytes
        of its body, `sent`, and then says nothing more: a stalled or slow client."""
        url = urllib.parse.urlparse(self.url)
        sock = socket.create_connection((url.hostname, url.port), timeout=60)
        token = self.token if token == "default" else token
        auth = f"Authorization: Bearer {token}\r\n" if token else ""
        head = f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n{auth}"
        sock.sendall(f"{head}Content-Length: {declared}\r\n\r\n".encode() + sent)
        return sock

    def pids(self) -> list[int]:
        """Every live process of the server (`processes_of`)."""
        return processes_of(self.tmp, self.proc.pid if self.proc.poll() is None else None)

    def processes(self) -> list[str]:
        """ "pid: command line" of each live process of the server (`pids`)."""
        out = []
        for pid in self.pids():
            try:
                cmdline = (
                    Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                )
            except OSError:
                continue
            out.append(f"{pid}: {cmdline[:300]}")
        return out

    def running_programs(self) -> list[str]:
        """Programs running in this server's sandboxes now (an idle warm sandbox runs none): processes
        below one of its bwrap processes, other than the sandbox's runner."""
        roots = {int(line.split(":", 1)[0]) for line in self.processes() if "bwrap" in line}
        out = []
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                cmdline = (
                    Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                )
            except OSError:
                continue
            if cmdline.startswith(("/codefu-runner", "/usr/bin/bwrap")) or int(pid) in roots:
                continue
            if _has_ancestor(int(pid), roots):
                out.append(f"{pid}: {cmdline[:200]}")
        return out

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def trouble(self, most: int = 40) -> str:
        """The last `most` warnings, errors and traceback lines of the server and of every Ray process it
        started (the replicas log into Ray's session folder in the server's $TMPDIR, not the server's log)."""
        marks = ("WARNING", "ERROR", "Traceback", "Error:", "Exception")
        lines = []
        for path in sorted(Path(self.tmp).rglob("*")):
            if path.suffix not in (".log", ".err", ".out") or not path.is_file():
                continue
            for line in path.read_text(errors="replace").splitlines():
                if any(m in line for m in marks):
                    lines.append(f"{path.name}: {line[:300]}")
        return "\n".join(lines[-most:])

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 120) -> int:
        if self.stopped_code is None:
            self.proc.send_signal(sig)
            try:
                self.stopped_code = self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.stopped_code = self.proc.wait()
                raise AssertionError(
                    f"codefu serve did not stop on {sig!r}:\n{self.output()[-3000:]}"
                ) from None
        return self.stopped_code

    def left_after_stop(self, timeout: float = 30) -> list[str]:
        """The server's processes still alive `timeout` seconds after it stopped (or none, sooner)."""
        deadline = time.monotonic() + timeout
        while (left := self.processes()) and time.monotonic() < deadline:
            time.sleep(0.5)
        return left


def processes_of(tmp: str, root: int | None = None) -> list[int]:
    """Live processes that belong to a program run with TMPDIR=`tmp`: `root` and all below it (Ray's
    daemons and workers, judge replicas, sandboxes), and any other that carries `tmp` in its command line
    or environment (one that outlived its parent; Ray's workers rename themselves `ray::...`)."""
    children: dict[int, list[int]] = {}
    mine: set[int] = set()
    marker = f"TMPDIR={tmp}".encode()
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        pid = int(name)
        try:
            stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            if stat[0] == "Z":
                continue
            children.setdefault(int(stat[1]), []).append(pid)
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            environ = Path(f"/proc/{pid}/environ").read_bytes()
        except (OSError, IndexError, ValueError):
            continue
        if tmp.encode() in cmdline or marker in environ.split(b"\0"):
            mine.add(pid)
    if root is not None:
        mine.add(root)
    todo = list(mine)
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in mine:
                mine.add(child)
                todo.append(child)
    return sorted(mine)


SPIN_PY = "while True:\n    pass"


def spin_judge_body(time_limit_s: float) -> bytes:
    """A /judge body whose one test spins for its whole time limit."""
    problem = {
        "name": "spin",
        "statement": "",
        "time_limit_s": time_limit_s,
        "tests": [{"input": "", "output": "1"}],
    }
    return json.dumps({"response": f"```python\n{SPIN_PY}\n```", "problem": problem}).encode()


def reply_of(sock: socket.socket, timeout: float) -> str:
    """What the server answers on a raw connection (status line, headers, body) within `timeout`."""
    sock.settimeout(timeout)
    reply = b""
    try:
        while b"}" not in reply and (chunk := sock.recv(65536)):
            reply += chunk
    except TimeoutError:
        pass
    return reply.decode(errors="replace")


def _has_ancestor(pid: int, ancestors: set[int]) -> bool:
    for _ in range(64):
        try:
            pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            return False
        if pid in ancestors:
            return True
        if pid <= 1:
            return False
    return False


def _send(request, timeout: float, raw: bool = False):
    try:
        with urllib.request.urlopen(request, timeout=timeout) as r:
            body = r.read()
            return r.status, (body.decode() if raw else json.loads(body)), _headers(r.headers)
    except urllib.error.HTTPError as e:
        body = e.read()
        try:
            answer = json.loads(body)
        except ValueError:
            answer = body.decode(errors="replace")
        return e.code, answer, _headers(e.headers)


def start_server(*flags: str, token: str | None = None) -> Served:
    """`codefu serve --port 0 FLAGS` started and answering; its log is in its temporary folder."""
    tmp = tempfile.mkdtemp(prefix="cfs-", dir="/tmp")  # short: Ray's socket paths must fit 107 bytes
    os.chmod(tmp, 0o755)  # the sandbox's user must reach the judge's folder inside it
    log = Path(tmp) / "serve.log"
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}  # a Ray of its own
    env |= {"TMPDIR": tmp, "PYTHONUNBUFFERED": "1"}
    if token is not None:
        env["CODEFU_SERVE_TOKEN"] = token
    argv = [sys.executable, "-m", "codefu", "serve", "--port", "0", *flags]
    with open(log, "wb") as f:
        proc = subprocess.Popen(argv, stdout=f, stderr=subprocess.STDOUT, env=env)
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        text = log.read_text(errors="replace")
        for line in text.splitlines():
            if line.startswith("listening on http://"):
                return Served(proc, line.removeprefix("listening on ").strip(), tmp, log, token)
        if proc.poll() is not None:
            raise AssertionError(f"codefu serve exited with {proc.returncode}:\n{text[-3000:]}")
        time.sleep(0.2)
    proc.kill()
    raise AssertionError(f"codefu serve did not start in {START_TIMEOUT_S} s:\n{log.read_text()[-3000:]}")


def cleanup(served: Served) -> None:
    """Stop the server if a test did not, kill what it left (after the test has looked), drop its folder."""
    if served.proc.poll() is None:
        served.proc.kill()
        served.proc.wait()
    for line in served.processes():
        try:
            os.kill(int(line.split(":", 1)[0]), signal.SIGKILL)
        except ProcessLookupError:
            pass
    shutil.rmtree(served.tmp, ignore_errors=True)


def _headers(headers) -> dict[str, str]:
    return {k.lower(): v for k, v in headers.items()}  # HTTP header names are case-insensitive
