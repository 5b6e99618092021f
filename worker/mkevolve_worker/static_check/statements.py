"""Statements: how the walker follows control flow, local definitions and
the statements that bind names."""

from __future__ import annotations

import ast

from .valuetypes import EMPTY, S, U, _deep_atoms, _elems, _seq, _tensor
from .astutil import _is_main_guard, _terminates
from .evidence import _annotation_kind, _param_evidence
from .model import Scope


class StatementWalker:
    """A part of Walker (walker.py): one method per statement type
    (s_<ast class name>), and local defs and lambdas."""

    def body(self, stmts, module=False):
        for s in stmts:
            if module and isinstance(s, ast.If) and _is_main_guard(s.test):
                continue
            self.stmt(s)

    def stmt(self, s):
        m = getattr(self, "s_" + type(s).__name__, None)
        if m is not None:
            m(s)
            return
        for child in ast.iter_child_nodes(s):
            if isinstance(child, ast.stmt):
                self.stmt(child)
            elif isinstance(child, ast.expr):
                self.expr(child)
            elif isinstance(child, (ast.excepthandler, ast.match_case if hasattr(ast, "match_case") else ast.excepthandler)):
                for g in ast.iter_child_nodes(child):
                    if isinstance(g, ast.stmt):
                        self.stmt(g)
                    elif isinstance(g, ast.expr):
                        self.expr(g)

    def s_FunctionDef(self, s):
        if id(s) in self.p.registered:
            # analysed as its own FuncInfo; its decorators run here
            for d in s.decorator_list:
                self.expr(d)
            return
        self.nested_def(s)

    s_AsyncFunctionDef = s_FunctionDef

    def nested_def(self, s):
        for d in s.decorator_list:
            self.expr(d)
        for d in list(s.args.defaults) + [d for d in s.args.kw_defaults if d is not None]:
            self.expr(d)
        jit = self.p._jit_decorated(self.fi, s)
        if jit:
            key = f"{self.key}.<locals>.{s.name}"
            self.scope.vars[s.name] = frozenset({("K", key)})
            return
        self.p.nested[id(s)] = (s, self.scope, self.fi)
        self.scope.vars[s.name] = frozenset({("N", id(s))})
        outer = self.scope
        self.scope = Scope(outer, self.fi.env)
        args = s.args
        ev = _param_evidence(s)
        for a in list(getattr(args, "posonlyargs", [])) + list(args.args) + list(args.kwonlyargs):
            e = ev.get(a.arg)
            ann = _annotation_kind(a.annotation)
            self.scope.vars[a.arg] = (S if ann == "S" or e == "S" else
                                      frozenset({"T"}) if e == "T" or ann == "T" else U)
        if args.vararg:
            self.scope.vars[args.vararg.arg] = _seq(U)
        if args.kwarg:
            self.scope.vars[args.kwarg.arg] = _seq(U)
        self.lambda_depth += 1
        self.nested_rets.append(EMPTY)
        self.body(s.body)
        self.nested_rets.pop()
        self.lambda_depth -= 1
        self.scope = outer

    def call_nested(self, nid, argts):
        """Re-walks a local def or lambda with the argument types of a call."""
        entry = self.p.nested.get(nid)
        if entry is None or nid in self.p.active_nested or len(self.p.active_nested) > 3:
            return U
        fnode, scope, fi = entry
        if fi is not self.fi:
            return U
        args = fnode.args
        params = [a.arg for a in list(getattr(args, "posonlyargs", [])) + list(args.args)]
        kwonly = [a.arg for a in args.kwonlyargs]
        pos, kws = argts
        bound = {}
        for i, (star, t) in enumerate(pos):
            if star:
                for p in params[i:]:
                    bound[p] = _elems(t)
                break
            if i < len(params):
                bound[params[i]] = t
        for k, t in kws.items():
            if k in params or k in kwonly:
                bound[k] = t
        outer = self.scope
        self.scope = Scope(scope, self.fi.env)
        for p in params + kwonly:
            self.scope.vars[p] = bound.get(p, U)
        if args.vararg:
            self.scope.vars[args.vararg.arg] = _seq(U)
        if args.kwarg:
            self.scope.vars[args.kwarg.arg] = _seq(U)
        self.p.active_nested.add(nid)
        self.lambda_depth += 1
        try:
            if isinstance(fnode, ast.Lambda):
                ret = self.expr(fnode.body)
            else:
                self.nested_rets.append(EMPTY)
                self.body(fnode.body)
                ret = self.nested_rets.pop() or S
        finally:
            self.lambda_depth -= 1
            self.p.active_nested.discard(nid)
            self.scope = outer
        return ret

    def s_ClassDef(self, s):
        for d in s.decorator_list:
            self.expr(d)
        for b in s.bases:
            self.expr(b)
        if id(s) in self.p.registered:
            return
        # class defined inside a function or a block: walk its methods inline
        for item in s.body:
            if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.nested_def(item)
            else:
                self.stmt(item)

    def s_Import(self, s):
        self.p._bind_import(self.fi, s, self.scope.vars, report=True, walker=self)

    s_ImportFrom = s_Import

    def s_Global(self, s):
        self.scope.globals.update(s.names)

    def s_Nonlocal(self, s):
        pass

    def s_Expr(self, s):
        self.expr(s.value)

    def s_Assign(self, s):
        t = self.expr(s.value)
        for target in s.targets:
            self.bind(target, t, s.value)

    def s_AnnAssign(self, s):
        if s.value is not None:
            t = self.expr(s.value)
            self.bind(s.target, t, s.value)
        elif isinstance(s.target, (ast.Attribute, ast.Subscript)):
            self.expr(s.target.value)

    def s_AugAssign(self, s):
        cur = self.load_target(s.target)
        val = self.expr(s.value)
        res = self.binop(s, s.op, cur, val)
        self.bind(s.target, res, s.value, aug=True)

    def s_Return(self, s):
        t = self.expr(s.value) if s.value is not None else S
        if self.lambda_depth and self.nested_rets:
            self.nested_rets[-1] = self.nested_rets[-1] | t
        if self.func is not None and self.lambda_depth == 0:
            self.p.join_ret(self.func, t)
            if (self.p.reporting and self.ctx == "D" and self.func.name == "forward"
                    and self.func.cls is not None and "P" in _deep_atoms(t)
                    and (_deep_atoms(t) & {"T", "A", "W"})):
                self.report(s, "output-cache",
                            "forward returns a tensor kept from an earlier call "
                            "(a cache on self, the class or the module)")

    def s_If(self, s):
        self.expr(s.test)
        before = dict(self.fresh)
        self.body(s.body)
        after_body = self.fresh
        self.fresh = dict(before)
        self.body(s.orelse)
        after_else = self.fresh
        if _terminates(s.body):
            self.fresh = after_else
        elif _terminates(s.orelse):
            self.fresh = after_body
        else:
            merged = dict(before)
            for k in after_body.keys() & after_else.keys():
                merged[k] = after_body[k] | after_else[k]
            self.fresh = merged

    def s_While(self, s):
        self.expr(s.test)
        before = dict(self.fresh)
        for _ in range(2):
            self.fresh = dict(before)
            self.body(s.body)
        self.fresh = before
        self.body(s.orelse)

    def s_For(self, s):
        it = self.expr(s.iter)
        before = dict(self.fresh)
        for _ in range(2):
            self.fresh = dict(before)
            self.bind(s.target, _elems(it), None)
            self.body(s.body)
        self.fresh = before
        self.body(s.orelse)

    s_AsyncFor = s_For

    def s_With(self, s):
        for item in s.items:
            t = self.expr(item.context_expr)
            if item.optional_vars is not None:
                self.bind(item.optional_vars, U if not _tensor(t) else t, None)
        self.body(s.body)

    s_AsyncWith = s_With

    def s_Try(self, s):
        before = dict(self.fresh)
        self.body(s.body)
        self.fresh = before
        for h in s.handlers:
            if h.type is not None:
                self.expr(h.type)
            if h.name:
                self.scope.vars[h.name] = U
            self.body(h.body)
        self.body(s.orelse)
        self.body(s.finalbody)

    s_TryStar = s_Try

    def s_Raise(self, s):
        if s.exc is not None:
            t = self.expr(s.exc)
            if any(a[0] == "Q" and a[1] in ("builtins.SystemExit", "builtins.KeyboardInterrupt")
                   for a in t if isinstance(a, tuple)):
                self.report(s, "exit", "raises SystemExit/KeyboardInterrupt to leave the process")
        if s.cause is not None:
            self.expr(s.cause)

    def s_Delete(self, s):
        for t in s.targets:
            if isinstance(t, ast.Attribute):
                base = self.expr(t.value)
                if self.is_external(base):
                    self.report(t, "patching", f"deletes attribute {t.attr} of a module or class "
                                "it does not own")
            elif isinstance(t, ast.Subscript):
                base = self.expr(t.value)
                self.expr(t.slice)
                self.check_external_subscript_store(t, base)
            else:
                self.expr(t) if not isinstance(t, ast.Name) else None
