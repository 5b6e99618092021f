"""The walker: one pass over one function, class body or module, inferring
types, recording calls and escaping references in the Project, and
reporting violations. Its parts are mixins, one module each:
statements.py, stores.py, expressions.py, attributes.py, calls.py,
external.py and imports.py."""

from __future__ import annotations

import ast

from .valuetypes import EMPTY, S, U, _norm, _seq, _tensor
from .evidence import _annotation_kind, _param_defaults, _param_evidence
from .model import Scope, _ModuleScope
from .imports import ImportChecker
from .stores import StoreWalker
from .statements import StatementWalker
from .attributes import AttributeWalker
from .expressions import ExpressionWalker
from .calls import CallWalker
from .external import ExternalUseWalker


class Walker(StatementWalker, StoreWalker, ExpressionWalker, AttributeWalker, CallWalker, ExternalUseWalker,
             ImportChecker):
    """Walks one module, class body or function (key) in the context it runs
    in (ctx): "D" on the data path, "I" at construction only, "X" never reached."""

    def __init__(self, proj, fi, func, cls, key, ctx):
        self.p = proj
        self.fi = fi
        self.func = func
        self.cls = cls
        self.key = key
        self.ctx = ctx
        self.scope = None
        self.lambda_depth = 0
        self.in_class_body = False
        self.nested_rets = []
        # locations assigned earlier in this call: reading them is not stale state
        self.fresh = {}

    # -- reporting helpers -------------------------------------------------

    def report(self, node, rule, message):
        self.p.report(self.fi, getattr(node, "lineno", 1), rule, message)

    def data_ctx(self):
        return self.ctx == "D" or (self.lambda_depth > 0 and self.ctx != "X")

    def compute(self, node, message, call=True):
        """A torch compute use: calls count on the data path; references count
        anywhere that runs (they can be smuggled into forward)."""
        if self.p.allow_pytorch:
            return
        if call and not self.data_ctx():
            return
        if not call and self.ctx == "X" and self.lambda_depth == 0:
            return
        self.report(node, "torch-compute", message)

    # -- entry points ------------------------------------------------------

    def walk_module(self):
        self.scope = _ModuleScope(self.fi)
        self.body(self.fi.tree.body, module=True)

    def walk_class_body(self):
        c = self.cls
        for q in c.torch_bases:
            if q in ("torch.Tensor", "torch._C.TensorBase", "torch._C._TensorBase") or \
                    q.endswith(("TorchFunctionMode", "TorchDispatchMode")):
                self.report(c.node, "patching",
                            f"class {c.name} subclasses {q}, which intercepts torch operations")
        for name in ("__torch_function__", "__torch_dispatch__"):
            if name in c.methods:
                self.report(c.methods[name].node, "patching",
                            f"{c.name}.{name} intercepts torch operations")
        self.scope = Scope(None, self.fi.env)
        self.scope.vars = dict(self.fi.env)
        self.in_class_body = True
        for stmt in c.node.body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                for d in stmt.decorator_list:
                    self.expr(d)
                if isinstance(stmt, ast.ClassDef):
                    for b in stmt.bases:
                        self.expr(b)
                continue
            before = dict(self.scope.vars)
            self.stmt(stmt)
            for k, v in self.scope.vars.items():
                if before.get(k) != v:
                    old = c.class_attrs.get(k, EMPTY)
                    new = _norm(old | v)
                    if new != old:
                        c.class_attrs[k] = new
                        self.p.changed = True
        for kw in c.node.keywords:
            t = self.expr(kw.value)
            if kw.arg == "metaclass" and not any(
                    isinstance(a, tuple) and a[0] == "Q" and a[1] in ("abc.ABCMeta", "type")
                    for a in t):
                self.report(kw.value, "patching",
                            f"class {c.name} uses a metaclass, which controls how it is built "
                            "and called")

    def walk_function(self):
        f = self.func
        node = f.node
        self.scope = Scope(None, self.fi.env)
        self.scope.parent = _ModuleScope(self.fi)
        args = node.args
        params = [a for a in getattr(args, "posonlyargs", [])] + list(args.args)
        evidence = _param_evidence(node)
        defaults = _param_defaults(args)
        # Defaults run at definition time; a default can smuggle a function in.
        default_types = {}
        pos_defaults = list(zip(params[len(params) - len(args.defaults):], args.defaults))
        kw_defaults = [(a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None]
        for a, d in pos_defaults + kw_defaults:
            dt = self.expr(d)
            if any(isinstance(x, tuple) and x[0] in ("Q", "F", "BM", "K", "N", "L") for x in dt):
                default_types[a.arg] = dt
        for i, a in enumerate(params):
            if i == 0 and f.kind == "method" and f.cls is not None:
                self.scope.vars[a.arg] = frozenset({("I", f.cls.key)})
                continue
            if i == 0 and f.kind == "classmethod" and f.cls is not None:
                self.scope.vars[a.arg] = frozenset({("C", f.cls.key)})
                continue
            if i == 0 and f.kind == "static" and f.cls is not None and f.cls.autograd:
                self.scope.vars[a.arg] = U  # ctx
                continue
            self.scope.vars[a.arg] = (self.param_type(f, a, evidence, defaults)
                                      | default_types.get(a.arg, EMPTY))
        for a in args.kwonlyargs:
            self.scope.vars[a.arg] = (self.param_type(f, a, evidence, defaults)
                                      | default_types.get(a.arg, EMPTY))
        if args.vararg:
            self.scope.vars[args.vararg.arg] = _seq(f.param_types.get("*" + args.vararg.arg, U))
        if args.kwarg:
            self.scope.vars[args.kwarg.arg] = _seq(U)
        self.check_decorators(f)
        self.body(node.body)

    def param_type(self, f, a, evidence, defaults):
        ann = _annotation_kind(a.annotation)
        if ann == "S":
            return S
        if ann == "T":
            return frozenset({"T"})
        site = f.param_types.get(a.arg, EMPTY)
        if site and site != U:
            return site - {"U"} if (site - {"U"}) else site
        ev = evidence.get(a.arg)
        if ev == "T":
            return frozenset({"T"})
        if ev == "S":
            return S
        if a.arg in defaults and defaults[a.arg] == "S":
            return S
        if f.name in ("forward", "__call__") and f.cls is not None:
            return frozenset({"T"})
        if f.name == "__init__":
            return S
        return U

    def check_decorators(self, f):
        for d in f.node.decorator_list:
            q = self.p._static_qual(self.fi, d)
            if q in ("functools.lru_cache", "functools.cache", "functools.cached_property"):
                if self.ctx == "D" and any(_tensor(t) for k, t in self.scope.vars.items()
                                           if not k.startswith("*")):
                    self.report(d, "output-cache",
                                f"{q} on {f.name}() caches results for tensor arguments")
