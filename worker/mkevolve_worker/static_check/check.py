"""The entry points: check a candidate given as text or as a file, and
report each violation once, the main file's first."""

from __future__ import annotations

import os

from .project import Project


def _finish(proj):
    seen = set()
    out = []
    for v in proj.syntax_errors + proj.violations:
        k = (v["file"], v["line"], v["rule"])
        if k in seen:
            continue
        seen.add(k)
        out.append(v)
    out.sort(key=lambda v: (v["file"] != proj.main_display, v["file"], v["line"], v["rule"]))
    return out


def check_source(source: str, filename: str, allow_pytorch: bool = False) -> list:
    """Checks one candidate given as text. Relative imports resolve next to
    `filename` when it names a real directory."""
    proj = Project(allow_pytorch)
    proj.main_display = filename
    path = os.path.abspath(filename)
    proj.root_dir = os.path.dirname(path)
    fi = proj.add_source(path, filename, source)
    if fi is None:
        return _finish(proj)
    proj.run()
    return _finish(proj)


def check_file(path: str, allow_pytorch: bool = False, extra_files=None) -> list:
    """Checks a candidate file, the sibling candidate files it imports, and
    extra_files. Raises OSError/UnicodeDecodeError when `path` cannot be read."""
    with open(path, "r", encoding="utf-8") as f:
        source = f.read()
    proj = Project(allow_pytorch)
    proj.main_display = path
    ap = os.path.abspath(path)
    proj.root_dir = os.path.dirname(ap)
    fi = proj.add_source(ap, path, source)
    for extra in extra_files or []:
        # extra files are candidate files wherever they live; named as given
        if os.path.abspath(extra) not in proj.files:
            with open(extra, "r", encoding="utf-8") as f:
                proj.add_source(extra, extra, f.read())
    if fi is None:
        return _finish(proj)
    proj.run()
    return _finish(proj)
