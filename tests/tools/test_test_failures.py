"""scripts/test-failures: the end of `make test` says why each failed test failed."""
import os
import subprocess
import tempfile
import unittest

SCRIPT = os.path.join(os.path.dirname(__file__), "..", "..", "scripts", "test-failures")

GTEST_FAILED = """<testcase name="pg.LocksTest.Crowd" time="23" status="fail">
<failure message="Failed"/><system-out>Running main()
[ RUN      ] LocksTest.Crowd
[ figures  ] server threads idle 12, with 5000 waiters 13
/src/tests/integration/locks_test.cc:335: Failure
Expected equality of these values:
  threads_busy
    Which is: 13
  threads_idle
    Which is: 12
waiting must not add threads
[  FAILED  ] LocksTest.Crowd (23000 ms)
</system-out></testcase>"""

SCRIPT_FAILED = """<testcase name="clients_vba" time="90" status="fail">
<failure message="Failed"/><system-out>""" + "".join(f"line {i}\n" for i in range(40)) + \
    """FAIL: IssueNumber returned R-0002 twice
</system-out></testcase>"""

PASSED = """<testcase name="docs_ja" time="1" status="run"><system-out>fine</system-out></testcase>"""


def run(cases):
    with tempfile.NamedTemporaryFile("w", suffix=".xml", delete=False) as f:
        f.write(f'<?xml version="1.0"?><testsuite name="t">{"".join(cases)}</testsuite>')
    try:
        out = subprocess.run([SCRIPT, f.name], capture_output=True, text=True, check=True)
        return out.stdout
    finally:
        os.unlink(f.name)


class TestFailures(unittest.TestCase):
    def test_a_passing_run_prints_nothing(self):
        self.assertEqual(run([PASSED]), "")

    def test_a_gtest_failure_is_shown_with_its_message_and_not_the_rest(self):
        out = run([PASSED, GTEST_FAILED])
        self.assertIn("1 failed test", out)
        self.assertIn("--- pg.LocksTest.Crowd", out)
        self.assertIn("locks_test.cc:335: Failure", out)
        self.assertIn("Which is: 13", out)
        self.assertIn("waiting must not add threads", out)
        self.assertNotIn("figures", out)
        self.assertNotIn("docs_ja", out)

    def test_another_test_shows_its_last_lines_within_the_limit(self):
        out = run([SCRIPT_FAILED])
        self.assertIn("FAIL: IssueNumber returned R-0002 twice", out)
        self.assertNotIn("line 0\n", out)
        self.assertLessEqual(len(out.splitlines()), 2 + 12)


if __name__ == "__main__":
    unittest.main()
