"""A checker and interpreter for the subset of VBA 7 that clients/vba and examples/*.bas are written
in, so that their code can run in `make test` (there is no VBA runtime on Linux). Standard library
only.

What it does:
  * parses modules (Attribute lines, Option Explicit, #If VBA7/Win64 … #Else … #End If, Declare,
    Const, module variables, Sub/Function with ByVal/ByRef/Optional parameters, line
    continuations, comments);
  * checks what the VBA compiler would refuse (check_project): Option Explicit in every module,
    every identifier declared or known, block structure, argument counts of calls to the project's
    procedures, `Foo(a, b)` as a statement, Set on a non-object variable and Let on an object one,
    a Declare without PtrSafe under VBA7, LongLong/LongPtr outside a #If, duplicate declarations;
  * runs procedures with VBA's semantics where these modules depend on them: typed variables with
    VBA's conversions on assignment (Long overflow at 2^31, banker's rounding, Type mismatch),
    ByRef/ByVal, Optional defaults, functions returning through their name, Set vs Let, If/
    ElseIf/Select Case (lists, ranges, Is)/For/For Each/Do While|Until/Exit, On Error Resume Next
    / GoTo label / GoTo 0 with Resume, Err (Number, Description, Source, Raise, Clear), the
    string, conversion and math built-ins used here, Scripting.Dictionary, Collection and
    MSXML2.ServerXMLHTTP.6.0 (real HTTP through http.client: setTimeouts, Open, setRequestHeader,
    send, Status, responseText; the body of send(String) goes out as UTF-8, as MSXML does).

What it is not: the VBA compiler or Office. Host objects (Outlook's MailItem, Excel's sheets) are
Python fakes given by the test. clients/vba/README.md says exactly what was and was not run.
"""

from __future__ import annotations

import datetime
import http.client
import math
import os
import random
import re
import ssl
import sys
import threading
import time
import urllib.parse
from typing import Any, Callable, Dict, List, Optional, Tuple

# --- values -------------------------------------------------------------------------------------


class _Special:
    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


EMPTY = _Special("Empty")
NULL = _Special("Null")
NOTHING = _Special("Nothing")


class VbaError(Exception):
    """A VBA runtime error (or, with number 0 and compile=True, a compile error)."""

    def __init__(self, number: int, description: str, source: str = "", line: int = 0, compile: bool = False):
        super().__init__(f"{'compile error' if compile else f'error {number}'}: {description}" + (f" (line {line})" if line else ""))
        self.number = number
        self.description = description
        self.source = source
        self.line = line
        self.compile = compile


def compile_error(msg: str, module: str = "", line: int = 0) -> VbaError:
    return VbaError(0, f"{module}:{line}: {msg}" if module else msg, line=line, compile=True)


VB_OBJECT_ERROR = -2147221504


class VbObject:
    """Base of the objects VBA code can hold (Set). Members are looked up case-insensitively."""

    type_name = "Object"

    def vba_get(self, name: str, args: List[Any]) -> Any:
        raise VbaError(438, f"Object doesn't support this property or method ({name})")

    def vba_let(self, name: str, args: List[Any], value: Any) -> None:
        raise VbaError(438, f"Object doesn't support this property or method ({name})")

    def vba_default(self, args: List[Any]) -> Any:
        return self.vba_get("item", args)

    def vba_default_let(self, args: List[Any], value: Any) -> None:
        self.vba_let("item", args, value)

    def vba_iter(self) -> List[Any]:
        raise VbaError(438, "Object doesn't support For Each")


class Dictionary(VbObject):
    type_name = "Dictionary"

    def __init__(self) -> None:
        self.d: Dict[Any, Any] = {}

    def _k(self, key: Any) -> Any:
        return key

    def vba_get(self, name: str, args: List[Any]) -> Any:
        n = name.lower()
        if n == "item":
            k = self._k(args[0])
            if k not in self.d:
                self.d[k] = EMPTY  # reading a missing key adds it, as Scripting.Dictionary does
            return self.d[k]
        if n == "exists":
            return self._k(args[0]) in self.d
        if n == "add":
            k = self._k(args[0])
            if k in self.d:
                raise VbaError(457, "This key is already associated with an element of this collection")
            self.d[k] = args[1]
            return EMPTY
        if n == "remove":
            k = self._k(args[0])
            if k not in self.d:
                raise VbaError(32811, "Element not found")
            del self.d[k]
            return EMPTY
        if n == "count":
            return len(self.d)
        if n == "keys":
            return list(self.d.keys())
        if n == "items":
            return list(self.d.values())
        if n == "removeall":
            self.d.clear()
            return EMPTY
        return super().vba_get(name, args)

    def vba_let(self, name: str, args: List[Any], value: Any) -> None:
        if name.lower() == "item":
            self.d[self._k(args[0])] = value
            return
        super().vba_let(name, args, value)

    def vba_iter(self) -> List[Any]:
        return list(self.d.keys())


class Collection(VbObject):
    type_name = "Collection"

    def __init__(self) -> None:
        self.items: List[Any] = []

    def vba_get(self, name: str, args: List[Any]) -> Any:
        n = name.lower()
        if n == "add":
            self.items.append(args[0])
            return EMPTY
        if n == "item":
            i = to_long(args[0])
            if not 1 <= i <= len(self.items):
                raise VbaError(9, "Subscript out of range")
            return self.items[i - 1]
        if n == "count":
            return len(self.items)
        if n == "remove":
            i = to_long(args[0])
            if not 1 <= i <= len(self.items):
                raise VbaError(9, "Subscript out of range")
            del self.items[i - 1]
            return EMPTY
        return super().vba_get(name, args)

    def vba_iter(self) -> List[Any]:
        return list(self.items)


class ServerXMLHTTP(VbObject):
    """MSXML2.ServerXMLHTTP.6.0, synchronous: real HTTP(S) through http.client. A failure to connect
    or to get an answer raises a runtime error from send, as MSXML does (its numbers)."""

    type_name = "IServerXMLHTTPRequest2"
    cafile: Optional[str] = None  # https: the CA to trust (the test's self-signed one)
    log: List[Dict[str, Any]] = []  # every request sent: {method, url, headers, body}
    log_lock = threading.Lock()

    def __init__(self) -> None:
        self.method = ""
        self.url = ""
        self.headers: Dict[str, str] = {}
        self.timeouts = (60000, 60000, 30000, 30000)
        self.status = 0
        self.text = ""
        self.response_headers: Dict[str, str] = {}
        self.opened = False
        self.proxy: Optional[Tuple[str, int]] = None
        self.bypass: List[str] = []

    @staticmethod
    def _close(conn: Optional[http.client.HTTPConnection]) -> None:
        if conn is not None:
            conn.close()

    def _bypassed(self, host: str) -> bool:
        for b in self.bypass:
            if b == "<local>" and "." not in host:
                return True
            if b and re.fullmatch(re.escape(b).replace(r"\*", ".*"), host, re.I):
                return True
        return False

    def vba_get(self, name: str, args: List[Any]) -> Any:
        n = name.lower()
        if n == "setproxy":
            # setProxy(2 = SXH_PROXY_SET_PROXY, "host:port", "bypass;list"); 1 = direct; 0 = WinHTTP's own.
            setting = to_long(args[0])
            if setting == 2:
                host, _, port = to_str(args[1]).rpartition(":")
                if not host or not port.isdigit():
                    raise VbaError(-2147024809, "The parameter is incorrect (proxy server must be host:port)")
                self.proxy = (host, int(port))
                self.bypass = [b.strip() for b in to_str(args[2]).split(";")] if len(args) > 2 else []
            else:
                self.proxy = None
            return EMPTY
        if n == "settimeouts":
            self.timeouts = tuple(to_long(a) for a in args)  # type: ignore[assignment]
            return EMPTY
        if n == "open":
            self.method = to_str(args[0]).upper()
            self.url = to_str(args[1])
            if len(args) > 2 and to_bool(args[2]):
                raise VbaError(5, "this test double supports synchronous requests only")
            self.opened = True
            self.headers = {}
            return EMPTY
        if n == "setrequestheader":
            if not self.opened:
                raise VbaError(-1072896750, "The object is in an invalid state")
            self.headers[to_str(args[0])] = to_str(args[1])
            return EMPTY
        if n == "send":
            self._send(args[0] if args else EMPTY)
            return EMPTY
        if n == "status":
            return self.status
        if n == "responsetext":
            return self.text
        if n == "getresponseheader":
            return self.response_headers.get(to_str(args[0]).lower(), "")
        return super().vba_get(name, args)

    def _send(self, body: Any) -> None:
        if not self.opened:
            raise VbaError(-1072896750, "The object is in an invalid state")
        data = None if body is EMPTY else py_str(to_str(body)).encode("utf-8")
        u = urllib.parse.urlsplit(self.url)
        path = u.path + ("?" + u.query if u.query else "")
        connect_s = self.timeouts[1] / 1000
        receive_s = self.timeouts[3] / 1000
        with ServerXMLHTTP.log_lock:
            ServerXMLHTTP.log.append({"method": self.method, "url": self.url, "headers": dict(self.headers), "body": None if data is None else data.decode("utf-8")})
        via = self.proxy if self.proxy is not None and not self._bypassed(u.hostname or "") else None
        conn: Optional[http.client.HTTPConnection] = None
        try:
            if u.scheme == "https":
                ctx = ssl.create_default_context(cafile=ServerXMLHTTP.cafile)
                if via is not None:  # a CONNECT tunnel through the proxy
                    conn = http.client.HTTPSConnection(via[0], via[1], timeout=connect_s, context=ctx)
                    conn.set_tunnel(u.hostname or "", u.port or 443)
                else:
                    conn = http.client.HTTPSConnection(u.hostname, u.port or 443, timeout=connect_s, context=ctx)
            elif via is not None:  # the absolute URL to the proxy
                conn = http.client.HTTPConnection(via[0], via[1], timeout=connect_s)
                path = self.url
            else:
                conn = http.client.HTTPConnection(u.hostname, u.port or 80, timeout=connect_s)
            conn.connect()
            assert conn.sock is not None
            conn.sock.settimeout(receive_s)
            conn.request(self.method, path, body=data, headers=self.headers)
            res = conn.getresponse()
            raw = res.read()
            self.status = res.status
            self.response_headers = {k.lower(): v for k, v in res.getheaders()}
            self.text = vba_str(raw.decode("utf-8", errors="replace"))
            conn.close()
        except socket_timeout:
            self._close(conn)
            raise VbaError(-2147012894, "The operation timed out")
        except ConnectionRefusedError:
            self._close(conn)
            raise VbaError(-2147012867, "A connection with the server could not be established")
        except ssl.SSLError as e:
            self._close(conn)
            raise VbaError(-2147012851, f"The certificate authority is invalid or incorrect ({e})")
        except (OSError, http.client.HTTPException) as e:
            self._close(conn)
            raise VbaError(-2147012866, f"The connection with the server was terminated abnormally ({e})")


import socket  # noqa: E402

socket_timeout = socket.timeout


class ErrObject(VbObject):
    type_name = "ErrObject"

    def __init__(self) -> None:
        self.clear()

    def clear(self) -> None:
        self.number = 0
        self.description = ""
        self.source = ""

    def set(self, e: VbaError) -> None:
        self.number = e.number
        self.description = e.description
        self.source = e.source or "VBAProject"

    def vba_get(self, name: str, args: List[Any]) -> Any:
        n = name.lower()
        if n == "number":
            return self.number
        if n == "description":
            return self.description
        if n == "source":
            return self.source
        if n == "clear":
            self.clear()
            return EMPTY
        if n == "raise":
            number = to_long(args[0])
            source = to_str(args[1]) if len(args) > 1 and args[1] is not EMPTY else ""
            desc = to_str(args[2]) if len(args) > 2 and args[2] is not EMPTY else f"Application-defined or object-defined error"
            raise VbaError(number, desc, source)
        return super().vba_get(name, args)

    def vba_default(self, args: List[Any]) -> Any:
        return self.number


class DebugObject(VbObject):
    type_name = "Debug"

    def __init__(self, out: List[str]) -> None:
        self.out = out

    def vba_get(self, name: str, args: List[Any]) -> Any:
        if name.lower() == "print":
            self.out.append(" ".join(to_str(a) for a in args))
            return EMPTY
        return super().vba_get(name, args)


def vba_str(s: str) -> str:
    """A Python string as VBA holds it: UTF-16 code units (a character beyond U+FFFF becomes a
    surrogate pair of two "characters", as Len and Mid$ see it in VBA)."""
    if all(ord(c) <= 0xFFFF for c in s):
        return s
    data = s.encode("utf-16-le", "surrogatepass")
    return "".join(chr(int.from_bytes(data[i : i + 2], "little")) for i in range(0, len(data), 2))


def py_str(s: str) -> str:
    """A VBA string (UTF-16 code units) as a Python string (surrogate pairs joined)."""
    if not any(0xD800 <= ord(c) <= 0xDFFF for c in s):
        return s
    data = b"".join(ord(c).to_bytes(2, "little") for c in s)
    return data.decode("utf-16-le", "surrogatepass")


# --- conversions (VBA's rules, for what these modules use) ---------------------------------------


def vba_round(x: float) -> int:
    """Banker's rounding, as CLng/CInt and assignment to an integer type do."""
    f = math.floor(x)
    d = x - f
    if d > 0.5 or (d == 0.5 and f % 2 == 1):
        return int(f) + 1
    return int(f)


def to_num(v: Any) -> Any:
    if isinstance(v, bool):
        return -1 if v else 0
    if isinstance(v, (int, float)):
        return v
    if v is EMPTY:
        return 0
    if isinstance(v, str):
        s = v.strip()
        try:
            if re.fullmatch(r"[-+]?\d+", s):
                return int(s)
            return float(s)
        except ValueError:
            raise VbaError(13, "Type mismatch")
    if v is NULL:
        raise VbaError(94, "Invalid use of Null")
    raise VbaError(13, "Type mismatch")


def to_long(v: Any) -> int:
    n = to_num(v)
    n = vba_round(n) if isinstance(n, float) else n
    if not -2147483648 <= n <= 2147483647:
        raise VbaError(6, "Overflow")
    return int(n)


def to_int(v: Any) -> int:
    n = to_long(v)
    if not -32768 <= n <= 32767:
        raise VbaError(6, "Overflow")
    return n


def to_double(v: Any) -> float:
    return float(to_num(v))


def to_bool(v: Any) -> bool:
    if isinstance(v, bool):
        return v
    if isinstance(v, str):
        if v.lower() == "true":
            return True
        if v.lower() == "false":
            return False
    return to_num(v) != 0


def fmt_double(x: float) -> str:
    """CStr of a Double: up to 15 significant digits, E notation beyond."""
    if x == int(x) and abs(x) < 1e15:
        return str(int(x))
    s = f"{x:.15G}"
    if "E" in s:
        mant, exp = s.split("E")
        if "." in mant:
            mant = mant.rstrip("0").rstrip(".")
        e = int(exp)
        return f"{mant}E{'+' if e >= 0 else '-'}{abs(e):02d}"
    if "." in s:
        s = s.rstrip("0").rstrip(".")
    return s


def to_str(v: Any) -> str:
    if isinstance(v, str):
        return v
    if isinstance(v, bool):
        return "True" if v else "False"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return fmt_double(v)
    if v is EMPTY:
        return ""
    if v is NULL:
        raise VbaError(94, "Invalid use of Null")
    raise VbaError(13, "Type mismatch")


def coerce(v: Any, vtype: str) -> Any:
    """The value stored by `Let var = v` for a variable of type vtype."""
    t = vtype.lower()
    if t in ("variant", ""):
        return v
    if isinstance(v, VbObject) or v is NOTHING:
        if t in ("object", "collection", "dictionary"):
            return v
        raise VbaError(13, "Type mismatch")
    if t == "string":
        return to_str(v)
    if t == "long":
        return to_long(v)
    if t == "integer":
        return to_int(v)
    if t in ("double", "single", "date", "currency"):
        return to_double(v)
    if t == "boolean":
        return to_bool(v)
    if t == "longptr" or t == "longlong":
        n = to_num(v)
        return vba_round(n) if isinstance(n, float) else int(n)
    if t in ("object", "collection", "dictionary"):
        raise VbaError(91, "Object variable or With block variable not set")
    raise VbaError(13, f"unsupported type {vtype}")


def default_of(vtype: str) -> Any:
    t = vtype.lower()
    if t == "string":
        return ""
    if t in ("long", "integer", "longptr", "longlong"):
        return 0
    if t in ("double", "single", "date", "currency"):
        return 0.0
    if t == "boolean":
        return False
    if t in ("object", "collection", "dictionary"):
        return NOTHING
    return EMPTY


def is_object(v: Any) -> bool:
    return isinstance(v, VbObject) or v is NOTHING


def type_name(v: Any) -> str:
    if isinstance(v, VbObject):
        return v.type_name
    if v is NOTHING:
        return "Nothing"
    if v is EMPTY:
        return "Empty"
    if v is NULL:
        return "Null"
    if isinstance(v, bool):
        return "Boolean"
    if isinstance(v, int):
        return "Long"
    if isinstance(v, float):
        return "Double"
    if isinstance(v, str):
        return "String"
    if isinstance(v, list):
        return "Variant()"
    return "Object"


def var_type(v: Any) -> int:
    if v is EMPTY:
        return 0
    if v is NULL:
        return 1
    if isinstance(v, bool):
        return 11
    if isinstance(v, int):
        return 3
    if isinstance(v, float):
        return 5
    if isinstance(v, str):
        return 8
    if isinstance(v, list):
        return 8204
    return 9


# --- tokens ------------------------------------------------------------------------------------

TOKEN = re.compile(
    r"""
    (?P<ws>[ \t]+)
  | (?P<str>"(?:[^"]|"")*")
  | (?P<hex>&H[0-9A-Fa-f]+&?)
  | (?P<num>(?:\d+\.\d*|\.\d+|\d+)(?:[eE][+-]?\d+)?[#&!@]?)
  | (?P<id>[A-Za-z_][A-Za-z0-9_]*[$%&!#@]?)
  | (?P<op><>|<=|>=|:=|[-+*/\\^&=<>(),.:!#])
    """,
    re.X,
)


class Tok:
    __slots__ = ("kind", "text", "value")

    def __init__(self, kind: str, text: str, value: Any = None) -> None:
        self.kind = kind
        self.text = text
        self.value = value

    def is_(self, word: str) -> bool:
        return self.kind == "id" and self.value == word

    def __repr__(self) -> str:
        return f"{self.kind}:{self.text}"


def strip_comment(line: str) -> str:
    out = []
    in_str = False
    for ch in line:
        if ch == '"':
            in_str = not in_str
        elif ch == "'" and not in_str:
            break
        out.append(ch)
    return "".join(out).rstrip()


def tokenize(text: str, module: str, line: int) -> List[Tok]:
    toks: List[Tok] = []
    pos = 0
    while pos < len(text):
        m = TOKEN.match(text, pos)
        if not m:
            raise compile_error(f"unexpected character {text[pos]!r}", module, line)
        pos = m.end()
        kind = m.lastgroup
        t = m.group()
        if kind == "ws":
            continue
        if kind == "str":
            toks.append(Tok("str", t, t[1:-1].replace('""', '"')))
        elif kind == "hex":
            v = int(t[2:].rstrip("&"), 16)
            if not t.endswith("&") and v > 0x7FFF and v <= 0xFFFF:
                v -= 0x10000
            elif v > 0x7FFFFFFF:
                v -= 0x100000000
            toks.append(Tok("num", t, v))
        elif kind == "num":
            body = t.rstrip("#&!@")
            if t.endswith("#") or t.endswith("!") or "." in body or "e" in body.lower():
                toks.append(Tok("num", t, float(body)))
            else:
                toks.append(Tok("num", t, int(body)))
        elif kind == "id":
            toks.append(Tok("id", t, t.lower()))
        else:
            toks.append(Tok("op", t, t))
    return toks


# --- AST -----------------------------------------------------------------------------------------


class Node:
    line = 0


class Lit(Node):
    def __init__(self, value: Any) -> None:
        self.value = value


class Name(Node):
    def __init__(self, name: str, text: str) -> None:
        self.name = name  # lower case, without a type suffix
        self.text = text


class Member(Node):
    def __init__(self, obj: Node, name: str) -> None:
        self.obj = obj
        self.name = name


class CallOrIndex(Node):
    def __init__(self, target: Node, args: List[Node]) -> None:
        self.target = target
        self.args = args


class Unary(Node):
    def __init__(self, op: str, operand: Node) -> None:
        self.op = op
        self.operand = operand


class Binary(Node):
    def __init__(self, op: str, left: Node, right: Node) -> None:
        self.op = op
        self.left = left
        self.right = right


class NewObj(Node):
    def __init__(self, cls: str) -> None:
        self.cls = cls


class Stmt:
    line = 0


class DimStmt(Stmt):
    def __init__(self, decls: List[Tuple[str, str, bool]]) -> None:
        self.decls = decls  # (name, type, as_new)


class ConstStmt(Stmt):
    def __init__(self, name: str, vtype: str, expr: Node) -> None:
        self.name = name
        self.vtype = vtype
        self.expr = expr


class Assign(Stmt):
    def __init__(self, target: Node, expr: Node, is_set: bool) -> None:
        self.target = target
        self.expr = expr
        self.is_set = is_set


class CallStmt(Stmt):
    def __init__(self, target: Node, args: List[Node], explicit: bool) -> None:
        self.target = target
        self.args = args
        self.explicit = explicit


class IfStmt(Stmt):
    def __init__(self, branches: List[Tuple[Optional[Node], List[Stmt]]]) -> None:
        self.branches = branches  # (condition or None for Else, body)


class SelectStmt(Stmt):
    def __init__(self, expr: Node, cases: List[Tuple[Optional[List[Tuple[str, Any]]], List[Stmt]]]) -> None:
        self.expr = expr
        self.cases = cases  # ([("eq", node) | ("range", (a, b)) | ("is", (op, node))] or None for Else, body)


class ForStmt(Stmt):
    def __init__(self, var: str, start: Node, end: Node, step: Optional[Node], body: List[Stmt]) -> None:
        self.var = var
        self.start = start
        self.end = end
        self.step = step
        self.body = body


class ForEachStmt(Stmt):
    def __init__(self, var: str, coll: Node, body: List[Stmt]) -> None:
        self.var = var
        self.coll = coll
        self.body = body


class DoStmt(Stmt):
    def __init__(self, pre: Optional[Tuple[str, Node]], post: Optional[Tuple[str, Node]], body: List[Stmt]) -> None:
        self.pre = pre
        self.post = post
        self.body = body


class ExitStmt(Stmt):
    def __init__(self, what: str) -> None:
        self.what = what


class OnErrorStmt(Stmt):
    def __init__(self, mode: str, label: str = "") -> None:
        self.mode = mode  # "resume_next" | "goto" | "zero"
        self.label = label


class ResumeStmt(Stmt):
    def __init__(self, label: str) -> None:
        self.label = label  # "" = Resume (same statement), "next", or a label


class LabelStmt(Stmt):
    def __init__(self, name: str) -> None:
        self.name = name


class Param:
    def __init__(self, name: str, vtype: str, byval: bool, optional: bool, default: Optional[Node]) -> None:
        self.name = name
        self.vtype = vtype
        self.byval = byval
        self.optional = optional
        self.default = default


class Proc:
    def __init__(self, module: "Module", name: str, kind: str, public: bool, params: List[Param], rtype: str, line: int) -> None:
        self.module = module
        self.name = name
        self.kind = kind  # "sub" | "function"
        self.public = public
        self.params = params
        self.rtype = rtype
        self.body: List[Stmt] = []
        self.line = line
        self.labels: Dict[str, int] = {}


class Module:
    def __init__(self, name: str, path: str) -> None:
        self.name = name
        self.path = path
        self.option_explicit = False
        self.procs: Dict[str, Proc] = {}
        self.vars: Dict[str, Tuple[str, bool, bool]] = {}  # name -> (type, public, as_new)
        self.consts: Dict[str, Tuple[str, bool, Node]] = {}
        self.declares: Dict[str, Tuple[str, bool]] = {}  # name -> (lib proc, public)
        self.declare_lines: List[Tuple[int, bool, bool]] = []  # (line, ptrsafe, under_vba7)
        self.type_lines: List[Tuple[int, str]] = []


# --- parsing ------------------------------------------------------------------------------------

BLOCK_END_WORDS = {"end", "next", "loop", "else", "elseif", "case", "wend"}


class Parser:
    def __init__(self, module: Module, lines: List[Tuple[int, str]]) -> None:
        self.m = module
        self.lines = lines  # (line number, code without comment, continuations joined)
        self.i = 0

    def err(self, msg: str, line: int) -> VbaError:
        return compile_error(msg, self.m.name, line)

    # Expressions ---------------------------------------------------------------------------------

    def parse_expr_tokens(self, toks: List[Tok], line: int) -> Node:
        self.toks = toks
        self.p = 0
        self.line = line
        e = self.expr()
        if self.p != len(toks):
            raise self.err(f"unexpected {toks[self.p].text!r}", line)
        return e

    def peek(self) -> Optional[Tok]:
        return self.toks[self.p] if self.p < len(self.toks) else None

    def take(self) -> Tok:
        t = self.toks[self.p]
        self.p += 1
        return t

    def accept_op(self, op: str) -> bool:
        t = self.peek()
        if t is not None and t.kind == "op" and t.value == op:
            self.p += 1
            return True
        return False

    def accept_word(self, word: str) -> bool:
        t = self.peek()
        if t is not None and t.is_(word):
            self.p += 1
            return True
        return False

    def expect_op(self, op: str) -> None:
        if not self.accept_op(op):
            t = self.peek()
            raise self.err(f"expected {op!r}, found {t.text if t else 'end of line'!r}", self.line)

    def node(self, n: Node) -> Node:
        n.line = self.line
        return n

    def expr(self) -> Node:
        return self.or_expr()

    def or_expr(self) -> Node:
        left = self.and_expr()
        while True:
            if self.accept_word("or"):
                left = self.node(Binary("or", left, self.and_expr()))
            elif self.accept_word("xor"):
                left = self.node(Binary("xor", left, self.and_expr()))
            else:
                return left

    def and_expr(self) -> Node:
        left = self.not_expr()
        while self.accept_word("and"):
            left = self.node(Binary("and", left, self.not_expr()))
        return left

    def not_expr(self) -> Node:
        if self.accept_word("not"):
            return self.node(Unary("not", self.not_expr()))
        return self.cmp_expr()

    def cmp_expr(self) -> Node:
        left = self.concat_expr()
        while True:
            t = self.peek()
            if t is not None and t.kind == "op" and t.value in ("=", "<>", "<", ">", "<=", ">="):
                self.p += 1
                left = self.node(Binary(t.value, left, self.concat_expr()))
            elif t is not None and t.is_("is"):
                self.p += 1
                left = self.node(Binary("is", left, self.concat_expr()))
            else:
                return left

    def concat_expr(self) -> Node:
        left = self.add_expr()
        while self.accept_op("&"):
            left = self.node(Binary("&", left, self.add_expr()))
        return left

    def add_expr(self) -> Node:
        left = self.mod_expr()
        while True:
            if self.accept_op("+"):
                left = self.node(Binary("+", left, self.mod_expr()))
            elif self.accept_op("-"):
                left = self.node(Binary("-", left, self.mod_expr()))
            else:
                return left

    def mod_expr(self) -> Node:
        left = self.idiv_expr()
        while self.accept_word("mod"):
            left = self.node(Binary("mod", left, self.idiv_expr()))
        return left

    def idiv_expr(self) -> Node:
        left = self.mul_expr()
        while self.accept_op("\\"):
            left = self.node(Binary("\\", left, self.mul_expr()))
        return left

    def mul_expr(self) -> Node:
        left = self.neg_expr()
        while True:
            if self.accept_op("*"):
                left = self.node(Binary("*", left, self.neg_expr()))
            elif self.accept_op("/"):
                left = self.node(Binary("/", left, self.neg_expr()))
            else:
                return left

    def neg_expr(self) -> Node:
        if self.accept_op("-"):
            return self.node(Unary("-", self.neg_expr()))
        if self.accept_op("+"):
            return self.neg_expr()
        return self.pow_expr()

    def pow_expr(self) -> Node:
        left = self.postfix()
        while self.accept_op("^"):
            left = self.node(Binary("^", left, self.neg_or_postfix()))
        return left

    def neg_or_postfix(self) -> Node:
        if self.accept_op("-"):
            return self.node(Unary("-", self.postfix()))
        return self.postfix()

    def args(self) -> List[Node]:
        out: List[Node] = []
        if self.accept_op(")"):
            return out
        while True:
            out.append(self.expr())
            if self.accept_op(")"):
                return out
            self.expect_op(",")

    def postfix(self, stop_before_args: bool = False) -> Node:
        e = self.primary()
        while True:
            if self.accept_op("."):
                t = self.take()
                if t.kind != "id":
                    raise self.err("a member name is expected after '.'", self.line)
                e = self.node(Member(e, t.value.rstrip("$")))
            elif self.peek() is not None and self.peek().kind == "op" and self.peek().value == "(":  # type: ignore[union-attr]
                self.p += 1
                e = self.node(CallOrIndex(e, self.args()))
            else:
                return e

    def primary(self) -> Node:
        t = self.peek()
        if t is None:
            raise self.err("an expression is expected", self.line)
        self.p += 1
        if t.kind == "num":
            return self.node(Lit(t.value))
        if t.kind == "str":
            return self.node(Lit(t.value))
        if t.kind == "op" and t.value == "(":
            e = self.expr()
            self.expect_op(")")
            return e
        if t.kind == "id":
            w = t.value
            if w == "true":
                return self.node(Lit(True))
            if w == "false":
                return self.node(Lit(False))
            if w == "nothing":
                return self.node(Lit(NOTHING))
            if w == "empty":
                return self.node(Lit(EMPTY))
            if w == "null":
                return self.node(Lit(NULL))
            if w == "new":
                c = self.take()
                return self.node(NewObj(c.value))
            return self.node(Name(w.rstrip("$%&!#@"), t.text))
        raise self.err(f"unexpected {t.text!r}", self.line)

    # Statements ------------------------------------------------------------------------------------

    def parse_module(self) -> None:
        cond_stack: List[Tuple[bool, bool]] = []  # (this branch active, a branch was taken)
        body_lines: List[Tuple[int, str]] = []
        vba7_stack: List[bool] = []
        for ln, code in self.lines:
            s = code.strip()
            low = s.lower()
            if low.startswith("#if ") or low.startswith("#elseif ") or low == "#else" or low.startswith("#end if"):
                if low.startswith("#if "):
                    cond = self.eval_cond(s[4:], ln)
                    parent = all(a for a, _ in cond_stack)
                    cond_stack.append((parent and cond, cond))
                    vba7_stack.append("vba7" in low)
                elif low.startswith("#elseif "):
                    cond = self.eval_cond(s[8:], ln)
                    active, taken = cond_stack.pop()
                    cond_stack.append((not taken and cond, taken or cond))
                elif low == "#else":
                    if not cond_stack:
                        raise self.err("#Else without #If", ln)
                    active, taken = cond_stack.pop()
                    cond_stack.append((not taken, True))
                    vba7_stack[-1] = False
                else:
                    if not cond_stack:
                        raise self.err("#End If without #If", ln)
                    cond_stack.pop()
                    vba7_stack.pop()
                continue
            under_vba7 = bool(vba7_stack) and vba7_stack[-1]
            if re.match(r"(public\s+|private\s+)?declare\b", low):
                self.m.declare_lines.append((ln, " ptrsafe " in f" {low} ", under_vba7))
            if re.search(r"\blong(long|ptr)\b", low) and not cond_stack:
                self.m.type_lines.append((ln, s))
            if all(a for a, _ in cond_stack):
                body_lines.append((ln, s))
        if cond_stack:
            raise self.err("#If without #End If", self.lines[-1][0] if self.lines else 0)
        self.lines = body_lines
        self.i = 0
        while self.i < len(self.lines):
            ln, s = self.lines[self.i]
            self.i += 1
            if not s:
                continue
            low = s.lower()
            if low.startswith("attribute "):
                continue
            if low == "option explicit":
                self.m.option_explicit = True
                continue
            if low.startswith("option "):
                continue
            toks = tokenize(s, self.m.name, ln)
            public = False
            j = 0
            if toks[0].is_("public") or toks[0].is_("global"):
                public = True
                j = 1
            elif toks[0].is_("private") or toks[0].is_("dim"):
                j = 1
            head = toks[j] if j < len(toks) else None
            if head is not None and (head.is_("sub") or head.is_("function")):
                self.parse_proc(toks[j:], public, ln)
            elif head is not None and head.is_("const"):
                st = self.parse_const(toks[j + 1 :], ln)
                if st.name in self.m.consts or st.name in self.m.vars:
                    raise self.err(f"duplicate declaration of {st.name}", ln)
                self.m.consts[st.name] = (st.vtype, public, st.expr)
            elif head is not None and head.is_("declare"):
                self.parse_declare(toks[j + 1 :], public, ln)
            elif head is not None and (head.is_("type") or head.is_("enum") or head.is_("property")):
                raise self.err(f"{head.text} is outside the subset this checker runs", ln)
            elif j == 1 and head is not None and head.kind == "id":
                for name, vtype, as_new in self.parse_decls(toks[j:], ln):
                    if name in self.m.vars or name in self.m.consts:
                        raise self.err(f"duplicate declaration of {name}", ln)
                    self.m.vars[name] = (vtype, public, as_new)
            elif toks[0].is_("withevents") or (len(toks) > 1 and toks[1].is_("withevents")):
                continue
            else:
                raise self.err(f"only declarations may stand outside a procedure: {s!r}", ln)

    def eval_cond(self, text: str, ln: int) -> bool:
        t = text.strip()
        if t.lower().endswith(" then"):
            t = t[:-5]
        words = {"vba7": True, "win64": True, "win32": True, "mac": False}
        expr = t.lower()
        m = re.fullmatch(r"(not\s+)?(\w+)", expr.strip())
        if not m or m.group(2) not in words:
            raise self.err(f"unsupported #If condition {text!r}", ln)
        v = words[m.group(2)]
        return not v if m.group(1) else v

    def parse_decls(self, toks: List[Tok], ln: int) -> List[Tuple[str, str, bool]]:
        out = []
        p = 0
        while p < len(toks):
            t = toks[p]
            if t.kind != "id":
                raise self.err(f"a variable name is expected, found {t.text!r}", ln)
            if t.is_("withevents"):
                p += 1
                continue
            name = t.value.rstrip("$%&!#@")
            suffix = t.text[-1] if t.text[-1] in "$%&!#@" else ""
            vtype = {"$": "String", "%": "Integer", "&": "Long", "#": "Double", "!": "Single", "@": "Currency"}.get(suffix, "Variant")
            p += 1
            if p < len(toks) and toks[p].kind == "op" and toks[p].value == "(":
                raise self.err("arrays are outside the subset this checker runs", ln)
            as_new = False
            if p < len(toks) and toks[p].is_("as"):
                p += 1
                if p < len(toks) and toks[p].is_("new"):
                    as_new = True
                    p += 1
                vtype = toks[p].text
                p += 1
                while p < len(toks) and toks[p].kind == "op" and toks[p].value == ".":
                    vtype = vtype + "." + toks[p + 1].text
                    p += 2
            out.append((name, vtype, as_new))
            if p < len(toks):
                if not (toks[p].kind == "op" and toks[p].value == ","):
                    raise self.err(f"',' expected in a declaration, found {toks[p].text!r}", ln)
                p += 1
        return out

    def parse_const(self, toks: List[Tok], ln: int) -> ConstStmt:
        name = toks[0].value.rstrip("$%&!#@")
        p = 1
        vtype = "Variant"
        if p < len(toks) and toks[p].is_("as"):
            vtype = toks[p + 1].text
            p += 2
        if not (toks[p].kind == "op" and toks[p].value == "="):
            raise self.err("Const needs = value", ln)
        st = ConstStmt(name, vtype, self.parse_expr_tokens(toks[p + 1 :], ln))
        st.line = ln
        return st

    def parse_declare(self, toks: List[Tok], public: bool, ln: int) -> None:
        p = 0
        if p < len(toks) and toks[p].is_("ptrsafe"):
            p += 1
        kind = toks[p].value
        name = toks[p + 1].value
        if kind not in ("sub", "function"):
            raise self.err("Declare Sub|Function expected", ln)
        self.m.declares[name] = (name, public)

    def parse_params(self, toks: List[Tok], ln: int) -> List[Param]:
        params: List[Param] = []
        groups: List[List[Tok]] = []
        depth = 0
        cur: List[Tok] = []
        for t in toks:
            if t.kind == "op" and t.value == "(":
                depth += 1
            if t.kind == "op" and t.value == ")":
                depth -= 1
            if depth == 0 and t.kind == "op" and t.value == ",":
                groups.append(cur)
                cur = []
            else:
                cur.append(t)
        if cur:
            groups.append(cur)
        seen_optional = False
        for g in groups:
            p = 0
            optional = byval = False
            while p < len(g) and g[p].kind == "id" and g[p].value in ("optional", "byval", "byref", "paramarray"):
                if g[p].value == "optional":
                    optional = True
                elif g[p].value == "byval":
                    byval = True
                elif g[p].value == "paramarray":
                    raise self.err("ParamArray is outside the subset this checker runs", ln)
                p += 1
            name = g[p].value.rstrip("$%&!#@")
            p += 1
            vtype = "Variant"
            if p < len(g) and g[p].is_("as"):
                vtype = g[p + 1].text
                p += 2
            default = None
            if p < len(g) and g[p].kind == "op" and g[p].value == "=":
                default = self.parse_expr_tokens(g[p + 1 :], ln)
            elif p != len(g):
                raise self.err(f"unexpected {g[p].text!r} in the parameters", ln)
            if seen_optional and not optional:
                raise self.err("a parameter after an Optional one must be Optional", ln)
            seen_optional = seen_optional or optional
            if any(q.name == name for q in params):
                raise self.err(f"duplicate parameter {name}", ln)
            params.append(Param(name, vtype, byval, optional, default))
        return params

    def parse_proc(self, toks: List[Tok], public: bool, ln: int) -> None:
        kind = toks[0].value
        name = toks[1].value.rstrip("$%&!#@")
        if not (toks[2].kind == "op" and toks[2].value == "("):
            raise self.err("'(' expected after the procedure name", ln)
        depth = 0
        close = -1
        for k in range(2, len(toks)):
            if toks[k].kind == "op" and toks[k].value == "(":
                depth += 1
            elif toks[k].kind == "op" and toks[k].value == ")":
                depth -= 1
                if depth == 0:
                    close = k
                    break
        params = self.parse_params(toks[3:close], ln)
        rtype = "Variant"
        rest = toks[close + 1 :]
        if rest and rest[0].is_("as"):
            rtype = rest[1].text
        if name in self.m.procs:
            raise self.err(f"duplicate procedure {name}", ln)
        proc = Proc(self.m, name, kind, public, params, rtype, ln)
        self.m.procs[name] = proc
        proc.body = self.parse_block(("end " + kind,), ln, proc)
        for idx, st in enumerate(proc.body):
            if isinstance(st, LabelStmt):
                proc.labels[st.name] = idx

    def next_line(self) -> Tuple[int, str]:
        while self.i < len(self.lines):
            ln, s = self.lines[self.i]
            self.i += 1
            if s:
                return ln, s
        return -1, ""

    def parse_block(self, ends: Tuple[str, ...], start_line: int, proc: Proc) -> List[Stmt]:
        """Statements until a line starting with one of `ends` (lower case), which is left as
        self.end_line / self.end_text."""
        body: List[Stmt] = []
        while True:
            ln, s = self.next_line()
            if ln < 0:
                raise self.err(f"missing {ends[0].title()} for the block at line {start_line}", start_line)
            low = s.lower()
            for e in ends:
                if low == e or low.startswith(e + " ") or low.startswith(e + "\t"):
                    self.end_line = ln
                    self.end_text = s
                    return body
            m = re.match(r"^([A-Za-z_][A-Za-z0-9_]*):$", s)
            if m:
                st: Stmt = LabelStmt(m.group(1).lower())
                st.line = ln
                body.append(st)
                continue
            first = low.split()[0] if low.split() else ""
            if first in BLOCK_END_WORDS:
                raise self.err(f"{s!r} without its block (expected {' / '.join(e.title() for e in ends)})", ln)
            body.append(self.parse_stmt(ln, s, proc))

    def parse_stmt(self, ln: int, s: str, proc: Proc) -> Stmt:
        toks = tokenize(s, self.m.name, ln)
        t0 = toks[0]
        st: Stmt
        if t0.is_("dim") or t0.is_("static"):
            st = DimStmt(self.parse_decls(toks[1:], ln))
        elif t0.is_("const"):
            st = self.parse_const(toks[1:], ln)
        elif t0.is_("set"):
            eq = next((k for k, t in enumerate(toks) if t.kind == "op" and t.value == "="), -1)
            if eq < 0:
                raise self.err("Set needs =", ln)
            target = self.parse_expr_tokens(toks[1:eq], ln)
            st = Assign(target, self.parse_expr_tokens(toks[eq + 1 :], ln), True)
        elif t0.is_("let"):
            return self.parse_stmt(ln, s[3:].strip(), proc)
        elif t0.is_("if"):
            st = self.parse_if(toks, ln, proc)
        elif t0.is_("select"):
            st = self.parse_select(toks, ln, proc)
        elif t0.is_("for"):
            st = self.parse_for(toks, ln, proc)
        elif t0.is_("do"):
            pre = None
            if len(toks) > 1:
                pre = (toks[1].value, self.parse_expr_tokens(toks[2:], ln))
            body = self.parse_block(("loop",), ln, proc)
            end = tokenize(self.end_text, self.m.name, self.end_line)
            post = None
            if len(end) > 1:
                post = (end[1].value, self.parse_expr_tokens(end[2:], self.end_line))
            if pre and pre[0] not in ("while", "until") or post and post[0] not in ("while", "until"):
                raise self.err("Do/Loop takes While or Until", ln)
            st = DoStmt(pre, post, body)
        elif t0.is_("while"):
            raise self.err("While...Wend is outside the subset (use Do While...Loop)", ln)
        elif t0.is_("exit"):
            st = ExitStmt(toks[1].value)
        elif t0.is_("on") and len(toks) > 2 and toks[1].is_("error"):
            if toks[2].is_("resume"):
                st = OnErrorStmt("resume_next")
            elif toks[2].is_("goto") and toks[3].kind == "num" and toks[3].value == 0:
                st = OnErrorStmt("zero")
            elif toks[2].is_("goto"):
                st = OnErrorStmt("goto", toks[3].value)
            else:
                raise self.err("On Error Resume Next | GoTo label | GoTo 0", ln)
        elif t0.is_("resume"):
            st = ResumeStmt(toks[1].value if len(toks) > 1 else "")
        elif t0.is_("goto"):
            raise self.err("GoTo is outside the subset (On Error GoTo only)", ln)
        elif t0.is_("with"):
            raise self.err("With is outside the subset this checker runs", ln)
        elif t0.is_("call"):
            self.toks = toks
            self.p = 1
            self.line = ln
            target = self.postfix()
            if self.p != len(toks):
                raise self.err("unexpected text after Call", ln)
            if isinstance(target, CallOrIndex):
                st = CallStmt(target.target, target.args, True)
            else:
                st = CallStmt(target, [], True)
        elif t0.is_("randomize"):
            st = CallStmt(self.node(Name("randomize", "Randomize")), [], False)
        else:
            st = self.parse_call_or_assign(toks, ln)
        st.line = ln
        return st

    def parse_call_or_assign(self, toks: List[Tok], ln: int) -> Stmt:
        self.toks = toks
        self.p = 0
        self.line = ln
        # The target: a name with members and argument lists, e.g. d("k"), ws.Cells(r, 2).Value.
        e: Node = self.primary()
        while True:
            if self.accept_op("."):
                t = self.take()
                e = self.node(Member(e, t.value.rstrip("$")))
            elif self.peek() is not None and self.peek().kind == "op" and self.peek().value == "(":  # type: ignore[union-attr]
                save = self.p
                self.p += 1
                args = self.args()
                nxt = self.peek()
                if nxt is None or (nxt.kind == "op" and nxt.value in ("=", ".", "(")):
                    e = self.node(CallOrIndex(e, args))
                else:
                    # `Foo (a) & b`: the parenthesis started the first argument.
                    self.p = save
                    break
            else:
                break
        nxt = self.peek()
        if nxt is not None and nxt.kind == "op" and nxt.value == "=":
            self.p += 1
            value = self.expr()
            if self.p != len(toks):
                raise self.err("unexpected text after the assignment", ln)
            return Assign(e, value, False)
        if nxt is None:
            if isinstance(e, CallOrIndex):
                if len(e.args) > 1:
                    raise self.err("a call with several arguments in parentheses needs Call (or no parentheses)", ln)
                return CallStmt(e.target, e.args, False)
            return CallStmt(e, [], False)
        args: List[Node] = []
        while True:
            args.append(self.expr())
            if self.p == len(toks):
                break
            self.expect_op(",")
        return CallStmt(e, args, False)

    def parse_if(self, toks: List[Tok], ln: int, proc: Proc) -> Stmt:
        then = next((k for k, t in enumerate(toks) if t.is_("then")), -1)
        if then < 0:
            raise self.err("If without Then", ln)
        cond = self.parse_expr_tokens(toks[1:then], ln)
        if then != len(toks) - 1:
            # Single-line If: If c Then stmt [Else stmt]
            rest = toks[then + 1 :]
            els = next((k for k, t in enumerate(rest) if t.is_("else")), -1)
            src = self.lines[self.i - 1][1]
            then_src, else_src = self.split_single_line_if(src)
            branches: List[Tuple[Optional[Node], List[Stmt]]] = [(cond, [self.parse_stmt(ln, then_src, proc)])]
            if els >= 0 and else_src:
                branches.append((None, [self.parse_stmt(ln, else_src, proc)]))
            return IfStmt(branches)
        branches = []
        cur_cond: Optional[Node] = cond
        while True:
            body = self.parse_block(("elseif", "else", "end if"), ln, proc)
            branches.append((cur_cond, body))
            low = self.end_text.lower()
            if low.startswith("end if"):
                return IfStmt(branches)
            if low.startswith("elseif"):
                et = tokenize(self.end_text, self.m.name, self.end_line)
                th = next((k for k, t in enumerate(et) if t.is_("then")), -1)
                if th != len(et) - 1:
                    raise self.err("ElseIf ... Then must end its line", self.end_line)
                cur_cond = self.parse_expr_tokens(et[1:th], self.end_line)
            else:
                if cur_cond is None:
                    raise self.err("two Else in one If", self.end_line)
                cur_cond = None

    def split_single_line_if(self, src: str) -> Tuple[str, str]:
        """'If c Then a Else b' -> ('a', 'b'), respecting strings."""
        in_str = False
        words: List[Tuple[int, str]] = []
        for m in re.finditer(r'"(?:[^"]|"")*"|\b(Then|Else)\b', src, re.I):
            if m.group(1):
                words.append((m.start(), m.group(1).lower()))
        then_at = next(p for p, w in words if w == "then")
        else_at = next((p for p, w in words if w == "else" and p > then_at), -1)
        if else_at < 0:
            return src[then_at + 4 :].strip(), ""
        return src[then_at + 4 : else_at].strip(), src[else_at + 4 :].strip()

    def parse_select(self, toks: List[Tok], ln: int, proc: Proc) -> Stmt:
        if not toks[1].is_("case"):
            raise self.err("Select Case expected", ln)
        expr = self.parse_expr_tokens(toks[2:], ln)
        cases: List[Tuple[Optional[List[Tuple[str, Any]]], List[Stmt]]] = []
        # The first line after Select Case must be a Case.
        head_line, head = self.next_line()
        if not head.lower().startswith("case"):
            raise self.err("Case expected after Select Case", head_line)
        while True:
            body = self.parse_block(("case", "end select"), head_line, proc)
            cases.append((self.parse_case_head(head, head_line), body))
            if self.end_text.lower().startswith("end select"):
                return SelectStmt(expr, cases)
            head_line, head = self.end_line, self.end_text

    def parse_case_head(self, head: str, ln: int) -> Optional[List[Tuple[str, Any]]]:
        toks = tokenize(head, self.m.name, ln)[1:]
        if toks and toks[0].is_("else"):
            return None
        items: List[Tuple[str, Any]] = []
        groups: List[List[Tok]] = [[]]
        depth = 0
        for t in toks:
            if t.kind == "op" and t.value == "(":
                depth += 1
            if t.kind == "op" and t.value == ")":
                depth -= 1
            if depth == 0 and t.kind == "op" and t.value == ",":
                groups.append([])
            else:
                groups[-1].append(t)
        for g in groups:
            if g and g[0].is_("is"):
                items.append(("is", (g[1].value, self.parse_expr_tokens(g[2:], ln))))
                continue
            to = next((k for k, t in enumerate(g) if t.is_("to")), -1)
            if to >= 0:
                items.append(("range", (self.parse_expr_tokens(g[:to], ln), self.parse_expr_tokens(g[to + 1 :], ln))))
            else:
                items.append(("eq", self.parse_expr_tokens(g, ln)))
        return items

    def parse_for(self, toks: List[Tok], ln: int, proc: Proc) -> Stmt:
        if toks[1].is_("each"):
            var = toks[2].value
            if not toks[3].is_("in"):
                raise self.err("For Each x In ...", ln)
            coll = self.parse_expr_tokens(toks[4:], ln)
            body = self.parse_block(("next",), ln, proc)
            self.check_next(var)
            return ForEachStmt(var, coll, body)
        var = toks[1].value
        if not (toks[2].kind == "op" and toks[2].value == "="):
            raise self.err("For v = a To b", ln)
        to = next((k for k, t in enumerate(toks) if t.is_("to")), -1)
        step = next((k for k, t in enumerate(toks) if t.is_("step")), -1)
        start = self.parse_expr_tokens(toks[3:to], ln)
        end = self.parse_expr_tokens(toks[to + 1 : step if step > 0 else len(toks)], ln)
        step_expr = self.parse_expr_tokens(toks[step + 1 :], ln) if step > 0 else None
        body = self.parse_block(("next",), ln, proc)
        self.check_next(var)
        return ForStmt(var, start, end, step_expr, body)

    def check_next(self, var: str) -> None:
        et = tokenize(self.end_text, self.m.name, self.end_line)
        if len(et) > 1 and et[1].value != var:
            raise self.err(f"Next {et[1].text} does not close For {var}", self.end_line)


def logical_lines(path: str) -> List[Tuple[int, str]]:
    """(first line number, code) with comments removed and ' _' continuations joined (at most 24)."""
    with open(path, encoding="utf-8") as f:
        raw = f.read().split("\n")
    return _logical(raw, os.path.basename(path))


def _logical(raw: List[str], name: str) -> List[Tuple[int, str]]:
    """(index of the first physical line, code) of `raw`'s logical lines."""
    out: List[Tuple[int, str]] = []
    i = 0
    while i < len(raw):
        start = i + 1
        code = strip_comment(raw[i].rstrip("\r"))
        joined = 0
        while code.endswith(" _") or code == "_":
            joined += 1
            if joined > 24:
                raise compile_error("too many line continuations", name, start)
            i += 1
            code = code[:-1].rstrip() + " " + strip_comment(raw[i].rstrip("\r")).strip()
        out.append((start, code))
        i += 1
    return out


# --- reserved identifiers ------------------------------------------------------------------------

# MS-VBAL 3.3.5.2: every <reserved-identifier>. None of them may name a variable, constant,
# parameter, loop variable or procedure ("Compile error: Expected: identifier"): `Dim lock As
# Object` or `Dim shared As Outlook.Recipient` stops the whole module.
RESERVED_IDENTIFIERS = frozenset(w.lower() for w in (
    # statement keywords
    "Call Case Close Const Declare DefBool DefByte DefCur DefDate DefDbl DefInt DefLng DefLngLng "
    "DefLngPtr DefObj DefSng DefStr DefVar Dim Do Else ElseIf End EndIf Enum Erase Event Exit For "
    "Friend Function Get Global GoSub GoTo If Implements Input Let Lock Loop LSet Next On Open Option "
    "Print Private Public Put RaiseEvent ReDim Resume Return RSet Seek Select Set Static Stop Sub Type "
    "Unlock Wend While With Write "
    # marker keywords
    "Any As ByRef ByVal Each In New Shared Until WithEvents Optional ParamArray Preserve Spc Tab Then To "
    # operator identifiers
    "AddressOf And Eqv Imp Is Like Mod Not Or TypeOf Xor "
    # special forms
    "Array Circle InputB LBound Scale UBound "
    # reserved type identifiers
    "Boolean Byte Currency Date Double Integer Long LongLong LongPtr Single String Variant "
    # reserved names
    "Abs CBool CByte CCur CDate CDbl CDec CInt CLng CLngLng CLngPtr CSng CStr CVar CVErr Debug "
    "DoEvents Fix Int Len LenB Me PSet Sgn "
    # literal identifiers
    "True False Nothing Empty Null "
    # rem keyword, reserved for implementation use, future reserved
    "Rem Attribute LINEINPUT VB_Base VB_Control VB_Creatable VB_Customizable VB_Description "
    "VB_Exposed VB_Ext_KEY VB_GlobalNameSpace VB_HelpID VB_Invoke_Func VB_Invoke_Property "
    "VB_Invoke_PropertyPut VB_Invoke_PropertyPutRef VB_MemberFlags VB_Name VB_PredeclaredId "
    "VB_ProcData VB_TemplateDerived VB_UserMemId VB_VarDescription VB_VarHelpID VB_VarMemberFlags "
    "VB_VarProcData VB_VarUserMemId CDecl Decimal DefDec"
).split())

_DECL_HEAD = re.compile(r"^\s*(?:(?:public|private|global|dim|static|const)\b\s*)+(?:withevents\s+|const\s+)?", re.I)
_PROC_HEAD = re.compile(
    r"^\s*(?:(?:public|private|friend|static)\s+)*(?:declare\s+(?:ptrsafe\s+)?)?(sub|function|property\s+(?:get|let|set))\s+(\w+)"
    r"(?:\s+lib\s+\"[^\"]*\"(?:\s+alias\s+\"[^\"]*\")?)?\s*\((.*)\)", re.I)
_FOR_HEAD = re.compile(r"^\s*for\s+(?:each\s+)?(\w+)", re.I)


def _split_top(text: str) -> List[str]:
    """`text` split at the commas outside parentheses and strings."""
    parts, depth, cur, in_str = [], 0, "", False
    for ch in text:
        if ch == '"':
            in_str = not in_str
        elif not in_str and ch == "(":
            depth += 1
        elif not in_str and ch == ")":
            depth -= 1
        elif not in_str and ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
            continue
        cur += ch
    if cur.strip():
        parts.append(cur)
    return parts


def declared_names(code: str) -> List[Tuple[str, str]]:
    """(what, name) of every name one logical line of VBA declares: variables and constants
    (Dim/Private/Public/Global/Static/Const, WithEvents), procedures and their parameters, For and
    For Each loop variables. Works on any line, also of a snippet that is not a whole module."""
    out: List[Tuple[str, str]] = []
    for stmt in _split_statements(code):
        m = _PROC_HEAD.match(stmt)
        if m:
            out.append(("procedure", m.group(2)))
            for p in _split_top(m.group(3)):
                words = re.findall(r"[A-Za-z_]\w*[$%&!#@]?", p.split("=")[0])
                while len(words) > 1 and words[0].lower() in ("optional", "byval", "byref", "paramarray"):
                    words.pop(0)
                if words:
                    out.append(("parameter", words[0].rstrip("$%&!#@")))
            continue
        m = _FOR_HEAD.match(stmt)
        if m:
            out.append(("loop variable", m.group(1)))
            continue
        m = _DECL_HEAD.match(stmt)
        head = stmt[: m.end()].lower() if m else ""
        if m and not (re.search(r"\b(dim|const)\b", head) is None
                      and re.match(r"\s*(?:declare|sub|function|property|type|enum|event)\b", stmt[m.end():], re.I)):
            what = "constant" if "const" in head else "variable"
            for part in _split_top(stmt[m.end():]):
                name = re.match(r"\s*([A-Za-z_]\w*)", part)
                if name:
                    out.append((what, name.group(1).rstrip("$%&!#@")))
    return out


def _split_statements(code: str) -> List[str]:
    """A logical line's statements (split at ':' outside strings; a label's colon is kept)."""
    out, cur, in_str = [], "", False
    for ch in code:
        if ch == '"':
            in_str = not in_str
        if ch == ":" and not in_str and not re.fullmatch(r"\s*[A-Za-z_]\w*\s*", cur) and not cur.rstrip().endswith(":"):
            out.append(cur)
            cur = ""
            continue
        cur += ch
    out.append(cur)
    return [s for s in out if s.strip()]


def reserved_name_problems(lines: List[Tuple[int, str]], where: str) -> List[str]:
    """One problem per declared name that is a reserved identifier, in logical `lines`."""
    problems = []
    for ln, code in lines:
        for what, name in declared_names(code):
            if name.lower() in RESERVED_IDENTIFIERS:
                problems.append(f"{where}:{ln}: the {what} {name} is a reserved word (Expected: identifier)")
    return problems


def markdown_vba_blocks(path: str) -> List[Tuple[int, str]]:
    """(first line, code) of every ```vb / ```vba / ```vbnet block of a Markdown file."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    out = []
    for m in re.finditer(r"^```(?:vb|vba|vbnet|vb6)[ \t]*\n(.*?)^```", text, re.M | re.S | re.I):
        out.append((text.count("\n", 0, m.start()) + 2, m.group(1)))
    return out


def check_markdown(path: str) -> List[str]:
    """Reserved words declared as names in the VBA blocks of a Markdown file."""
    problems = []
    for first, code in markdown_vba_blocks(path):
        lines = [(first + n - 1, ln) for n, ln in _logical(code.split("\n"), os.path.basename(path))]
        problems += reserved_name_problems(lines, os.path.basename(path))
    return problems


# --- the project ---------------------------------------------------------------------------------

BUILTIN_FUNCTIONS = {
    "len", "mid", "left", "right", "instr", "instrrev", "replace", "lcase", "ucase", "trim", "ltrim", "rtrim",
    "chrw", "chr", "ascw", "asc", "hex", "cstr", "clng", "cint", "cdbl", "cbool", "cdec", "val", "str", "format",
    "isnumeric", "isempty", "isnull", "isobject", "typename", "vartype", "int", "fix", "abs", "sgn", "rnd",
    "randomize", "now", "date", "timer", "environ", "createobject", "getsetting", "savesetting", "msgbox",
    "inputbox", "space", "string", "doevents", "sleep", "iif", "split", "join", "ubound", "lbound", "array",
    "strcomp", "round",
}

BUILTIN_CONSTANTS: Dict[str, Any] = {
    "vbobjecterror": VB_OBJECT_ERROR, "vbbinarycompare": 0, "vbtextcompare": 1, "vbcrlf": "\r\n", "vbcr": "\r",
    "vblf": "\n", "vbtab": "\t", "vbnullstring": "", "vbnewline": "\r\n", "vbboolean": 11, "vbstring": 8,
    "vblong": 3, "vbdouble": 5, "vbinteger": 2, "vbempty": 0, "vbnull": 1, "vbobject": 9, "vbexclamation": 48,
    "vbinformation": 64, "vbcritical": 16, "vbokonly": 0, "vbyesno": 4, "vbyes": 6, "vbno": 7,
}

BUILTIN_OBJECTS = {"err", "debug"}


class Project:
    """Modules loaded together, as one VBA project. `host` gives the host's globals (Outlook's
    Application, Excel's ActiveSheet…) by lower-case name; `settings` is the registry of
    GetSetting/SaveSetting; `environ` answers Environ$."""

    def __init__(self, paths: List[str], host: Optional[Dict[str, Any]] = None, environ: Optional[Dict[str, str]] = None):
        self.modules: Dict[str, Module] = {}
        for path in paths:
            name = os.path.splitext(os.path.basename(path))[0]
            m = Module(name, path)
            Parser(m, logical_lines(path)).parse_module()
            for ln, s in logical_lines(path)[:5]:
                mm = re.match(r'Attribute VB_Name = "([^"]+)"', s)
                if mm:
                    m.name = mm.group(1)
            self.modules[m.name.lower()] = m
        self.host = {k.lower(): v for k, v in (host or {}).items()}
        self.environ = environ or {"COMPUTERNAME": "PC-TEST", "USERNAME": "tester"}
        self.settings: Dict[Tuple[str, str, str], str] = {}
        self.msgboxes: List[str] = []
        self.debug: List[str] = []
        self.inputs: List[str] = []  # InputBox answers, in order
        self.err = ErrObject()
        self.rng = random.Random()
        self.globals: Dict[Tuple[str, str], List[Any]] = {}  # (module, var) -> [value, type]
        for m in self.modules.values():
            for name, (vtype, public, as_new) in m.vars.items():
                self.globals[(m.name.lower(), name)] = [self.new_value(vtype, as_new), vtype]
        self.sleeps: List[int] = []
        self.sleep_scale = 1.0
        self.const_values: Dict[Tuple[str, str], Any] = {}

    def new_value(self, vtype: str, as_new: bool) -> Any:
        if as_new:
            return self.create_new(vtype)
        return default_of(vtype)

    def create_new(self, cls: str) -> Any:
        c = cls.lower()
        if c == "collection":
            return Collection()
        if c in ("dictionary", "scripting.dictionary"):
            return Dictionary()
        raise VbaError(429, f"ActiveX component can't create object ({cls})")

    # Checks -----------------------------------------------------------------------------------

    def check(self) -> List[str]:
        """What the VBA compiler (or a careful reviewer) would refuse; [] when clean."""
        problems: List[str] = []
        for m in self.modules.values():
            problems += reserved_name_problems(logical_lines(m.path), m.name)
            if not m.option_explicit:
                problems.append(f"{m.name}: no Option Explicit")
            for ln, ptrsafe, under_vba7 in m.declare_lines:
                if under_vba7 and not ptrsafe:
                    problems.append(f"{m.name}:{ln}: a Declare under #If VBA7 needs PtrSafe")
                if not under_vba7 and ptrsafe:
                    problems.append(f"{m.name}:{ln}: PtrSafe outside #If VBA7 breaks Office 2007")
            for ln, s in m.type_lines:
                problems.append(f"{m.name}:{ln}: LongLong/LongPtr outside #If VBA7/Win64: {s}")
            for proc in m.procs.values():
                checker = _ProcChecker(self, m, proc, problems)
                checker.run()
        return problems

    # Name resolution -----------------------------------------------------------------------------

    def find_proc(self, module: Module, name: str) -> Optional[Proc]:
        if name in module.procs:
            return module.procs[name]
        for m in self.modules.values():
            p = m.procs.get(name)
            if p is not None and p.public:
                return p
        return None

    def find_global(self, module: Module, name: str) -> Optional[List[Any]]:
        if (module.name.lower(), name) in self.globals:
            return self.globals[(module.name.lower(), name)]
        for m in self.modules.values():
            if name in m.vars and m.vars[name][1]:
                return self.globals[(m.name.lower(), name)]
        return None

    def find_const(self, module: Module, name: str) -> Optional[Tuple[Module, Tuple[str, bool, Node]]]:
        if name in module.consts:
            return module, module.consts[name]
        for m in self.modules.values():
            if name in m.consts and m.consts[name][1]:
                return m, m.consts[name]
        return None

    # Running --------------------------------------------------------------------------------------

    def call(self, name: str, *args: Any) -> Any:
        """Runs a public procedure by name with Python values as its arguments (ByRef ones get
        temporary cells). Raises VbaError when it ends with an unhandled error."""
        for m in self.modules.values():
            p = m.procs.get(name.lower())
            if p is not None:
                cells: List[Optional[List[Any]]] = [[vba_str(a) if isinstance(a, str) else a, "Variant", "temp"] for a in args]
                return Frame(self, p).run(cells)
        raise KeyError(name)


class _ProcChecker:
    """Static checks of one procedure: declared names, calls to the project's procedures,
    Set/Let against declared types."""

    def __init__(self, project: Project, module: Module, proc: Proc, problems: List[str]) -> None:
        self.project = project
        self.m = module
        self.proc = proc
        self.problems = problems
        self.locals: Dict[str, str] = {p.name: p.vtype for p in proc.params}
        if proc.kind == "function":
            self.locals[proc.name] = proc.rtype

    def where(self, line: int) -> str:
        return f"{self.m.name}:{line}"

    def run(self) -> None:
        self.block(self.proc.body)
        for st in self.walk(self.proc.body):
            if isinstance(st, OnErrorStmt) and st.mode == "goto" and st.label not in self.proc.labels:
                self.problems.append(f"{self.where(st.line)}: label {st.label} not found (labels must be at the procedure's top level)")
            if isinstance(st, ResumeStmt) and st.label not in ("", "next") and st.label not in self.proc.labels:
                self.problems.append(f"{self.where(st.line)}: label {st.label} not found")

    def walk(self, body: List[Stmt]) -> List[Stmt]:
        out: List[Stmt] = []
        for st in body:
            out.append(st)
            if isinstance(st, IfStmt):
                for _, b in st.branches:
                    out += self.walk(b)
            elif isinstance(st, SelectStmt):
                for _, b in st.cases:
                    out += self.walk(b)
            elif isinstance(st, (ForStmt, ForEachStmt, DoStmt)):
                out += self.walk(st.body)
        return out

    def declared_type(self, name: str) -> Optional[str]:
        if name in self.locals:
            return self.locals[name]
        g = self.project.find_global(self.m, name)
        if g is not None:
            return str(g[1])
        c = self.project.find_const(self.m, name)
        if c is not None:
            return "const"
        return None

    def known(self, name: str) -> bool:
        return (
            name in self.locals
            or self.project.find_global(self.m, name) is not None
            or self.project.find_const(self.m, name) is not None
            or self.project.find_proc(self.m, name) is not None
            or name in self.m.declares
            or name in BUILTIN_FUNCTIONS
            or name in BUILTIN_CONSTANTS
            or name in BUILTIN_OBJECTS
            or name in self.project.host
        )

    def block(self, body: List[Stmt]) -> None:
        for st in body:
            self.stmt(st)

    def stmt(self, st: Stmt) -> None:
        if isinstance(st, DimStmt):
            for name, vtype, _ in st.decls:
                if name in self.locals:
                    self.problems.append(f"{self.where(st.line)}: duplicate declaration of {name}")
                self.locals[name] = vtype
        elif isinstance(st, ConstStmt):
            self.expr(st.expr, st.line)
            self.locals[st.name] = st.vtype
        elif isinstance(st, Assign):
            self.expr(st.expr, st.line)
            self.target(st.target, st.line)
            if isinstance(st.target, Name):
                t = (self.declared_type(st.target.name) or "").lower()
                objectish = t in ("object", "collection", "dictionary") or "." in t
                scalar = t in ("string", "long", "integer", "double", "single", "boolean", "date", "currency", "longptr", "longlong")
                if st.is_set and scalar:
                    self.problems.append(f"{self.where(st.line)}: Set on {st.target.text} declared As {t}")
                if not st.is_set and objectish:
                    self.problems.append(f"{self.where(st.line)}: {st.target.text} is an object: assign it with Set")
                if t == "const":
                    self.problems.append(f"{self.where(st.line)}: assignment to the constant {st.target.text}")
        elif isinstance(st, CallStmt):
            self.callee(st.target, st.args, st.line, statement=True)
        elif isinstance(st, IfStmt):
            for cond, body in st.branches:
                if cond is not None:
                    self.expr(cond, st.line)
                self.block(body)
        elif isinstance(st, SelectStmt):
            self.expr(st.expr, st.line)
            for items, body in st.cases:
                for kind, v in items or []:
                    if kind == "eq":
                        self.expr(v, st.line)
                    elif kind == "range":
                        self.expr(v[0], st.line)
                        self.expr(v[1], st.line)
                    else:
                        self.expr(v[1], st.line)
                self.block(body)
        elif isinstance(st, ForStmt):
            if not self.known(st.var):
                self.problems.append(f"{self.where(st.line)}: variable not declared: {st.var}")
            self.expr(st.start, st.line)
            self.expr(st.end, st.line)
            if st.step is not None:
                self.expr(st.step, st.line)
            self.block(st.body)
        elif isinstance(st, ForEachStmt):
            if not self.known(st.var):
                self.problems.append(f"{self.where(st.line)}: variable not declared: {st.var}")
            elif (self.declared_type(st.var) or "").lower() not in ("variant", "object"):
                self.problems.append(f"{self.where(st.line)}: a For Each variable must be a Variant or an Object")
            self.expr(st.coll, st.line)
            self.block(st.body)
        elif isinstance(st, DoStmt):
            for c in (st.pre, st.post):
                if c is not None:
                    self.expr(c[1], st.line)
            self.block(st.body)

    def target(self, node: Node, line: int) -> None:
        if isinstance(node, Name):
            if not self.known(node.name):
                self.problems.append(f"{self.where(line)}: variable not declared: {node.text}")
        else:
            self.expr(node, line)

    def callee(self, target: Node, args: List[Node], line: int, statement: bool) -> None:
        for a in args:
            self.expr(a, line)
        if isinstance(target, Name):
            if not self.known(target.name):
                self.problems.append(f"{self.where(line)}: not defined: {target.text}")
                return
            p = self.project.find_proc(self.m, target.name)
            if p is not None and target.name not in self.locals:
                required = sum(1 for q in p.params if not q.optional)
                if not required <= len(args) <= len(p.params):
                    self.problems.append(f"{self.where(line)}: {p.name} takes {required}..{len(p.params)} arguments, given {len(args)}")
                if statement and p.kind == "function" and False:
                    pass
        else:
            self.expr(target, line)

    def expr(self, node: Node, line: int) -> None:
        if isinstance(node, Name):
            if not self.known(node.name):
                self.problems.append(f"{self.where(line)}: not declared: {node.text}")
            else:
                p = self.project.find_proc(self.m, node.name)
                if p is not None and node.name not in self.locals and p.kind == "sub":
                    self.problems.append(f"{self.where(line)}: {node.text} is a Sub: it has no value")
                elif p is not None and node.name not in self.locals and any(not q.optional for q in p.params):
                    self.problems.append(f"{self.where(line)}: {node.text} needs arguments")
        elif isinstance(node, Member):
            self.expr(node.obj, line)
        elif isinstance(node, CallOrIndex):
            if isinstance(node.target, Name):
                self.callee(node.target, node.args, line, statement=False)
                p = self.project.find_proc(self.m, node.target.name)
                if p is not None and p.kind == "sub" and node.target.name not in self.locals:
                    self.problems.append(f"{self.where(line)}: {node.target.text} is a Sub: it has no value")
            else:
                self.expr(node.target, line)
                for a in node.args:
                    self.expr(a, line)
        elif isinstance(node, Unary):
            self.expr(node.operand, line)
        elif isinstance(node, Binary):
            self.expr(node.left, line)
            self.expr(node.right, line)


# --- execution -----------------------------------------------------------------------------------


class _Exit(Exception):
    def __init__(self, what: str) -> None:
        self.what = what


class _Jump(Exception):
    def __init__(self, label: str) -> None:
        self.label = label


class _Resume(Exception):
    """Resume Next from a handler: continue after the statement that failed (top level only)."""


class Frame:
    """One running procedure: its variables (cells [value, type]) and error-handling state."""

    def __init__(self, project: Project, proc: Proc) -> None:
        self.pj = project
        self.proc = proc
        self.m = proc.module
        self.vars: Dict[str, List[Any]] = {}
        self.on_error = "zero"
        self.handler = ""
        self.in_handler = False
        self.failed_index = -1

    # Procedure call --------------------------------------------------------------------------------

    def run(self, arg_cells: List[Optional[List[Any]]]) -> Any:
        params = self.proc.params
        if len(arg_cells) > len(params):
            raise VbaError(450, f"Wrong number of arguments ({self.proc.name})")
        for i, p in enumerate(params):
            cell = arg_cells[i] if i < len(arg_cells) else None
            if cell is None:
                if not p.optional:
                    raise VbaError(449, f"Argument not optional ({p.name} of {self.proc.name})")
                v = self.eval(p.default) if p.default is not None else default_of(p.vtype)
                self.vars[p.name] = [coerce(v, p.vtype), p.vtype]
            elif p.byval:
                self.vars[p.name] = [coerce(cell[0], p.vtype), p.vtype]
            else:
                if cell[1].lower() != p.vtype.lower() and p.vtype.lower() != "variant" and len(cell) < 3:
                    raise VbaError(0, f"ByRef argument type mismatch ({p.name} As {p.vtype} given {cell[1]})", compile=True)
                cell[0] = coerce(cell[0], p.vtype) if p.vtype.lower() != "variant" else cell[0]
                self.vars[p.name] = cell
        if self.proc.kind == "function":
            self.vars[self.proc.name] = [default_of(self.proc.rtype), self.proc.rtype]
        body = self.proc.body
        i = 0
        while i < len(body):
            try:
                self.exec(body[i])
                i += 1
            except _Exit as e:
                if e.what in ("function", "sub"):
                    break
                raise VbaError(0, f"Exit {e.what} outside its block", compile=True)
            except _Jump as j:
                i = self.proc.labels[j.label]
            except _Resume:
                i = self.failed_index + 1
                self.in_handler = False
            except VbaError as e:
                if e.compile:
                    raise
                if self.on_error == "goto" and not self.in_handler:
                    self.pj.err.set(e)
                    self.in_handler = True
                    self.failed_index = i
                    i = self.proc.labels[self.handler]
                else:
                    raise
        if self.proc.kind == "function":
            return self.vars[self.proc.name][0]
        return EMPTY

    # Statements -------------------------------------------------------------------------------------

    def block(self, body: List[Stmt]) -> None:
        for st in body:
            self.exec(st)

    def exec(self, st: Stmt) -> None:
        if self.on_error == "resume_next" and not isinstance(st, (IfStmt, SelectStmt, ForStmt, ForEachStmt, DoStmt)):
            try:
                self.exec1(st)
            except VbaError as e:
                if e.compile:
                    raise
                self.pj.err.set(e)
            return
        self.exec1(st)

    def exec1(self, st: Stmt) -> None:
        try:
            self._exec(st)
        except VbaError as e:
            if not e.line:
                e.line = st.line
                e.args = (f"{e.args[0]} ({self.m.name}.{self.proc.name}, line {st.line})",)
            raise

    def _exec(self, st: Stmt) -> None:
        if isinstance(st, DimStmt):
            for name, vtype, as_new in st.decls:
                self.vars[name] = [self.pj.new_value(vtype, as_new), vtype]
        elif isinstance(st, ConstStmt):
            self.vars[st.name] = [coerce(self.eval(st.expr), st.vtype), st.vtype, "const"]
        elif isinstance(st, Assign):
            self.assign(st)
        elif isinstance(st, CallStmt):
            self.call_stmt(st)
        elif isinstance(st, IfStmt):
            for cond, body in st.branches:
                if cond is None or self.truth(cond):
                    self.block(body)
                    return
        elif isinstance(st, SelectStmt):
            v = self.eval(st.expr)
            for items, body in st.cases:
                if items is None or any(self.case_matches(v, kind, x) for kind, x in items):
                    self.block(body)
                    return
        elif isinstance(st, ForStmt):
            self.run_for(st)
        elif isinstance(st, ForEachStmt):
            coll = self.eval(st.coll)
            values = coll if isinstance(coll, list) else (coll.vba_iter() if isinstance(coll, VbObject) else None)
            if values is None:
                raise VbaError(424, "Object required")
            try:
                for v in values:
                    cell = self.cell(st.var)
                    cell[0] = v
                    self.block(st.body)
            except _Exit as e:
                if e.what != "for":
                    raise
        elif isinstance(st, DoStmt):
            try:
                while True:
                    if st.pre is not None and not self.loop_cond(st.pre):
                        break
                    self.block(st.body)
                    if st.post is not None and not self.loop_cond(st.post):
                        break
            except _Exit as e:
                if e.what != "do":
                    raise
        elif isinstance(st, ExitStmt):
            if self.in_handler and st.what in ("sub", "function"):
                self.pj.err.clear()
            raise _Exit(st.what)
        elif isinstance(st, OnErrorStmt):
            self.pj.err.clear()
            self.on_error = st.mode
            self.handler = st.label
            if st.mode == "zero":
                self.in_handler = False
        elif isinstance(st, ResumeStmt):
            if not self.in_handler:
                raise VbaError(20, "Resume without error")
            self.pj.err.clear()
            if st.label == "next":
                raise _Resume()
            if st.label == "":
                raise VbaError(0, "Resume (without Next or a label) is outside the subset", compile=True)
            self.in_handler = False
            raise _Jump(st.label)
        elif isinstance(st, LabelStmt):
            pass
        else:
            raise VbaError(0, f"cannot run {type(st).__name__}", compile=True)

    def loop_cond(self, c: Tuple[str, Node]) -> bool:
        v = self.truth(c[1])
        return v if c[0] == "while" else not v

    def run_for(self, st: ForStmt) -> None:
        start = self.eval(st.start)
        end = self.eval(st.end)
        step = self.eval(st.step) if st.step is not None else 1
        cell = self.cell(st.var)
        cell[0] = coerce(start, cell[1])
        try:
            while True:
                v = to_num(cell[0])
                if (to_num(step) >= 0 and v > to_num(end)) or (to_num(step) < 0 and v < to_num(end)):
                    break
                self.block(st.body)
                cell[0] = coerce(to_num(cell[0]) + to_num(step), cell[1])
        except _Exit as e:
            if e.what != "for":
                raise

    def case_matches(self, v: Any, kind: str, x: Any) -> bool:
        if kind == "eq":
            return to_bool(compare("=", v, self.eval(x)))
        if kind == "range":
            return to_bool(compare(">=", v, self.eval(x[0]))) and to_bool(compare("<=", v, self.eval(x[1])))
        return to_bool(compare(x[0], v, self.eval(x[1])))

    def truth(self, node: Node) -> bool:
        v = self.eval(node)
        if v is NULL:
            return False
        return to_bool(v)

    # Variables ---------------------------------------------------------------------------------------

    def cell(self, name: str) -> List[Any]:
        if name in self.vars:
            return self.vars[name]
        g = self.pj.find_global(self.m, name)
        if g is not None:
            return g
        raise VbaError(0, f"Variable not defined: {name}", compile=True)

    def assign(self, st: Assign) -> None:
        value = self.eval(st.expr)
        if st.is_set and not is_object(value):
            raise VbaError(424, "Object required")
        if not st.is_set and isinstance(value, VbObject):
            value = value.vba_default([])  # Let of an object: its default member
        t = st.target
        if isinstance(t, Name):
            cell = self.cell(t.name)
            if len(cell) > 2:
                raise VbaError(0, f"Assignment to constant not permitted: {t.text}", compile=True)
            vtype = str(cell[1]).lower()
            if st.is_set:
                if vtype not in ("variant", "object", "collection", "dictionary") and "." not in vtype:
                    raise VbaError(0, f"Set on {t.text} As {cell[1]}", compile=True)
                cell[0] = value
            else:
                if vtype in ("object", "collection", "dictionary") or "." in vtype:
                    raise VbaError(91, "Object variable or With block variable not set (an object needs Set)")
                cell[0] = coerce(value, str(cell[1]))
            return
        if isinstance(t, Member):
            obj = self.eval(t.obj)
            self.require_object(obj)
            obj.vba_let(t.name, [], value)
            return
        if isinstance(t, CallOrIndex):
            args = [self.eval(a) for a in t.args]
            if isinstance(t.target, Member):
                obj = self.eval(t.target.obj)
                self.require_object(obj)
                obj.vba_let(t.target.name, args, value)
                return
            obj = self.eval(t.target)
            self.require_object(obj)
            obj.vba_default_let(args, value)
            return
        raise VbaError(0, "cannot assign to this", compile=True)

    def require_object(self, obj: Any) -> None:
        if obj is NOTHING or obj is EMPTY:
            raise VbaError(91, "Object variable or With block variable not set")
        if not isinstance(obj, VbObject):
            raise VbaError(424, "Object required")

    def call_stmt(self, st: CallStmt) -> None:
        self.invoke(st.target, st.args, statement=True)

    # Expressions -------------------------------------------------------------------------------------

    def eval(self, node: Node) -> Any:
        if isinstance(node, Lit):
            return node.value
        if isinstance(node, Name):
            return self.name_value(node)
        if isinstance(node, Binary):
            if node.op == "is":
                a, b = self.eval(node.left), self.eval(node.right)
                if not is_object(a) or not is_object(b):
                    raise VbaError(424, "Object required")
                return a is b
            return binary(node.op, self.eval(node.left), self.eval(node.right))
        if isinstance(node, Unary):
            v = self.eval(node.operand)
            if node.op == "-":
                if v is NULL:
                    return NULL
                n = to_num(v)
                return -n
            if isinstance(v, bool):
                return not v
            return ~to_long(v)
        if isinstance(node, (CallOrIndex, Member)):
            return self.invoke(node, [], statement=False)
        if isinstance(node, NewObj):
            return self.pj.create_new(node.cls)
        raise VbaError(0, f"cannot evaluate {type(node).__name__}", compile=True)

    def name_value(self, node: Name) -> Any:
        n = node.name
        if n in self.vars:
            return self.vars[n][0]
        g = self.pj.find_global(self.m, n)
        if g is not None:
            return g[0]
        c = self.pj.find_const(self.m, n)
        if c is not None:
            key = (c[0].name.lower(), n)
            if key not in self.pj.const_values:
                self.pj.const_values[key] = coerce(self.eval(c[1][2]), c[1][0])
            return self.pj.const_values[key]
        if n in BUILTIN_CONSTANTS:
            return BUILTIN_CONSTANTS[n]
        if n == "err":
            return self.pj.err
        if n == "debug":
            return DebugObject(self.pj.debug)
        if n in self.pj.host:
            return self.pj.host[n]
        return self.invoke(node, [], statement=False)

    def arg_cells(self, args: List[Node]) -> List[Optional[List[Any]]]:
        cells: List[Optional[List[Any]]] = []
        for a in args:
            if isinstance(a, Name) and (a.name in self.vars or self.pj.find_global(self.m, a.name) is not None):
                cells.append(self.cell(a.name))
            else:
                cells.append([self.eval(a), "Variant", "temp"])
        return cells

    def invoke(self, node: Node, extra: List[Node], statement: bool) -> Any:
        """Calls or reads node (a Name, Member or CallOrIndex), with extra arguments from a
        statement call (`Foo a, b`)."""
        if isinstance(node, CallOrIndex):
            target, args = node.target, node.args + extra
        else:
            target, args = node, extra
        if isinstance(target, Name):
            n = target.name
            recursive = n == self.proc.name and self.proc.kind == "function" and (args or isinstance(node, CallOrIndex))
            if not recursive and (n in self.vars or self.pj.find_global(self.m, n) is not None):
                v = self.cell(n)[0]
                if not args:
                    return v
                self.require_object(v)
                return v.vba_default([self.eval(a) for a in args])
            if n == "err":
                if args:
                    raise VbaError(0, "Err takes no arguments", compile=True)
                return self.pj.err
            p = self.pj.find_proc(self.m, n)
            if p is not None:
                return Frame(self.pj, p).run(self.arg_cells(args))
            if n in self.m.declares or n in BUILTIN_FUNCTIONS:
                return builtin(self, n, [self.eval(a) for a in args])
            if n in self.pj.host:
                v = self.pj.host[n]
                if args:
                    return v.vba_default([self.eval(a) for a in args])
                return v
            c = self.pj.find_const(self.m, n)
            if c is not None and not args:
                return self.name_value(target)
            raise VbaError(0, f"Sub or Function not defined: {target.text}", compile=True)
        if isinstance(target, Member):
            obj = self.eval(target.obj)
            self.require_object(obj)
            return obj.vba_get(target.name, [self.eval(a) for a in args])
        obj = self.eval(target)
        self.require_object(obj)
        return obj.vba_default([self.eval(a) for a in args])


def compare(op: str, a: Any, b: Any) -> Any:
    if a is NULL or b is NULL:
        return NULL
    if isinstance(a, VbObject) or isinstance(b, VbObject) or a is NOTHING or b is NOTHING:
        raise VbaError(13, "Type mismatch")
    if isinstance(a, str) and isinstance(b, str):
        x: Any = a
        y: Any = b
    elif isinstance(a, str) or isinstance(b, str):
        # A number compared with a string: the string must be numeric (Variant rules).
        if a is EMPTY:
            a = "" if isinstance(b, str) else 0
        if b is EMPTY:
            b = "" if isinstance(a, str) else 0
        if isinstance(a, str) and isinstance(b, str):
            x, y = a, b
        else:
            x, y = to_num(a), to_num(b)
    else:
        x, y = to_num(a), to_num(b)
    return {"=": x == y, "<>": x != y, "<": x < y, ">": x > y, "<=": x <= y, ">=": x >= y}[op]


def binary(op: str, a: Any, b: Any) -> Any:
    if op == "&":
        return ("" if a is NULL else to_str(a)) + ("" if b is NULL else to_str(b))
    if op in ("=", "<>", "<", ">", "<=", ">="):
        return compare(op, a, b)
    if op in ("and", "or", "xor"):
        if isinstance(a, bool) and isinstance(b, bool):
            return {"and": a and b, "or": a or b, "xor": a != b}[op]
        x, y = to_long(a), to_long(b)
        return {"and": x & y, "or": x | y, "xor": x ^ y}[op]
    if a is NULL or b is NULL:
        return NULL
    if op == "+":
        if isinstance(a, str) and isinstance(b, str):
            return a + b
        return arith(to_num(a) + to_num(b), a, b)
    if op == "-":
        return arith(to_num(a) - to_num(b), a, b)
    if op == "*":
        return arith(to_num(a) * to_num(b), a, b)
    if op == "/":
        y = to_double(b)
        if y == 0:
            raise VbaError(11, "Division by zero")
        return to_double(a) / y
    if op == "\\":
        x, y = to_long(a), to_long(b)
        if y == 0:
            raise VbaError(11, "Division by zero")
        q = abs(x) // abs(y)
        return q if (x >= 0) == (y >= 0) else -q
    if op == "mod":
        x, y = to_long(a), to_long(b)
        if y == 0:
            raise VbaError(11, "Division by zero")
        r = abs(x) % abs(y)
        return r if x >= 0 else -r
    if op == "^":
        return to_double(a) ** to_double(b)
    raise VbaError(0, f"operator {op}", compile=True)


def arith(result: Any, a: Any, b: Any) -> Any:
    """Integer arithmetic on Longs overflows past 2^31 as in VBA; a Double operand makes a Double."""
    if isinstance(result, float) or isinstance(a, float) or isinstance(b, float):
        return float(result)
    if isinstance(a, str) or isinstance(b, str):
        return float(result)
    if not -2147483648 <= result <= 2147483647:
        raise VbaError(6, "Overflow")
    return result


OLE_EPOCH = datetime.datetime(1899, 12, 30)


def ole_datetime(days: float) -> datetime.datetime:
    """A VBA Date (days since 1899-12-30, the time as the fraction) as a datetime."""
    return OLE_EPOCH + datetime.timedelta(days=days)


def ole_date(t: datetime.datetime) -> float:
    return (t - OLE_EPOCH).total_seconds() / 86400.0


def builtin(frame: Frame, name: str, a: List[Any]) -> Any:
    pj = frame.pj
    if name == "len":
        return len(to_str(a[0]))
    if name == "mid":
        s = to_str(a[0])
        start = to_long(a[1])
        if start < 1:
            raise VbaError(5, "Invalid procedure call or argument")
        if len(a) > 2:
            n = to_long(a[2])
            if n < 0:
                raise VbaError(5, "Invalid procedure call or argument")
            return s[start - 1 : start - 1 + n]
        return s[start - 1 :]
    if name == "left":
        n = to_long(a[1])
        if n < 0:
            raise VbaError(5, "Invalid procedure call or argument")
        return to_str(a[0])[:n]
    if name == "right":
        n = to_long(a[1])
        if n < 0:
            raise VbaError(5, "Invalid procedure call or argument")
        s = to_str(a[0])
        return s[len(s) - n :] if n else ""
    if name == "instr":
        if len(a) >= 3 and not isinstance(a[0], str):
            start, hay, needle = to_long(a[0]), to_str(a[1]), to_str(a[2])
            compare_mode = to_long(a[3]) if len(a) > 3 else 0
        else:
            start, hay, needle, compare_mode = 1, to_str(a[0]), to_str(a[1]), 0
        if start < 1:
            raise VbaError(5, "Invalid procedure call or argument")
        if compare_mode == 1:
            hay, needle = hay.lower(), needle.lower()
        if needle == "":
            return start
        return hay.find(needle, start - 1) + 1
    if name == "replace":
        return to_str(a[0]).replace(to_str(a[1]), to_str(a[2]))
    if name == "lcase":
        return to_str(a[0]).lower()
    if name == "ucase":
        return to_str(a[0]).upper()
    if name == "trim":
        return to_str(a[0]).strip(" ")
    if name == "ltrim":
        return to_str(a[0]).lstrip(" ")
    if name == "rtrim":
        return to_str(a[0]).rstrip(" ")
    if name in ("chrw", "chr"):
        code = to_long(a[0])
        if name == "chr" and not 0 <= code <= 255:
            raise VbaError(5, "Invalid procedure call or argument")
        if not -32768 <= code <= 65535:
            raise VbaError(5, "Invalid procedure call or argument")
        return chr(code & 0xFFFF) if code >= 0 else chr(code + 65536)
    if name in ("ascw", "asc"):
        s = to_str(a[0])
        if s == "":
            raise VbaError(5, "Invalid procedure call or argument")
        code = ord(s[0])
        if code > 0xFFFF:
            raise VbaError(0, "the interpreter holds strings as UTF-16 code units; got a non-BMP character", compile=True)
        return code - 65536 if code > 32767 else code
    if name == "hex":
        n = to_long(a[0])
        return format(n & 0xFFFFFFFF if n < 0 else n, "X")
    if name == "cstr":
        return to_str(a[0])
    if name == "clng":
        return to_long(a[0])
    if name == "cint":
        return to_int(a[0])
    if name in ("cdbl", "cdec"):
        return to_double(a[0])
    if name == "cbool":
        return to_bool(a[0])
    if name == "val":
        m = re.match(r"\s*[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?", to_str(a[0]))
        if not m:
            return 0.0
        return float(m.group(0))
    if name == "str":
        v = to_num(a[0])
        s = to_str(float(v) if isinstance(v, float) else v)
        return s if s.startswith("-") else " " + s
    if name == "format":
        v = a[0]
        pattern = to_str(a[1]) if len(a) > 1 else ""
        if re.fullmatch(r"0+", pattern):
            n = to_num(v)
            n = vba_round(n) if isinstance(n, float) else n
            return str(abs(int(n))).rjust(len(pattern), "0") if n >= 0 else "-" + str(abs(int(n))).rjust(len(pattern), "0")
        if pattern == "ddddd h:nn AMPM":
            # A date in the user's locale; the interpreter's locale is Japanese (ja-JP): the short
            # date is yyyy/mm/dd and the AM/PM designators are 午前/午後.
            t = ole_datetime(to_double(v))
            h12 = t.hour % 12 or 12
            return f"{t.year:04d}/{t.month:02d}/{t.day:02d} {h12}:{t.minute:02d} {'午前' if t.hour < 12 else '午後'}"
        raise VbaError(0, f"Format pattern {pattern!r} is outside the subset", compile=True)
    if name == "isnumeric":
        v = a[0]
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            return True
        if isinstance(v, str):
            try:
                float(v.strip())
                return True
            except ValueError:
                return False
        return False
    if name == "isempty":
        return a[0] is EMPTY
    if name == "isnull":
        return a[0] is NULL
    if name == "isobject":
        return is_object(a[0])
    if name == "typename":
        return type_name(a[0])
    if name == "vartype":
        return var_type(a[0])
    if name == "int":
        return float(math.floor(to_double(a[0]))) if isinstance(to_num(a[0]), float) else to_num(a[0])
    if name == "fix":
        return float(math.trunc(to_double(a[0])))
    if name == "abs":
        return abs(to_num(a[0]))
    if name == "sgn":
        n = to_num(a[0])
        return (n > 0) - (n < 0)
    if name == "rnd":
        return pj.rng.random()
    if name == "randomize":
        pj.rng.seed()
        return EMPTY
    if name == "timer":
        now = datetime.datetime.now()
        return float(now.hour * 3600 + now.minute * 60 + now.second) + now.microsecond / 1e6
    if name == "date":
        return float((datetime.date.today() - datetime.date(1899, 12, 30)).days)
    if name == "now":
        now = datetime.datetime.now()
        return (now - datetime.datetime(1899, 12, 30)).total_seconds() / 86400.0
    if name == "environ":
        return pj.environ.get(to_str(a[0]), "")
    if name == "createobject":
        prog = to_str(a[0]).lower()
        if prog == "scripting.dictionary":
            return Dictionary()
        if prog in ("msxml2.serverxmlhttp.6.0", "msxml2.serverxmlhttp60", "msxml2.serverxmlhttp"):
            return ServerXMLHTTP()
        raise VbaError(429, f"ActiveX component can't create object ({a[0]})")
    if name == "getsetting":
        return pj.settings.get((to_str(a[0]), to_str(a[1]), to_str(a[2])), to_str(a[3]) if len(a) > 3 else "")
    if name == "savesetting":
        pj.settings[(to_str(a[0]), to_str(a[1]), to_str(a[2]))] = to_str(a[3])
        return EMPTY
    if name == "msgbox":
        pj.msgboxes.append(to_str(a[0]))
        return 1
    if name == "inputbox":
        if not pj.inputs:
            raise VbaError(0, "InputBox called but the test gave no answer", compile=True)
        return pj.inputs.pop(0)
    if name == "space":
        return " " * to_long(a[0])
    if name == "string":
        return to_str(a[1])[0] * to_long(a[0])
    if name == "doevents":
        return 0
    if name == "sleep":
        ms = to_long(a[0])
        pj.sleeps.append(ms)
        time.sleep(ms / 1000 * pj.sleep_scale)
        return EMPTY
    if name == "iif":
        return a[1] if to_bool(a[0]) else a[2]
    raise VbaError(0, f"built-in {name} is outside the subset", compile=True)
