"""The VBA client (clients/vba/*.bas) and the VBA examples, checked and run by the VBA-subset
interpreter (vba.py) against a live ichido. See clients/vba/README.md for what this does and does
not prove."""

from __future__ import annotations

import datetime
import http.server
import json
import os
import socket
import socketserver
import random
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
VBA_DIR = os.path.dirname(HERE)
REPO = os.path.dirname(os.path.dirname(VBA_DIR))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(REPO, "clients", "testing"))

import vba  # noqa: E402
from fakes import Items, MailItem, Worksheet  # noqa: E402
from ichido_testing import LossyProxy, Server, Tethered, flaky_for_keys, mail_message_ids, readme_recipes  # noqa: E402

JSON = os.path.join(VBA_DIR, "IchidoJson.bas")
ICHIDO = os.path.join(VBA_DIR, "Ichido.bas")
MAILBOX = os.path.join(REPO, "examples", "shared-mailbox", "SharedMailbox.bas")
OUTLOOK_SESSION = os.path.join(REPO, "examples", "shared-mailbox", "ThisOutlookSession.cls")
RECEIPTS = os.path.join(REPO, "examples", "receipt-numbers", "ReceiptNumbers.bas")


def markdown_files():
    """Every Markdown file of the repository outside build trees and node_modules."""
    out = []
    for root, dirs, files in os.walk(REPO):
        dirs[:] = [x for x in dirs if x not in (".git", "node_modules", "build") and not x.startswith("build-")]
        out += [os.path.join(root, f) for f in files if f.endswith(".md")]
    return sorted(out)


def project(*extra, **kw):
    return vba.Project([JSON, ICHIDO, *extra], **kw)


def as_python(v):
    """A value JsonParse returned, as Python's json module would have parsed it."""
    if isinstance(v, vba.Dictionary):
        return {vba.py_str(k): as_python(x) for k, x in v.d.items()}
    if isinstance(v, vba.Collection):
        return [as_python(x) for x in v.items]
    if v is vba.NULL:
        return None
    if isinstance(v, str):
        return vba.py_str(v)
    return v


class StaticChecks(unittest.TestCase):
    def test_every_module_and_example_passes_the_checks(self):
        host = {"application": object(), "olfolderinbox": 6, "activesheet": object()}
        for files in ([JSON, ICHIDO], [JSON, ICHIDO, MAILBOX, OUTLOOK_SESSION], [JSON, ICHIDO, RECEIPTS]):
            with self.subTest(files=[os.path.basename(f) for f in files]):
                self.assertEqual(vba.Project(files, host=host).check(), [])

    def test_the_checker_finds_what_the_old_readme_snippet_got_wrong(self):
        # The VBA snippet the README had before: JsonEscape did not exist, http was undeclared.
        d = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, d, True)
        bad = os.path.join(d, "Old.bas")
        with open(bad, "w", encoding="utf-8") as f:
            f.write(
                'Attribute VB_Name = "Old"\nOption Explicit\n'
                "Public Sub OnMail(ByVal mail As Object)\n"
                "    Dim msgId As String\n"
                '    msgId = mail.PropertyAccessor.GetProperty("x")\n'
                '    Set http = CreateObject("MSXML2.ServerXMLHTTP.6.0")\n'
                '    http.send "{""key"": """ & JsonEscape(msgId) & """}"\n'
                "    Dim n As Long\n"
                '    Set n = CreateObject("Scripting.Dictionary")\n'
                "End Sub\n"
                "Private Sub Report(ByVal a As Long, ByVal b As Long)\nEnd Sub\n"
            )
        problems = "\n".join(vba.Project([bad]).check())
        self.assertIn("variable not declared: http", problems)
        self.assertIn("not defined: JsonEscape", problems)
        self.assertIn("Set on n declared As long", problems)
        with self.assertRaises(vba.VbaError) as cm:  # `Report(1, 2)` as a statement does not compile
            bad2 = os.path.join(d, "Old2.bas")
            with open(bad2, "w", encoding="utf-8") as f:
                f.write('Attribute VB_Name = "Old2"\nOption Explicit\nSub A()\n    Report(1, 2)\nEnd Sub\n')
            vba.Project([bad2])
        self.assertTrue(cm.exception.compile)

    def test_no_reserved_word_is_declared_as_a_name_in_any_module_or_markdown_vba_block(self):
        # `Dim lock As Object` (clients/vba/README.md) and `Dim shared As Outlook.Recipient`
        # (ThisOutlookSession.cls) stopped their modules with "Expected: identifier".
        problems = []
        for path in [JSON, ICHIDO, MAILBOX, OUTLOOK_SESSION, RECEIPTS]:
            problems += vba.reserved_name_problems(vba.logical_lines(path), os.path.basename(path))
        for md in markdown_files():
            problems += vba.check_markdown(md)
        self.assertEqual(problems, [])

    def test_the_checker_rejects_every_reserved_identifier_as_a_declared_name(self):
        d = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, d, True)
        self.assertIn("lock", vba.RESERVED_IDENTIFIERS)
        self.assertIn("shared", vba.RESERVED_IDENTIFIERS)
        self.assertGreater(len(vba.RESERVED_IDENTIFIERS), 150)
        forms = {
            "variable": "Dim {w} As Object",
            "module variable": "Private {w} As Long",
            "constant": "Const {w} As Long = 1",
            "parameter": "Sub P(ByVal a As Long, Optional ByVal {w} As Long = 0)",
            "loop variable": "For {w} = 1 To 2",
            "for each variable": "For Each {w} In items",
            "procedure": "Public Function {w}() As Long",
            "second of two": "Dim ok As Long, {w} As Object",
        }
        for word in sorted(vba.RESERVED_IDENTIFIERS):
            for what, form in forms.items():
                if what == "module variable" and word in ("sub", "function", "declare", "type", "enum", "event"):
                    continue  # "Private Sub As Long" is no declaration at all
                code = form.format(w=word.title())
                found = vba.reserved_name_problems([(1, code)], "M")
                self.assertEqual(len(found), 1, f"{what}: {code}")
        # The same in a whole module (the checker) and in a Markdown block.
        bas = os.path.join(d, "Bad.bas")
        with open(bas, "w", encoding="utf-8") as f:
            f.write('Attribute VB_Name = "Bad"\nOption Explicit\nPublic Sub A()\n    Dim shared As Object\nEnd Sub\n')
        self.assertIn("Bad:4: the variable shared is a reserved word", "\n".join(vba.Project([bas]).check()))
        md = os.path.join(d, "R.md")
        with open(md, "w", encoding="utf-8") as f:
            f.write("# x\n\n```vb\nDim ok As Long\nDim lock As Object\n```\n\n```vba\nFor Each next In c\n```\n")
        self.assertEqual(vba.check_markdown(md), ["R.md:5: the variable lock is a reserved word (Expected: identifier)",
                                                  "R.md:9: the loop variable next is a reserved word (Expected: identifier)"])
        # Names that are not reserved stay allowed (Name, Item, Key, Value are used as names).
        for ok in ("Dim name As String", "Dim item As Object", "Sub P(ByVal key As String, ByVal value As Long)", "Dim locked As Boolean"):
            self.assertEqual(vba.reserved_name_problems([(1, ok)], "M"), [], ok)

    def test_vba_files_import_on_japanese_windows_ascii_and_crlf(self):
        # The VBA editor imports .bas/.cls in the ANSI code page (CP932 on Japanese Windows) and
        # wants CRLF lines: UTF-8 Japanese became mojibake, LF-only files lost their Attribute
        # lines. Every VBA file is ASCII (Japanese through IchidoText escapes), CRLF throughout,
        # lines within the editor's 1023 characters, and stored so by git (-text).
        files = subprocess.run(["git", "ls-files", "*.bas", "*.cls"], cwd=REPO, capture_output=True, text=True, check=True).stdout.split()
        self.assertGreaterEqual(len(files), 5, files)
        for rel in files:
            with open(os.path.join(REPO, rel), "rb") as f:
                data = f.read()
            with self.subTest(file=rel):
                self.assertEqual([i for i, b in enumerate(data) if b > 127][:1], [], "a non-ASCII byte at this offset")
                self.assertEqual(data.decode("cp932"), data.decode("ascii"))
                self.assertTrue(data.endswith(b"\r\n"))
                self.assertEqual(data.count(b"\n"), data.count(b"\r\n"), "a line without CRLF")
                self.assertEqual(data.count(b"\r"), data.count(b"\r\n"), "a lone CR")
                self.assertLessEqual(max(len(line) for line in data.split(b"\r\n")), 1023)
                attr = subprocess.run(["git", "check-attr", "text", "--", rel], cwd=REPO, capture_output=True, text=True, check=True).stdout
                self.assertTrue(attr.strip().endswith(": text: unset"), attr)

    def test_the_checker_wants_option_explicit_and_ptrsafe(self):
        d = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, d, True)
        path = os.path.join(d, "M.bas")
        with open(path, "w", encoding="utf-8") as f:
            f.write(
                'Attribute VB_Name = "M"\n#If VBA7 Then\nPrivate Declare Sub Sleep Lib "kernel32" (ByVal ms As Long)\n'
                "#Else\nPrivate Declare Sub Sleep Lib \"kernel32\" (ByVal ms As Long)\n#End If\n"
                "Sub A()\n    x = 1\nEnd Sub\n"
            )
        problems = "\n".join(vba.Project([path]).check())
        self.assertIn("no Option Explicit", problems)
        self.assertIn("needs PtrSafe", problems)
        self.assertIn("variable not declared: x", problems)


class Json(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.pj = project()

    def test_json_string_escapes_everything_and_round_trips(self):
        for s in ["", "plain", 'quote " and backslash \\', "tab\tnew\nline\rcr\x08\x0c", "\x00\x01\x1f\x7f",
                  "<CAF=x/y+z@mail.example.co.jp>", "受付番号 R-0001", "ｆｕｌｌ＿ｗｉｄｔｈ", "😀 emoji", "/ slash"]:
            out = self.pj.call("JsonString", s)
            self.assertTrue(out.isascii(), out)
            self.assertEqual(json.loads(vba.py_str(out)), s)

    def test_json_parse_matches_pythons_json(self):
        for text in [
            '{"value":1,"formatted":"R-0001","period":"","key":"form-1","replayed":false,"issued_at":"2026-04-01T09:30:00.123Z"}',
            '{"outcome":"completed","result":{"ticket":"T-1","n":[1,2,{"x":null}]},"completed_at":"x"}',
            '{"error":{"code":"counter_not_found","message":"No counter \'r\'.","details":{"field":"key"}}}',
            '  [ 1 , -2 , 3.25 , -1.5e3, 9007199254740992, true, false, null, "", "\\u53d7\\u4ed8\\ud83d\\ude00\\n\\"\\\\\\/" ]  ',
            '"just a string"', "42", "[]", "{}", '{"a":{},"b":[]}',
        ]:
            with self.subTest(text=text):
                v = self.pj.call("JsonParse", text)
                self.assertEqual(as_python(v), json.loads(text))
                again = self.pj.call("JsonStringify", v)
                self.assertEqual(json.loads(vba.py_str(again)), json.loads(text))

    def test_invalid_json_raises_json_error_with_the_position(self):
        for bad in ['{"a":1,}', "[1 2]", '"abc', "tru", '{"a" 1}', "", "{} x", '{"a":"\\q"}', '"\\u12"']:
            with self.subTest(bad=bad):
                with self.assertRaises(vba.VbaError) as cm:
                    self.pj.call("JsonParse", bad)
                self.assertEqual(cm.exception.number, vba.VB_OBJECT_ERROR + 7801)
                self.assertIn("invalid JSON at position", cm.exception.description)

    def test_numbers_are_exact_up_to_2_to_the_53(self):
        for n in [0, 1, -1, 2147483647, 2147483648, 123456789012345, 9007199254740991, 9007199254740992]:
            self.assertEqual(self.pj.call("JsonNumber", float(n)), str(n))
            self.assertEqual(self.pj.call("JsonParse", str(n)), float(n))
        self.assertEqual(self.pj.call("JsonNumber", 1.5), "1.5")


class Live(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = Server().start()
        cls.writer = cls.server.token("writer", "vba")
        cls.scratch = tempfile.mkdtemp(prefix="ichido-vba-")

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()
        shutil.rmtree(cls.scratch, ignore_errors=True)

    def connected(self, url=None, **kw):
        pj = project(**kw)
        pj.call("IchidoConnect", url or self.server.url, self.writer, "vba")
        return pj

    def mailbox_client(self, url):
        """examples/shared-mailbox set up a day ago (SetupIchido, the first run) and connected to url."""
        pj = project(MAILBOX)
        pj.settings[("ichido", "mailbox", "since")] = str(vba.ole_date(datetime.datetime.now() - datetime.timedelta(days=1)))
        pj.settings[("ichido", "connection", "url")] = url
        pj.settings[("ichido", "connection", "token")] = self.server.token("writer", "mailbox")
        pj.call("ConnectIchido")
        return pj

    def proxy(self, policy):
        p = LossyProxy(self.server.port, policy)
        self.addCleanup(p.close)
        return p

    def raises(self, pj, code, *call):
        with self.assertRaises(vba.VbaError) as cm:
            pj.call(*call)
        self.assertEqual(cm.exception.number, vba.VB_OBJECT_ERROR + 7878, cm.exception)
        self.assertEqual(pj.globals[("ichido", "ichidolastcode")][0], code)
        self.assertTrue(cm.exception.description.startswith(code + ": "), cm.exception.description)
        return cm.exception

    def test_the_request_bodies_are_exactly_the_api_s(self):
        self.server.admin("PUT", "/v1/ns/vba/counters/bodies", {"require_key": True})
        pj = self.connected()
        start = len(vba.ServerXMLHTTP.log)
        pj.call("IchidoNextNumber", "bodies", "order-1", "first 受付")
        claim = pj.call("IchidoBegin", "<m 1@例え.jp>", 90000, 0, "sha256:ab")
        token = claim.vba_get("item", ["token"])
        pj.call("IchidoComplete", "<m 1@例え.jp>", token, '{"ok":true}')
        lock = pj.call("IchidoAcquire", "ledger", 0, 45000)
        pj.call("IchidoRelease", "ledger", lock.vba_get("item", ["token"]))
        sent = vba.ServerXMLHTTP.log[start:]
        t = int(token)
        lt = int(lock.vba_get("item", ["token"]))
        rid = r'"request_id":"[0-9a-f]{32}"'
        expected = [
            ("POST", "/v1/ns/vba/counters/bodies/next", r'\{"key":"order-1","note":"first \\u53d7\\u4ed8"\}'),
            ("POST", "/v1/ns/vba/once/begin", r'\{"key":"<m 1@\\u4f8b\\u3048\.jp>","owner":"PC-TEST:tester","lease_ms":90000,"wait_ms":0,' + rid + r',"fingerprint":"sha256:ab"\}'),
            ("POST", "/v1/ns/vba/once/complete", r'\{"key":"<m 1@\\u4f8b\\u3048\.jp>","token":' + str(t) + r',"result":\{"ok":true\}\}'),
            ("POST", "/v1/ns/vba/locks/ledger/acquire", r'\{"owner":"PC-TEST:tester","wait_ms":0,"lease_ms":45000,' + rid + r"\}"),
            ("POST", "/v1/ns/vba/locks/ledger/release", r'\{"token":' + str(lt) + r"\}"),
        ]
        self.assertEqual(len(sent), len(expected))
        for req, (method, path, body) in zip(sent, expected):
            self.assertEqual(req["method"], method)
            self.assertEqual(req["url"], self.server.url + path)
            self.assertRegex(req["body"], "^" + body + "$")
            self.assertEqual(req["headers"]["Content-Type"], "application/json")
            self.assertEqual(req["headers"]["Authorization"], "Bearer " + self.writer)

    def test_counters_same_key_same_number_and_errors(self):
        self.server.admin("PUT", "/v1/ns/vba/counters/receipts", {"max": 2, "format": "R-{seq:4}", "require_key": True})
        pj = self.connected()
        a = pj.call("IchidoNextNumber", "receipts", "order-7")
        self.assertEqual((a.vba_get("item", ["formatted"]), a.vba_get("item", ["replayed"])), ("R-0001", False))
        b = pj.call("IchidoNextNumber", "receipts", "order-7")
        self.assertEqual((b.vba_get("item", ["value"]), b.vba_get("item", ["replayed"])), (1.0, True))
        pj.call("IchidoNextNumber", "receipts", "order-8")
        e = self.raises(pj, "counter_exhausted", "IchidoNextNumber", "receipts", "order-9")
        self.assertEqual(pj.globals[("ichido", "ichidolaststatus")][0], 409)
        self.raises(pj, "counter_not_found", "IchidoNextNumber", "nope", "k")
        self.raises(pj, "invalid_argument", "IchidoNextNumber", "receipts", "")
        self.raises(pj, "invalid_argument", "IchidoNextNumber", "bad/name", "k")
        self.assertIn("counter_exhausted", e.description)

    def test_once_outcomes_fail_and_dead(self):
        pj = self.connected()
        key = "<CAF=x/y+z 受付@mail.example.co.jp>"
        c = pj.call("IchidoBegin", key)
        self.assertEqual(c.vba_get("item", ["outcome"]), "acquired")
        other = self.connected(environ={"COMPUTERNAME": "PC-B", "USERNAME": "b"})
        busy = other.call("IchidoBegin", key)
        self.assertEqual((busy.vba_get("item", ["outcome"]), busy.vba_get("item", ["owner"])), ("in_progress", "PC-TEST:tester"))
        pj.call("IchidoComplete", key, c.vba_get("item", ["token"]), '{"ticket":"T-1"}', c.vba_get("item", ["lease_end_ms"]))
        done = other.call("IchidoBegin", key)
        self.assertEqual(done.vba_get("item", ["outcome"]), "completed")
        self.assertEqual(as_python(done.vba_get("item", ["result"])), {"ticket": "T-1"})
        _, rec = self.server.admin("GET", "/v1/ns/vba/once?key=" + __import__("urllib.parse").parse.quote(key, safe=""))
        self.assertEqual(rec["key"], key, "the key arrived intact")

        f = pj.call("IchidoBegin", "fragile", 60000, 0, "", 1)
        pj.call("IchidoFail", "fragile", f.vba_get("item", ["token"]), "smtp 550 ユーザー不明")
        dead = pj.call("IchidoBegin", "fragile")
        self.assertEqual(dead.vba_get("item", ["outcome"]), "dead")
        self.assertEqual(dead.vba_get("item", ["last_error"]), "smtp 550 ユーザー不明")
        self.raises(pj, "stale_token", "IchidoComplete", key, 999999.0)

    def test_locks_acquire_release_and_the_holder(self):
        pj = self.connected()
        a = pj.call("IchidoAcquire", "printer", 0, 30000)
        self.assertTrue(a.vba_get("item", ["acquired"]))
        b = self.connected(environ={"COMPUTERNAME": "PC-B", "USERNAME": "b"}).call("IchidoAcquire", "printer", 200, 30000)
        self.assertFalse(b.vba_get("item", ["acquired"]))
        self.assertEqual(b.vba_get("item", ["holder"]).vba_get("item", ["owner"]), "PC-TEST:tester")
        pj.call("IchidoRelease", "printer", a.vba_get("item", ["token"]))
        self.raises(pj, "not_holder", "IchidoRelease", "printer", a.vba_get("item", ["token"]))

    def test_forbidden_and_invalid_request_carry_status_and_details(self):
        pj = project()
        pj.call("IchidoConnect", self.server.url, self.server.token("reader", "vba"), "vba")
        self.raises(pj, "forbidden", "IchidoBegin", "k")
        self.assertEqual(pj.globals[("ichido", "ichidolaststatus")][0], 403)
        w = self.connected()
        self.raises(w, "invalid_request", "IchidoBegin", "k", 10)
        self.assertEqual(w.globals[("ichido", "ichidolastdetails")][0].vba_get("item", ["field"]), "lease_ms")
        self.raises(project(), "invalid_argument", "IchidoBegin", "k")  # not connected

    def test_a_lost_begin_answer_is_retried_with_the_same_request_id(self):
        done = []
        proxy = self.proxy(lambda req: "drop_answer" if req["path"].endswith("/once/begin") and not done and not done.append(1) else "pass")
        pj = self.connected(proxy.url)
        c = pj.call("IchidoBegin", "lost-begin")
        self.assertEqual(c.vba_get("item", ["outcome"]), "acquired")
        self.assertTrue(c.vba_get("item", ["replayed"]))
        begins = proxy.requests("/once/begin")
        self.assertEqual(len(begins), 2)
        self.assertEqual(begins[0]["body"]["request_id"], begins[1]["body"]["request_id"])

    def test_503_is_retried_4xx_is_not(self):
        n = []
        proxy = self.proxy(lambda req: {"status": 503, "body": {"error": {"code": "store_unavailable", "message": "x", "details": {}}}}
                           if "/counters/r503/" in req["path"] and len(n) < 2 and not n.append(1) else "pass")
        self.server.admin("PUT", "/v1/ns/vba/counters/r503", {})
        pj = self.connected(proxy.url)
        self.assertEqual(pj.call("IchidoNextNumber", "r503", "k").vba_get("item", ["value"]), 1.0)
        self.assertEqual(len(pj.sleeps), 2)
        self.assertTrue(250 <= pj.sleeps[0] <= 500 and 500 <= pj.sleeps[1] <= 1000, pj.sleeps)
        self.raises(pj, "counter_not_found", "IchidoNextNumber", "missing", "k")
        self.assertEqual(len(proxy.requests("/counters/missing/next")), 1)

    def test_complete_unreachable_until_the_lease_end_raises_complete_unconfirmed(self):
        proxy = self.proxy(lambda req: "drop_request" if req["path"].endswith("/once/complete") else "pass")
        pj = self.connected(proxy.url)
        c = pj.call("IchidoBegin", "report-1", 1500)
        started = time.monotonic()
        self.raises(pj, "complete_unconfirmed", "IchidoComplete", "report-1", c.vba_get("item", ["token"]), '{"rows":3}', c.vba_get("item", ["lease_end_ms"]))
        self.assertGreaterEqual(time.monotonic() - started, 0.8)
        self.assertGreaterEqual(len(proxy.requests("/once/complete")), 2)
        self.assertEqual(len(proxy.requests("/once/fail")), 0)

    def test_japanese_messages_when_asked_codes_unchanged(self):
        with open(os.path.join(REPO, "clients", "messages-ja.json"), encoding="utf-8") as f:
            table = json.load(f)
        pj = project()
        for code, text in table.items():
            self.assertEqual(vba.py_str(pj.call("IchidoMessageJa", code)), text, code)
        self.assertEqual(pj.call("IchidoMessageJa", "no_such_code"), "")
        pj = self.connected()
        self.raises(pj, "counter_not_found", "IchidoNextNumber", "nope", "k")
        pj.call("IchidoLanguage", "ja")
        e = self.raises(pj, "counter_not_found", "IchidoNextNumber", "nope", "k")
        self.assertTrue(vba.py_str(e.description).startswith("counter_not_found: " + table["counter_not_found"] + " ("))
        e = self.raises(pj, "invalid_argument", "IchidoNextNumber", "receipts", "")
        self.assertIn(table["invalid_argument"], vba.py_str(e.description))

    def test_the_url_error_says_what_is_accepted(self):
        pj = project()
        e = self.raises(pj, "invalid_argument", "IchidoConnect", "ftp://x", "t", "ns")
        self.assertIn("https://", e.description)
        self.assertIn("http://", e.description.replace("https://", ""), "http:// is accepted, so the message says so")
        pj.call("IchidoConnect", "http://ichido.internal:7878", "t", "ns")

    def test_a_proxy_given_to_ichidoconnect_carries_every_request(self):
        seen = []

        class Forward(http.server.BaseHTTPRequestHandler):
            def do_POST(self):  # an HTTP proxy: the request line holds the absolute URL
                seen.append(self.path)
                u = __import__("urllib.parse").parse.urlsplit(self.path)
                body = self.rfile.read(int(self.headers["Content-Length"]))
                conn = __import__("http.client").client.HTTPConnection(u.hostname, u.port, timeout=30)
                conn.request("POST", u.path, body=body, headers={k: v for k, v in self.headers.items() if k.lower() != "host"})
                res = conn.getresponse()
                data = res.read()
                conn.close()
                self.send_response(res.status)
                for k, v in res.getheaders():
                    if k.lower() not in ("connection", "transfer-encoding"):
                        self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *a):
                pass

        proxy = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Forward)
        threading.Thread(target=proxy.serve_forever, daemon=True).start()
        self.addCleanup(proxy.server_close)
        self.addCleanup(proxy.shutdown)
        self.server.admin("PUT", "/v1/ns/vba/counters/proxied", {})
        pj = project()
        pj.call("IchidoConnect", self.server.url, self.writer, "vba", "", 30000, 4, f"127.0.0.1:{proxy.server_address[1]}")
        self.assertEqual(pj.call("IchidoNextNumber", "proxied", "k1").vba_get("item", ["value"]), 1.0)
        self.assertEqual(seen, [self.server.url + "/v1/ns/vba/counters/proxied/next"])
        # A host on the bypass list goes direct.
        pj.call("IchidoConnect", self.server.url, self.writer, "vba", "", 30000, 4, f"127.0.0.1:{proxy.server_address[1]}", "127.0.0.*")
        pj.call("IchidoNextNumber", "proxied", "k2")
        self.assertEqual(len(seen), 1)

    def test_an_outlook_event_never_waits_long_on_a_server_that_does_not_answer(self):
        # ItemAdd runs on Outlook's UI thread: 4 attempts of a 10 s connect / 30 s receive froze
        # Outlook for minutes per mail. In an event (HandleNewMail) a call is one attempt of at most
        # 3 s; the mail is left for the retry pass, which forwards it once the server answers.
        hang = self.proxy(lambda req: "hang")
        pj = self.mailbox_client(hang.url)
        forwarded = []
        mail = MailItem(vba.vba_str("<event-1@example.jp>"), "s", lambda sent: forwarded.append(1))
        done = threading.Event()
        took = []

        def run():
            t0 = time.monotonic()
            pj.call("HandleNewMail", mail)
            took.append(time.monotonic() - t0)
            done.set()

        threading.Thread(target=run, daemon=True).start()
        self.assertTrue(done.wait(20), "HandleNewMail did not return within 20 s")
        self.assertLessEqual(took[0], 3.5)
        self.assertEqual(pj.sleeps, [], "no backoff sleeps in an event")
        self.assertEqual(forwarded, [])
        self.assertEqual(len(hang.requests("/once/begin")), 1, "one attempt")
        self.assertTrue(any("unreachable" in vba.py_str(d) for d in pj.debug), pj.debug)
        # The retry pass, against the live server: the mail is forwarded once.
        pj.settings[("ichido", "connection", "url")] = self.server.url
        pj.call("ConnectIchido")
        pj.call("RetryPending", Items([mail]))
        self.assertEqual(forwarded, [1])

    def test_an_unconfirmed_completion_in_an_event_is_recorded_by_the_retry_pass_not_forwarded_again(self):
        dropped = []
        proxy = self.proxy(lambda req: "drop_answer" if req["path"].endswith("/once/complete") and not dropped and not dropped.append(1) else "pass")
        pj = self.mailbox_client(proxy.url)
        forwarded = []
        mail = MailItem(vba.vba_str("<event-2@example.jp>"), "s", lambda sent: forwarded.append(1))
        pj.call("HandleNewMail", mail)
        self.assertEqual(forwarded, [1])
        self.assertEqual(len(proxy.requests("/once/complete")), 1, "one attempt in the event")
        _, rec = self.server.admin("GET", "/v1/ns/mailbox/once?key=%3Cevent-2%40example.jp%3E")
        self.assertEqual(rec["state"], "completed", "the lost answer's complete was committed")
        pj.call("RetryPending", Items([mail]))
        self.assertEqual(forwarded, [1], "never forwarded again")
        self.assertEqual(len(proxy.requests("/once/complete")), 2, "the retry pass re-sent the complete")

    def test_https_with_the_servers_ca(self):
        d = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, d, True)
        cert, key = os.path.join(d, "cert.pem"), os.path.join(d, "key.pem")
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=localhost",
                        "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost", "-keyout", key, "-out", cert], check=True, capture_output=True)
        tls = Server(args=["--tls-cert", cert, "--tls-key", key]).start()
        self.addCleanup(tls.stop)
        vba.ServerXMLHTTP.cafile = cert
        self.addCleanup(setattr, vba.ServerXMLHTTP, "cafile", None)
        pj = project()
        pj.call("IchidoConnect", f"https://localhost:{tls.port}/", tls.admin_token, "tls")
        self.assertEqual(pj.call("IchidoBegin", "over-tls").vba_get("item", ["outcome"]), "acquired")

    def test_seed_000_the_excel_macro_numbers_orders_from_three_pcs_at_once(self):
        self.server.admin("PUT", "/v1/ns/shop/counters/receipts", {"max": 9999, "format": "R-{seq:4}", "require_key": True})
        token = self.server.token("writer", "shop")
        proxy = self.proxy(flaky_for_keys(random.Random(3), "/counters/receipts/next"))
        orders = {(r, 1): f"A{1000 + r}" for r in range(2, 32)}  # 30 orders in rows 2..31
        sheets, errors = [], []

        def pc(n):
            try:
                pj = project(RECEIPTS, environ={"COMPUTERNAME": f"PC-{n}", "USERNAME": "clerk"})
                pj.sleep_scale = 0.2
                pj.settings[("ichido", "connection", "url")] = proxy.url
                pj.settings[("ichido", "connection", "token")] = token
                sheet = Worksheet(orders)
                pj.call("NumberOrders", sheet, 31)
                self.assertEqual(pj.msgboxes, [])
                sheets.append(sheet)
            except Exception as e:  # reported below
                errors.append(e)

        threads = [threading.Thread(target=pc, args=(n,)) for n in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(errors, [])
        numbers = [sheets[0].cells[(r, 2)] for r in range(2, 32)]
        self.assertEqual(sorted(numbers), [f"R-{i:04d}" for i in range(1, 31)], "no duplicate, no gap")
        for s in sheets[1:]:
            self.assertEqual([s.cells[(r, 2)] for r in range(2, 32)], numbers, "every PC wrote the same numbers")
        self.assertGreater(len(proxy.dropped("/next")), 0)

    def test_seed_000_the_excel_macro_says_plainly_when_the_counter_is_exhausted(self):
        server = Server().start()  # its own: the macro always uses namespace shop
        self.addCleanup(server.stop)
        server.admin("PUT", "/v1/ns/shop/counters/receipts", {"max": 1, "format": "R-{seq:4}", "require_key": True})
        pj = project(RECEIPTS)
        pj.settings[("ichido", "connection", "url")] = server.url
        pj.settings[("ichido", "connection", "token")] = server.token("writer", "shop")
        sheet = Worksheet({(2, 1): "B1", (3, 1): "B2", (4, 1): "B3"})
        pj.call("NumberOrders", sheet, 4)
        self.assertEqual(sheet.cells.get((2, 2)), "R-0001")
        self.assertNotIn((3, 2), sheet.cells)
        self.assertNotIn((4, 2), sheet.cells, "it stops at the first refusal")
        self.assertEqual(pj.msgboxes, ["受付番号の上限に達しました。管理者に連絡してください。"])
        # An unreachable server: a message that says a re-run is safe.
        pj.settings[("ichido", "connection", "url")] = "http://127.0.0.1:9"
        pj.sleep_scale = 0.01
        pj.msgboxes.clear()
        pj.call("NumberOrders", Worksheet({(2, 1): "C1"}), 2)
        self.assertEqual(len(pj.msgboxes), 1)
        self.assertIn("行 2 の受付番号を発行できませんでした: unreachable", pj.msgboxes[0])
        self.assertIn("もう一度実行しても、番号が重複することはありません。", pj.msgboxes[0])

    def test_seed_002_three_outlook_clients_on_100_mails_one_killed(self):
        token = self.server.token("writer", "mailbox")
        ids = mail_message_ids(100) + ["<絵文字😀+/@example.jp>"]
        ids_file = os.path.join(self.scratch, "ids.json")
        with open(ids_file, "w", encoding="utf-8") as f:
            json.dump(ids, f, ensure_ascii=False)
        ledger = os.path.join(self.scratch, "forwards.txt")
        open(ledger, "w").close()
        env = dict(os.environ, ICHIDO_URL=self.server.url, ICHIDO_TOKEN=token, LEASE_MS="1500")
        killed = {}

        def on_line(line, t):
            if line.startswith("KILLME "):
                killed["id"] = json.loads(line[7:])
                t.kill()

        clients = [
            Tethered([sys.executable, os.path.join(HERE, "outlook_client.py"), name, ids_file, ledger, str(seed)],
                     dict(env, KILL_AT="10" if name == "outlook-B" else "0"), on_line)
            for seed, name in enumerate(["outlook-A", "outlook-B", "outlook-C"], start=11)
        ]
        codes = [c.wait() for c in clients]
        self.assertEqual(codes[0], 0, clients[0].err)
        self.assertEqual(codes[2], 0, clients[2].err)
        self.assertNotEqual(codes[1], 0)
        self.assertIn("id", killed, "client B reached its 10th forward")
        with open(ledger, encoding="utf-8") as f:
            forwarded = [line.split("\t", 1)[1] for line in f.read().splitlines()]
        self.assertEqual(len(forwarded), len(ids), "each mail forwarded exactly once")
        self.assertEqual(set(forwarded), set(ids))
        import urllib.parse

        for i in ids:
            _, rec = self.server.admin("GET", "/v1/ns/mailbox/once?key=" + urllib.parse.quote(i, safe=""))
            self.assertEqual(rec["state"], "completed", i)
            self.assertEqual(rec["attempt"], 2 if i == killed["id"] else 1, i)


class OldMail(unittest.TestCase):
    """examples/shared-mailbox never sends old mail again: not on its first run, and not after
    ichido purged a mail's completed record (here after 1 s instead of 30 days)."""

    @classmethod
    def setUpClass(cls):
        cls.server = Server(args=["--once-retention", "1s"]).start()
        cls.token = cls.server.token("writer", "mailbox")

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def client(self, forwarded):
        pj = project(MAILBOX)
        pj.settings[("ichido", "connection", "url")] = self.server.url
        pj.settings[("ichido", "connection", "token")] = self.token
        pj.call("ConnectIchido")
        return pj

    def test_an_old_mail_is_never_handled_again_after_its_record_was_purged(self):
        forwarded = []
        now = datetime.datetime.now()
        old = MailItem(vba.vba_str("<old@example.jp>"), "old", lambda sent: forwarded.append("old"), received=now - datetime.timedelta(days=8))
        new = MailItem(vba.vba_str("<new@example.jp>"), "new", lambda sent: forwarded.append("new"), received=now)
        pj = self.client(forwarded)
        pj.settings[("ichido", "mailbox", "since")] = str(vba.ole_date(now - datetime.timedelta(days=60)))
        # Eight days ago the old mail was forwarded and completed (done here, now).
        claim = pj.call("IchidoBegin", "<old@example.jp>", 60000)
        pj.call("IchidoComplete", "<old@example.jp>", claim.vba_get("item", ["token"]), '{"forwarded_to":"x"}')
        deadline = time.monotonic() + 30
        while self.server.admin("GET", "/v1/ns/mailbox/once?key=%3Cold%40example.jp%3E")[0] != 404:
            self.assertLess(time.monotonic(), deadline, "the record was not purged")
            time.sleep(0.2)
        start = len(vba.ServerXMLHTTP.log)
        pj.call("RetryPending", Items([old, new]))
        pj.call("HandleNewMail", old)  # ItemAdd for an old mail (moved back into the inbox)
        self.assertEqual(forwarded, ["new"])
        keys = [json.loads(r["body"])["key"] for r in vba.ServerXMLHTTP.log[start:] if r["url"].endswith("/once/begin")]
        self.assertEqual(keys, ["<new@example.jp>"], "the old mail is not even asked about")

    def test_the_first_run_leaves_the_mails_already_there_alone(self):
        forwarded = []
        before = MailItem(vba.vba_str("<before@example.jp>"), "b", lambda sent: forwarded.append("before"),
                          received=datetime.datetime.now() - datetime.timedelta(minutes=5))
        pj = self.client(forwarded)
        self.assertNotIn(("ichido", "mailbox", "since"), pj.settings)
        pj.call("RetryPending", Items([before]))
        self.assertEqual(forwarded, [])
        self.assertIn(("ichido", "mailbox", "since"), pj.settings, "the first run says from when")
        self.assertTrue(any("first run" in vba.py_str(d) for d in pj.debug), pj.debug)
        time.sleep(0.05)
        after = MailItem(vba.vba_str("<after@example.jp>"), "a", lambda sent: forwarded.append("after"))
        pj.call("HandleNewMail", after)
        self.assertEqual(forwarded, ["after"])
        # SetProcessSince before the first run: the mails since then are handled.
        pj2 = self.client(forwarded)
        pj2.call("SetProcessSince", vba.ole_date(datetime.datetime.now() - datetime.timedelta(days=1)))
        pj2.call("RetryPending", Items([before]))
        self.assertEqual(forwarded, ["after", "before"])


class Readme(unittest.TestCase):
    """The README's VBA recipe, exactly as written there, as a module of its own."""

    def test_vba_outlook_item_add(self):
        code = readme_recipes().get("vba/outlook-item-add")
        self.assertIsNotNone(code, "README recipe vba/outlook-item-add is missing")
        d = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, d, True)
        path = os.path.join(d, "Recipe.bas")
        with open(path, "w", encoding="utf-8") as f:
            f.write('Attribute VB_Name = "Recipe"\nOption Explicit\n\n' + code + "\n")
        self.assertEqual(project(path).check(), [])
        server = Server().start()
        self.addCleanup(server.stop)
        token = server.token("writer", "mailbox")
        ids = mail_message_ids(20)
        forwarded, lock = [], threading.Lock()

        def on_send(sent):
            with lock:
                forwarded.append(vba.py_str(sent.original.message_id))

        errors = []

        def client(n):
            try:
                pj = project(path, environ={"COMPUTERNAME": f"PC-{n}", "USERNAME": "staff"})
                pj.call("IchidoConnect", server.url, token, "mailbox")
                for i in ids:
                    pj.call("HandleSharedMail", MailItem(vba.vba_str(i), "s", on_send))
                self.assertEqual(pj.debug, [])
            except Exception as e:  # reported below
                errors.append(e)

        threads = [threading.Thread(target=client, args=(n,)) for n in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(errors, [])
        self.assertEqual(sorted(forwarded), sorted(ids), "each mail forwarded once, by one client")


if __name__ == "__main__":
    unittest.main()
