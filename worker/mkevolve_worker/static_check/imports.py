"""A candidate's imports: resolved to its own files or to external names
(ImportResolution, a part of Project), and judged (ImportChecker, a part of
Walker)."""

from __future__ import annotations

import ast
import os

from .rules import HARNESS_PACKAGE, IMPORT_RULES, REFERENCE_MODULE_RE, REFERENCE_NAMES
from .valuetypes import U


class ImportResolution:
    """A part of Project (project.py): binds imported names to the
    candidate's own files, packages and members, or to qualified names."""

    def _find_module_file(self, base_dir, modname):
        rel = modname.replace(".", os.sep)
        cand = [os.path.join(base_dir, rel + ".py"), os.path.join(base_dir, rel, "__init__.py")]
        for p in cand:
            if os.path.isfile(p):
                return p
        if os.path.isdir(os.path.join(base_dir, rel)):
            return ("PKG", os.path.join(base_dir, rel))
        return None

    def _import_base(self, fi, level):
        if fi.path.startswith("<"):
            return None
        d = os.path.dirname(fi.path)
        for _ in range(max(level - 1, 0)):
            d = os.path.dirname(d)
        return d

    def _module_member(self, path, name):
        other = self.load_path(path)
        if other is None:
            return U
        t = other.env.get(name)
        if t:
            return t
        # submodule of a package __init__
        if os.path.basename(path) == "__init__.py":
            return self._package_member(os.path.dirname(path), name)
        return U

    def _package_member(self, dirpath, name):
        r = self._find_module_file(dirpath, name)
        if r is None:
            return U
        if isinstance(r, tuple):
            return frozenset({r})
        return frozenset({("MOD", r)})

    def _resolve_candidate_module(self, fi, modname, level):
        """Path (or ('PKG', dir)) of a candidate file for an import, or None."""
        if fi.path.startswith("<"):
            return None
        bases = []
        if level:
            bases.append(self._import_base(fi, level))
        else:
            bases.append(os.path.dirname(fi.path))
            if self.root_dir and self.root_dir not in bases:
                bases.append(self.root_dir)
        for b in bases:
            if b is None:
                continue
            if not modname:
                return ("PKG", b)
            r = self._find_module_file(b, modname)
            if r is not None:
                return r
        return None

    def _bind_import(self, fi, node, env, report=True, walker=None):
        if isinstance(node, ast.Import):
            for alias in node.names:
                name = alias.name
                local = self._resolve_candidate_module(fi, name, 0)
                if report and walker:
                    walker.check_import_name(name, node, local is not None)
                if alias.asname:
                    if local is None:
                        env[alias.asname] = frozenset({("Q", name)})
                    elif isinstance(local, tuple):
                        env[alias.asname] = frozenset({local})
                    else:
                        env[alias.asname] = frozenset({("MOD", local)})
                else:
                    top = name.split(".")[0]
                    if local is None:
                        env[top] = frozenset({("Q", top)})
                    else:
                        r = self._resolve_candidate_module(fi, top, 0)
                        if isinstance(r, tuple):
                            env[top] = frozenset({r})
                        elif r:
                            env[top] = frozenset({("MOD", r)})
            return
        # ImportFrom
        mod = node.module or ""
        level = node.level or 0
        local = self._resolve_candidate_module(fi, mod, level)
        if report and walker:
            walker.check_import_from(mod, level, node, local is not None)
        for alias in node.names:
            if alias.name == "*":
                if local is None:
                    fi.star_modules.append(mod)
                elif not isinstance(local, tuple):
                    other = self.load_path(local)
                    if other is not None:
                        for k, v in other.env.items():
                            env.setdefault(k, v)
                continue
            bound = alias.asname or alias.name
            if local is None:
                env[bound] = frozenset({("Q", f"{mod}.{alias.name}" if mod else alias.name)})
            elif isinstance(local, tuple):
                env[bound] = self._package_member(local[1], alias.name)
            else:
                env[bound] = self._module_member(local, alias.name)


class ImportChecker:
    """A part of Walker (walker.py): the rules an import statement, or a
    module imported by name, can break."""

    def check_import_name(self, name, node, local=False):
        if name == HARNESS_PACKAGE or name.startswith(HARNESS_PACKAGE + "."):
            self.report(node, "harness-import", f"imports {name}: the evaluation harness's own modules are "
                                                "off limits to a kernel")
            return
        if local:
            if any(REFERENCE_MODULE_RE.match(c) and not c[:1].isdigit()
                   for c in name.split(".")):
                self.report(node, "reference-import",
                            f"imports {name}, which looks like the problem/reference module")
            return
        for prefix, rule, why in IMPORT_RULES:
            if rule and (name == prefix or name.startswith(prefix + ".")):
                if prefix == "concurrent" and name.startswith("concurrent.futures.process"):
                    continue
                self.report(node, rule, f"imports {name}: {why}")
                return
        comps = name.split(".")
        if name == "__main__" or "__main__" in comps:
            self.report(node, "reference-import", "imports __main__ (where the reference lives)")
            return
        if any(REFERENCE_MODULE_RE.match(c) for c in comps):
            self.report(node, "reference-import",
                        f"imports {name}, which looks like the problem/reference module")

    def check_import_from(self, mod, level, node, local=False):
        full_names = [f"{mod}.{a.name}" if mod else a.name for a in node.names]
        if mod:
            before = len(self.p.violations)
            self.check_import_name(mod, node, local)
            if len(self.p.violations) > before:
                return
        for a, full in zip(node.names, full_names):
            if a.name in REFERENCE_NAMES:
                self.report(node, "reference-import",
                            f"imports {a.name} from {mod or '.'}: the reference is off limits")
                return
            if a.name == "*" or local:
                continue
            before = len(self.p.violations)
            for prefix, rule, why in IMPORT_RULES:
                if rule and (full == prefix or full.startswith(prefix + ".")):
                    self.report(node, rule, f"imports {full}: {why}")
                    break
            if len(self.p.violations) > before:
                return
