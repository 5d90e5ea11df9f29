"""Test harness for the Python client tests (stdlib only): a live ichido and a lossy proxy.

Server runs the ichido binary under test ($ICHIDO_BINARY, else build/ichido) on 127.0.0.1:0 with
a fresh data directory, through tether.sh so that it dies with the test process even if that is
killed; stop() ends it (SIGTERM) and removes the directory. Tests stop it in tearDownClass /
addCleanup, so it also stops when a test fails.

LossyProxy makes failures real (the same contract as harness.mjs): "drop_answer" forwards the
request, reads the server's whole answer (so the server did commit) and then cuts the client's
connection; "drop_request" cuts it before anything reaches the server; "hang" never answers; a
dict {"status", "body", "headers"} is answered by the proxy itself (a fake 503 or 429).
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import urllib.request
from typing import Any, Callable, Dict, List, Optional, Union

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
TETHER = os.path.join(HERE, "tether.sh")


def ichido_binary() -> str:
    path = os.environ.get("ICHIDO_BINARY") or os.path.join(REPO, "build", "ichido")
    if not os.path.exists(path):
        raise RuntimeError(f"ichido binary not found at {path}; build it or set ICHIDO_BINARY")
    return path


class Server:
    def __init__(self, auth: bool = True, args: Optional[List[str]] = None, listen: str = "127.0.0.1:0") -> None:
        """listen: --listen; "localhost:0" serves 127.0.0.1 and ::1 on one port."""
        self.auth = auth
        self.args = args or []
        self.listen = listen
        self.dir = tempfile.mkdtemp(prefix="ichido-py-test-")
        self.data_dir = os.path.join(self.dir, "data")
        self.proc: Optional[subprocess.Popen[bytes]] = None
        self.pid = 0
        self.port = 0
        self.url = ""
        self.admin_token = ""
        self.log = ""

    def start(self) -> "Server":
        args = [TETHER, ichido_binary(), "serve", "--listen", self.listen, "--data", self.data_dir, *self.args]
        if not self.auth:
            args.append("--no-auth")
        log_path = os.path.join(self.dir, "server.log")
        self._log_file = open(log_path, "wb")
        self.proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=self._log_file, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            with open(log_path, encoding="utf-8", errors="replace") as f:
                self.log = f.read()
            pid = re.search(r"tether: pid (\d+)", self.log)
            port = re.search(r"ichido listening on 127\.0\.0\.1:(\d+)", self.log)
            if pid and port:
                self.pid = int(pid.group(1))
                self.port = int(port.group(1))
                self.url = f"http://127.0.0.1:{self.port}"
                if self.auth:
                    with open(os.path.join(self.data_dir, "admin.token"), encoding="utf-8") as f:
                        self.admin_token = f.read().strip()
                return self
            if self.proc.poll() is not None:
                break
            time.sleep(0.01)
        self.kill9()
        raise RuntimeError(f"ichido did not start:\n{self.log}")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None and self.pid:
            try:
                os.kill(self.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            self.proc.wait(timeout=30)
        if self.proc is not None and self.proc.stdin is not None:
            self.proc.stdin.close()
        self._log_file.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def kill9(self) -> None:
        if self.pid:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if self.proc is not None:
            if self.proc.stdin is not None:
                self.proc.stdin.close()
            self.proc.wait(timeout=30)

    def admin(self, method: str, path: str, body: Any = None) -> "tuple[int, Any]":
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method)
        req.add_header("Authorization", f"Bearer {self.admin_token}")
        req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, timeout=30) as res:
                text = res.read().decode()
                return res.status, json.loads(text) if text else None
        except urllib.error.HTTPError as e:
            text = e.read().decode()
            return e.code, json.loads(text) if text else None

    def token(self, role: str, ns: str) -> str:
        status, body = self.admin("POST", "/v1/admin/tokens", {"role": role, "ns": ns})
        if status != 201:
            raise RuntimeError(f"token create: {status} {body}")
        return str(body["token"])


class Tethered:
    """A command run through tether.sh (it dies with this process), with its stdout lines handed
    to on_line(line, self) as they come; kill() sends SIGKILL to the command itself."""

    def __init__(self, argv: List[str], env: Dict[str, str], on_line: Callable[[str, "Tethered"], None] = lambda line, t: None) -> None:
        self.proc = subprocess.Popen([TETHER, *argv], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True)
        self.pid = 0
        self.lines: List[str] = []
        self.err = ""
        self._pid_known = threading.Event()
        self._on_line = on_line
        self._threads = [threading.Thread(target=self._read_out), threading.Thread(target=self._read_err)]
        for t in self._threads:
            t.start()

    def _read_err(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.err += line
            m = re.search(r"tether: pid (\d+)", line)
            if m and not self.pid:
                self.pid = int(m.group(1))
                self._pid_known.set()

    def _read_out(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))
            self._on_line(line.rstrip("\n"), self)

    def kill(self) -> None:
        self._pid_known.wait(10)
        try:
            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    def wait(self, timeout: float = 240) -> int:
        code = self.proc.wait(timeout=timeout)
        for t in self._threads:
            t.join()
        for pipe in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if pipe is not None:
                pipe.close()
        return code

    def last(self) -> Any:
        return json.loads(self.lines[-1]) if self.lines else None


Policy = Callable[[Dict[str, Any]], Union[str, Dict[str, Any]]]


def _read_message(sock: socket.socket, buf: bytearray) -> Optional[bytes]:
    """Reads one HTTP/1.1 message (head + Content-Length body) from sock into/through buf."""
    while True:
        end = buf.find(b"\r\n\r\n")
        if end >= 0:
            head = bytes(buf[:end]).decode("latin-1")
            m = re.search(r"\r\ncontent-length:\s*(\d+)", head, re.I)
            total = end + 4 + (int(m.group(1)) if m else 0)
            if len(buf) >= total:
                msg = bytes(buf[:total])
                del buf[:total]
                return msg
        chunk = sock.recv(65536)
        if not chunk:
            return None
        buf.extend(chunk)


class LossyProxy:
    """``policy(req)`` decides per request; req = {"method", "path", "body" (JSON or None), "n"}."""

    def __init__(self, upstream_port: int, policy: Policy = lambda req: "pass") -> None:
        self.upstream_port = upstream_port
        self.policy = policy
        self.log: List[Dict[str, Any]] = []
        self._mu = threading.Lock()
        self._n = 0
        self._sockets: List[socket.socket] = []
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def dropped(self, part: str) -> List[Dict[str, Any]]:
        with self._mu:
            return [e for e in self.log if e["action"] == "drop_answer" and part in e["path"]]

    def requests(self, part: str) -> List[Dict[str, Any]]:
        with self._mu:
            return [e for e in self.log if part in e["path"]]

    def close(self) -> None:
        self._closed = True
        self._listener.close()
        with self._mu:
            for s in self._sockets:
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                s.close()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            with self._mu:
                self._sockets.append(client)
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        upstream: Optional[socket.socket] = None
        inbuf, upbuf = bytearray(), bytearray()
        try:
            while True:
                msg = _read_message(client, inbuf)
                if msg is None:
                    return
                head, _, raw = msg.partition(b"\r\n\r\n")
                method, path = head.decode("latin-1").split(" ", 2)[:2]
                try:
                    body = json.loads(raw.decode("utf-8")) if raw else None
                except ValueError:
                    body = None
                with self._mu:
                    self._n += 1
                    n = self._n
                action = self.policy({"method": method, "path": path, "body": body, "n": n})
                tag = f"fake_{action['status']}" if isinstance(action, dict) else action
                with self._mu:
                    self.log.append({"method": method, "path": path, "body": body, "action": tag})
                if action == "drop_request":
                    return
                if action == "hang":
                    while client.recv(65536):
                        pass
                    return
                if isinstance(action, dict):
                    text = json.dumps(action.get("body", {})).encode()
                    extra = "".join(f"{k}: {v}\r\n" for k, v in action.get("headers", {}).items())
                    client.sendall(
                        f"HTTP/1.1 {action['status']} X\r\nContent-Type: application/json\r\n{extra}"
                        f"Content-Length: {len(text)}\r\n\r\n".encode() + text
                    )
                    continue
                if upstream is None:
                    upstream = socket.create_connection(("127.0.0.1", self.upstream_port))
                    with self._mu:
                        self._sockets.append(upstream)
                upstream.sendall(msg)
                answer = _read_message(upstream, upbuf)
                if answer is None:
                    return
                if action == "drop_answer":
                    return  # the server answered: it committed; the client never hears it
                client.sendall(answer)
        except OSError:
            return
        finally:
            client.close()
            if upstream is not None:
                upstream.close()


def flaky_for_keys(
    rand: random.Random,
    suffix: str,
    drop_answer: float = 0.15,
    drop_request: float = 0.05,
    fake_503: float = 0.05,
    max_per_key: int = 2,
) -> Policy:
    """Requests whose path ends with ``suffix`` fail with the given chances (answer lost after the
    commit, request lost before it, a fake 503), never more than ``max_per_key`` times in all for
    one key: a client that retries 4 times always gets through, even when other clients send the
    same key at the same time. (Counting failures in a row instead let one client's success reset
    the count between another client's failures: three clients on one key could see a fourth
    failure, and the VBA seed test failed so once.)"""
    failures: Dict[Any, int] = {}
    mu = threading.Lock()

    def policy(req: Dict[str, Any]) -> Union[str, Dict[str, Any]]:
        if not req["path"].endswith(suffix):
            return "pass"
        key = (req["body"] or {}).get("key")
        with mu:
            n = failures.get(key, 0)
            if n >= max_per_key:
                return "pass"
            r = rand.random()
            action: Union[str, Dict[str, Any]] = "pass"
            if r < drop_answer:
                action = "drop_answer"
            elif r < drop_answer + drop_request:
                action = "drop_request"
            elif r < drop_answer + drop_request + fake_503:
                action = {"status": 503, "body": {"error": {"code": "store_unavailable", "message": "test proxy", "details": {}}}}
            if action != "pass":
                failures[key] = n + 1
            return action

    return policy


def readme_recipes(path: Optional[str] = None) -> Dict[str, str]:
    """The README's code blocks marked <!-- recipe: NAME --> (the line before the fence), by NAME:
    the tests run them as written."""
    with open(path or os.path.join(REPO, "README.md"), encoding="utf-8") as f:
        text = f.read()
    return {m.group(1): m.group(2) for m in re.finditer(r"<!-- recipe: (\S+) -->\n```\w*\n(.*?)\n```", text, re.S)}


def mail_message_ids(count: int = 100) -> List[str]:
    """Message-IDs as shared mailboxes see them: <, @, /, +, spaces, quotes, Japanese."""
    kinds = [
        "<CAF=x/y+z{i}@mail.example.co.jp>",
        "<{i}.受付.請求書@社内.example.jp>",
        '<reply {i} "quoted" +tag/path@example.com>',
        "<ｆｕｌｌ＿ｗｉｄｔｈ-{i}@例え.jp>",
    ]
    return [kinds[i % len(kinds)].format(i=i) for i in range(count)]
