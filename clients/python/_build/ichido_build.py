"""A PEP 517 build backend for this one pure-Python package, standard library only.

Why not setuptools: `pip install ./clients/python` should work everywhere the client does — also
offline and on a Debian machine without the `wheel` package — and the client itself needs nothing
but the standard library. This backend builds the wheel (and an sdist, and a PEP 660 editable
wheel) from pyproject.toml's [project] table and src/ichido; see docs/decisions/082.
"""

from __future__ import annotations

import base64
import hashlib
import io
import os
import re
import tarfile
import zipfile
from typing import Dict, List, Optional, Tuple

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = "ichido"


def _project() -> Dict[str, str]:
    """The [project] table's string keys (name, version, description, requires-python, readme)."""
    with open(os.path.join(ROOT, "pyproject.toml"), encoding="utf-8") as f:
        text = f.read()
    table = re.search(r"^\[project\]\s*$(.*?)(?=^\[)", text + "\n[", re.M | re.S)
    if table is None:
        raise RuntimeError("pyproject.toml has no [project] table")
    out = {}
    for key, value in re.findall(r'^([A-Za-z-]+)\s*=\s*"([^"]*)"\s*$', table.group(1), re.M):
        out[key] = value
    for needed in ("name", "version"):
        if needed not in out:
            raise RuntimeError(f"pyproject.toml [project] has no {needed}")
    return out


def _metadata() -> bytes:
    p = _project()
    lines = [
        "Metadata-Version: 2.1",
        f"Name: {p['name']}",
        f"Version: {p['version']}",
        f"Summary: {p.get('description', '')}",
        "License: MIT",
        "Classifier: Programming Language :: Python :: 3",
        "Classifier: Typing :: Typed",
    ]
    if "requires-python" in p:
        lines.append(f"Requires-Python: {p['requires-python']}")
    readme = os.path.join(ROOT, p.get("readme", "README.md"))
    body = ""
    if os.path.exists(readme):
        lines.append("Description-Content-Type: text/markdown")
        with open(readme, encoding="utf-8") as f:
            body = f.read()
    return ("\n".join(lines) + "\n\n" + body).encode("utf-8")


def _package_files() -> List[Tuple[str, str]]:
    """(path in the wheel, path on disk) of the package's files."""
    src = os.path.join(ROOT, "src", PACKAGE)
    out = []
    for name in sorted(os.listdir(src)):
        if name.endswith(".py") or name == "py.typed":
            out.append((f"{PACKAGE}/{name}", os.path.join(src, name)))
    return out


def _dist_info() -> str:
    p = _project()
    return f"{p['name']}-{p['version']}.dist-info"


def _write_wheel(directory: str, files: List[Tuple[str, bytes]]) -> str:
    p = _project()
    name = f"{p['name']}-{p['version']}-py3-none-any.whl"
    info = _dist_info()
    files = files + [
        (f"{info}/METADATA", _metadata()),
        (f"{info}/WHEEL", b"Wheel-Version: 1.0\nGenerator: ichido_build\nRoot-Is-Purelib: true\nTag: py3-none-any\n"),
        (f"{info}/top_level.txt", f"{PACKAGE}\n".encode()),
    ]
    record = io.StringIO()
    with zipfile.ZipFile(os.path.join(directory, name), "w", zipfile.ZIP_DEFLATED) as whl:
        for arcname, data in files:
            whl.writestr(zipfile.ZipInfo(arcname, date_time=(2026, 1, 1, 0, 0, 0)), data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            record.write(f"{arcname},sha256={digest},{len(data)}\n")
        record.write(f"{info}/RECORD,,\n")
        whl.writestr(zipfile.ZipInfo(f"{info}/RECORD", date_time=(2026, 1, 1, 0, 0, 0)), record.getvalue())
    return name


# --- PEP 517 -----------------------------------------------------------------------------------


def get_requires_for_build_wheel(config_settings: Optional[dict] = None) -> List[str]:
    return []


def get_requires_for_build_sdist(config_settings: Optional[dict] = None) -> List[str]:
    return []


def build_wheel(wheel_directory: str, config_settings: Optional[dict] = None, metadata_directory: Optional[str] = None) -> str:
    files = []
    for arcname, path in _package_files():
        with open(path, "rb") as f:
            files.append((arcname, f.read()))
    return _write_wheel(wheel_directory, files)


def build_sdist(sdist_directory: str, config_settings: Optional[dict] = None) -> str:
    p = _project()
    base = f"{p['name']}-{p['version']}"
    name = f"{base}.tar.gz"
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz") as tar:
        for rel in ["pyproject.toml", "README.md", "_build/ichido_build.py"] + [
            os.path.relpath(path, ROOT) for _, path in _package_files()
        ]:
            path = os.path.join(ROOT, rel)
            if os.path.exists(path):
                tar.add(path, arcname=f"{base}/{rel}")
        pkg_info = tarfile.TarInfo(f"{base}/PKG-INFO")
        data = _metadata()
        pkg_info.size = len(data)
        tar.addfile(pkg_info, io.BytesIO(data))
    return name


# --- PEP 660 (pip install -e) ------------------------------------------------------------------


def get_requires_for_build_editable(config_settings: Optional[dict] = None) -> List[str]:
    return []


def build_editable(wheel_directory: str, config_settings: Optional[dict] = None, metadata_directory: Optional[str] = None) -> str:
    pth = (os.path.join(ROOT, "src") + "\n").encode("utf-8")
    return _write_wheel(wheel_directory, [(f"__editable__.{PACKAGE}.pth", pth)])
