"""docs/API.md and docs/openapi.yaml describe the same API: the same operations (method and path,
both ways) and the same error codes, each with the status src/http/error_mapping.cc gives it.

The route table itself is held to docs/openapi.yaml by src/http/openapi_test.cc, so together the
three agree. Python standard library only: the OpenAPI file is read by its layout (two-space YAML
as it is written), not by a YAML library."""

from __future__ import annotations

import os
import re
import unittest
from typing import Dict, List, Set, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))

METHODS = ("get", "put", "post", "delete", "patch", "head", "options")


def read(path: str) -> str:
    with open(os.path.join(REPO, path), encoding="utf-8") as f:
        return f.read()


def openapi_operations(text: str) -> Set[Tuple[str, str]]:
    """(METHOD, path) of every operation under `paths:`."""
    ops: Set[Tuple[str, str]] = set()
    in_paths = False
    path = None
    for line in text.splitlines():
        if re.match(r"^\S", line):
            in_paths = line.startswith("paths:")
            path = None
            continue
        if not in_paths:
            continue
        m = re.match(r"^  (/\S*):\s*$", line)
        if m:
            path = m.group(1)
            continue
        m = re.match(r"^    ([a-z]+):", line)
        if m and path and m.group(1) in METHODS:
            ops.add((m.group(1).upper(), path))
    return ops


def openapi_error_codes(text: str) -> List[str]:
    """The `enum` of the Error schema's `code`: every code an error body may carry."""
    lines = text.splitlines()
    start = next(i for i, l in enumerate(lines) if re.match(r"^    Error:\s*$", l))
    codes: List[str] = []
    in_enum = False
    for line in lines[start + 1:]:
        if re.match(r"^    \S", line):  # the next schema
            break
        if re.match(r"^\s+enum:\s*$", line):
            in_enum = True
            continue
        if in_enum:
            m = re.match(r"^\s+- ([a-z_]+)\s*$", line)
            if not m:
                break
            codes.append(m.group(1))
    return codes


def api_md_operations(text: str) -> Set[Tuple[str, str]]:
    """Every `METHOD /path` written in code spans (a query string is not part of the path)."""
    return {(m.group(1), m.group(2)) for m in
            re.finditer(r"`(GET|PUT|POST|DELETE|PATCH|HEAD) (/[^`\s?]*)", text)}


def api_md_error_table(text: str) -> Dict[str, int]:
    """code -> status from the table of the Errors section."""
    section = text.split("\n## Errors", 1)[1].split("\n## ", 1)[0]
    table: Dict[str, int] = {}
    for m in re.finditer(r"^\| `([a-z_]+)` \| (\d{3}) \|", section, re.M):
        table[m.group(1)] = int(m.group(2))
    return table


def errc_codes(header: str) -> List[str]:
    body = header.split("enum class errc {", 1)[1].split("};", 1)[0]
    return re.findall(r"^\s*([a-z_]+),", body, re.M)


def mapped_statuses(source: str) -> Dict[str, int]:
    return {m.group(1): int(m.group(2)) for m in
            re.finditer(r"case errc::([a-z_]+):\s*return (\d{3});", source)}


def status_mentions(text: str) -> List[Tuple[int, str]]:
    """Every "NNN `code`" in prose: a status followed by the code it names."""
    return [(int(m.group(1)), m.group(2)) for m in
            re.finditer(r"(?<![\d.])([1-5]\d\d) `([a-z][a-z0-9_]*)`", text)]


class ApiMdAgreesWithOpenApi(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.api_md = read("docs/API.md")
        cls.openapi = read("docs/openapi.yaml")
        cls.errc = errc_codes(read("include/ichido/errc.h"))
        cls.statuses = mapped_statuses(read("src/http/error_mapping.cc"))

    def test_readers_of_the_files_find_what_they_expect(self):
        # A parser that found nothing would make every comparison below pass.
        self.assertGreater(len(openapi_operations(self.openapi)), 20)
        self.assertGreater(len(openapi_error_codes(self.openapi)), 20)
        self.assertGreater(len(self.errc), 20)
        self.assertEqual(set(self.errc), set(self.statuses), "error_mapping.cc maps every errc")

    def test_every_operation_of_openapi_is_in_api_md(self):
        missing = openapi_operations(self.openapi) - api_md_operations(self.api_md)
        self.assertEqual(sorted(missing), [], "operations of docs/openapi.yaml that docs/API.md does not name")

    def test_every_operation_named_in_api_md_is_in_openapi(self):
        extra = api_md_operations(self.api_md) - openapi_operations(self.openapi)
        self.assertEqual(sorted(extra), [], "operations docs/API.md names that docs/openapi.yaml does not have")

    def test_the_same_error_codes_as_openapi_and_the_code(self):
        table = api_md_error_table(self.api_md)
        self.assertEqual(sorted(table), sorted(openapi_error_codes(self.openapi)),
                         "the error table of docs/API.md against the Error enum of docs/openapi.yaml")
        self.assertEqual(sorted(table), sorted(self.errc),
                         "the error table of docs/API.md against include/ichido/errc.h")

    def test_each_error_has_the_status_the_server_answers(self):
        table = api_md_error_table(self.api_md)
        wrong = {code: (status, self.statuses.get(code)) for code, status in table.items()
                 if self.statuses.get(code) != status}
        self.assertEqual(wrong, {}, "code: (docs/API.md, src/http/error_mapping.cc)")

    def test_every_code_named_with_a_status_exists_with_that_status(self):
        for name, text in (("docs/API.md", self.api_md), ("docs/openapi.yaml", self.openapi)):
            for status, code in status_mentions(text):
                with self.subTest(file=name, mention=f"{status} `{code}`"):
                    self.assertIn(code, self.statuses, "not an error code the server has")
                    self.assertEqual(status, self.statuses[code])

    def test_openapi_responses_name_codes_of_their_own_status(self):
        # An inline response `'409': description: '`counter_exists`…'` names codes of that status.
        known = set(self.statuses)
        current = None
        for line in self.openapi.splitlines():
            m = re.match(r"^\s+'(\d{3})':", line)
            if m:
                current = int(m.group(1))
                continue
            if re.match(r"^\s+(content|headers|\$ref|schema|examples?):", line) or \
                    re.match(r"^\s{0,4}\S", line):
                current = None
                continue
            if current is None:
                continue
            for code in re.findall(r"`([a-z][a-z0-9_]*)`", line):
                if code in known:
                    with self.subTest(status=current, code=code):
                        self.assertEqual(self.statuses[code], current)


if __name__ == "__main__":
    unittest.main()
