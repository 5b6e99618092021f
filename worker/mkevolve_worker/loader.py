"""Loading problems and candidates from their real files.

`@triton.jit` reads the source of the functions it decorates, so modules are
imported from files (importlib with a unique module name), never exec'd from
strings. A candidate named decomposed_solution.py inside a directory with an
__init__.py is imported as a submodule of that package, so relative imports
of its subkernels work.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import itertools
import os
import sys

_counter = itertools.count()


class LoadError(Exception):
    """A problem or candidate file is missing or lacks a required name."""


def _unique(prefix: str) -> str:
    return f"_mk_{prefix}_{os.getpid()}_{next(_counter)}"


def _loader(name: str, path: str):
    """None (the default loader), or, in a candidate's process whose static
    findings are judged by what runs, one that shows the file's code to the
    line collector before it runs (coverage.py)."""
    from . import coverage
    return coverage.loader_for(name, path)


def import_file(path: str, prefix: str = "mod"):
    path = os.path.abspath(path)
    if not os.path.isfile(path):
        raise LoadError(f"{path}: no such file")
    name = _unique(prefix)
    spec = importlib.util.spec_from_file_location(name, path, loader=_loader(name, path))
    if spec is None or spec.loader is None:
        raise LoadError(f"{path}: cannot be imported as a Python module")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    d = os.path.dirname(path)
    if d not in sys.path:
        sys.path.insert(0, d)
    spec.loader.exec_module(mod)
    return mod


def package_root(path: str) -> str | None:
    """The directory of the outermost package containing path, or None."""
    d = os.path.dirname(os.path.abspath(path))
    if not os.path.isfile(os.path.join(d, "__init__.py")):
        return None
    while os.path.isfile(os.path.join(os.path.dirname(d), "__init__.py")):
        d = os.path.dirname(d)
    return d


def import_candidate(path: str):
    """Imports a candidate file; inside a package, as part of the package."""
    path = os.path.abspath(path)
    if not os.path.isfile(path):
        raise LoadError(f"{path}: no such file")
    root = package_root(path)
    if root is None:
        return import_file(path, "cand")
    # Register the package under a unique name, then import the file as its submodule.
    pkg = _unique("pkg")
    init = os.path.join(root, "__init__.py")
    spec = importlib.util.spec_from_file_location(pkg, init, loader=_loader(pkg, init),
                                                  submodule_search_locations=[root])
    mod = importlib.util.module_from_spec(spec)
    sys.modules[pkg] = mod
    parent = os.path.dirname(root)
    if parent not in sys.path:
        sys.path.insert(0, parent)
    spec.loader.exec_module(mod)
    rel = os.path.relpath(path, root)[:-3].replace(os.sep, ".")
    return importlib.import_module(f"{pkg}.{rel}")


def load_problem(path: str):
    """Imports a problem: Model plus either get_inputs()/get_init_inputs() or
    get_input_configs() (a subproblem instantiated several times may define
    only the latter; every one of its configurations is then checked)."""
    mod = import_file(path, "prob")
    if not hasattr(mod, "Model"):
        raise LoadError(f"{path}: defines no Model (a problem needs Model, get_inputs, get_init_inputs)")
    if callable(getattr(mod, "get_input_configs", None)):
        return mod
    missing = [n for n in ("get_inputs", "get_init_inputs") if not hasattr(mod, n)]
    if missing:
        raise LoadError(f"{path}: defines no {', '.join(missing)} (a problem needs Model, get_inputs and "
                        "get_init_inputs, or get_input_configs)")
    return mod


def problem_configs(mod) -> list[dict]:
    """[{"get_init_inputs": callable, "get_inputs": callable}, ...]: the problem's
    get_input_configs() if it has one, else its single default configuration.
    A configuration without get_init_inputs uses the module's get_init_inputs()."""
    if not callable(getattr(mod, "get_input_configs", None)):
        return [{"get_init_inputs": mod.get_init_inputs, "get_inputs": mod.get_inputs}]
    configs = mod.get_input_configs()
    if not isinstance(configs, (list, tuple)) or not configs:
        raise LoadError("get_input_configs() must return a non-empty list of {get_init_inputs, get_inputs}")
    default_init = getattr(mod, "get_init_inputs", None)
    out = []
    for i, c in enumerate(configs):
        if not isinstance(c, dict) or "get_inputs" not in c:
            raise LoadError(f"get_input_configs()[{i}] must be a dict with get_inputs (and get_init_inputs)")
        if "get_init_inputs" not in c and default_init is None:
            raise LoadError(f"get_input_configs()[{i}] has no get_init_inputs and the module defines no "
                            "get_init_inputs()")

        def wrap(v):
            return v if callable(v) else (lambda v=v: list(v))
        out.append({"get_init_inputs": wrap(c["get_init_inputs"] if "get_init_inputs" in c else default_init),
                    "get_inputs": wrap(c["get_inputs"])})
    return out


def candidate_files(path: str) -> list[str]:
    """The candidate's own source files: the file, plus its whole package if in one."""
    path = os.path.abspath(path)
    root = package_root(path)
    if root is None:
        return [path]
    files = []
    for d, dirs, names in os.walk(root):
        dirs[:] = [x for x in dirs if not x.startswith(".") and x != "__pycache__"]
        files += [os.path.join(d, n) for n in names if n.endswith(".py")]
    return sorted(files)


def subkernel_files(kernel: str) -> dict[str, str]:
    """{name: path} of a composed package's subkernels (the .py files of
    subkernel_implementations/ beside the kernel), or {} for a plain kernel."""
    d = os.path.join(os.path.dirname(os.path.abspath(kernel)), "subkernel_implementations")
    if not os.path.isdir(d):
        return {}
    out = {}
    for n in sorted(os.listdir(d)):
        p = os.path.join(d, n)
        if n.endswith(".py") and n != "__init__.py" and os.path.isfile(p) and not os.path.islink(p):
            out[n[:-3]] = p
    return out


def loaded_own_files(path: str) -> list[str]:
    """Candidate files plus modules the candidate actually imported from its own directory."""
    files = set(candidate_files(path))
    home = os.path.dirname(os.path.abspath(path)) + os.sep
    for m in list(sys.modules.values()):
        f = getattr(m, "__file__", None)
        if f and os.path.abspath(f).startswith(home) and f.endswith(".py"):
            files.add(os.path.abspath(f))
    return sorted(files)


def _is_jit_decorator(node) -> bool:
    target = node.func if isinstance(node, ast.Call) else node
    if isinstance(target, ast.Attribute):
        return target.attr in ("jit", "autotune", "heuristics")
    if isinstance(target, ast.Name):
        return target.id in ("jit", "autotune", "heuristics", "triton_jit")
    return False


def triton_kernel_names(files: list[str]) -> set[str]:
    """Names of functions decorated with triton.jit (or autotune/heuristics) in files."""
    names = set()
    for f in files:
        try:
            with open(f, encoding="utf-8") as fh:
                tree = ast.parse(fh.read(), filename=f)
        except (OSError, SyntaxError, ValueError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef) and any(_is_jit_decorator(d) for d in node.decorator_list):
                names.add(node.name)
    return names


def syntax_check(files: list[str]) -> SyntaxError | None:
    for f in files:
        try:
            with open(f, "rb") as fh:
                compile(fh.read(), f, "exec", dont_inherit=True)
        except SyntaxError as e:
            return e
        except (OSError, ValueError) as e:
            return SyntaxError(f"{os.path.basename(f)}: {e}")
    return None
