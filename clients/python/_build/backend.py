"""A PEP 517 build backend of the standard library alone.

``pip install ./clients/python`` builds in an isolated environment and
installs the backend's requirements there first: with setuptools (or
flit, hatchling) that means a download from PyPI, which a machine without
PyPI cannot make. This backend needs nothing (``requires = []``): it writes
the wheel with zipfile and the sdist with tarfile, from the files under
src/ and the metadata in pyproject.toml. The version is read from
src/scratchrun/_version.py, its one place.

It builds pure-Python wheels of this one package; it is no general tool.
"""

from __future__ import annotations

import base64
import hashlib
import io
import os
import re
import tarfile
import time
import tomllib
import zipfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src"

# Files and directories never packed: caches and build leftovers.
_SKIP = re.compile(r"(^|/)(__pycache__|\.mypy_cache|\.pytest_cache|build|dist)(/|$)|\.py[co]$")


def _project() -> dict[str, Any]:
    with open(ROOT / "pyproject.toml", "rb") as f:
        project: dict[str, Any] = tomllib.load(f)["project"]
    return project


def _version() -> str:
    text = (SRC / "scratchrun" / "_version.py").read_text(encoding="utf-8")
    m = re.search(r'^__version__ = "([^"]+)"$', text, re.M)
    if not m:
        raise RuntimeError("src/scratchrun/_version.py: no __version__ line")
    return m.group(1)


def _dist_name(project: dict[str, Any]) -> str:
    # The wheel's file name normalizes the project name (PEP 427, PEP 503).
    return re.sub(r"[-_.]+", "_", project["name"]).lower()


def _metadata(project: dict[str, Any], version: str) -> str:
    lines = [
        "Metadata-Version: 2.1",
        f"Name: {project['name']}",
        f"Version: {version}",
        f"Summary: {project.get('description', '')}",
    ]
    if "requires-python" in project:
        lines.append(f"Requires-Python: {project['requires-python']}")
    lic = project.get("license", {})
    if isinstance(lic, dict) and "text" in lic:
        lines.append(f"License: {lic['text']}")
    for c in project.get("classifiers", []):
        lines.append(f"Classifier: {c}")
    for name, url in project.get("urls", {}).items():
        lines.append(f"Project-URL: {name}, {url}")
    readme = project.get("readme")
    body = ""
    if isinstance(readme, str):
        lines.append("Description-Content-Type: text/markdown")
        body = (ROOT / readme).read_text(encoding="utf-8")
    return "\n".join(lines) + "\n\n" + body


def _package_files() -> list[tuple[str, Path]]:
    """The files of the import package, as (path in the wheel, path on disk)."""
    out = []
    for path in sorted((SRC / "scratchrun").rglob("*")):
        rel = path.relative_to(SRC).as_posix()
        if path.is_file() and not _SKIP.search(rel):
            out.append((rel, path))
    return out


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def _zip_entry(zf: zipfile.ZipFile, name: str, data: bytes) -> None:
    # A fixed date keeps the wheel the same from one build to the next.
    info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
    info.external_attr = 0o644 << 16
    info.compress_type = zipfile.ZIP_DEFLATED
    zf.writestr(info, data)


def _dist_info_files(project: dict[str, Any], version: str) -> dict[str, bytes]:
    wheel = "Wheel-Version: 1.0\nGenerator: scratchrun-backend\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    return {
        "METADATA": _metadata(project, version).encode(),
        "WHEEL": wheel.encode(),
        "top_level.txt": b"scratchrun\n",
    }


def _write_wheel(wheel_directory: str, contents: list[tuple[str, bytes]]) -> str:
    project = _project()
    version = _version()
    name = _dist_name(project)
    dist_info = f"{name}-{version}.dist-info"
    filename = f"{name}-{version}-py3-none-any.whl"
    records = []
    with zipfile.ZipFile(os.path.join(wheel_directory, filename), "w") as zf:
        for arc, data in contents:
            _zip_entry(zf, arc, data)
            records.append(_record_line(arc, data))
        for fname, data in _dist_info_files(project, version).items():
            arc = f"{dist_info}/{fname}"
            _zip_entry(zf, arc, data)
            records.append(_record_line(arc, data))
        records.append(f"{dist_info}/RECORD,,")
        _zip_entry(zf, f"{dist_info}/RECORD", ("\n".join(records) + "\n").encode())
    return filename


# PEP 517 hooks.


def get_requires_for_build_wheel(config_settings: dict[str, Any] | None = None) -> list[str]:
    """Nothing: the backend is the standard library's."""
    return []


def get_requires_for_build_sdist(config_settings: dict[str, Any] | None = None) -> list[str]:
    """Nothing: the backend is the standard library's."""
    return []


def get_requires_for_build_editable(config_settings: dict[str, Any] | None = None) -> list[str]:
    """Nothing: the backend is the standard library's."""
    return []


def build_wheel(
    wheel_directory: str,
    config_settings: dict[str, Any] | None = None,
    metadata_directory: str | None = None,
) -> str:
    """Writes the wheel of the package under src/ and returns its file name."""
    return _write_wheel(wheel_directory, [(arc, p.read_bytes()) for arc, p in _package_files()])


def build_editable(
    wheel_directory: str,
    config_settings: dict[str, Any] | None = None,
    metadata_directory: str | None = None,
) -> str:
    """Writes a wheel whose .pth file puts src/ on the path (PEP 660)."""
    return _write_wheel(wheel_directory, [("scratchrun_editable.pth", (str(SRC) + "\n").encode())])


def build_sdist(sdist_directory: str, config_settings: dict[str, Any] | None = None) -> str:
    """Writes the source archive (what builds the wheel again) and returns its name."""
    project = _project()
    version = _version()
    base = f"{_dist_name(project)}-{version}"
    filename = f"{base}.tar.gz"
    members: list[tuple[str, bytes]] = [("PKG-INFO", _metadata(project, version).encode())]
    for top in ("pyproject.toml", "README.md", "CHANGELOG.md", "_build", "src", "tests"):
        path = ROOT / top
        paths = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
        for p in paths:
            rel = p.relative_to(ROOT).as_posix()
            if not _SKIP.search(rel):
                members.append((rel, p.read_bytes()))
    with tarfile.open(os.path.join(sdist_directory, filename), "w:gz", format=tarfile.PAX_FORMAT) as tf:
        for rel, data in members:
            info = tarfile.TarInfo(f"{base}/{rel}")
            info.size = len(data)
            info.mode = 0o644
            info.mtime = int(time.time())
            tf.addfile(info, io.BytesIO(data))
    return filename
