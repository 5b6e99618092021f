"""One evaluation's verdict: the body of the worker's answer to op "eval".

Every verdict the worker sends is a WorkerVerdict written by its to_json(),
so the answer's top-level keys are declared once, here, in the order they
are written. The C++ side reads them with eval::Verdict::from_json
(src/eval/verdict.cc); worker_fields() lists them for a test that compares
the two tables. Standard library only: no torch.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field


class _Required:
    def __repr__(self) -> str:
        return "<required>"


# The default of a field every verdict must set. (A field without a default
# cannot follow one with a default, and the fields are declared in the order
# they are written; keyword-only fields need Python 3.10.)
_REQUIRED = _Required()


def _always():
    """A key written in every verdict (its value may be null)."""
    return field(default=_REQUIRED, metadata={"optional": False})


def _when_set():
    """A key written only when its value is not None; absent otherwise."""
    return field(default=None, metadata={"optional": True})


@dataclass
class WorkerVerdict:
    """The verdict's top-level fields, in the order they are written."""

    max_abs_err: float | None = _always()       # the worst trial's error; null when none was compared
    runtime_ms: dict | None = _always()         # {"median", "mean"}; null unless status is correct and timed
    uses_pytorch: bool | None = _always()       # null when the runtime profile was skipped
    device: str = _always()                     # "cuda", or "cpu" in test mode
    checks: dict = _always()                    # what each layer found (docs/EVAL.md)
    elapsed_s: float = _always()                # the evaluation's own time
    subkernel_runtime_ms: dict | None = _when_set()  # a composed package's time per subkernel
    status: str = _always()                     # errors.CORRECT, INCORRECT, ... or NO_VERDICT
    kind: str = _always()                       # a key of errors.STATUS_OF_KIND
    message: str = _always()                    # what an LLM reads
    reasons: list = _always()                   # one line per reason; empty when correct
    stderr_tail: str | None = _when_set()       # the failed process's last output, secrets hidden
    retryable: bool | None = _when_set()        # True on status no_verdict: the pool retries it
    baseline_ms: dict | None = _when_set()      # {"eager", "compile"} with options.baselines

    def __post_init__(self) -> None:
        missing = [f.name for f in dataclasses.fields(self) if getattr(self, f.name) is _REQUIRED]
        if missing:
            raise TypeError(f"WorkerVerdict needs {', '.join(missing)}")

    def __setattr__(self, name: str, value) -> None:
        # A key the table does not declare cannot be added on the way to the answer.
        if name not in _FIELDS:
            raise AttributeError(f"WorkerVerdict has no field {name!r}")
        object.__setattr__(self, name, value)

    def to_json(self) -> dict:
        """The answer's body: every key in the order declared; the optional
        ones only when set. Values are the objects held (not copies)."""
        out = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if value is None and f.metadata["optional"]:
                continue
            out[f.name] = value
        return out

    @classmethod
    def from_json(cls, body: dict) -> "WorkerVerdict":
        """The verdict to_json() wrote; ValueError for a key it cannot write
        or a missing one it always writes."""
        unknown = sorted(set(body) - set(_FIELDS))
        if unknown:
            raise ValueError(f"not a verdict field: {', '.join(unknown)}")
        try:
            return cls(**body)
        except TypeError as e:
            raise ValueError(str(e)) from None


_FIELDS = frozenset(f.name for f in dataclasses.fields(WorkerVerdict))


def worker_fields() -> list[str]:
    """The top-level keys a verdict can have, sorted."""
    return sorted(_FIELDS)
