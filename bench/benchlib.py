"""Pieces the Python bench tools share (bench/one-conn, bench/ab): a server started on a fresh
data directory, and the machine lines of ichido-loadgen and ichido-fsync-baseline. Stdlib only."""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
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
    """`binary serve --no-auth` on 127.0.0.1, any port, data in `data`; its output goes to
    server.out beside `data`. Errors name `prog` (the tool). Without a token on purpose: the tools
    using it (one-conn, paced, ab, commits) are micro-experiments on ichido itself; bench/run
    compares the systems with authentication on, as deployed."""

    def __init__(self, prog: str, binary: str, data: str) -> None:
        self.prog = prog
        self.out = open(os.path.join(os.path.dirname(data), "server.out"), "w+")
        self.proc = subprocess.Popen([binary, "serve", "--listen", "127.0.0.1:0", "--data", data,
                                      "--no-auth"], stdout=self.out, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            self.out.seek(0)
            m = re.search(r"listening on (\S+)", self.out.read())
            if m:
                self.url = "http://" + m.group(1)
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"{prog}: the server did not start")

    def request(self, method: str, path: str, body: Optional[dict] = None) -> bytes:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.url + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.read()

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
