"""Every curl example in the README, sent as written against a live ichido, in README order.

Each ```sh block's `NAME=value` lines and `curl` commands (with their `\\` continuation lines) are
run with bash; the lines between them (answers shown as examples, comments) are not. Two
substitutions make the examples runnable: the README's `http://127.0.0.1:7878` becomes the test
server's address, and a `"token": N` in a request becomes the token the previous answer of that
kind really carried (the README shows 42 and 7). Every answer must be 2xx, and the answer the README
shows after the command (the next `{...}` line, in a comment or not, or the ```json block that
follows) must have exactly the same fields. The server records each answer (ICHIDO_CONTRACT_LOG),
and the openapi_contract test checks them against docs/openapi.yaml.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
import sys
import unittest
from typing import List, Optional, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "clients", "testing"))

from ichido_testing import Server, ichido_binary, readme_recipes  # noqa: E402

README_URL = "http://127.0.0.1:7878"


def curl_examples(path: Optional[str] = None) -> List[Tuple[List[str], str, Optional[dict]]]:
    """(assignments in force, the curl command, the answer the README shows or None), in order."""
    with open(path or os.path.join(REPO, "README.md"), encoding="utf-8") as f:
        text = f.read()
    out = []
    for m in re.finditer(r"```sh\n(.*?)\n```(?:\n```json\n(.*?)\n```)?", text, re.S):
        lines = m.group(1).split("\n")
        json_after = m.group(2)
        assigns: List[str] = []
        i = 0
        while i < len(lines):
            line = lines[i]
            if re.match(r"^[A-Z_]+=", line):
                assigns.append(line.split("  #")[0].strip())
            elif line.startswith("curl "):
                cmd = line
                while cmd.rstrip().endswith("\\") and i + 1 < len(lines):
                    i += 1
                    cmd = cmd.rstrip()[:-1] + " " + lines[i].strip()
                shown = None
                # An answer on the same line after `#`, else the next `{`-line (plain or commented).
                inline = re.search(r"#\s*(\{.*\})\s*$", cmd)
                if inline:
                    shown = inline.group(1)
                    cmd = cmd[: inline.start()].rstrip()
                else:
                    cmd = re.sub(r"\s+#[^']*$", "", cmd)  # a trailing comment (not inside quotes)
                    for j in range(i + 1, len(lines)):
                        nxt = lines[j].lstrip("# ").strip()
                        if lines[j].startswith("curl "):
                            break
                        if nxt.startswith("{"):
                            shown = nxt
                            break
                last_curl = not any(l.startswith("curl ") for l in lines[i + 1 :])
                if shown is None and json_after and last_curl:
                    shown = json_after
                out.append((list(assigns), cmd, json.loads(shown) if shown else None))
            i += 1
    return out


class ReadmeCurl(unittest.TestCase):
    def test_examples_are_found(self):
        cmds = [c for _, c, _ in curl_examples()]
        # The README's curl examples: counter create and next, once begin and complete, lock
        # acquire and release, namespace settings. Fewer means the extraction broke.
        self.assertGreaterEqual(len(cmds), 7, cmds)
        self.assertTrue(all(c.startswith("curl ") for c in cmds))

    def test_every_curl_example_answers_as_the_readme_shows(self):
        server = Server().start()
        self.addCleanup(server.stop)
        env = dict(os.environ, ICHIDO_TOKEN=server.admin_token)
        last_token: Optional[int] = None
        sent = 0
        for assigns, cmd, shown in curl_examples():
            cmd = cmd.replace(README_URL, server.url)
            assigns = [a.replace(README_URL, server.url) for a in assigns]
            if last_token is not None:
                cmd = re.sub(r'"token":\s*\d+', f'"token": {last_token}', cmd)
            script = "\n".join(assigns + [cmd.replace("curl ", "curl -sS -w '\\n%{http_code}' ", 1)])
            r = subprocess.run(["bash", "-e", "-c", script], env=env, capture_output=True, text=True, timeout=60)
            self.assertEqual(r.returncode, 0, f"{cmd}\n{r.stderr}")
            body, _, status = r.stdout.rpartition("\n")
            with self.subTest(cmd=cmd):
                self.assertRegex(status, r"^2\d\d$", f"{cmd}\n{body}")
                answer = json.loads(body)
                if isinstance(answer.get("token"), int):
                    last_token = answer["token"]
                if shown is not None:
                    self.assertEqual(sorted(answer), sorted(shown), f"the README shows other fields for\n{cmd}")
            sent += 1
        self.assertGreaterEqual(sent, 7)

    def test_the_curl_counter_examples_after_the_first_steps_answer_as_shown(self):
        # Followed in order, the first steps' counter and key made the curl section answer 200
        # and replayed: true where it showed 201 and replayed: false.
        server = Server().start()
        self.addCleanup(server.stop)
        cwd = tempfile.mkdtemp(prefix="ichido-readme-order-")
        self.addCleanup(shutil.rmtree, cwd, True)
        os.symlink(server.data_dir, os.path.join(cwd, "ichido-data"))
        os.mkdir(os.path.join(cwd, "bin"))
        os.symlink(ichido_binary(), os.path.join(cwd, "bin", "ichido"))
        env = dict(os.environ, PATH=os.path.join(cwd, "bin") + os.pathsep + os.environ["PATH"], ICHIDO_URL=server.url)
        env.pop("ICHIDO_TOKEN", None)
        first = subprocess.run(["bash", "-e", "-c", readme_recipes()["sh/first-steps"]], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)
        self.assertEqual(first.returncode, 0, first.stderr)
        env["ICHIDO_TOKEN"] = server.admin_token
        counters = [(a, c, shown) for a, c, shown in curl_examples() if "/counters/" in c][:2]
        self.assertEqual(len(counters), 2)
        for (assigns, cmd, shown), status in zip(counters, ("201", "200")):
            cmd = cmd.replace(README_URL, server.url).replace("curl ", "curl -sS -w '\\n%{http_code}' ", 1)
            r = subprocess.run(["bash", "-e", "-c", "\n".join(assigns + [cmd])], env=env, capture_output=True, text=True, timeout=60)
            body, _, got = r.stdout.rpartition("\n")
            answer = json.loads(body)
            with self.subTest(cmd=cmd):
                self.assertEqual(got, status, body)
                for field in ("name", "last_value", "value", "formatted", "replayed"):
                    if field in shown:
                        self.assertEqual(answer[field], shown[field], field)


if __name__ == "__main__":
    unittest.main()
