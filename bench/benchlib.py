"""Pieces the Python bench tools share (bench/one-conn, bench/ab): a server started on a fresh
data directory, and the machine lines of ichido-loadgen and ichido-fsync-baseline. Stdlib only."""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
import urllib.error
import urllib.request
from typing import Dict, List, Optional, Tuple


def fields(line: str) -> Dict[str, str]:
    """key=value pairs of a machine line (ichido-loadgen, ichido-fsync-baseline, a round line)."""
    return dict(f.split("=", 1) for f in line.split() if "=" in f)


def _stat_cpu_seconds(stat: str) -> Tuple[str, float]:
    """(name, user + system CPU seconds) from the text of a /proc/PID[/task/TID]/stat file (the
    name is the one in parentheses, which may itself hold parentheses)."""
    fields_after = stat.rsplit(")", 1)[1].split()
    name = stat[stat.index("(") + 1:stat.rindex(")")]
    return name, (int(fields_after[11]) + int(fields_after[12])) / os.sysconf("SC_CLK_TCK")


class Server:
    """`binary serve` on 127.0.0.1, any port, data in `data`; its output goes to server.out beside
    `data`. With `auth` (bench/ab's default, as deployed) it asks for a token: `token` is the
    admin token its first start wrote (DATA/admin.token), sent with every request() and given to
    the load generator (--token); without, it runs with --no-auth and `token` is "" (one-conn,
    paced and commits: micro-experiments on ichido's store and disk). Errors name `prog`."""

    def __init__(self, prog: str, binary: str, data: str, auth: bool = False) -> None:
        self.prog = prog
        self.token = ""
        self.out = open(os.path.join(os.path.dirname(data), "server.out"), "w+")
        cmd = [binary, "serve", "--listen", "127.0.0.1:0", "--data", data]
        if not auth:
            cmd.append("--no-auth")
        self.proc = subprocess.Popen(cmd, stdout=self.out, stderr=subprocess.STDOUT)
        token_file = os.path.join(data, "admin.token")
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            self.out.seek(0)
            m = re.search(r"listening on (\S+)", self.out.read())
            if m:
                self.url = "http://" + m.group(1)
                if auth:
                    # Written before the server listens (a first start only).
                    self._check_asks_for_token()
                    with open(token_file, encoding="ascii") as f:
                        self.token = f.read().strip()
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"{prog}: the server did not start")

    def request(self, method: str, path: str, body: Optional[dict] = None) -> bytes:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.url + path, data=data, method=method,
                                     headers=self.headers())
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.read()

    def _check_asks_for_token(self) -> None:
        """Measuring "as deployed" means the server checks tokens: a request without one must
        be refused (401), or the measurement would be of something else."""
        req = urllib.request.Request(self.url + "/v1/ns/bench/counters", method="GET")
        try:
            with urllib.request.urlopen(req, timeout=30):
                pass
        except urllib.error.HTTPError as e:
            if e.code == 401:
                return
        self.stop()
        raise RuntimeError(f"{self.prog}: the server does not ask for a token (started with "
                           "--no-auth?); measure with --no-auth to compare without")

    def headers(self) -> Dict[str, str]:
        """A request's headers: JSON, and the token when the server asks for one."""
        h = {"Content-Type": "application/json"}
        if self.token:
            h["Authorization"] = "Bearer " + self.token
        return h

    def metric(self, name: str) -> float:
        text = self.request("GET", "/metrics").decode()
        m = re.search(r"^" + re.escape(name) + r" (\S+)$", text, re.M)
        if not m:
            raise RuntimeError(f"{self.prog}: /metrics has no {name}")
        return float(m.group(1))

    def cpu_seconds(self) -> float:
        """The server process's user + system CPU time so far (from /proc)."""
        with open(f"/proc/{self.proc.pid}/stat", encoding="ascii", errors="replace") as f:
            return _stat_cpu_seconds(f.read())[1]

    def thread_cpu_seconds(self) -> Dict[str, float]:
        """User + system CPU time so far of each of the server's threads, by thread name (the
        server names them: ichido-writer, ichido-io-1, ...; README "Threads on a small machine").
        Threads of one name add up; a thread that ends between the listing and the read is
        left out."""
        out: Dict[str, float] = {}
        task = f"/proc/{self.proc.pid}/task"
        for tid in os.listdir(task):
            try:
                with open(f"{task}/{tid}/stat", encoding="ascii", errors="replace") as f:
                    name, seconds = _stat_cpu_seconds(f.read())
            except FileNotFoundError:
                continue
            out[name] = out.get(name, 0.0) + seconds
        return out

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.out.close()


def start_line(cmd: List[str]) -> subprocess.Popen:
    """Starts a tool that prints a machine line (see finish_line)."""
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish_line(prog: str, cmd: List[str], proc: subprocess.Popen) -> Dict[str, str]:
    """Waits for `proc` (started from `cmd`) and returns the fields of its `system=` line;
    RuntimeError naming `prog` when it failed, printed none or saw errors."""
    stdout, stderr = proc.communicate(timeout=600)
    line = next((l for l in stdout.splitlines() if l.startswith("system=")), None)
    if proc.returncode != 0 or line is None:
        raise RuntimeError(f"{prog}: {os.path.basename(cmd[0])} failed "
                           f"(exit {proc.returncode}): {stderr.strip()}")
    f = fields(line)
    if f.get("errors", "0") != "0":
        raise RuntimeError(f"{prog}: {os.path.basename(cmd[0])} saw errors: {line}")
    return f


def machine_line(prog: str, cmd: List[str]) -> Dict[str, str]:
    """Runs `cmd` to its end: finish_line(start_line(cmd))."""
    return finish_line(prog, cmd, start_line(cmd))
