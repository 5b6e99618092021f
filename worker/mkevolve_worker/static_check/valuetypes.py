"""The abstract values the checker infers for expressions.

A type is a frozenset of atoms (alternatives):
  "T" a tensor computed from the inputs, "A" a tensor allocated here
  (it becomes "T" once a kernel launch given input data writes it),
  "W" a weight (parameter or buffer), "P" state kept across calls,
  "S" a scalar or other non-tensor, "U" unknown;
  ("Q", "torch.x.y") a qualified external name, ("SEQ", type) a container
  of values of that type, and tuples naming the candidate's own functions,
  classes, instances, kernels and methods (their first item says which).
"""

from __future__ import annotations


TENSORISH = frozenset({"T", "A", "W", "P"})
S = frozenset({"S"})
U = frozenset({"U"})
EMPTY = frozenset()


def _seq(elem, depth=0):
    """A container (tuple, list, dict, ModuleList) holding values of type elem."""
    if depth >= 2:
        return frozenset({("SEQ", U)})
    capped = set()
    for a in _norm(elem):
        if isinstance(a, tuple) and a[0] == "SEQ":
            inner = _seq(a[1], depth + 1)
            capped |= inner
        else:
            capped.add(a)
    return frozenset({("SEQ", frozenset(capped))})


MAX_ATOMS = 48      # widening: a type with more alternatives than this is collapsed
MAX_QUAL_PARTS = 8  # torch.a.b.c... deeper than this is not a symbol we classify


def _norm(t):
    """Merges every container atom of t into one and bounds the number of
    alternatives, so types stop growing (loops like `e = e.__cause__`)."""
    if len(t) > MAX_ATOMS:
        quals = sorted((a for a in t if isinstance(a, tuple) and a[0] == "Q"),
                       key=lambda a: (len(a[1]), a[1]))[:MAX_ATOMS // 2]
        t = frozenset(a for a in t if not (isinstance(a, tuple) and a[0] == "Q")) \
            | frozenset(quals) | U
    seqs = [a for a in t if isinstance(a, tuple) and a[0] == "SEQ"]
    if len(seqs) < 2:
        return t
    merged = frozenset().union(*(a[1] for a in seqs))
    return frozenset(a for a in t if not (isinstance(a, tuple) and a[0] == "SEQ")) | _seq(merged)


def _elems(t):
    out = set()
    for a in t:
        if isinstance(a, tuple) and a[0] == "SEQ":
            out |= a[1]
        elif a == "S":
            out.add("S")
        elif a in TENSORISH:
            out.add(a)
        elif isinstance(a, tuple) and a[0] == "L":
            out.add(a)
        else:
            out.add("U")
    if "P" in t and (out & TENSORISH or any(_is_seq(a) for a in out)):
        out.add("P")
    return frozenset(out) or U


def _is_seq(a):
    return isinstance(a, tuple) and a[0] == "SEQ"


def _tensor(t):
    return bool(t & TENSORISH)


def _deep_atoms(t, depth=0):
    """All atoms of t including those inside containers."""
    out = set(t)
    if depth < 3:
        for a in t:
            if _is_seq(a):
                out |= _deep_atoms(a[1], depth + 1)
    return out


def _atoms(t, kind):
    return [a for a in t if isinstance(a, tuple) and a[0] == kind]


LAYER = ("L",)             # an instance of a torch.nn layer
LAYER_IDENTITY = ("LI",)   # an instance of torch.nn.Identity
