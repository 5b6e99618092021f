"""Uses of external names: references to and calls of qualified names
(torch, os, ...) and builtins, judged by classify.py."""

from __future__ import annotations

import ast

from .. import toplevel
from .names import (SCALAR_BUILTINS, TENSORY_BUILTINS, TENSOR_METHOD_ALLOC, TENSOR_METHOD_META,
                    TENSOR_METHOD_VIEW)
from .valuetypes import EMPTY, LAYER, LAYER_IDENTITY, S, TENSORISH, U, _elems, _is_seq, _seq, _tensor
from .astutil import _const_str
from .classify import classify


class ExternalUseWalker:
    """A part of Walker (walker.py): references to qualified names, and
    calls of them and of builtins."""

    def check_reference(self, node, t, callee):
        if not isinstance(node, (ast.Name, ast.Attribute)):
            return
        for a in t:
            if not isinstance(a, tuple):
                continue
            if a[0] == "Q":
                self.check_qual(node, a[1], call=callee)
            elif a[0] in ("F", "BM") and not callee:
                self.p.add_edge(self.key, a[1], ref=True)
            elif a[0] == "I" and not callee and a[1] in self.p.classes:
                # an instance escaping (stored in a list, passed on): its forward may run
                c = self.p.classes[a[1]]
                if not (isinstance(node, ast.Name) and node.id == "self") and not (
                        isinstance(node, ast.Attribute)):
                    for name in ("forward", "__call__"):
                        m = c.find_method(name)
                        if m is not None:
                            self.p.add_edge(self.key, m.key, ref=True)
            elif a[0] == "TM" and not callee:
                name = a[1]
                if name not in TENSOR_METHOD_VIEW | TENSOR_METHOD_META | TENSOR_METHOD_ALLOC:
                    self.compute(node, f"takes the tensor method .{name} as a value", call=False)
            elif a[0] == "LM" and not callee:
                if a[1] in ("forward", "_conv_forward", "__call__"):
                    self.compute(node, f"takes nn layer method .{a[1]} as a value", call=False)

    def classify_here(self, q):
        """classify(q), except what the top level of a composed package may do
        itself (toplevel.py: packing its subproblems' outputs with torch.cat
        or torch.stack), which the decomposition verifier accepted."""
        kind, msg = classify(q)
        if kind == "compute" and toplevel.packing_call(q) and toplevel.is_package_top(self.fi.path):
            return "view", ""
        return kind, msg

    def check_qual(self, node, q, call, args=None, kwargs=None):
        """Classify a use of qualified name q. Returns the result type for calls."""
        kind, msg = self.classify_here(q)
        if kind in ("ok", "module", "meta", "alloc", "view", "param", "init", "layer",
                    "container", "identity", "autograd-base", "numpy", "tensor-method-ok",
                    "builtin", "operator"):
            return kind
        if kind == "compute":
            self.compute(node, msg, call=call)
        elif kind == "matmul-ref":
            self.compute(node, msg, call=False)
        elif kind in ("aten", "torch-compile", "side-stream", "file-io", "dynamic-code",
                      "process", "exit", "native-code", "frame-inspection", "patching",
                      "threads", "network", "foreign-library", "reference-import", "privileges",
                      "harness-import"):
            self.report(node, kind, msg)
        elif kind == "tf32":
            if not call:
                self.report(node, "tf32", msg)
            # calls are checked with their argument in call_qual
        return kind

    def call_qual(self, node, q, argts, method):
        pos, kws = argts
        all_args = [t for _, t in pos] + list(kws.values())
        kind = self.classify_here(q)[0]
        if q.startswith("builtins."):
            return self.call_builtin(node, q[9:], argts, method)
        if kind == "tf32":
            arg = node.args[0] if node.args else None
            if not (isinstance(arg, ast.Constant) and arg.value == "highest"):
                self.report(node, "tf32", "set_float32_matmul_precision below 'highest' enables "
                            "TF32 matmuls")
            return S
        if kind == "alloc":
            return frozenset({"A"})
        if kind == "view":
            prov = EMPTY
            for t in all_args:
                prov = prov | (t & TENSORISH)
            return prov or frozenset({"T"})
        if kind == "meta":
            return S if not q.endswith(("Tensor", "tensor")) else U
        if kind in ("param", "init"):
            if q.endswith(("_calculate_fan_in_and_fan_out", "calculate_gain",
                           "_calculate_correct_fan")):
                return S
            return frozenset({"W"})
        if kind == "layer":
            return frozenset({LAYER})
        if kind == "identity":
            return frozenset({LAYER_IDENTITY})
        if kind == "container":
            elems = EMPTY
            for _, t in pos:
                elems = elems | t | _elems(t)
            for t in kws.values():
                elems = elems | _elems(t)
            elems = frozenset(a for a in elems if a == LAYER or (isinstance(a, tuple) and a[0] == "I"))
            return _seq(elems or U)
        if kind == "compute":
            return frozenset({"T"}) | frozenset(a for t in all_args for a in t if a == "P")
        if kind == "numpy":
            if any(_tensor(t) for t in all_args):
                self.compute(node, f"computes with {q} on tensor data (CPU compute on the data "
                             "path)")
                return frozenset({"T"})
            return U
        if kind == "operator":
            name = q.rsplit(".", 1)[-1]
            if name in ("methodcaller", "attrgetter"):
                self.report(node, "dynamic-code", f"operator.{name} looks attributes up by "
                            "string")
                return U
            if any(_tensor(t) for t in all_args):
                self.compute(node, f"applies operator.{name} to tensors")
                return frozenset({"T"})
            return U
        if kind == "import-module":
            arg = node.args[0] if node.args else None
            name = _const_str(arg) if arg is not None else None
            if name is None:
                self.report(node, "dynamic-code", "imports a module whose name is computed")
                return U
            self.check_import_name(name, node)
            return frozenset({("Q", name)})
        if q in ("functools.partial",):
            return U
        if q == "functools.reduce":
            return U
        return U

    def call_builtin(self, node, name, argts, method):
        pos, kws = argts
        all_args = [t for _, t in pos] + list(kws.values())
        if name in ("getattr", "hasattr", "delattr", "setattr"):
            return self.call_getattr_family(node, name, pos)
        if name == "super":
            if self.cls is not None:
                return frozenset({("SUPER", self.cls.key)})
            return U
        if name == "type":
            if pos and _tensor(pos[0][1]):
                return frozenset({("Q", "torch.Tensor")})
            if pos:
                t = pos[0][1]
                cs = {("C", a[1]) for a in t if isinstance(a, tuple) and a[0] == "I"}
                if cs:
                    return frozenset(cs)
            return U
        if name in ("exec", "eval", "compile", "__import__", "globals", "locals", "vars",
                    "breakpoint"):
            return self.dynamic_builtin(node, name, pos)
        if name == "open":
            self.report(node, "file-io", "opens a file")
            return U
        if name in ("exit", "quit"):
            self.report(node, "exit", f"calls {name}()")
            return U
        if name in TENSORY_BUILTINS:
            deep = set()
            for t in all_args:
                deep |= set(t) | set(_elems(t)) if any(_is_seq(a) for a in t) else set(t)
            if deep & TENSORISH:
                self.compute(node, f"applies {name}() to tensors")
                return frozenset({"T"})
            return S if all(t <= {"S"} for t in all_args) else U
        if name in SCALAR_BUILTINS:
            return S
        if name in ("range",):
            return _seq(S)
        if name in ("list", "tuple", "set", "frozenset", "sorted", "reversed", "iter"):
            if pos:
                t = pos[0][1]
                if _tensor(t) and not any(_is_seq(a) for a in t):
                    return _seq(t)
                return _seq(_elems(t))
            return _seq(S)
        if name == "next":
            return _elems(pos[0][1]) if pos else U
        if name == "enumerate":
            return _seq(_seq(S | (_elems(pos[0][1]) if pos else U)))
        if name == "zip":
            inner = EMPTY
            for _, t in pos:
                inner = inner | _elems(t)
            return _seq(_seq(inner or U))
        if name == "dict":
            v = EMPTY
            for t in kws.values():
                v = v | t
            for _, t in pos:
                v = v | _elems(t)
            return _seq(v or S)
        if name == "map":
            return _seq(U)
        if name in ("staticmethod", "classmethod", "property"):
            return U
        if name in ("SystemExit", "KeyboardInterrupt"):
            return frozenset({("Q", "builtins." + name)})
        return U

    def dynamic_builtin(self, node, name, pos):
        if name == "__import__":
            arg = node.args[0] if node.args else None
            lit = _const_str(arg) if arg is not None else None
            self.report(node, "dynamic-code", "calls __import__")
            if lit is not None:
                self.check_import_name(lit, node)
                return frozenset({("Q", lit.split(".")[0])})
            return U
        what = {"exec": "runs exec()", "eval": "runs eval()", "compile": "compiles code with "
                "compile()", "globals": "reads globals()", "locals": "reads locals()",
                "vars": "reads vars()", "breakpoint": "calls breakpoint()"}[name]
        self.report(node, "dynamic-code", what)
        return U

    def call_getattr_family(self, node, name, pos):
        if len(pos) < 2:
            return U
        obj = pos[0][1]
        arg_node = node.args[1] if len(node.args) > 1 else None
        lit = _const_str(arg_node) if arg_node is not None else None
        own = bool(obj) and all(isinstance(a, tuple) and a[0] in ("I", "C", "SUPER")
                                for a in obj)
        if name == "setattr":
            external = self.is_external(obj)
            if external:
                if any(a[1].startswith("torch.backends") for a in obj
                       if isinstance(a, tuple) and a[0] == "Q") and lit is not None:
                    val = node.args[2] if len(node.args) > 2 else None
                    self.check_backend_flag(node, lit, val)
                else:
                    self.report(node, "patching", "setattr on a module or class it does not own")
            elif _tensor(obj):
                self.report(node, "patching", "setattr on a tensor")
            elif lit is not None:
                val = pos[2][1] if len(pos) > 2 else U
                for a in obj:
                    if isinstance(a, tuple) and a[0] in ("I", "C") and a[1] in self.p.classes:
                        self.p.join_attr(self.p.classes[a[1]], lit, val, self.key)
            return S
        if name == "delattr":
            if self.is_external(obj):
                self.report(node, "patching", "delattr on a module or class it does not own")
            return S
        if name == "hasattr":
            return S
        # getattr
        if lit is not None:
            t = self.attribute(node, obj, lit, True)
            # a literal getattr on torch is a reference whether or not it is called
            for a in t:
                if isinstance(a, tuple) and a[0] == "Q":
                    self.check_qual(node, a[1], call=False)
                elif isinstance(a, tuple) and a[0] == "TM":
                    if a[1] not in TENSOR_METHOD_VIEW | TENSOR_METHOD_META | TENSOR_METHOD_ALLOC:
                        self.compute(node, f"getattr takes tensor method .{a[1]}", call=False)
            if len(pos) > 2:
                t = t | pos[2][1]
            return t
        if own:
            # getattr(self, name): any method may be picked
            for a in obj:
                c = self.p.classes.get(a[1])
                if c is None:
                    continue
                for cc in c.mro():
                    for m in cc.methods.values():
                        self.p.add_edge(self.key, m.key, ref=True)
                t = EMPTY
                for cc in c.mro():
                    for v in list(cc.attrs.values()) + list(cc.class_attrs.values()):
                        t = t | v
                return (t | U) if t else U
            return U
        if obj <= {"S"} or all(_is_seq(a) for a in obj if isinstance(a, tuple)) and not (
                obj & TENSORISH) and "U" not in obj and any(_is_seq(a) for a in obj):
            return U
        self.report(node, "dynamic-code", "getattr with a computed attribute name on a module, "
                    "tensor or unknown object")
        return U

    def is_external(self, t):
        return any(isinstance(a, tuple) and a[0] in ("Q", "MOD", "PKG") for a in t)
