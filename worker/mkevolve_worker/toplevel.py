"""What the top level of a decomposition may do itself, besides constructing
and calling its subproblems: one rule, read by the decomposition verifier
(decompose_check: decomposed_problem.py) and by the evaluator's static check
(static_check: a composed package's decomposed_solution.py), so that a
decomposition the verifier accepts is never rejected once composed.

Only layout: shape queries, views and reshapes, splitting (split, chunk,
unbind) and packing (cat, stack). No math. Standard library only."""
from __future__ import annotations

import os

# torch.<name> functions that pack several tensors into one, value for value.
PACKING_FUNCS = frozenset({"cat", "concat", "concatenate", "stack"})

# torch.<name> functions the top level may call (layout only, no math).
LAYOUT_FUNCS = frozenset({
    "flatten", "unflatten", "reshape", "permute", "transpose", "swapaxes", "swapdims",
    "movedim", "moveaxis", "squeeze", "unsqueeze", "t", "split", "chunk", "tensor_split",
    "unbind", "narrow", "select", "Size", "no_grad", "inference_mode", "is_tensor",
    "is_floating_point", "numel",
}) | PACKING_FUNCS

# The file of a composed package that is its top level (docs/RUN-DIRECTORY.md).
PACKAGE_TOP = "decomposed_solution.py"
PACKAGE_SUBKERNELS = "subkernel_implementations"


def is_package_top(path: str) -> bool:
    """Is path the top-level file of a composed solution package?"""
    return (os.path.basename(path) == PACKAGE_TOP
            and os.path.isdir(os.path.join(os.path.dirname(os.path.abspath(path)), PACKAGE_SUBKERNELS)))


def packing_call(qualified: str) -> bool:
    """Is the fully qualified name one of torch's packing functions (torch.cat, ...)?"""
    parts = qualified.split(".")
    return len(parts) == 2 and parts[0] == "torch" and parts[1] in PACKING_FUNCS
