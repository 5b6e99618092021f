"""Which of the static check's PyTorch-compute findings actually ran.

The static check (static_check/) sees every path forward could take, not
the one it does take. Honest LLM code often carries a PyTorch fallback that
never runs: `if weight is None: weight = torch.randn(...) * scale`, `if not
x.is_cuda: return F.gelu(x)`, `except Exception: return torch.matmul(a, b)`.
So findings of CONDITIONAL_RULES (purely compute: "torch-compute") are judged
by what ran. The server (evaluate.py) runs a candidate whose only findings
are of those rules, with their lines as TARGETS in its job; each of the
candidate's two processes (children.candidate_body, profile_body) starts a
Collector before it imports the candidate and reports which targets ran: with
each trial's output, when the trials are over, in timing.json (after the
warm-up, timed, synced and wall-clock calls), in the profiling process's
runtime.json, and in error.json. The server (Tracker) decides per line: ran
(cheating, as before), never ran (a warning in the feedback), or unknown (a
process ended without a report after it was given work, a report that is
malformed, a collector that failed, a file that was never loaded through the
collector): unknown counts as ran.

Every other rule (patching, streams, threads, files, processes, timers,
dynamic code, imports, foreign libraries, output caches, no Triton launch)
stays a violation whether or not its line runs.

How lines are seen, in the candidate's processes only:
  * Every code object compiled from a file with targets passes through the
    collector before it runs: loader.py builds such files' specs with
    WatchedLoader, and a finder first on sys.meta_path swaps it into the
    specs of the candidate's own imports (sibling modules, a package's
    subkernel_implementations/). The collector gets the module's code
    object, which holds every function, class body, lambda and
    comprehension of the file (co_consts, recursively), before the module
    body executes; so module-level and construction-time lines are seen too.
  * Python 3.12+: sys.monitoring LINE events set locally on just the code
    objects that hold a target line; the callback notes the line and returns
    DISABLE, so each line start costs one callback, once, and nothing after
    it: the timed calls run at full speed, and no other code is instrumented.
  * Python < 3.12 (the CPU test mode's Debian Python 3.11): sys.settrace, a
    global call hook that hands a line tracer only to frames of those code
    objects. It costs a Python call per frame entry anywhere in the process,
    timed calls included, which is why it is only the fallback.
  * A target line with no instruction in its file's code objects cannot run
    (the compiler dropped it: `if False:`); it is reported as never run.

Trust: the collector lives in the candidate's own process, so a candidate
could forge "never ran" only with code the static check already forbids
(the findings here are the candidate's only ones): sys.monitoring,
sys.settrace or sys.gettrace (patching), frame or gc walks
(frame-inspection), `import mkevolve_worker` (reference-import),
sys.modules (also as os.sys.modules), sys.meta_path, globals(), importlib
or exec (dynamic-code) to reach this module, file writes to forge a report
(file-io), threads or processes to compute where no report looks (threads,
process). Emptying the collector after a flagged line ran is too late: the
process sent the server a "ran" event the moment it first ran. Dying or
hanging before a report leaves the lines unknown, which counts as ran.

Pure standard library: the server imports it before forking and uses only
split, targets_of and Tracker; start, report and loader_for run in the
candidate's processes.
"""

from __future__ import annotations

import importlib.machinery
import os
import sys
import types

__all__ = ["CONDITIONAL_RULES", "split", "targets_of", "start", "report", "loader_for", "Tracker"]

# Purely compute rules: code that only computes, whose line either runs on
# the data or does not. "foreign-library" stays a plain violation: its
# findings are mostly imports, which run at import time whatever forward
# does, and importing such a library can patch torch's operators, which no
# line coverage would see.
CONDITIONAL_RULES = frozenset({"torch-compute"})
MAX_TARGETS = 4096  # more findings than any real kernel has; past it all count as violations
TOOL_NAME = "mkevolve-coverage"


def split(violations: list) -> tuple[list, list]:
    """(hard, conditional): the findings that are violations whatever runs,
    and those of CONDITIONAL_RULES, judged by what ran."""
    hard = [v for v in violations if not (isinstance(v, dict) and v.get("rule") in CONDITIONAL_RULES)]
    cond = [v for v in violations if isinstance(v, dict) and v.get("rule") in CONDITIONAL_RULES]
    return hard, cond


def targets_of(conditional: list) -> list[list]:
    """[[absolute path, line], ...]: each line with a conditional finding, once."""
    out = sorted({(os.path.abspath(str(v.get("file", ""))), int(v.get("line") or 0)) for v in conditional})
    return [list(t) for t in out]


# ---------------------------------------------------------------------------
# In the candidate's processes
# ---------------------------------------------------------------------------

_active: "Collector | None" = None


def start(spec, notify=None) -> "Collector | None":
    """Starts this process's collector for job["coverage"] ({"targets":
    [[path, line], ...]}), before the candidate is imported; None without
    targets (then nothing changes). notify(i) is called the first time
    target i runs (the child sends the server an event at once, so nothing
    the process does later can take it back). A collector that cannot start
    reports that, and the server counts every target as ran."""
    global _active
    if not isinstance(spec, dict) or not spec.get("targets"):
        return None
    _active = Collector(spec["targets"], notify)
    try:
        _active.start()
    except Exception as e:  # noqa: BLE001 - reported: every target then counts as ran
        _active.error = f"the line collector did not start: {type(e).__name__}: {e}"[:300]
    return _active


def report() -> dict | None:
    """What this process's collector saw so far, or None when it has none."""
    return _active.report() if _active is not None else None


def loader_for(name: str, path: str):
    """A WatchedLoader for a file with targets while a collector runs, else
    None (the default loader; loader.py passes it to spec_from_file_location)."""
    if _active is None or not _active.watches(path):
        return None
    return WatchedLoader(name, path)


class WatchedLoader(importlib.machinery.SourceFileLoader):
    """A file's loader that hands the module's code object to the collector
    before the module body runs."""

    def get_code(self, fullname):
        code = super().get_code(fullname)
        if code is not None and _active is not None:
            _active.register(self.path, code)
        return code


class _Finder:
    """First on sys.meta_path: the candidate's own imports of files with
    targets (sibling modules, subkernels) get a WatchedLoader."""

    def __init__(self, collector: "Collector"):
        self.collector = collector

    def find_spec(self, name, path=None, target=None):
        # The spec the import system would find without this finder (the
        # finders after it, in order), with only the loader swapped: a
        # watched file still never shadows a built-in module.
        spec = None
        for finder in list(sys.meta_path):
            find = getattr(finder, "find_spec", None)
            if finder is self or find is None:
                continue
            spec = find(name, path, target)
            if spec is not None:
                break
        if spec is not None and type(spec.loader) is importlib.machinery.SourceFileLoader and \
                self.collector.watches(spec.origin):
            spec.loader = WatchedLoader(spec.loader.name, spec.loader.path)
        return spec

    def invalidate_caches(self):
        pass


class Collector:
    def __init__(self, targets, notify=None):
        self.n = 0
        self.notify = notify
        self.by_file: dict[str, dict[int, int]] = {}  # real path -> {line: target index}
        self.error: str | None = None
        self.ran: set[int] = set()
        self.loaded: set[int] = set()   # targets whose file's code went through register()
        self.mechanism: str | None = None
        self._lines: dict[int, dict[int, int]] = {}  # id(code) -> {line: target index}
        self._codes: list = []  # keeps the watched code objects (and so their ids) alive
        self._tool = None
        try:
            for i, (p, line) in enumerate(targets[:MAX_TARGETS]):
                self.by_file.setdefault(os.path.realpath(str(p)), {})[int(line)] = i
            self.n = len(targets)
        except (TypeError, ValueError) as e:
            self.n = len(targets) if isinstance(targets, list) else 0
            self.error = f"malformed targets: {e}"
        if self.n > MAX_TARGETS:
            self.error = f"{self.n} lines to watch, more than {MAX_TARGETS}"

    def watches(self, path) -> bool:
        return isinstance(path, str) and os.path.realpath(path) in self.by_file

    def start(self) -> None:
        if self.error is not None:
            return
        mon = getattr(sys, "monitoring", None)
        if mon is not None:
            for tid in (mon.COVERAGE_ID, 3, 4, mon.PROFILER_ID, mon.OPTIMIZER_ID, mon.DEBUGGER_ID):
                if mon.get_tool(tid) is None:
                    mon.use_tool_id(tid, TOOL_NAME)
                    self._tool = tid
                    break
            else:
                self.error = "no free sys.monitoring tool id"
                return
            mon.register_callback(self._tool, mon.events.LINE, self._on_line)
            self.mechanism = "sys.monitoring"
        else:
            sys.settrace(self._on_call)
            self.mechanism = "sys.settrace"
        sys.meta_path.insert(0, _Finder(self))

    def register(self, path: str, module_code) -> None:
        """Watches the target lines of one compiled file (its module's code
        object and every code object nested in it)."""
        lines = self.by_file.get(os.path.realpath(path))
        if not lines or self.error is not None:
            return
        stack = [module_code]
        while stack:
            code = stack.pop()
            own = {ln for _, _, ln in code.co_lines() if ln is not None}
            hits = {ln: i for ln, i in lines.items() if ln in own}
            if hits:
                self._codes.append(code)
                self._lines[id(code)] = hits
                if self.mechanism == "sys.monitoring":
                    sys.monitoring.set_local_events(self._tool, code, sys.monitoring.events.LINE)
            stack.extend(c for c in code.co_consts if isinstance(c, types.CodeType))
        self.loaded.update(lines.values())

    def _hit(self, i: int) -> None:
        if i in self.ran:
            return
        self.ran.add(i)
        if self.notify is not None:
            try:
                self.notify(i)
            except Exception:  # noqa: BLE001 - never the candidate's exception; the reports still say it
                pass

    # sys.monitoring: one call per line start of a watched code object, once.
    def _on_line(self, code, line):
        m = self._lines.get(id(code))
        if m is not None:
            i = m.get(line)
            if i is not None:
                self._hit(i)
        return sys.monitoring.DISABLE

    # sys.settrace: a line tracer only for frames of watched code objects.
    def _on_call(self, frame, event, arg):
        m = self._lines.get(id(frame.f_code))
        if m is None or all(i in self.ran for i in m.values()):
            return None
        return self._on_line_traced

    def _on_line_traced(self, frame, event, arg):
        if event == "line":
            i = self._lines.get(id(frame.f_code), {}).get(frame.f_lineno)
            if i is not None:
                self._hit(i)
        return self._on_line_traced

    def _intact(self) -> str | None:
        """Why the collector may have stopped seeing lines, or None."""
        if self.mechanism == "sys.monitoring":
            mon = sys.monitoring
            if mon.get_tool(self._tool) != TOOL_NAME:
                return "its sys.monitoring tool id was taken away"
            # The only way to read the callback is to set it: set it again, and see what was there.
            if mon.register_callback(self._tool, mon.events.LINE, self._on_line) != self._on_line:
                return "its line callback was replaced"
            for code in self._codes:
                if not mon.get_local_events(self._tool, code) & mon.events.LINE:
                    return f"the line events of {code.co_name} were switched off"
        elif self.mechanism == "sys.settrace" and sys.gettrace() != self._on_call:
            return "its trace function was replaced"
        return None

    def report(self) -> dict:
        """{"mechanism", "ok", "ran": [target index], "unknown": [target
        index], "error"?}: ran so far; unknown, targets whose file never went
        through the collector (never loaded, or loaded some other way)."""
        err = self.error or self._intact()
        out = {"mechanism": self.mechanism, "ok": err is None, "ran": sorted(self.ran),
               "unknown": sorted(set(range(self.n)) - self.loaded)}
        if err is not None:
            out["error"] = err
        return out


# ---------------------------------------------------------------------------
# In the server
# ---------------------------------------------------------------------------

class Tracker:
    """The server's account of one evaluation's coverage reports. Each of the
    candidate's processes is given work (given()) and reports (reported());
    a process's reports are complete when its last report came after the
    last work it was given. A process is required once it ran the candidate
    on the evaluation's inputs: the candidate process always, the profiling
    process once it was sent the timed calls' inputs (before that it only
    imported the candidate, as the candidate process did)."""

    ROLES = ("candidate", "profiling")

    def __init__(self, targets: list):
        self.targets = targets
        self.n = len(targets)
        self.procs = {r: {"given": 0, "at": None, "report": None, "required": False, "started": False,
                          "first": {}, "reports": 0, "mechanism": None, "error": None} for r in self.ROLES}

    @property
    def active(self) -> bool:
        return self.n > 0

    def given(self, role: str, required: bool = False) -> None:
        p = self.procs[role]
        p["started"] = True
        p["given"] += 1
        p["required"] = p["required"] or required

    def ran_now(self, role: str, i, where: str) -> None:
        """The process's event sent the moment target i first ran: kept
        whatever its later reports say."""
        if self.active and isinstance(i, int) and not isinstance(i, bool) and 0 <= i < self.n:
            self.procs[role]["first"].setdefault(i, where)

    def reported(self, role: str, rep, where: str) -> None:
        """A report from the process (an event's or a file's "coverage"), where
        it came from ("trial c0t1", "the timed calls"). A malformed one is
        recorded as an error: the process's coverage is then unknown."""
        if not self.active:
            return
        p = self.procs[role]
        ok = (isinstance(rep, dict) and isinstance(rep.get("ran"), list) and isinstance(rep.get("unknown"), list)
              and all(isinstance(i, int) and not isinstance(i, bool) and 0 <= i < self.n
                      for i in rep["ran"] + rep["unknown"]))
        p["reports"] += 1
        if not ok:
            p["error"] = "a malformed coverage report"
            p["at"] = p["given"]
            return
        for i in rep["ran"]:
            p["first"].setdefault(i, where)
        p["report"] = rep
        p["at"] = p["given"]
        if isinstance(rep.get("mechanism"), str):
            p["mechanism"] = rep["mechanism"][:40]
        if rep.get("ok") is not True:
            p["error"] = str(rep.get("error") or "the collector failed")[:300]

    def judge(self) -> list[dict]:
        """Per target: {"ran": True, "where", "ran_in": {process: where}},
        {"ran": False} or {"ran": None, "why"} (unknown, which counts as ran)."""
        out = []
        for i in range(self.n):
            ran = {r: p["first"][i] for r, p in self.procs.items() if i in p["first"]}
            if ran:
                where = ran["candidate"] if "candidate" in ran else f"{ran['profiling']} (profiling process)"
                out.append({"ran": True, "where": where, "ran_in": ran})
                continue
            why = None
            for r, p in self.procs.items():
                if not p["required"]:
                    continue
                rep = p["report"]
                if p["error"] is not None:
                    why = f"the {r} process's line collector: {p['error']}"
                elif rep is None or p["at"] != p["given"]:
                    why = f"the {r} process ended without reporting which lines ran since it was last given work"
                elif i in rep["unknown"]:
                    why = f"its file was not loaded through the line collector in the {r} process"
                if why:
                    break
            out.append({"ran": None, "why": why} if why else {"ran": False})
        return out

    def record(self) -> dict:
        """checks.static.coverage["processes"]."""
        out = {}
        for r, p in self.procs.items():
            if not p["started"]:
                continue
            rec = {"required": p["required"], "reports": p["reports"],
                   "complete": p["report"] is not None and p["at"] == p["given"] and p["error"] is None,
                   "mechanism": p["mechanism"]}
            if p["error"]:
                rec["error"] = p["error"]
            out[r] = rec
        return out
