"""The program model: the candidate's files, functions, classes, and the
scopes names are looked up in."""

from __future__ import annotations

from .names import NN_CONTAINERS, NN_PARAM
from .valuetypes import EMPTY


class FuncInfo:
    def __init__(self, key, node, finfo, cls):
        self.key = key
        self.node = node
        self.file = finfo
        self.cls = cls
        self.name = node.name
        self.is_jit = False
        self.kind = "function"  # function | method | static | classmethod
        self.param_types = {}   # name -> joined call-site type
        self.ret = EMPTY
        self.has_return = False

    def __repr__(self):
        return f"<FuncInfo {self.key}>"


class ClassInfo:
    def __init__(self, key, node, finfo):
        self.key = key
        self.node = node
        self.file = finfo
        self.name = node.name
        self.methods = {}       # name -> FuncInfo
        self.bases = []         # ClassInfo
        self.torch_bases = []   # qualified names of torch bases
        self.attrs = {}         # self.<attr> -> type (joined)
        self.class_attrs = {}   # class-body names -> type
        self.writers = {}       # attr -> set of node keys that assign or mutate it
        self.autograd = False
        self.body_key = key + ".<body>"

    def mro(self, seen=None):
        seen = seen if seen is not None else set()
        if self.key in seen:
            return []
        seen.add(self.key)
        out = [self]
        for b in self.bases:
            out.extend(b.mro(seen))
        return out

    def find_method(self, name):
        for c in self.mro():
            if name in c.methods:
                return c.methods[name]
        return None

    def torch_base_quals(self):
        out = []
        for c in self.mro():
            out.extend(c.torch_bases)
        return out

    def is_torch_layer_subclass(self):
        for q in self.torch_base_quals():
            last = q.rsplit(".", 1)[-1]
            if q.startswith("torch.nn.") and last not in NN_CONTAINERS and last not in NN_PARAM:
                return True
        return False


class FileInfo:
    def __init__(self, path, display, source, tree):
        self.path = path
        self.display = display
        self.source = source
        self.tree = tree
        self.env = {}            # module-level names -> type
        self.functions = {}      # key -> FuncInfo (top-level and methods)
        self.classes = {}        # name -> ClassInfo (top-level)
        self.star_modules = []
        self.writers = {}        # global name -> set of node keys mutating it
        self.module_key = path + "::<module>"


class Scope:
    def __init__(self, parent=None, module_env=None):
        self.vars = {}
        self.parent = parent
        self.module_env = module_env
        self.globals = set()

    def lookup(self, name):
        s = self
        while s is not None:
            if name in s.globals:
                break
            if name in s.vars:
                return s.vars[name]
            s = s.parent
        return None


class _ModuleScope(Scope):
    """Terminates a function's scope chain at the module (class bodies are skipped)."""

    def __init__(self, fi):
        super().__init__(None, fi.env)
        self.vars = fi.env
