"""The README's Python recipe, exactly as written there, run as a script against a live ichido."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "testing"))

from ichido_testing import Server, readme_recipes  # noqa: E402


class Readme(unittest.TestCase):
    def test_python_once_and_lock(self):
        code = readme_recipes().get("python/once-and-lock")
        self.assertIsNotNone(code, "README recipe python/once-and-lock is missing")
        server = Server().start()
        self.addCleanup(server.stop)
        env = dict(os.environ, PYTHONPATH=os.path.join(HERE, "..", "src"), ICHIDO_URL=server.url,
                   ICHIDO_TOKEN=server.token("writer", "ops"), ICHIDO_NS="ops")
        with tempfile.TemporaryDirectory() as d:
            script = os.path.join(d, "export.py")
            with open(script, "w", encoding="utf-8") as f:
                f.write(code)
            first = subprocess.run([sys.executable, script], env=env, capture_output=True, text=True, timeout=60)
            self.assertEqual(first.returncode, 0, first.stderr)
            again = subprocess.run([sys.executable, script], env=env, capture_output=True, text=True, timeout=60)
            self.assertEqual(again.returncode, 0, again.stderr)
        printed = json.loads(first.stdout.strip().replace("'", '"'))
        self.assertEqual(printed["rows"], 1200)
        self.assertEqual(again.stdout, first.stdout, "a rerun prints the stored result")
        _, lock = server.admin("GET", "/v1/ns/ops/locks/ledger")
        self.assertFalse(lock["held"], "the lock was released")
        # While another run holds the item, the recipe says so instead of running it again.
        status, body = server.admin("POST", "/v1/ns/ops/once/begin", {"key": "export-2026-04-01-x", "owner": "other"})
        self.assertEqual(body["outcome"], "acquired")
        with tempfile.TemporaryDirectory() as d:
            script = os.path.join(d, "export.py")
            with open(script, "w", encoding="utf-8") as f:
                f.write(code.replace('"export-2026-04-01"', '"export-2026-04-01-x"'))
            busy = subprocess.run([sys.executable, script], env=env, capture_output=True, text=True, timeout=60)
        self.assertEqual(busy.stdout.strip(), "not now: in_progress")


if __name__ == "__main__":
    unittest.main()
