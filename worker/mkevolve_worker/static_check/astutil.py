"""Small questions about syntax trees, answered without any analysis."""

from __future__ import annotations

import ast


def _const_str(node):
    """Folds string constants, concatenations, f-strings of constants, ''.join."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        a, b = _const_str(node.left), _const_str(node.right)
        if a is not None and b is not None:
            return a + b
    if isinstance(node, ast.JoinedStr):
        parts = []
        for v in node.values:
            if isinstance(v, ast.Constant) and isinstance(v.value, str):
                parts.append(v.value)
            elif isinstance(v, ast.FormattedValue):
                s = _const_str(v.value)
                if s is None:
                    return None
                parts.append(s)
            else:
                return None
        return "".join(parts)
    return None


def _dotted(node):
    """'a.b.c' for a Name/Attribute chain, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def _is_main_guard(test):
    if not isinstance(test, ast.Compare) or len(test.ops) != 1:
        return False
    sides = [test.left] + list(test.comparators)
    names = [s for s in sides if isinstance(s, ast.Name) and s.id == "__name__"]
    consts = [s for s in sides if isinstance(s, ast.Constant) and s.value == "__main__"]
    return bool(names and consts and isinstance(test.ops[0], ast.Eq))


def _terminates(stmts):
    return bool(stmts) and isinstance(stmts[-1], (ast.Return, ast.Raise, ast.Continue,
                                                  ast.Break))
