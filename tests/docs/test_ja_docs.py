"""The Japanese documents stay right (no server needed):

- README.ja.md is README.md in Japanese: the same sections in the same order (plus its 用語集), the
  same code in headings, and the same code blocks once their comments are stripped (the recipes'
  comments are translated, the code is not);
- one vocabulary: README.ja.md has the 用語集 of the project's words, and neither it, the error
  guide nor the dashboard's Japanese texts use the words it says to avoid;
- docs/errors.ja.md covers every error code the server can answer and every code the client
  libraries make, says which is which, and names no code that does not exist; the HTTP status it
  gives for a server code is the server's (src/http/error_mapping.cc).
"""

from __future__ import annotations

import os
import re
import unittest
from typing import Dict, List, Optional, Set, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))


def read(*path: str) -> str:
    with open(os.path.join(REPO, *path), encoding="utf-8") as f:
        return f.read()


# --- Markdown ----------------------------------------------------------------------------------

FENCE = re.compile(r"^(```+)(\S*)\s*$")


def blocks_and_headings(text: str) -> Tuple[List[Tuple[str, str]], List[Tuple[int, str]]]:
    """([(language, code)], [(level, heading text)]) in document order; headings inside code
    blocks are not headings."""
    blocks: List[Tuple[str, str]] = []
    headings: List[Tuple[int, str]] = []
    fence: Optional[str] = None
    lang = ""
    body: List[str] = []
    for line in text.split("\n"):
        m = FENCE.match(line)
        if fence is None:
            if m:
                fence, lang, body = m.group(1), m.group(2), []
                continue
            h = re.match(r"^(#{1,6})\s+(.*?)\s*$", line)
            if h:
                headings.append((len(h.group(1)), h.group(2)))
        elif line.strip() == fence:
            blocks.append((lang, "\n".join(body)))
            fence = None
        else:
            body.append(line)
    assert fence is None, "an unclosed code block"
    return blocks, headings


def strip_comment(line: str, markers: Tuple[str, ...]) -> str:
    """The line without its comment: from the first marker outside quotes (a marker at the start,
    or after a blank for '#' and "'", so that URLs, $# and don't are code)."""
    quote: Optional[str] = None
    i = 0
    while i < len(line):
        c = line[i]
        if quote:
            if c == "\\" and quote != "'":
                i += 2
                continue
            if c == quote:
                quote = None
        else:
            for m in markers:
                if line.startswith(m, i) and (m == "//" or i == 0 or line[i - 1] in " \t"):
                    if m == "//" and i > 0 and line[i - 1] == ":":
                        continue  # http://
                    return line[:i]
            if c in "\"'`" and not (c == "'" and "'" in markers):
                quote = c
        i += 1
    return line


COMMENTS = {
    "sh": ("#",),
    "python": ("#",),
    "toml": ("#",),
    "js": ("//",),
    "ts": ("//",),
    "vb": ("'",),
    "json": (),
}


def code_of(lang: str, code: str) -> List[str]:
    """A code block's lines without comments, trailing blanks and empty lines. A block without a
    language is a listing (a directory tree with descriptions, a log line): its first column."""
    if not lang:
        return [line.split()[0] for line in code.split("\n") if line.strip() and not line[0].isspace()]
    markers = COMMENTS.get(lang, ("#",))
    out = []
    for line in code.split("\n"):
        line = strip_comment(line, markers).rstrip()
        if line.strip():
            out.append(line)
    return out


def code_spans(heading: str) -> List[str]:
    return re.findall(r"`([^`]+)`", heading)


GLOSSARY = "用語集"


class ReadmeJaInStep(unittest.TestCase):
    def setUp(self):
        self.en_blocks, self.en_heads = blocks_and_headings(read("README.md"))
        self.ja_blocks, self.ja_heads = blocks_and_headings(read("README.ja.md"))

    def ja_without_glossary(self) -> List[Tuple[int, str]]:
        return [h for h in self.ja_heads if h[1] != GLOSSARY]

    def test_the_same_sections_in_the_same_order(self):
        en = [level for level, _ in self.en_heads]
        ja = [level for level, _ in self.ja_without_glossary()]
        self.assertEqual(
            ja, en,
            "README.ja.md's headings differ from README.md's:\n"
            + "\n".join(f"{'#' * l} {t}" for l, t in self.ja_without_glossary()))
        for (_, e), (_, j) in zip(self.en_heads, self.ja_without_glossary()):
            self.assertEqual(code_spans(j), code_spans(e), f"heading {e!r} / {j!r}")

    def test_the_same_recipes_once_comments_are_stripped(self):
        self.assertGreaterEqual(len(self.en_blocks), 30, "the extraction of code blocks broke")
        self.assertEqual(len(self.ja_blocks), len(self.en_blocks), "a different number of code blocks")
        for n, ((el, ec), (jl, jc)) in enumerate(zip(self.en_blocks, self.ja_blocks), 1):
            with self.subTest(block=n, first_line=ec.split("\n")[0]):
                self.assertEqual(jl, el, "another language")
                self.assertEqual(code_of(jl, jc), code_of(el, ec))

    def test_recipe_markers_match(self):
        en = re.findall(r"<!-- recipe: (\S+) -->", read("README.md"))
        ja = re.findall(r"<!-- recipe: (\S+) -->", read("README.ja.md"))
        self.assertEqual(ja, en)

    def test_recipe_comments_are_translated(self):
        """A comment line that is English prose in README.md is not left in English in README.ja.md
        (answers shown as examples, JSON and commands in comments are not prose)."""
        english = re.compile(r"^\s*(#|//|')\s*[A-Za-z][a-z]+( [a-z][A-Za-z,'.-]*){3,}")
        japanese = re.compile(r"[\u3040-\u30ff\u4e00-\u9fff]")
        left: List[str] = []
        for lang, code in self.ja_blocks:
            for line in code.split("\n"):
                if english.match(line) and not japanese.search(line):
                    left.append(line.strip())
        self.assertEqual(left, [], "comments still in English in README.ja.md")

    def test_no_line_names_the_commit_it_was_translated_from(self):
        found = re.findall(r"(?i)(?:コミット|commit)\s*[0-9a-f]{7,}", read("README.ja.md"))
        self.assertEqual(found, [])

    def test_the_error_guide_is_linked(self):
        self.assertTrue("docs/errors.ja.md" in read("README.ja.md"), "README.ja.md does not link it")

    def test_self_check_stripping(self):
        self.assertEqual(code_of("sh", "curl http://x/a#b  # a comment\n# only a comment\n"),
                         ["curl http://x/a#b"])
        self.assertEqual(code_of("js", "const u = 'https://x'; // note\n  // gone\nf(); "),
                         ["const u = 'https://x';", "f();"])
        self.assertEqual(code_of("vb", "MsgBox \"it's\" ' say it\n' gone"), ['MsgBox "it\'s"'])
        self.assertEqual(code_of("sh", "echo \"a # b\" # c"), ['echo "a # b"'])


# --- one vocabulary ----------------------------------------------------------------------------

# The words to use (the brief's 用語集) and those that drift from them.
USE = ["カウンター", "番号を発行", "採番", "once 記録", "一度きりの処理", "確保", "欠番", "失効",
       "リースが切れ", "ロール", "ロックを取得", "解放", "発火", "二重実行", "二重処理", "排他制御",
       "冪等", "リース", "フェンシングトークン", "名前空間"]
AVOID = {
    "発番": "番号を発行する",
    "処理記録": "once 記録",
    "無効化": "欠番にする / 失効させる",
    "取り消し": "欠番にする / 失効させる",
}


def glossary_section(text: str) -> str:
    m = re.search(r"^## " + GLOSSARY + r"\n(.*?)(?=^## )", text, re.S | re.M)
    return m.group(1) if m else ""


def ja_dictionary() -> str:
    js = read("web", "i18n.js")
    m = re.search(r"^const ja = \{\n(.*?)^\};", js, re.S | re.M)
    assert m, "web/i18n.js has no `const ja = {…};`"
    return m.group(1)


def ja_strings(dictionary: str) -> Dict[str, str]:
    return dict(re.findall(r"'([\w.]+)':\s*'((?:[^'\\]|\\.)*)'", dictionary))


class OneVocabulary(unittest.TestCase):
    def test_the_readme_has_the_glossary_with_every_word(self):
        g = glossary_section(read("README.ja.md"))
        self.assertTrue(g, "README.ja.md has no '## 用語集' section")
        for w in USE:
            self.assertIn(w, g, f"the glossary lacks {w}")
        for w in AVOID:
            self.assertIn(w, g, f"the glossary does not say to avoid {w}")

    def check_text(self, name: str, text: str):
        for word, use in AVOID.items():
            lines = [l for l in text.split("\n") if word in l]
            self.assertEqual(lines, [], f"{name} uses {word} (use {use})")
        # 起動 is the server's start-up only: an event 発火する a trigger or a bot.
        fired = re.compile(r"(ボット|Bot|bot|トリガー|スクリプト|ハンドラー|イベント|マクロ)[^。、\n]{0,12}起動"
                           r"|起動[^。、\n]{0,8}(ボット|Bot|トリガー)")
        self.assertEqual([l for l in text.split("\n") if fired.search(l)], [],
                         f"{name}: 起動 for a trigger or a bot (use 発火する)")
        # 権限 only as the general idea of permission, never for a role.
        self.assertNotRegex(text, r"権限\s*[（(]?\s*(reader|writer|admin)", f"{name}: a role called 権限")

    def test_the_readme_uses_the_glossarys_words(self):
        text = read("README.ja.md")
        g = glossary_section(text)
        self.check_text("README.ja.md", text.replace(g, ""))

    def test_the_error_guide_uses_the_glossarys_words(self):
        self.check_text("docs/errors.ja.md", read("docs", "errors.ja.md"))

    def test_the_dashboard_uses_the_glossarys_words(self):
        d = ja_dictionary()
        self.check_text("web/i18n.js (ja)", d)
        strings = ja_strings(d)
        self.assertEqual(strings["nav.counters"], "カウンター")
        self.assertEqual(strings["nav.once"], "once 記録")
        self.assertEqual(strings["t.role"], "ロール")
        self.assertIn("失効", strings["t.revoke"])
        self.assertIn("フェンシングトークン", strings["l.force_text"])

    def test_every_english_text_of_the_dashboard_has_a_japanese_one(self):
        js = read("web", "i18n.js")
        en = ja_strings(re.search(r"^const en = \{\n(.*?)^\};", js, re.S | re.M).group(1))
        ja = ja_strings(ja_dictionary())
        self.assertGreater(len(en), 100)
        self.assertEqual(sorted(set(en) - set(ja)), [], "English only")
        self.assertEqual(sorted(set(ja) - set(en)), [], "Japanese only")


# --- the error guide ---------------------------------------------------------------------------

def server_codes() -> Dict[str, int]:
    """Every wire code of errc with its HTTP status (src/base/errc.cc, src/http/error_mapping.cc)."""
    names = dict(re.findall(r"case errc::(\w+):\s*return \"(\w+)\";", read("src", "base", "errc.cc")))
    statuses = dict(re.findall(r"case errc::(\w+):\s*return (\d+);", read("src", "http", "error_mapping.cc")))
    assert names and set(names) == set(statuses), "errc.cc and error_mapping.cc do not parse alike"
    return {names[e]: int(statuses[e]) for e in names}


CLIENT_SOURCES = {
    "Apps Script": ("clients", "gas", "Ichido.gs"),
    "VBA": ("clients", "vba", "Ichido.bas"),
    "Python": ("clients", "python", "src", "ichido", "_client.py"),
    "Node.js": ("clients", "node", "index.js"),
}


def client_codes() -> Dict[str, Set[str]]:
    """Every code a client library makes itself: code -> the clients that make it."""
    pattern = re.compile(r"""(?:IchidoError|RaiseIchido)\(?\s*['"]([a-z_]+)['"]""")
    out: Dict[str, Set[str]] = {}
    for client, path in CLIENT_SOURCES.items():
        for code in pattern.findall(read(*path)):
            out.setdefault(code, set()).add(client)
    return out


OUTCOMES = {"in_progress", "dead"}  # once/begin outcomes the clients throw as codes


def guide() -> Dict[str, str]:
    """code -> its 種類 line."""
    text = read("docs", "errors.ja.md")
    out: Dict[str, str] = {}
    for m in re.finditer(r"^### `(\w+)`[^\n]*\n\n種類: (.+)$", text, re.M):
        assert m.group(1) not in out, f"{m.group(1)} twice"
        out[m.group(1)] = m.group(2)
    headed = re.findall(r"^### (.*)$", text, re.M)
    assert len(headed) == len(out), f"a code section without its 種類 line: {headed}"
    return out


class ErrorGuide(unittest.TestCase):
    def setUp(self):
        self.guide = guide()
        self.server = server_codes()
        self.clients = client_codes()

    def test_the_codes_the_users_meet_most_come_first(self):
        first = list(self.guide)[:11]
        self.assertEqual(first, ["counter_not_found", "counter_exhausted", "key_required",
                                 "lock_timeout", "in_progress", "dead", "stale_token",
                                 "fingerprint_mismatch", "complete_unconfirmed", "unreachable",
                                 "forbidden"])

    def test_every_server_code_is_covered_with_its_status(self):
        for code, status in self.server.items():
            with self.subTest(code=code):
                self.assertIn(code, self.guide, "the guide lacks a server code")
                self.assertTrue(self.guide[code].startswith(f"サーバーのエラー（HTTP {status}"),
                                self.guide[code])

    def test_every_code_the_clients_make_is_covered_and_called_a_clients(self):
        self.assertIn("unreachable", self.clients)  # the extraction works
        for code, makers in self.clients.items():
            if code in OUTCOMES:
                continue
            with self.subTest(code=code):
                self.assertIn(code, self.guide, "the guide lacks a client code")
                kind = self.guide[code]
                self.assertTrue(kind.startswith("クライアントのコード"), kind)
                for client in makers:
                    self.assertIn(client, kind, f"{code} is made by {client} too")

    def test_every_code_the_guide_names_exists_and_is_of_the_kind_it_says(self):
        for code, kind in self.guide.items():
            with self.subTest(code=code):
                if kind.startswith("サーバーのエラー"):
                    self.assertIn(code, self.server)
                elif kind.startswith("サーバーの応答"):
                    self.assertIn(code, OUTCOMES)
                    self.assertRegex(read("docs", "openapi.yaml"), r"enum: \[[^\]]*\b" + code + r"\b")
                else:
                    self.assertTrue(kind.startswith("クライアントのコード"), kind)
                    self.assertNotIn(code, self.server, "a server code called a client's")
                    self.assertIn(code, self.clients, "no client makes this code")


if __name__ == "__main__":
    unittest.main()
