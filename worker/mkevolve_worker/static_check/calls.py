"""Calls: kernel launches, calls of the candidate's own functions, classes
and instances, and methods of tensors, layers and containers."""

from __future__ import annotations

import ast

from .names import (CONTAINER_METHODS, CONTAINER_MUTATORS, CONTAINER_READERS, DISTINCTIVE_COMPUTE,
                    FILE_METHODS, HOOK_METHODS, LAYER_OK_METHODS, TENSOR_METHOD_ALLOC, TENSOR_METHOD_META,
                    TENSOR_METHOD_VIEW)
from .valuetypes import EMPTY, LAYER, S, TENSORISH, U, _atoms, _elems, _seq
from .astutil import _const_str


class CallWalker:
    """A part of Walker (walker.py): e_Call and what it dispatches to,
    except calls of qualified names and builtins (external.py)."""

    def e_Call(self, node, callee, inner):
        func = node.func
        # kernel[grid](...)
        if isinstance(func, ast.Subscript):
            base = self.expr(func.value, inner=True)
            self.expr(func.slice)
            kernels = _atoms(base, "K") + [a for a in _elems(base) if isinstance(a, tuple) and a[0] == "K"]
            if kernels:
                argts = self.eval_args(node)
                self.launch(node, argts)
                return S
            ftype = self.expr(func)  # e.g. table[name](x)
            argts = self.eval_args(node)
            return self.apply_call(node, ftype, argts, None)
        if isinstance(func, ast.Attribute):
            recv = self.expr(func.value, inner=True)
            attr = func.attr
            ftype = self.attribute(func, recv, attr, True)
            self.check_reference(func, ftype, True)
            argts = self.eval_args(node)
            self.misc_method_checks(node, attr)
            if attr in ("register_buffer", "register_parameter", "add_module") and node.args:
                name = _const_str(node.args[0])
                val = argts[0][1][1] if len(argts[0]) > 1 else U
                if name is not None:
                    for a in recv:
                        if isinstance(a, tuple) and a[0] == "I" and a[1] in self.p.classes:
                            self.p.join_attr(self.p.classes[a[1]], name,
                                             val if attr == "add_module" else frozenset({"W"}),
                                             self.key)
            return self.apply_call(node, ftype, argts, (func.value, recv, attr))
        ftype = self.expr(func, callee=True)
        argts = self.eval_args(node)
        return self.apply_call(node, ftype, argts, None)

    def eval_args(self, node):
        pos = []
        for a in node.args:
            if isinstance(a, ast.Starred):
                pos.append(("*", self.expr(a.value)))
            else:
                pos.append((None, self.expr(a)))
        kws = {}
        for kw in node.keywords:
            t = self.expr(kw.value)
            kws[kw.arg if kw.arg is not None else "**"] = t
        return pos, kws

    def launch(self, node, argts):
        lines = self.p.launches.setdefault(self.key, [])
        if node.lineno not in lines:
            lines.append(node.lineno)
            self.p.changed = True
        pos, kws = argts
        for kw in node.keywords:
            if kw.arg == "stream":
                self.report(kw.value, "side-stream", "launches a kernel on an explicit stream")
        alltypes = [t for _, t in pos] + list(kws.values())
        if any("T" in t or "P" in t for t in alltypes):
            # outputs written by the kernel now hold input-derived data
            for a in node.args:
                if isinstance(a, ast.Name) and a.id in self.scope.vars:
                    cur = self.scope.vars[a.id]
                    if "A" in cur:
                        self.scope.vars[a.id] = cur | {"T"}

    def apply_call(self, node, ftype, argts, method):
        pos, kws = argts
        out = EMPTY
        all_args = [t for _, t in pos] + list(kws.values())
        for a in ftype:
            if a in TENSORISH or a in ("S", "U"):
                out = out | U
                if a == "U" and method is not None:
                    out = out | self.unknown_method(node, method)
                continue
            kind = a[0]
            if kind == "Q":
                out = out | self.call_qual(node, a[1], argts, method)
            elif kind == "TM":
                out = out | self.tensor_method(node, a[1], method, argts)
            elif kind == "LM":
                if a[1] not in LAYER_OK_METHODS:
                    self.compute(node, f"calls .{a[1]}() of a torch.nn layer")
                    out = out | {"T"}
                else:
                    out = out | U
            elif kind == "SM":
                out = out | self.container_method(node, a[1], method, argts)
            elif kind in ("F", "BM"):
                f = self.p.funcs.get(a[1])
                if f is not None:
                    self.p.add_edge(self.key, f.key)
                    self.bind_params(f, argts, bound=(kind == "BM"))
                    out = out | (f.ret or U)
                    if f.is_jit:
                        out = out | U
            elif kind == "KG":
                self.launch(node, argts)
                out = out | S
            elif kind == "K":
                out = out | U
            elif kind == "KM":
                if a[2] == "run":
                    self.launch(node, argts)
                out = out | U
            elif kind == "C":
                c = self.p.classes.get(a[1])
                if c is not None:
                    init = c.find_method("__init__")
                    if init is not None:
                        self.p.add_edge(self.key, init.key)
                        self.bind_params(init, argts, bound=True)
                    out = out | {("I", c.key)}
            elif kind == "I":
                c = self.p.classes.get(a[1])
                if c is not None:
                    out = out | self.call_instance(node, c, argts)
            elif kind == "L":
                self.compute(node, "calls a torch.nn layer to compute (use its .weight/.bias in "
                             "a Triton kernel instead)")
                out = out | {"T"}
            elif kind == "SEQ":
                for e in a[1]:
                    if e == LAYER:
                        self.compute(node, "calls a torch.nn container of layers")
                        out = out | {"T"}
                    elif isinstance(e, tuple) and e[0] == "I" and e[1] in self.p.classes:
                        out = out | self.call_instance(node, self.p.classes[e[1]], argts)
            elif kind == "LI":
                out = out | (pos[0][1] if pos else U)
            elif kind == "N":
                out = out | self.call_nested(a[1], argts)
            else:
                out = out | U
        if not ftype:
            out = U
        return out or U

    def call_instance(self, node, c, argts):
        out = EMPTY
        for name in ("__call__", "forward"):
            m = c.find_method(name)
            if m is not None:
                self.p.add_edge(self.key, m.key)
                self.bind_params(m, argts, bound=True)
                out = out | (m.ret or frozenset({"T"}))
                break
        else:
            if c.is_torch_layer_subclass():
                self.compute(node, f"calls {c.name}, which inherits forward from a torch.nn layer")
            out = frozenset({"T"})
        return out

    def bind_params(self, f, argts, bound):
        pos, kws = argts
        args = f.node.args
        params = [a.arg for a in list(getattr(args, "posonlyargs", [])) + list(args.args)]
        if (bound or f.kind == "classmethod") and params and f.kind != "static":
            params = params[1:]
        if f.kind == "static" and f.cls is not None and f.cls.autograd and params:
            params = params[1:]  # ctx
        i = 0
        for star, t in pos:
            if star:
                for p in params[i:]:
                    self.p.join_param(f, p, _elems(t))
                if args.vararg:
                    self.p.join_param(f, "*" + args.vararg.arg, _elems(t))
                break
            if i < len(params):
                self.p.join_param(f, params[i], t)
            elif args.vararg:
                self.p.join_param(f, "*" + args.vararg.arg, t)
            i += 1
        for k, t in kws.items():
            if k != "**":
                self.p.join_param(f, k, t)

    def unknown_method(self, node, method):
        attr = method[2]
        if attr in DISTINCTIVE_COMPUTE:
            self.compute(node, f"calls .{attr}(), a PyTorch compute method")
            return frozenset({"T"})
        return U

    def misc_method_checks(self, node, attr):
        if attr in FILE_METHODS:
            self.report(node, "file-io", f"calls .{attr}() (file I/O)")
        elif attr == "wait_stream":
            self.report(node, "side-stream", "synchronises with another CUDA stream")
        elif attr in HOOK_METHODS:
            self.report(node, "patching", f"registers a hook with .{attr}(): code that runs "
                        "around forward outside the candidate's own forward")

    def container_method(self, node, attr, method, argts):
        pos, kws = argts
        recv_node, recv, _ = method if method else (None, U, attr)
        if attr in CONTAINER_MUTATORS and recv_node is not None:
            loc = self.location(recv_node)
            vals = EMPTY
            for _, t in pos:
                vals = vals | (_elems(t) if attr in ("extend", "update") else t)
            for t in kws.values():
                vals = vals | t
            if attr == "setdefault" and len(pos) >= 2:
                vals = pos[1][1]
            if loc is not None:
                self.store_check(node, vals, self.loc_desc(loc))
                self.join_location(loc, _seq(vals))
            elif isinstance(recv_node, ast.Name) and recv_node.id in self.scope.vars:
                self.scope.vars[recv_node.id] = self.scope.vars[recv_node.id] | _seq(vals)
        if attr in CONTAINER_READERS:
            r = _elems(recv)
            if attr in ("values", "items"):
                return _seq(r)
            return r
        if attr in ("keys", "copy"):
            return recv
        return U

    def tensor_method(self, node, attr, method, argts):
        recv = method[1] if method else frozenset({"T"})
        prov = recv & TENSORISH or frozenset({"T"})
        if attr in TENSOR_METHOD_VIEW:
            if attr == "record_stream":
                self.report(node, "side-stream", "records a tensor on another CUDA stream")
            return prov
        if attr in TENSOR_METHOD_ALLOC:
            return frozenset({"A"})
        if attr in TENSOR_METHOD_META:
            return S
        if attr in CONTAINER_METHODS and attr not in ("add", "copy", "index"):
            return U
        self.compute(node, f"calls tensor method .{attr}() (PyTorch compute)")
        return frozenset({"T"}) | (prov & {"P"})
