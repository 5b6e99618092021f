"""Stores: what an assignment binds, and the state a store keeps beyond a
call (module globals, class and instance attributes)."""

from __future__ import annotations

import ast

from .valuetypes import EMPTY, _deep_atoms, _elems, _is_seq, _norm, _seq, _tensor
from .model import _ModuleScope


class StoreWalker:
    """A part of Walker (walker.py): binding targets, stores into
    modules and classes it does not own, and persistent locations."""

    def load_target(self, target):
        if isinstance(target, ast.Name):
            return self.lookup_name(target.id, target)
        return self.expr(target)

    def bind(self, target, t, value_node, aug=False):
        if isinstance(target, ast.Name):
            name = target.id
            if name in self.scope.globals:
                self.store_check(target, t, f"global {name}")
                self.p.join_global(self.fi, name, t, self.key)
                self.fresh[("g", name)] = t
                return
            if self.scope.vars is self.fi.env:
                old = self.fi.env.get(name, EMPTY)
                new = _norm(old | t)
                if new != old:
                    self.fi.env[name] = new
                    self.p.changed = True
                return
            self.scope.vars[name] = _norm(t)
        elif isinstance(target, (ast.Tuple, ast.List)):
            inner = _elems(t)
            if _tensor(t) and not any(_is_seq(a) for a in t):
                inner = t
            for elt in target.elts:
                if isinstance(elt, ast.Starred):
                    self.bind(elt.value, _seq(inner), None)
                else:
                    self.bind(elt, inner, None)
        elif isinstance(target, ast.Starred):
            self.bind(target.value, t, None)
        elif isinstance(target, ast.Attribute):
            base = self.expr(target.value, inner=True)
            self.attr_store(target, base, t, value_node)
        elif isinstance(target, ast.Subscript):
            base = self.expr(target.value, inner=True)
            self.expr(target.slice)
            if self.check_external_subscript_store(target, base):
                return
            loc = self.location(target.value)
            if loc is not None:
                self.store_check(target, t, self.loc_desc(loc))
                self.join_location(loc, _seq(t))

    def attr_store(self, target, base, t, value_node):
        attr = target.attr
        for a in base:
            if not isinstance(a, tuple):
                continue
            if a[0] == "Q":
                q = a[1]
                if q.startswith("torch.backends"):
                    self.check_backend_flag(target, attr, value_node)
                    continue
                self.check_qual(target, q, call=False)
                if q in ("sys",) and attr in ("stdout", "stderr", "stdin"):
                    self.report(target, "patching", f"replaces sys.{attr}")
                else:
                    self.report(target, "patching",
                                f"assigns {q}.{attr}: monkeypatching a module or class "
                                "it does not own")
            elif a[0] in ("MOD", "PKG"):
                self.report(target, "patching", f"assigns {attr} on another candidate module")
            elif a[0] == "I" and a[1] in self.p.classes:
                # Plain state on self (running statistics, RNN hidden state) is
                # legitimate; a cache shows when forward returns it later.
                c = self.p.classes[a[1]]
                self.p.join_attr(c, attr, t, self.key)
                self.fresh[("a", c.key, attr)] = t
            elif a[0] == "C" and a[1] in self.p.classes:
                c = self.p.classes[a[1]]
                if self.ctx == "D":
                    self.store_check(target, t, f"{c.name}.{attr}")
                self.p.join_attr(c, attr, t, self.key)
        if attr == "__class__" and _tensor(base):
            self.report(target, "patching", "changes the class of a tensor")

    def check_backend_flag(self, node, attr, value_node):
        bad = False
        if attr in ("allow_tf32", "allow_fp16_reduced_precision_reduction",
                    "allow_bf16_reduced_precision_reduction"):
            bad = not (isinstance(value_node, ast.Constant) and value_node.value is False)
        elif attr == "fp32_precision":
            bad = not (isinstance(value_node, ast.Constant) and value_node.value in ("ieee", "highest"))
        if bad:
            self.report(node, "tf32", f"sets torch.backends ...{attr}: TF32/reduced precision "
                        "must stay off (the reference runs in full fp32)")

    def check_external_subscript_store(self, target, base):
        for a in base:
            if not isinstance(a, tuple) or a[0] != "Q":
                continue
            q = a[1]
            if q == "sys.modules":
                self.report(target, "patching", "writes sys.modules (replaces a module)")
            elif q == "os.environ":
                self.report(target, "patching", "changes os.environ")
            else:
                self.report(target, "patching", f"writes into {q}")
            return True
        return False

    def store_check(self, node, t, where):
        if not self.p.reporting or self.ctx != "D" and not self.lambda_depth:
            return
        if self.ctx == "X":
            return
        deep = _deep_atoms(t)
        if "T" in deep:
            self.report(node, "output-cache",
                        f"stores a tensor derived from the inputs or outputs in {where}, "
                        "which outlives the call")

    def location(self, node):
        """('g', fi, name) / ('a', ClassInfo, attr) for persistent containers."""
        if isinstance(node, ast.Name):
            if self._is_local(node.id):
                return None
            if node.id in self.fi.env:
                return ("g", self.fi, node.id)
            return None
        if isinstance(node, ast.Attribute):
            base = self.expr(node.value, inner=True, quiet=True)
            for a in base:
                if isinstance(a, tuple) and a[0] in ("I", "C") and a[1] in self.p.classes:
                    return ("a", self.p.classes[a[1]], node.attr)
        return None

    def _is_local(self, name):
        s = self.scope
        while s is not None and not isinstance(s, _ModuleScope):
            if name in s.globals:
                return False
            if name in s.vars:
                return True
            s = s.parent
        return False

    def loc_desc(self, loc):
        if loc[0] == "g":
            return f"module-level {loc[2]}"
        return f"{loc[1].name}.{loc[2]}"

    def join_location(self, loc, t):
        if loc[0] == "g":
            self.p.join_global(loc[1], loc[2], t, self.key)
        else:
            self.p.join_attr(loc[1], loc[2], t, self.key)

    def persistent(self, loc):
        """Is this location written on the data path (so it carries state between calls)?"""
        if not self.p.p_enabled:
            return False
        if loc[0] == "g":
            writers = loc[1].writers.get(loc[2], set())
        else:
            writers = set()
            for c in loc[1].mro():
                writers |= c.writers.get(loc[2], set())
        return any(w in self.p.data_path for w in writers)
