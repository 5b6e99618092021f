"""MKEvolve's worker: the only code that imports torch and Triton.

It loads problems and candidates, checks correctness against the reference,
times kernels, and detects cheating, for the C++ side through a JSON-lines
protocol (docs/ARCHITECTURE.md, `python -m mkevolve_worker serve`). Importing
this package imports no torch.
"""

__version__ = "0.1.0"
