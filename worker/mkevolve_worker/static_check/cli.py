"""`python -m mkevolve_worker.static_check [--allow-pytorch] K.py [EXTRA.py ...]`:
prints one line per violation; exit status 0 clean, 1 violations, 2 unreadable."""

from __future__ import annotations

import sys

from .check import check_file


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    allow = False
    if "--allow-pytorch" in argv:
        argv.remove("--allow-pytorch")
        allow = True
    if not argv or argv[0] in ("-h", "--help"):
        print("usage: python -m mkevolve_worker.static_check [--allow-pytorch] K.py [EXTRA.py ...]",
              file=sys.stderr)
        return 2
    path, extras = argv[0], argv[1:]
    for p in [path] + extras:
        try:
            with open(p, "r", encoding="utf-8") as f:
                f.read()
        except (OSError, UnicodeDecodeError) as e:
            print(f"{p}: cannot read: {e}", file=sys.stderr)
            return 2
    violations = check_file(path, allow_pytorch=allow, extra_files=extras)
    for v in violations:
        print(f"{v['file']}:{v['line']}: {v['rule']}: {v['message']}")
    return 1 if violations else 0
