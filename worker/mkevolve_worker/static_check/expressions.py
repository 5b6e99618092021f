"""Expressions: the type of each expression, and the PyTorch compute that
operators on tensors are."""

from __future__ import annotations

import ast

from .names import BUILTIN_NAMES
from .valuetypes import EMPTY, S, TENSORISH, U, _elems, _is_seq, _seq, _tensor
from .model import Scope


class ExpressionWalker:
    """A part of Walker (walker.py): one method per expression type
    (e_<ast class name>); calls are in calls.py, attributes in attributes.py."""

    # -- names ---------------------------------------------------------------

    def lookup_name(self, name, node):
        t = self.scope.lookup(name)
        if t is None:
            t = self.fi.env.get(name)
        if t is None:
            if name in BUILTIN_NAMES:
                return frozenset({("Q", "builtins." + name)})
            for m in self.fi.star_modules:
                return frozenset({("Q", f"{m}.{name}")})
            return U
        if ("g", name) in self.fresh and name in self.scope_globals():
            return self.fresh[("g", name)]
        if self.fi.env.get(name) is t and self.func is not None and self.p.p_enabled:
            # module-level tensors, and containers written on the data path, outlive a call
            if _tensor(t) or (self.persistent(("g", self.fi, name))
                              and any(_is_seq(a) for a in t)):
                t = t | {"P"}
        return t

    def scope_globals(self):
        out = set()
        s = self.scope
        while s is not None:
            out |= s.globals
            s = s.parent
        return out

    # -- expressions ----------------------------------------------------------

    def expr(self, node, callee=False, inner=False, quiet=False):
        if node is None:
            return U
        if quiet:
            saved = self.p.reporting
            self.p.reporting = False
            try:
                return self.expr(node, callee, inner, False)
            finally:
                self.p.reporting = saved
        m = getattr(self, "e_" + type(node).__name__, None)
        if m is None:
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.expr):
                    self.expr(child)
            return U
        t = m(node, callee, inner)
        if not inner:
            self.check_reference(node, t, callee)
        return t

    def e_Constant(self, node, callee, inner):
        return S

    def e_JoinedStr(self, node, callee, inner):
        for v in node.values:
            self.expr(v)
        return S

    def e_FormattedValue(self, node, callee, inner):
        self.expr(node.value)
        if node.format_spec is not None:
            self.expr(node.format_spec)
        return S

    def e_Name(self, node, callee, inner):
        name = node.id
        if name == "__builtins__":
            self.report(node, "patching", "uses __builtins__")
        t = self.lookup_name(name, node)
        return t

    def e_Subscript(self, node, callee, inner):
        base = self.expr(node.value)
        idx = self.expr(node.slice)
        if _tensor(base) and (_tensor(idx) or any(_is_seq(a) and _tensor(a[1]) for a in idx)):
            self.compute(node, "indexes a tensor with a tensor (gather/mask on the host side)")
            return frozenset({"T"}) | (base & {"P"})
        out = set()
        for a in base:
            if a in TENSORISH:
                out.add(a)
            elif isinstance(a, tuple) and a[0] == "Q":
                q = a[1]
                if q == "sys.modules":
                    out.add("U")
                else:
                    out.add(("Q", q))
            elif isinstance(a, tuple) and a[0] == "K":
                out.add(("KG", a[1]))
            else:
                out |= _elems(frozenset({a}))
        out = frozenset(out) or U
        if "P" in base and (_tensor(out - {"P"}) or any(_is_seq(a) for a in out)):
            out = out | {"P"}
        return out

    def e_Starred(self, node, callee, inner):
        return _elems(self.expr(node.value))

    def e_Tuple(self, node, callee, inner):
        ts = EMPTY
        for e in node.elts:
            if isinstance(e, ast.Starred):
                ts = ts | _elems(self.expr(e.value))
            else:
                ts = ts | self.expr(e)
        return _seq(ts or S)

    e_List = e_Tuple
    e_Set = e_Tuple

    def e_Dict(self, node, callee, inner):
        ts = EMPTY
        for k in node.keys:
            if k is not None:
                self.expr(k)
        for v in node.values:
            ts = ts | self.expr(v)
        return _seq(ts or S)

    def e_Slice(self, node, callee, inner):
        for x in (node.lower, node.upper, node.step):
            if x is not None:
                self.expr(x)
        return S

    def e_BinOp(self, node, callee, inner):
        left = self.expr(node.left)
        right = self.expr(node.right)
        return self.binop(node, node.op, left, right)

    def binop(self, node, op, left, right):
        if isinstance(op, ast.MatMult):
            known = lambda t: t and not (t & TENSORISH) and "U" not in t
            if not (known(left) and known(right)):
                self.compute(node, "uses the @ operator (matrix multiply) in PyTorch")
            return frozenset({"T"}) | ((left | right) & {"P"})
        if _tensor(left) or _tensor(right):
            # list/tuple repetition or concatenation is not compute
            if any(_is_seq(a) for a in left | right) and not (
                    (left & TENSORISH) and (right & TENSORISH)):
                return left | right
            sym = _OP_SYMBOLS.get(type(op), "arithmetic")
            self.compute(node, f"computes `{sym}` on tensors in PyTorch")
            return frozenset({"T"}) | ((left | right) & {"P"})
        if any(_is_seq(a) for a in left) and any(_is_seq(a) for a in right):
            return left | right
        if "U" in left or "U" in right:
            return U | (S if (left | right) <= {"S", "U"} else EMPTY)
        return S

    def e_UnaryOp(self, node, callee, inner):
        t = self.expr(node.operand)
        if isinstance(node.op, ast.Not):
            return S
        if _tensor(t):
            self.compute(node, "negates/inverts a tensor in PyTorch")
            return frozenset({"T"})
        return t

    def e_BoolOp(self, node, callee, inner):
        t = EMPTY
        for v in node.values:
            t = t | self.expr(v)
        return t

    def e_Compare(self, node, callee, inner):
        ts = [self.expr(node.left)] + [self.expr(c) for c in node.comparators]
        flagged = False
        for i, op in enumerate(node.ops):
            if isinstance(op, (ast.Is, ast.IsNot, ast.In, ast.NotIn)):
                continue
            a, b = ts[i], ts[i + 1]
            if (_tensor(a) and not any(_is_seq(x) for x in a)) or (
                    _tensor(b) and not any(_is_seq(x) for x in b)):
                if not flagged:
                    self.compute(node, "compares tensors in PyTorch")
                flagged = True
        return frozenset({"T"}) if flagged else S

    def e_IfExp(self, node, callee, inner):
        self.expr(node.test)
        return self.expr(node.body) | self.expr(node.orelse)

    def e_NamedExpr(self, node, callee, inner):
        t = self.expr(node.value)
        self.bind(node.target, t, node.value)
        return t

    def e_Lambda(self, node, callee, inner):
        outer = self.scope
        self.scope = Scope(outer, self.fi.env)
        args = node.args
        for a in list(getattr(args, "posonlyargs", [])) + list(args.args) + list(args.kwonlyargs):
            self.scope.vars[a.arg] = U
        if args.vararg:
            self.scope.vars[args.vararg.arg] = _seq(U)
        if args.kwarg:
            self.scope.vars[args.kwarg.arg] = _seq(U)
        for d in args.defaults + [d for d in args.kw_defaults if d is not None]:
            self.expr(d)
        self.p.nested[id(node)] = (node, outer, self.fi)
        self.lambda_depth += 1
        self.expr(node.body)
        self.lambda_depth -= 1
        self.scope = outer
        return frozenset({("N", id(node))})

    def comprehension(self, node, elts):
        outer = self.scope
        self.scope = Scope(outer, self.fi.env)
        for gen in node.generators:
            it = self.expr(gen.iter)
            self.bind(gen.target, _elems(it), None)
            for cond in gen.ifs:
                self.expr(cond)
        t = EMPTY
        for e in elts:
            t = t | self.expr(e)
        self.scope = outer
        return _seq(t or S)

    def e_ListComp(self, node, callee, inner):
        return self.comprehension(node, [node.elt])

    e_SetComp = e_ListComp
    e_GeneratorExp = e_ListComp

    def e_DictComp(self, node, callee, inner):
        return self.comprehension(node, [node.key, node.value])

    def e_Await(self, node, callee, inner):
        return self.expr(node.value)

    def e_Yield(self, node, callee, inner):
        if node.value is not None:
            self.expr(node.value)
        return U

    e_YieldFrom = e_Yield


_OP_SYMBOLS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//",
               ast.Mod: "%", ast.Pow: "**", ast.LShift: "<<", ast.RShift: ">>",
               ast.BitOr: "|", ast.BitAnd: "&", ast.BitXor: "^", ast.MatMult: "@"}
