"""The package as users get it: `pip install ./clients/python` into a fresh virtualenv (offline:
the in-tree build backend needs nothing from PyPI), imported from outside the source tree, talking
to a live ichido; `pip install -e` too; and `mypy --strict` over the package and over typed
application code using it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGE = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(PACKAGE, "..", "testing"))

from ichido_testing import Server  # noqa: E402


class Packaging(unittest.TestCase):
    def test_pip_install_into_a_virtualenv_and_use_it(self):
        d = tempfile.mkdtemp(prefix="ichido-py-venv-")
        self.addCleanup(shutil.rmtree, d, True)
        venv = os.path.join(d, "venv")
        subprocess.run([sys.executable, "-m", "venv", venv], check=True, capture_output=True)
        py = os.path.join(venv, "bin", "python")
        # Offline (--no-index): the in-tree build backend needs nothing from PyPI.
        pip = subprocess.run(
            [py, "-m", "pip", "install", "--no-index", "--quiet", PACKAGE],
            capture_output=True, text=True, cwd=d,
        )
        self.assertEqual(pip.returncode, 0, pip.stdout + pip.stderr)
        server = Server().start()
        self.addCleanup(server.stop)
        server.admin("PUT", "/v1/ns/pkg/counters/receipts", {"format": "R-{seq:4}", "require_key": True})
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        env.update(ICHIDO_URL=server.url, ICHIDO_TOKEN=server.token("writer", "pkg"), ICHIDO_NS="pkg")
        code = (
            "import ichido, os, sys\n"
            "assert os.path.dirname(ichido.__file__).startswith(sys.prefix), ichido.__file__\n"
            "assert os.path.exists(os.path.join(os.path.dirname(ichido.__file__), 'py.typed'))\n"
            "c = ichido.Client()\n"
            "print(ichido.__version__, c.next_number('receipts', 'form-1').formatted)\n"
        )
        run = subprocess.run([py, "-c", code], capture_output=True, text=True, cwd=d, env=env)
        self.assertEqual(run.returncode, 0, run.stderr)
        self.assertEqual(run.stdout.strip(), "0.1.0 R-0001")

    def test_editable_install_imports_the_source_tree(self):
        d = tempfile.mkdtemp(prefix="ichido-py-venv-")
        self.addCleanup(shutil.rmtree, d, True)
        venv = os.path.join(d, "venv")
        subprocess.run([sys.executable, "-m", "venv", venv], check=True, capture_output=True)
        py = os.path.join(venv, "bin", "python")
        pip = subprocess.run([py, "-m", "pip", "install", "--no-index", "--quiet", "-e", PACKAGE], capture_output=True, text=True, cwd=d)
        self.assertEqual(pip.returncode, 0, pip.stdout + pip.stderr)
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        run = subprocess.run([py, "-c", "import ichido; print(ichido.__file__)"], capture_output=True, text=True, cwd=d, env=env)
        self.assertEqual(run.returncode, 0, run.stderr)
        self.assertEqual(run.stdout.strip(), os.path.join(PACKAGE, "src", "ichido", "__init__.py"))

    def test_mypy_strict_over_the_package_and_typed_code_using_it(self):
        mypy = shutil.which("mypy")
        self.assertIsNotNone(mypy, "mypy is missing: run scripts/install-deps test")
        env = dict(os.environ, MYPYPATH=os.path.join(PACKAGE, "src"))
        d = tempfile.mkdtemp(prefix="ichido-mypy-")
        self.addCleanup(shutil.rmtree, d, True)
        run = subprocess.run(
            [mypy, "--strict", "--cache-dir", d, os.path.join(PACKAGE, "src", "ichido"), os.path.join(HERE, "typing_usage.py")],
            capture_output=True, text=True, env=env, cwd=PACKAGE,
        )
        self.assertEqual(run.returncode, 0, run.stdout + run.stderr)


if __name__ == "__main__":
    unittest.main()
