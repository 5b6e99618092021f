"""Attributes: the type of a.b, whatever a is (a tensor, a module, the
candidate's own class or instance, a torch.nn layer)."""

from __future__ import annotations

from .names import (ARITH_DUNDERS, DYNAMIC_ATTRS, FRAME_ATTRS, MODULE_OK_METHODS, TENSOR_SCALAR_ATTRS,
                    TENSOR_VIEW_ATTRS)
from .valuetypes import EMPTY, LAYER, MAX_QUAL_PARTS, TENSORISH, U, _is_seq, _norm, _tensor


class AttributeWalker:
    """A part of Walker (walker.py): attribute loads."""

    def e_Attribute(self, node, callee, inner):
        base = self.expr(node.value, inner=True)
        return self.attribute(node, base, node.attr, callee)

    def attribute(self, node, base, attr, callee):
        if attr in FRAME_ATTRS:
            self.report(node, "frame-inspection", f"reads frame attribute .{attr}")
        if attr in DYNAMIC_ATTRS:
            self.report(node, "dynamic-code", f"uses .{attr} (reaches code objects, globals or "
                        "class internals)")
        own = all(isinstance(a, tuple) and a[0] in ("I", "C", "SUPER") for a in base) and base
        if attr == "__dict__" and not own:
            self.report(node, "patching", "uses __dict__ of a module, class or object it does not "
                        "own")
        if attr in ARITH_DUNDERS and not own:
            self.compute(node, f"uses the operator method .{attr}", call=False)
            return frozenset({"T"})
        out = set()
        for a in base:
            if a == "S":
                out.add("S")
            elif a == "U":
                out.add("U")
            elif a in TENSORISH:
                if attr in TENSOR_SCALAR_ATTRS:
                    out.add("S")
                elif attr in TENSOR_VIEW_ATTRS:
                    out |= base & TENSORISH
                elif attr == "__class__":
                    out.add(("Q", "torch.Tensor"))
                else:
                    out.add(("TM", attr))
            elif not isinstance(a, tuple):
                out.add("U")
            elif a[0] == "Q":
                if a[1].count(".") >= MAX_QUAL_PARTS:
                    out.add("U")
                else:
                    out.add(("Q", a[1] + "." + attr))
            elif a[0] == "MOD":
                out |= self.p._module_member(a[1], attr)
            elif a[0] == "PKG":
                out |= self.p._package_member(a[1], attr)
            elif a == LAYER:
                if "weight" in attr or "bias" in attr or attr.startswith("running_") or attr.startswith("in_proj"):
                    out.add("W")
                else:
                    out.add(("LM", attr))
            elif a[0] == "I" and a[1] in self.p.classes:
                out |= self.instance_attr(node, self.p.classes[a[1]], attr)
            elif a[0] == "C" and a[1] in self.p.classes:
                out |= self.class_attr(self.p.classes[a[1]], attr)
            elif a[0] == "SUPER" and a[1] in self.p.classes:
                out |= self.super_attr(self.p.classes[a[1]], attr)
            elif a[0] == "K":
                out.add(("KM", a[1], attr))
            elif a[0] == "SEQ":
                out.add(("SM", attr))
            else:
                out.add("U")
        return _norm(frozenset(out)) or U

    def instance_attr(self, node, c, attr):
        if ("a", c.key, attr) in self.fresh:
            return self.fresh[("a", c.key, attr)]
        m = c.find_method(attr)
        if m is not None:
            if m.is_jit:
                return frozenset({("K", m.key)})
            if m.kind == "static":
                return frozenset({("F", m.key)})
            return frozenset({("BM", m.key)})
        t = EMPTY
        for cc in c.mro():
            t = t | cc.attrs.get(attr, EMPTY) | cc.class_attrs.get(attr, EMPTY)
        if not t:
            if c.is_torch_layer_subclass():
                if "weight" in attr or "bias" in attr or attr.startswith("running_"):
                    return frozenset({"W"})
                quals = c.torch_base_quals()
                return frozenset({("Q", quals[0] + "." + attr)}) if quals else U
            if any(q == "torch.nn.Module" for q in c.torch_base_quals()):
                if attr in MODULE_OK_METHODS or attr in ("training",):
                    return frozenset({("Q", "torch.nn.Module." + attr)})
            return U
        if self.p.p_enabled and self.func is not None and (_tensor(t) or any(_is_seq(a) for a in t)):
            if self.persistent(("a", c, attr)):
                t = t | {"P"}
        return t

    def class_attr(self, c, attr):
        if c.autograd and attr == "apply":
            m = c.find_method("forward")
            if m is not None:
                return frozenset({("F", m.key)})
        m = c.find_method(attr)
        if m is not None:
            return frozenset({("K" if m.is_jit else "F", m.key)})
        t = EMPTY
        for cc in c.mro():
            t = t | cc.class_attrs.get(attr, EMPTY) | cc.attrs.get(attr, EMPTY)
        if not t:
            quals = c.torch_base_quals()
            if quals:
                return frozenset({("Q", quals[0] + "." + attr)})
            return U
        if self.p.p_enabled and (_tensor(t) or any(_is_seq(a) for a in t)):
            if self.persistent(("a", c, attr)):
                t = t | {"P"}
        return t

    def super_attr(self, c, attr):
        for b in c.bases:
            m = b.find_method(attr)
            if m is not None:
                return frozenset({("BM", m.key)})
        quals = c.torch_base_quals()
        if quals:
            return frozenset({("Q", quals[0] + "." + attr)})
        return U
