"""The README's shell recipes, exactly as written there, run with bash against a live ichido, with
the `ichido` under test first on PATH (as `make install` puts it) and ./ichido-data being the
server's data directory (as `make run` makes it)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "clients", "testing"))

from ichido_testing import Server, ichido_binary, readme_recipes  # noqa: E402

RECIPES = readme_recipes()


class ReadmeShell(unittest.TestCase):
    def setUp(self):
        self.server = Server().start()
        self.addCleanup(self.server.stop)
        self.cwd = tempfile.mkdtemp(prefix="ichido-readme-sh-")
        self.addCleanup(shutil.rmtree, self.cwd, True)
        os.symlink(self.server.data_dir, os.path.join(self.cwd, "ichido-data"))
        bin_dir = os.path.join(self.cwd, "bin")
        os.mkdir(bin_dir)
        os.symlink(ichido_binary(), os.path.join(bin_dir, "ichido"))
        self.env = dict(os.environ, PATH=bin_dir + os.pathsep + os.environ["PATH"], ICHIDO_URL=self.server.url)
        self.env.pop("ICHIDO_NS", None)
        self.env["ICHIDO_TOKEN"] = self.server.admin_token

    def script(self, name, text):
        path = os.path.join(self.cwd, name)
        with open(path, "w", encoding="utf-8") as f:
            f.write("#!/bin/sh\n" + text)
        os.chmod(path, 0o755)

    def bash(self, recipe, env=None):
        code = RECIPES.get(recipe)
        self.assertIsNotNone(code, f"README recipe {recipe} is missing")
        return subprocess.run(["bash", "-e", "-c", code], cwd=self.cwd, env=env or self.env, capture_output=True, text=True, timeout=120)

    def test_first_steps(self):
        env = dict(self.env)
        del env["ICHIDO_TOKEN"]  # the recipe sets it from ./ichido-data/admin.token
        r = self.bash("sh/first-steps", env)
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.splitlines()
        self.assertEqual(lines[0], "created counter receipts")
        self.assertEqual(lines[1], "R-0001")
        self.assertRegex(lines[2], r"^\S{20,}$", "a new token, and nothing else")
        status, body = self.server.admin("GET", "/v1/ns/shop/counters/receipts")
        self.assertEqual((status, body["last_value"]), (200, 1))

    def test_once_run_runs_the_export_once(self):
        self.script("nightly-export.sh", "echo exported >> runs.txt\necho exported\n")
        first = self.bash("sh/once-run")
        self.assertEqual(first.returncode, 0, first.stderr)
        self.assertEqual(first.stdout, "exported\n")
        again = self.bash("sh/once-run")
        self.assertEqual(again.returncode, 0, again.stderr)
        self.assertIn("already completed", again.stderr)
        with open(os.path.join(self.cwd, "runs.txt")) as f:
            self.assertEqual(f.read(), "exported\n")

    def test_exit_codes_branch(self):
        self.script("make-invoices.sh", 'echo "made with $*" >> made.txt\n')
        ok = self.bash("sh/exit-codes")
        self.assertEqual(ok.returncode, 0, ok.stderr)
        with open(os.path.join(self.cwd, "made.txt")) as f:
            self.assertRegex(f.read(), r"^made with --fencing-token \d+\n$")
        _, lock = self.server.admin("GET", "/v1/ns/shop/locks/invoices")
        self.assertFalse(lock["held"], "released")
        # Held elsewhere: the else branch, with exit code 75, and the script does not run.
        status, held = self.server.admin("POST", "/v1/ns/shop/locks/invoices/acquire", {"owner": "other-pc", "lease_ms": 60000})
        self.assertTrue(held["acquired"])
        busy = self.bash("sh/exit-codes")
        self.assertEqual(busy.returncode, 0, busy.stderr)
        self.assertIn("invoices are being made elsewhere (exit 75)", busy.stderr)
        with open(os.path.join(self.cwd, "made.txt")) as f:
            self.assertEqual(len(f.read().splitlines()), 1)


class MakeInstall(unittest.TestCase):
    """README: `make install` puts `ichido` on PATH (PREFIX, default /usr/local; DESTDIR)."""

    def test_make_install_into_a_destdir(self):
        dest = tempfile.mkdtemp(prefix="ichido-install-")
        self.addCleanup(shutil.rmtree, dest, True)
        # -o build: install what is built already (make test has just built it).
        r = subprocess.run(["make", "-C", REPO, "-o", "build", "install", f"DESTDIR={dest}", "PREFIX=/opt/ichido"],
                           capture_output=True, text=True, timeout=300)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        installed = os.path.join(dest, "opt", "ichido", "bin", "ichido")
        self.assertTrue(os.access(installed, os.X_OK))
        version = subprocess.run([installed, "--version"], capture_output=True, text=True)
        self.assertEqual(version.returncode, 0)
        self.assertRegex(version.stdout, r"^ichido \d+\.\d+\.\d+ \(SQLite 3\.\d+\.\d+\)")
        self.assertIn("75   lock acquire, lock run: not acquired", subprocess.run([installed, "--help"], capture_output=True, text=True).stdout)
        r = subprocess.run(["make", "-C", REPO, "uninstall", f"DESTDIR={dest}", "PREFIX=/opt/ichido"], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertFalse(os.path.exists(installed))


if __name__ == "__main__":
    unittest.main()
