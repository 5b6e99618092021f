"""Static (AST) cheat detection for Triton candidates.

Pure standard library: this module never imports torch or triton, so
`mkevolve check` works on machines without either.

A candidate is one file (or a package: a top-level file plus the sibling files
it imports). The checker parses every file, infers a rough type for each
expression (tensor, scalar, torch symbol, candidate class or function, ...),
builds a call graph, and reports violations. Each violation is a dict
{"file", "line", "rule", "message"}. Rule ids are stable (see RULES).

How the data path is decided:
  * `ModelNew.forward` (every file's `ModelNew`) is the root of the data path.
    Everything it calls or refers to, and every function whose reference
    escapes (stored, passed as a callback, registered), is on the data path.
  * Module-level code, class bodies, `__init__` and functions only *called*
    from those run once at construction: torch calls there are allowed
    (weight preparation), but stashing a reference to a torch compute function
    is not.
  * Bodies of `@triton.jit` functions are Triton, not torch, and are skipped.
  * Code that nothing reaches (the reference `Model` an LLM copied into the
    file, `get_inputs`, `if __name__ == "__main__":` blocks) is not data path;
    the non-compute rules still apply to it, except `__main__` blocks, which
    never run on import.

Tensor-ness is a heuristic: forward parameters, parameters and buffers,
torch allocations and anything computed from tensors are tensors; shapes,
strides, sizes, `numel()`, `len()`, literals and `triton.cdiv` results are
scalars. Arithmetic and comparisons are flagged only with a tensor operand;
`@` is flagged unless both operands are known non-tensors.

Known limits (the runtime profile layer covers what this one cannot see):
  * Values whose type is unknown (results of unknown libraries, parameters of
    lambdas handed to external code) are not treated as tensors, so plain
    arithmetic on them is not flagged; `@` and unmistakable compute method
    names (matmul, softmax, conv2d, ...) still are.
  * Compute done in Python on host lists (`x.tolist()` ... `torch.tensor(...)`)
    is not flagged here; the runtime layer sees the host-to-device copy.
  * A kernel launch that is reachable but never executed (dead branch) counts.
    So does PyTorch compute in a branch that never runs; `eval` then runs
    the candidate and counts it only if its line ran (coverage.py).
  * Returning a tensor kept from an earlier call is flagged; keeping state on
    self (running statistics, RNN hidden state) is not.
  * `getattr(self, <computed name>)` is allowed; it is treated as reaching
    every method of the class.
  * torch.cat/stack/repeat and RNG fills (uniform_, bernoulli) are compute,
    except torch.cat/stack in a composed package's decomposed_solution.py,
    which may pack its subproblems' outputs (toplevel.py: the decomposition
    verifier's rule);
    copies (`contiguous`, `clone`, `copy_`, `.to`) and fills (`zero_`, `fill_`)
    are allowed.
"""

from .check import check_file, check_source
from .cli import main
from .rules import RULES

__all__ = ["RULES", "check_file", "check_source", "main"]
