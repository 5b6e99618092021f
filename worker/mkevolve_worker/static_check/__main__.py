"""`python -m mkevolve_worker.static_check`: the command line (cli.py)."""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
