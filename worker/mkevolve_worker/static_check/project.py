"""The analysis of one candidate: its files, the call graph, which code is
on the data path, and the violations found."""

from __future__ import annotations

import ast
import os

from .valuetypes import EMPTY, _norm
from .astutil import _dotted, _is_main_guard
from .model import ClassInfo, FileInfo, FuncInfo
from .imports import ImportResolution
from .walker import Walker


INIT_METHODS = ("__init__", "__new__", "__init_subclass__", "__post_init__", "__set_name__")
MAX_FILES = 64  # a candidate package is a handful of files


class Project(ImportResolution):
    def __init__(self, allow_pytorch):
        self.allow_pytorch = allow_pytorch
        self.files = {}          # path -> FileInfo
        self.order = []
        self.syntax_errors = []
        self.funcs = {}          # key -> FuncInfo
        self.classes = {}        # key -> ClassInfo
        self.calls = {}          # node key -> set of func keys (direct calls)
        self.refs = {}           # node key -> set of func keys (escaping references)
        self.launches = {}       # node key -> list of lines
        self.data_path = set()
        self.init_only = set()
        self.p_enabled = False
        self.reporting = False
        self.violations = []
        self.changed = False
        self.root_dir = None
        self.main_display = ""
        self.registered = set()   # ids of def/class nodes analysed on their own
        self.nested = {}          # id(def or lambda node) -> (node, defining scope, file)
        self.active_nested = set()

    # -- loading ----------------------------------------------------------

    def add_source(self, path, display, source):
        path = os.path.abspath(path)
        if path in self.files:
            return self.files[path]
        try:
            tree = ast.parse(source, filename=display)
        except SyntaxError as e:
            self.syntax_errors.append({
                "file": display, "line": int(e.lineno or 1), "rule": "syntax-error",
                "message": f"syntax error: {e.msg}"})
            self.files[path] = None
            return None
        except ValueError as e:  # null bytes
            self.syntax_errors.append({"file": display, "line": 1, "rule": "syntax-error",
                                       "message": f"cannot parse: {e}"})
            self.files[path] = None
            return None
        fi = FileInfo(path, display, source, tree)
        self.files[path] = fi
        self.order.append(fi)
        self._prepass(fi)
        return fi

    def load_path(self, path, display=None):
        ap = os.path.abspath(path)
        if ap in self.files:
            return self.files[ap]
        if display is None and not self._inside_root(ap):
            return None  # not a candidate file
        if len(self.files) >= MAX_FILES:
            return None
        try:
            with open(ap, "r", encoding="utf-8") as f:
                src = f.read()
        except (OSError, UnicodeDecodeError):
            return None
        if display is None:
            display = self._display_for(ap)
        return self.add_source(ap, display, src)

    def _inside_root(self, ap):
        root = self.root_dir
        return bool(root) and os.path.commonpath([root, ap]) == root

    def _display_for(self, ap):
        """Sibling files are named relative to the main file's name as given."""
        base = os.path.dirname(self.main_display)
        rel = os.path.relpath(ap, self.root_dir)
        return os.path.join(base, rel) if base else rel

    # -- prepass: imports, defs, classes ------------------------------------

    def _prepass(self, fi):
        # Imports first (anywhere at module level), so decorators resolve.
        for node in self._module_stmts(fi.tree.body):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                self._bind_import(fi, node, fi.env, report=False)
        for node in self._module_stmts(fi.tree.body):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                f = self._register_func(fi, node, None, node.name)
                self.registered.add(id(node))
                fi.env[node.name] = frozenset({("K" if f.is_jit else "F", f.key)})
            elif isinstance(node, ast.ClassDef):
                c = self._register_class(fi, node, node.name)
                self.registered.add(id(node))
                fi.classes[node.name] = c
                fi.env[node.name] = frozenset({("C", c.key)})
        # `kernel = triton.jit(fn)` at module level
        for node in fi.tree.body:
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
                fn = self._jit_wrapped(fi, node.value)
                if fn is not None:
                    fn.is_jit = True
                    for t in node.targets:
                        if isinstance(t, ast.Name):
                            fi.env[t.id] = frozenset({("K", fn.key)})
                    if fn.name in fi.env:
                        fi.env[fn.name] = frozenset({("K", fn.key)})
        for c in list(fi.classes.values()):
            self._resolve_bases(fi, c)

    def _module_stmts(self, body):
        for node in body:
            yield node
            if isinstance(node, ast.If) and not _is_main_guard(node.test):
                yield from self._module_stmts(node.body)
                yield from self._module_stmts(node.orelse)
            elif isinstance(node, ast.Try) or type(node).__name__ == "TryStar":
                yield from self._module_stmts(node.body)
                for h in node.handlers:
                    yield from self._module_stmts(h.body)
                yield from self._module_stmts(node.orelse)
                yield from self._module_stmts(node.finalbody)

    def _static_qual(self, fi, node):
        """Qualified name of a decorator-like expression from imports only."""
        if isinstance(node, ast.Call):
            node = node.func
        d = _dotted(node)
        if d is None:
            return None
        head, _, rest = d.partition(".")
        t = fi.env.get(head)
        if not t:
            return None
        for a in t:
            if isinstance(a, tuple) and a[0] == "Q":
                return a[1] + ("." + rest if rest else "")
        return None

    def _jit_decorated(self, fi, node):
        quals = [self._static_qual(fi, d) for d in node.decorator_list]
        return any(q in ("triton.jit", "triton.runtime.jit", "triton.runtime.jit.jit",
                         "triton.runtime.jit.JITFunction") for q in quals if q)

    def _jit_wrapped(self, fi, call):
        """fn for `triton.jit(fn)` / `triton.autotune(...)(triton.jit(fn))`."""
        q = self._static_qual(fi, call.func)
        if q not in ("triton.jit", "triton.autotune", "triton.heuristics",
                     "triton.runtime.jit"):
            return None
        if not call.args:
            return None
        arg = call.args[0]
        if isinstance(arg, ast.Call):
            return self._jit_wrapped(fi, arg)
        if isinstance(arg, ast.Name):
            for f in fi.functions.values():
                if f.cls is None and f.name == arg.id:
                    return f
        return None

    def _register_func(self, fi, node, cls, qual):
        key = f"{fi.path}::{qual}"
        f = FuncInfo(key, node, fi, cls)
        f.is_jit = self._jit_decorated(fi, node)
        if cls is not None:
            f.kind = "method"
            for d in node.decorator_list:
                dn = _dotted(d)
                if dn == "staticmethod":
                    f.kind = "static"
                elif dn == "classmethod":
                    f.kind = "classmethod"
        fi.functions[key] = f
        self.funcs[key] = f
        return f

    def _register_class(self, fi, node, qual):
        key = f"{fi.path}::{qual}"
        c = ClassInfo(key, node, fi)
        self.classes[key] = c
        for item in node.body:
            if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                c.methods[item.name] = self._register_func(fi, item, c, f"{qual}.{item.name}")
            elif isinstance(item, ast.ClassDef):
                inner = self._register_class(fi, item, f"{qual}.{item.name}")
                c.class_attrs[item.name] = frozenset({("C", inner.key)})
        return c

    def _resolve_bases(self, fi, c):
        for b in c.node.bases:
            t = self._static_type(fi, b)
            for a in t:
                if a[0] == "C" and a[1] in self.classes:
                    c.bases.append(self.classes[a[1]])
                    self._resolve_bases(self.classes[a[1]].file, self.classes[a[1]])
                elif a[0] == "Q":
                    c.torch_bases.append(a[1])
                    if a[1] in ("torch.autograd.Function", "torch.autograd.function.Function"):
                        c.autograd = True
        for cc in c.class_attrs.values():
            for a in cc:
                if a[0] == "C":
                    inner = self.classes[a[1]]
                    if not inner.bases and not inner.torch_bases:
                        self._resolve_bases(fi, inner)

    def _static_type(self, fi, node):
        d = _dotted(node)
        if d is None:
            return EMPTY
        parts = d.split(".")
        t = fi.env.get(parts[0], EMPTY)
        for p in parts[1:]:
            nt = set()
            for a in t:
                if a[0] == "Q":
                    nt.add(("Q", a[1] + "." + p))
                elif a[0] == "MOD":
                    nt |= self._module_member(a[1], p)
                elif a[0] == "PKG":
                    nt |= self._package_member(a[1], p)
            t = frozenset(nt)
        return t

    # -- recording ---------------------------------------------------------

    def report(self, fi, line, rule, message):
        if self.reporting:
            self.violations.append({"file": fi.display, "line": int(line), "rule": rule,
                                    "message": message})

    def add_edge(self, src, dst, ref=False):
        table = self.refs if ref else self.calls
        s = table.setdefault(src, set())
        if dst not in s:
            s.add(dst)
            self.changed = True

    def join_param(self, f, name, t):
        old = f.param_types.get(name, EMPTY)
        new = _norm(old | t)
        if new != old:
            f.param_types[name] = new
            self.changed = True

    def join_ret(self, f, t):
        new = _norm(f.ret | t)
        if new != f.ret:
            f.ret = new
            self.changed = True

    def join_attr(self, c, attr, t, writer):
        old = c.attrs.get(attr, EMPTY)
        new = _norm(old | t)
        if new != old:
            c.attrs[attr] = new
            self.changed = True
        w = c.writers.setdefault(attr, set())
        if writer not in w:
            w.add(writer)
            self.changed = True

    def join_global(self, fi, name, t, writer):
        old = fi.env.get(name, EMPTY)
        new = _norm(old | t)
        if new != old:
            fi.env[name] = new
            self.changed = True
        w = fi.writers.setdefault(name, set())
        if writer not in w:
            w.add(writer)
            self.changed = True

    # -- driver ------------------------------------------------------------

    def modelnew_classes(self):
        out = []
        for fi in self.order:
            t = fi.env.get("ModelNew", EMPTY)
            for a in t:
                if a[0] == "C" and a[1] in self.classes:
                    out.append(self.classes[a[1]])
        return out

    def run(self):
        # Phase A: types and graph; Phase B: with persistent-read tracking.
        for phase, rounds in (("A", 6), ("B", 4)):
            self.p_enabled = phase == "B"
            for _ in range(rounds):
                self.changed = False
                self._walk_all()
                if not self.changed:
                    break
            self._compute_contexts()
        self.reporting = True
        self._walk_all()
        self._check_entry()

    def _walk_all(self):
        for fi in list(self.order):
            w = Walker(self, fi, None, None, fi.module_key, "I")
            w.walk_module()
            for c in self._all_classes(fi):
                w = Walker(self, fi, None, c, c.body_key, "I")
                w.walk_class_body()
            for f in list(fi.functions.values()):
                if f.is_jit:
                    continue
                ctx = self.context_of(f.key)
                Walker(self, fi, f, f.cls, f.key, ctx).walk_function()

    def _all_classes(self, fi):
        return [c for c in self.classes.values() if c.file is fi]

    def context_of(self, key):
        if key in self.data_path:
            return "D"
        if key in self.init_only:
            return "I"
        return "X"

    def _compute_contexts(self):
        init_entries = set()
        for fi in self.order:
            init_entries.add(fi.module_key)
        for c in self.classes.values():
            init_entries.add(c.body_key)
            for name in INIT_METHODS:
                if name in c.methods:
                    init_entries.add(c.methods[name].key)
        reach_init = set(init_entries)
        stack = list(init_entries)
        while stack:
            k = stack.pop()
            for d in self.calls.get(k, ()):
                if d not in reach_init:
                    reach_init.add(d)
                    stack.append(d)
        roots = set()
        for c in self.modelnew_classes():
            for name in ("forward", "__call__"):
                m = c.find_method(name)
                if m is not None:
                    roots.add(m.key)
        # Dunder methods run implicitly (attribute hooks, __call__, __del__,
        # operators), so no call edge leads to them.
        for c in self.classes.values():
            for name, m in c.methods.items():
                if name.startswith("__") and name.endswith("__") and name not in INIT_METHODS:
                    roots.add(m.key)
        # escaping references from anywhere reachable
        data = set(roots)
        changed = True
        while changed:
            changed = False
            live = reach_init | data
            for src in list(live):
                for d in self.refs.get(src, ()):
                    if d not in data:
                        data.add(d)
                        changed = True
            stack = list(data)
            while stack:
                k = stack.pop()
                for d in list(self.calls.get(k, ())) + list(self.refs.get(k, ())):
                    if d not in data:
                        data.add(d)
                        stack.append(d)
                        changed = True
        self.data_path = data
        self.init_only = reach_init - data

    def reachable_from(self, key):
        seen = {key}
        stack = [key]
        while stack:
            k = stack.pop()
            for d in list(self.calls.get(k, ())) + list(self.refs.get(k, ())):
                if d not in seen:
                    seen.add(d)
                    stack.append(d)
        return seen

    def _check_entry(self):
        if not self.order:
            return
        fi = self.order[0]
        t = fi.env.get("ModelNew")
        if not t:
            self.report(fi, 1, "missing-modelnew",
                        "no class named ModelNew (define it, or import it from a candidate file)")
            return
        classes = [self.classes[a[1]] for a in t if a[0] == "C" and a[1] in self.classes]
        line = self._modelnew_line(fi)
        if not classes:
            src = ", ".join(sorted(a[1] for a in t if a[0] == "Q")) or "an unresolved name"
            self.report(fi, line, "no-triton-launch",
                        f"ModelNew comes from {src}, which is not a candidate file, so no "
                        "Triton kernel launch can be seen")
            return
        for c in classes:
            fwd = c.find_method("forward")
            if fwd is None:
                self.report(c.file, c.node.lineno, "no-triton-launch",
                            f"class {c.name} has no forward method")
                continue
            reach = self.reachable_from(fwd.key)
            # Under the PyTorch policy (Swap, and a reference checked as its own
            # candidate) a PyTorch forward may pass, marked uses_pytorch: it
            # needs no Triton launch (it still needs a forward, from a candidate file).
            if not self.allow_pytorch and not any(self.launches.get(k) for k in reach):
                self.report(c.file, fwd.node.lineno, "no-triton-launch",
                            f"{c.name}.forward never launches a @triton.jit kernel defined in the "
                            "candidate (expected kernel[grid](...) in forward or a helper it calls)")

    def _modelnew_line(self, fi):
        for node in self._module_stmts(fi.tree.body):
            if isinstance(node, ast.ClassDef) and node.name == "ModelNew":
                return node.lineno
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                for a in node.names:
                    if (a.asname or a.name) == "ModelNew":
                        return node.lineno
            if isinstance(node, ast.Assign):
                for t in node.targets:
                    if isinstance(t, ast.Name) and t.id == "ModelNew":
                        return node.lineno
        return 1
