"""The trusted side of an evaluation (runs in the server or the one-shot CLI).

Order of one eval (docs/ARCHITECTURE.md has the whole story):
 1. syntax and static checks on the candidate's files (no code runs);
 2. the reference child (problem file only) loads the problem before any
    candidate code runs, then streams the trials: for each it draws the
    inputs (seeded), hands them over as a sealed in-memory file, computes and
    seals the expected output, draws the next trial's inputs, and hands the
    expected output over only once the server holds the candidate's output
    for that trial ("candidate first", trial by trial);
 3. the candidate child (candidate files only; pre-started and warmed) gets
    each trial's sealed inputs from the server, runs the trial and hands back
    a sealed output; the server compares it (CPU torch, slice by slice) and
    either kills the candidate or sends the next trial;
 4. beside it, a second process of the same candidate (profile_body) gets the
    timed calls' inputs once every trial passed, and profiles every forward
    call it makes (runtime_check.py);
 5. once the profiling process has finished, the candidate times itself under
    the GPU's timing lock;
 6. after the candidate and every descendant are dead, the server judges the
    profile, the wall-clock cross-check and the output of the last timed call.
At most a trial or two of data exists at a time; footprint.Sampler measures
the peak (checks.footprint), which the pool admits evaluations by. A failure
of the reference side without an error of the problem's own is no verdict on
the candidate (status no_verdict). Nothing the candidate process does can
reach the verdict: it only ever hands over tensors and timings through sealed
files and a pipe.
"""

from __future__ import annotations

import json
import os
import random
import signal
import time

from . import children, errors, footprint, gpuclock, gpulock, isolation, layouts, loader, sandbox, spares, tensorio, timing
from . import coverage
from . import correctness as C
from .verdict import WorkerVerdict


class RequestError(Exception):
    """A bad request or a missing capability: answered as a protocol error."""


class ProblemError(Exception):
    """The reference problem itself failed: answered as a protocol error."""


class ShapeSkipped(ProblemError):
    """Check mode: the shape variant asked for is one the reference cannot
    run (shapes.validate); args[0] is {"shape", "error"}."""


class HarnessError(ProblemError):
    """The reference's process died, stalled past its deadline or broke the
    protocol, without an error of the problem's own: the evaluation has no
    verdict (status no_verdict), which the pool retries."""


MAX_JSON = 64 << 20


def _read_json(path: str, limit: int = MAX_JSON):
    try:
        buf = tensorio._read_untrusted(path, limit)
    except FileNotFoundError:
        return None
    except tensorio.FormatError:
        return None
    try:
        return json.loads(bytes(buf).decode("utf-8", "replace"))
    except ValueError:
        return None


def _first_line(text: str) -> str:
    for line in text.splitlines():
        if line.strip():
            return line.strip()[:300]
    return ""


_RNG = random.SystemRandom()
CUDA_CONTEXT_BYTES = footprint.CUDA_CONTEXT_BYTES


def _sources_digest(problem: str) -> str | None:
    """The problem file and the Python files beside it (it may import them);
    None when they cannot be read."""
    import hashlib
    h = hashlib.sha256()
    try:
        folder = os.path.dirname(os.path.abspath(problem))
        names = sorted(n for n in os.listdir(folder) if n.endswith(".py"))
        h.update(os.path.abspath(problem).encode() + b"\0")
        for n in names:
            with open(os.path.join(folder, n), "rb") as f:
                h.update(n.encode() + b"\0" + hashlib.sha256(f.read()).digest())
    except OSError:
        return None
    return h.hexdigest()


class Evaluator:
    def __init__(self, test_mode: bool = False, progress=None, keep_spares: bool = False):
        self.test_mode = test_mode
        self.launcher = spares.Launcher(keep_spares)
        # Whether an evaluation forks the next candidate's spares at its start
        # (the request's "spares" field, set per eval by serve.py).
        self.refill_at_start = True
        # The request's "priority" (the beam rounds its subproblem has left):
        # waiting timed phases of higher priority go first (gpulock.py).
        self.timing_priority = 0
        self.progress = progress or (lambda phase: None)
        self._gpu = None
        self._ncu_version = None

    # -- GPU facts (queried in a child: the server never initialises CUDA) --

    def gpu_info(self, timeout_s: float = 120) -> dict:
        if self._gpu is None:
            child = isolation.spawn("gpu", lambda ctx: children.gpu_probe_body(ctx, {}), cut_network=False)
            isolation.supervise(child, timeout_s)
            info = _read_json(child.path("gpu.json"))
            isolation.cleanup_dir(child.dir)
            if not isinstance(info, dict):
                info = {"gpus": [], "error": "the GPU probe died: " + _first_line(child.tail() or "no output")}
            self._gpu = info
        return self._gpu

    def cuda_available(self) -> bool:
        return bool(self.gpu_info().get("gpus"))

    # -- static checks --

    @staticmethod
    def static_check(kernel: str, allow_pytorch: bool) -> dict:
        try:
            from . import static_check
        except ImportError as e:
            return {"available": False, "error": f"static checks unavailable (mkevolve_worker.static_check: {e})"}
        try:
            v = static_check.check_file(kernel, allow_pytorch=allow_pytorch)
        except Exception as e:  # noqa: BLE001
            return {"available": False, "error": f"static check crashed on {kernel}: {type(e).__name__}: {e}"}
        return {"available": True, "violations": list(v or [])}

    def check(self, kernel: str, allow_pytorch: bool = False) -> dict:
        if not os.path.isfile(kernel):
            raise RequestError(f"{kernel}: no such file")
        res = self.static_check(os.path.abspath(kernel), allow_pytorch)
        if not res["available"]:
            raise RequestError(res["error"])
        # A check runs nothing, so it cannot know which lines run: findings of
        # these rules are reported like any other, but an eval counts them
        # only if their line runs (coverage.py).
        return {"clean": not res["violations"], "violations": res["violations"],
                "conditional_rules": sorted(coverage.CONDITIONAL_RULES)}

    # -- helpers --

    def _options(self, options) -> dict:
        if options is not None and not isinstance(options, dict):
            raise RequestError("options must be a JSON object")
        try:
            opts = C.normalize_options(options)
        except ValueError as e:
            raise RequestError(str(e)) from None
        if sandbox.PLAN is not None and not sandbox.PLAN.cuda_ipc:
            opts["cuda_ipc"] = False  # the server's self-test found CUDA IPC broken in the sandbox
        if opts["test_cpu"] and not self.test_mode:
            raise RequestError("option test_cpu is honoured only by a worker started with --test-mode")
        if not opts["static_check"] and not self.test_mode:
            raise RequestError("option static_check=false is honoured only by a worker started with --test-mode")
        if opts["test_static"] and not self.test_mode:
            raise RequestError("option test_static is honoured only by a worker started with --test-mode")
        return opts

    def _device(self, opts: dict) -> str:
        if opts["test_cpu"]:
            return "cpu"
        if not self.cuda_available():
            err = self.gpu_info().get("error")
            raise RequestError("no CUDA GPU is visible to the worker" + (f" ({err})" if err else "")
                               + "; evaluation needs a GPU with Triton")
        return "cuda"

    @staticmethod
    def _file(path, what: str) -> str:
        if not isinstance(path, str) or not path:
            raise RequestError(f"missing {what} path")
        if not os.path.isfile(path):
            raise RequestError(f"{what} file {path}: no such file")
        return os.path.abspath(path)

    def close(self) -> None:
        """Kills the spares."""
        self.launcher.close()

    # -- eval --

    def evaluate(self, problem, kernel, options=None) -> dict:
        """One candidate's verdict; with options.baselines, also the baselines
        (timed in their own child, only for a correct candidate)."""
        res = self._evaluate(problem, kernel, options)
        opts = self._options(options)
        if opts["shapes"] != "benchmark" and opts["shape_variant"] is None:
            self._shapes_record(res, self._file(problem, "problem"), self._file(kernel, "kernel"), options, opts)
        if (opts["profile_ncu"] and res.status == errors.CORRECT and opts["perf"] and not opts["test_cpu"]
                and isinstance(res.checks, dict)):
            # Advisory hardware counters: never change the verdict.
            res.checks["ncu"] = self.ncu_profile(self._file(problem, "problem"), self._file(kernel, "kernel"),
                                                 opts)
        if opts["baselines"] and res.status == errors.CORRECT and opts["perf"]:
            b = self.baseline(problem, options)
            res.baseline_ms = {k: ({"median": b[k]["median_ms"], "mean": b[k]["mean_ms"]} if b.get(k) else None)
                               for k in ("eager", "compile")}
            if b.get("compile_error"):
                res.checks["baseline_compile_error"] = b["compile_error"]
        return res.to_json()

    def _shapes_record(self, res: WorkerVerdict, problem, kernel, options, opts: dict) -> None:
        """checks.shapes: the shapes the candidate holds at ("held"), those it
        failed at with the error ("failed"), those the reference cannot run
        ("skipped"). search: from the evaluation itself (its variants were
        configurations); check: a correct candidate is evaluated once more
        at each variant alone (no timing), the verdict left as it is."""
        from . import shapes
        checks = res.checks if isinstance(res.checks, dict) else {}
        if opts["shapes"] == "search":
            rec = checks.get("shapes")
            if not isinstance(rec, dict):
                return  # failed before the reference loaded the problem
            variants = list(rec.get("variants") or [])
            failed_at = rec.pop("failed_at", None)
            if res.status == errors.CORRECT:
                rec["held"], rec["failed"] = variants, []
            elif failed_at in variants:
                rec["held"] = variants[:variants.index(failed_at)]
                rec["not_reached"] = variants[variants.index(failed_at) + 1:]  # the first failure ends it
                rec["failed"] = [{"shape": failed_at, "error": errors.shorten(str(res.message), 500)}]
            else:
                rec["held"], rec["failed"] = [], []
                rec["not_reached"] = variants  # it failed at the benchmark's own configurations
            return
        d = shapes.derive(problem)
        rec = {"mode": "check", "benchmark": d["benchmark"], "variants": [v["label"] for v in d["variants"]],
               "held": [], "failed": [], "skipped": [], "kept": d["kept"], "error": d["error"]}
        checks["shapes"] = rec
        if res.status != errors.CORRECT:
            rec["not_reached"] = rec["variants"]
            return
        for k, v in enumerate(d["variants"]):
            sub_opts = dict(options or {}, shapes="check", shape_variant=k, perf=False, baselines=False,
                            profile_ncu=False)
            try:
                sub = self._evaluate(problem, kernel, sub_opts)
            except ShapeSkipped as e:
                rec["skipped"].append(e.args[0])
                continue
            except ProblemError as e:
                rec["skipped"].append({"shape": v["label"], "error": errors.shorten(str(e), 500)})
                continue
            if sub.status == errors.CORRECT:
                rec["held"].append(v["label"])
            elif sub.status == "no_verdict":
                # The harness failed, not the candidate: not known, never counted against it.
                rec["skipped"].append({"shape": v["label"], "error": "no verdict: "
                                       + errors.shorten(str(sub.message), 400)})
            else:
                rec["failed"].append({"shape": v["label"], "status": sub.status, "kind": sub.kind,
                                      "error": errors.shorten(str(sub.message), 500)})

    def _evaluate(self, problem, kernel, options=None) -> WorkerVerdict:
        t_start = time.monotonic()
        opts = self._options(options)
        if opts["tf32"]:
            raise RequestError("option tf32 is for the baseline op only; candidates and references run with TF32 off")
        problem = self._file(problem, "problem")
        kernel = self._file(kernel, "kernel")
        device = self._device(opts)
        res = _Result(opts, device)
        files = loader.candidate_files(kernel)

        err = loader.syntax_check(files)
        if err is not None:
            return res.fail("syntax_error", "syntax error: " + errors.trimmed_traceback(err), t_start)

        static = self.static_check(kernel, opts["allow_pytorch"])
        if (opts["test_cpu"] and not opts["test_static"]) or not opts["static_check"]:
            # Test mode only: torch-only CPU candidates necessarily break the rules,
            # and GPU tests switch the layer off to exercise the runtime layers alone.
            static["enforced"] = False
        elif not static["available"]:
            raise RequestError(static["error"])
        else:
            static["enforced"] = True
        res.checks["static"] = static
        hard, conditional = coverage.split(static.get("violations") or [])
        if static.get("enforced") and hard:
            reasons = [_violation_line(v) for v in static["violations"]]
            return res.fail("static_violation", "static check: " + "; ".join(reasons[:5]), t_start, reasons)
        if static.get("enforced") and conditional:
            # PyTorch compute the static check found, and nothing else: it is
            # cheating only if it runs. The candidate's processes report
            # which of these lines ran (coverage.py); _judge_coverage decides.
            res.coverage = coverage.Tracker(coverage.targets_of(conditional))

        perf = bool(opts["perf"]) and opts["perf_trials"] > 0
        sampler = footprint.Sampler()
        try:
            with sampler:
                out = self._evaluate_candidate(res, problem, kernel, opts, device, perf, t_start, sampler)
        except HarnessError as e:
            # The reference side failed, not the candidate: no verdict (the
            # pool retries it, and a search never charges it to the candidate).
            out = res.no_verdict("reference_failed", str(e), t_start)
        if res.coverage is not None and out.status != "no_verdict":
            out = self._judge_coverage(res, out, conditional, t_start)
        fp = res.checks.setdefault("footprint", {})
        fp.update(host_peak_bytes=sampler.peak_bytes, host_samples=sampler.samples,
                  host_peak_by_process=sampler.peak_by_role(),
                  host_source="/proc Pss_Anon+Pss_Shmem of the server's process tree, sampled every 100 ms, "
                              "plus sealed files it held (footprint.py)")
        return out

    @staticmethod
    def _judge_coverage(res, out: WorkerVerdict, conditional: list, t_start: float) -> WorkerVerdict:
        """The verdict once the candidate has run, for a candidate whose only
        static findings are PyTorch compute (coverage.py): a finding whose
        line ran, or whose running is unknown, makes it cheating, as the
        finding alone did before; one whose line never ran in any of its
        processes is a warning beside the verdict it earned."""
        cov = res.coverage
        lines = _coverage_lines(conditional, cov)
        static = res.checks["static"]
        static["coverage"] = {
            "rules": sorted(coverage.CONDITIONAL_RULES),
            "lines": [{"file": v.get("file"), "line": v.get("line"), "rule": v.get("rule"), **j} for v, j in lines],
            "processes": cov.record(),
            "otherwise": {"status": out.status, "kind": out.kind},
        }
        counted = [(v, j) for v, j in lines if j["ran"] is not False]
        static["violations"] = [dict(v, ran=j["ran"]) for v, j in counted]
        static["warnings"] = [dict(v, ran=False) for v, j in lines if j["ran"] is False]
        warnings = [_warning_line(v) for v in static["warnings"]]
        if counted:
            reasons = [_ran_line(v, j) for v, j in counted]
            if out.status != errors.CORRECT:  # what else went wrong, for the LLM to fix too
                warnings.append(f"otherwise: {out.status} ({out.kind}): "
                                f"{_first_line(str(out.message))}")
            return res.fail("static_violation", "static check: " + "; ".join(reasons[:5]), t_start,
                            reasons + warnings)
        out.reasons = list(out.reasons or []) + warnings
        where = ", ".join(f"{os.path.basename(str(v.get('file')))}:{v.get('line')}" for v in static["warnings"][:5])
        out.message = (f"{out.message}; warning: PyTorch compute on lines that never ran ({where}); "
                       f"it was not counted as cheating, but remove it")
        return out

    def ncu_profile(self, problem: str, kernel: str, opts: dict) -> dict:
        """checks.ncu for a correct candidate: one call under Nsight Compute, in
        a sandboxed child of its own (ncu.py), with the GPU's timing lock taken
        shared, as the CUPTI profile's burst is. Its failure is recorded as an
        error, never the candidate's."""
        from . import ncu
        exe = ncu.find_ncu()
        if exe is None:
            return {"error": "Nsight Compute (ncu) was not found on PATH, in /usr/local/cuda/bin or "
                             "/opt/nvidia/nsight-compute (set MKEVOLVE_NCU to its path)"}
        if self._ncu_version is None:
            self._ncu_version = ncu.version(exe) or ""
        job = {"ncu": exe, "problem": problem, "kernel": kernel, "seed": opts["seed"]}
        t0 = time.monotonic()
        timeout = max(opts["timeout_s"], 120.0)
        child = self._run_shared("ncu", lambda ctx: ncu.child_body(ctx, job), timeout, opts)
        try:
            try:  # written inside the candidate's process tree: no links, no FIFOs, bounded
                text = bytes(tensorio._read_untrusted(child.path("ncu.csv"), MAX_JSON)).decode("utf-8", "replace")
            except (OSError, tensorio.FormatError):
                text = ""
            kernels = ncu.parse_csv(text)
            seconds = round(time.monotonic() - t0, 3)
            if child.timed_out:
                return {"error": f"ncu took more than {timeout:g} s", "seconds": seconds}
            if not kernels:
                why = f"exit status {child.exit_code()}" if child.term_signal() is None else \
                    errors.describe_signal(child.term_signal())
                notes = [ln for ln in text.splitlines() if "==ERROR==" in ln or "==WARNING==" in ln][:5]
                return {"error": f"ncu profiled no kernel ({why}): "
                                 + errors.redact_env_secrets(" ".join(notes) or child.tail()[-600:]),
                        "seconds": seconds}
            out = ncu.summarize(kernels, self._ncu_version or None)
            out["seconds"] = seconds
            return out
        finally:
            isolation.cleanup_dir(child.dir)

    def _ref_timeout(self, opts: dict) -> float:
        """Each step of the reference's own deadline (draw, compute, hand over):
        the pool derives it from the reference's measured time; never shorter
        than the candidate's."""
        return max(opts["timeout_s"], float(opts.get("reference_timeout_s") or 0) or 600.0)

    def _ref_step(self, ref2, what: str, timeout_s: float, protect=frozenset()) -> dict:
        """The reference's next "expected" event; ProblemError when it failed.
        A reference that another process stopped (SIGSTOP: every candidate
        runs as the same user) is continued first."""
        isolation._kill(ref2, signal.SIGCONT)
        if isolation.wait_event(ref2, "expected", timeout_s):
            return [e for e in ref2.events if e.get("ev") == "expected"][-1]
        self._reference_failed(ref2, what, timeout_s, protect)
        raise AssertionError("unreachable")

    def _ref_fd(self, ref2, what: str, timeout_s: float, protect=frozenset()) -> int:
        isolation._kill(ref2, signal.SIGCONT)
        fd = isolation.receive_fd(ref2, timeout_s)
        if fd is None:
            self._reference_failed(ref2, what, timeout_s, protect)
        return fd

    def _take_shared(self, opts: dict, defer: dict | None = None):
        """(lock, record): the GPU's timing lock taken shared, for GPU work that
        must never run beside a neighbour's timed phase (gpulock.py); says
        "waiting for the GPU" only when it has to wait. defer (a candidate's
        evaluation: {"left": seconds}): first let live evaluations of higher
        priority go, for at most defer["left"] seconds, an evaluation's
        budget across its shared steps."""
        if defer is None:
            work = gpulock.TimingLock(shared=True)
        else:
            work = gpulock.TimingLock(shared=True, priority=self.timing_priority, max_defer_s=defer["left"])
        rec = work.acquire(0)
        if not rec["held"] and "busy" in rec.get("error", ""):
            self.progress("waiting for the GPU")
            rec = work.acquire(max(opts["timeout_s"], 60) * 2 + (defer["left"] if defer else 0))
        if defer is not None:
            defer["left"] = max(0.0, defer["left"] - rec.get("deferred_s", 0.0))
        return work, rec

    def _run_shared(self, name: str, body, timeout_s: float, lock_opts: dict, box=None):
        """Forks body as its own child and waits for it (timeout_s), holding the
        GPU's timing lock shared meanwhile (its wait bounded by lock_opts, as
        _take_shared's): for GPU work such as running the reference, which must
        never run beside a neighbour's timed phase. The caller reads the child's
        files, then cleans up child.dir."""
        work, _ = self._take_shared(lock_opts)
        try:
            child = isolation.spawn(name, body, cpu_seconds=timeout_s, box=box)
            try:
                isolation.supervise(child, timeout_s)
            except BaseException:
                isolation.cleanup_dir(child.dir)
                raise
        finally:
            work.release()
        return child

    def _ref_compare(self, ref2, op: str, tid: str, fd: int, what: str, timeout_s: float,
                     protect=frozenset(), retain: bool = False, keys: list | None = None) -> dict:
        """Hands the reference the candidate's sealed output (fd) for trial
        tid and returns what its comparison said: the event's "result" (op
        "compare") or "results" (op "compare_last"). retain: the timed calls
        reuse this trial's inputs (the reference keeps its copy of them).
        keys (op "compare_last"): which timed outputs the file holds. A
        reference that cannot compare is a harness failure (HarnessError),
        never the candidate's."""
        n_before = sum(1 for e in ref2.events if e.get("ev") == "compared")
        msg = {"op": op, "id": tid, "retain": retain}
        if keys is not None:
            msg["keys"] = keys
        if not isolation.send_msg(ref2, msg, [fd]):
            self._reference_failed(ref2, what, timeout_s, protect)
        isolation._kill(ref2, signal.SIGCONT)
        if not isolation.wait_event(ref2, "compared", timeout_s):
            self._reference_failed(ref2, what, timeout_s, protect)
        evs = [e for e in ref2.events if e.get("ev") == "compared"]
        ev = evs[-1]
        if len(evs) != n_before + 1 or ev.get("id") != tid:
            raise HarnessError(f"{ref2.job_problem}: the reference answered out of turn {what}")
        if ev.get("error"):
            raise HarnessError(f"{ref2.job_problem}: the reference could not compare {what}: "
                               f"{str(ev['error'])[:500]}")
        key = "results" if op == "compare_last" else "result"
        out = ev.get(key)
        if not isinstance(out, dict) or (key == "result" and not isinstance(out.get("ok"), bool)):
            raise HarnessError(f"{ref2.job_problem}: the reference sent a malformed comparison {what}")
        return out

    def _reference_failed(self, ref2, what: str, timeout_s: float, protect=frozenset()):
        """Raises ProblemError saying how the reference failed while `what`."""
        end = time.monotonic() + 2.0
        while ref2.exit_status is None and not isolation._exited(ref2) and time.monotonic() < end:
            time.sleep(0.02)
        running = ref2.exit_status is None
        isolation.finish(ref2, protect)
        err = _read_json(ref2.path("error.json"))
        if isinstance(err, dict) and err.get("message"):
            msg = f"{ref2.job_problem}: {errors.redact_env_secrets(str(err['message']))}"
            if err.get("kind") == "oom":
                # The GPU's memory was taken (by neighbours, or by what the
                # admission's estimate missed): no verdict, retried alone.
                raise HarnessError(msg)
            raise ProblemError(msg)
        if running:
            raise HarnessError(f"{ref2.job_problem}: the reference took more than {timeout_s:g} s {what}")
        sig = ref2.term_signal()
        why = (f"died of {errors.describe_signal(sig)}" if sig is not None
               else f"exited with status {ref2.exit_code()}")
        if sig == signal.SIGKILL:
            why += " (possibly the kernel's out-of-memory killer)"
        raise HarnessError(f"{ref2.job_problem}: the reference {why} {what}: "
                           + errors.redact_env_secrets(ref2.tail()[-800:]))

    def _evaluate_candidate(self, res, problem, kernel, opts, device, perf, t_start, sampler):
        """The candidate's verdict from its run beside the reference: the
        trials streamed one at a time, then its profile and its timed calls
        (the steps are _CandidateRun's, in this order)."""
        run = _CandidateRun(self, res, problem, kernel, opts, device, perf, sampler)
        # The server's own steps before the candidate's start and after its
        # exit, as phases_s milestones (relative to the candidate's start, so
        # the first are negative): the rest of elapsed_s.
        steps = [("server: request received", t_start), ("server: taking the shared lock", time.monotonic())]
        run.start_reference()
        try:
            steps.append(("server: reference started", time.monotonic()))
            run.load_problem()
            run.draw_first_inputs()
            steps.append(("server: first inputs drawn", time.monotonic()))
            run.start_candidate()
            run.phase_s[:0] = [[name, round(t - run.cand.started, 3)] for name, t in steps]
            run.run_trials()
            run.after_exit()
            out = self._finish(res, run.cand, run.state, kernel, opts, device, perf, t_start, sampler, run.ref2)
            if "shape_failed" in run.state and isinstance(out.checks, dict) and "shapes" in out.checks:
                out.checks["shapes"]["failed_at"] = run.state["shape_failed"]
            run.mark("server: verdict ready")  # the same list as out.checks["phases_s"]
            return out
        finally:
            run.clean_up()

    def _record_footprint(self, res, state, ref2, prof, cand=None, perf: bool | None = None) -> None:
        """checks.footprint; perf: the evaluation was to time the candidate
        (default: it was profiled), so a run that ended before its timed
        calls saw only part of its footprint."""
        perf = prof is not None if perf is None else perf
        peaks = dict(state["device_peaks"])
        for ev in ref2.events:
            if ev.get("ev") == "mem" and isinstance(ev.get("device_peak"), int):
                peaks["ref"] = max(peaks.get("ref", 0), ev["device_peak"])
        if isinstance(res.checks.get("handover"), dict):
            # The reference's tally rides on each comparison: the last one says it all.
            ref_released = next((e["ipc_released"] for e in reversed(ref2.events)
                                 if e.get("ev") == "compared" and "ipc_released" in e), None)
            _record_released(res.checks["handover"], "reference", ref_released)
            _record_released(res.checks["handover"], "candidate", state.get("cand_ipc_released"))
        if prof is not None:
            rt = _read_json(prof.path("runtime.json"))
            if isinstance(rt, dict) and isinstance(rt.get("device_peak"), int):
                peaks["prof"] = rt["device_peak"]
        n_cuda = (1 + (1 if "cand" in peaks else 0) + (1 if prof is not None else 0)) if peaks else 0
        timed = _read_json(cand.path("timing.json")) if cand is not None and "cand" in peaks else None
        cand_timed = timed.get("device_peak") if isinstance(timed, dict) else None
        phases, complete = footprint.device_phases(peaks, state.get("cand_held"),
                                                   cand_timed if isinstance(cand_timed, int) else None,
                                                   timed=perf, profiled=prof is not None)
        res.checks["footprint"] = {
            "input_bytes": state["input_bytes"], "output_bytes": state["output_bytes"],
            "device_peak_bytes": (max(phases.values()) + n_cuda * CUDA_CONTEXT_BYTES) if peaks else None,
            "device_peaks": peaks, "device_phases": phases,
            # Every phase seen: a record the pool lets replace or raise its figure (admission.h).
            "device_complete": complete, "device_rule_version": footprint.DEVICE_RULE_VERSION,
            "device_source": "torch.cuda.max_memory_reserved() of each process (as it reports it), summed over "
                             "the processes of the phase that held the most, plus a CUDA context each",
            "reference_s": round(state["ref_s"], 4),
            "in_place": bool(state.get("in_place")),
        }
        trace = [[e.get("id"), e.get("at"), e.get("reserved"), e.get("allocated"), e.get("peak"), e.get("layout")]
                 for e in ref2.events if e.get("ev") == "ref_mem"]
        if trace:
            # option trace_memory: [trial, step, reserved, allocated, peak, layout (children._memory_layout)]
            res.checks["footprint"]["ref_trace"] = trace
        alloc = next((e for e in ref2.events if e.get("ev") == "ref_alloc"), None)
        if alloc is not None:  # option ref_max_split_mb
            res.checks["footprint"]["ref_alloc"] = {k: v for k, v in alloc.items() if k not in ("ev", "_t")}
        if state.get("ref_peak_grew_at"):
            # The trials at which the reference's high-water mark rose, and to
            # what: where its memory went (diagnosis).
            res.checks["footprint"]["ref_peak_grew_at"] = state["ref_peak_grew_at"]
        if state["input_bytes"] and state["output_bytes"]:
            # The rule the pool estimates by (docs/EVAL.md, Device memory of one
            # evaluation), beside what was measured.
            acc = footprint.device_accounting(state["input_bytes"], state["output_bytes"], timed=perf,
                                              pool_bytes=state.get("pool_bytes", 0))
            res.checks["footprint"]["device_rule"] = {
                "copies": {k: {"inputs": v[0], "outputs": v[1]} for k, v in acc["copies"].items()},
                "phases": {k: {"inputs": v[0], "outputs": v[1]} for k, v in acc["phases"].items()},
                "bytes": int(acc["bytes"])}

    def _collect_profile(self, prof, opts: dict, protect: frozenset, defer: dict,
                         burst_s: float | None = None) -> dict:
        """Lets the profiling process run its burst of profiled calls (under the
        GPU's timing lock taken shared: never while a candidate is timed; after
        live evaluations of higher priority, within the evaluation's budget
        defer["left"]) and waits for it; its runtime record, or why there is none.
        The burst's own deadline is at least what its calls were expected to
        take (burst_s, pass_plan) with a margin: the trials before it do not
        eat the time the harness planned for it."""
        shared = gpulock.TimingLock(shared=True, priority=self.timing_priority, max_defer_s=defer["left"])
        rec = None

        def left() -> float:  # one deadline for the whole process, from its start; lock waits excepted
            return max(0.05, opts["timeout_s"] - (time.monotonic() - prof.started) + waited)
        waited = 0.0
        try:
            if isolation.wait_event(prof, "profile_ready", left()):
                rec = shared.acquire(opts["timeout_s"] + defer["left"])
                waited = rec.get("waited_s", 0.0)
                defer["left"] = max(0.0, defer["left"] - rec.get("deferred_s", 0.0))
                rec["go_t"] = time.monotonic()
                prof.go()
            isolation.supervise(prof, max(left(), 3 * (burst_s or 0) + 30 if burst_s else 0), protect=protect)
        finally:
            shared.release()
        rt = _read_json(prof.path("runtime.json"))
        if not prof.timed_out and isinstance(rt, dict) and isinstance(rt.get("activities"), list):
            return {"ok": True, "record": rt, "lock": rec}
        try:
            size = os.path.getsize(prof.path("runtime.json"))
        except OSError:
            size = None
        if not prof.timed_out and size is not None:
            # It wrote its record, but not one that can be read (too large, or not a record).
            return {"ok": False, "kind": "malformed_result", "stderr": prof.tail(),
                    "message": f"in the second, profiled process of the candidate: its runtime profile "
                               f"({size} bytes) is not a readable record of at most {MAX_JSON} bytes"}
        kind, message = _failure_of(prof, "being profiled", opts["timeout_s"])
        return {"ok": False, "kind": kind, "message": "in the second, profiled process of the candidate: " + message,
                "stderr": prof.tail()}

    def _finish(self, res, cand, state, kernel, opts, device, perf, t_start, sampler, ref2) -> WorkerVerdict:
        verdict = state["verdict"]
        for ch, which in ((cand, "candidate"), (state.get("prof"), "profiled")):
            if ch is not None and ch.pid in sampler.over:
                limit = int(opts.get("host_mem_limit_bytes") or 0)
                return res.fail("oom", f"the {which} process of the candidate used {sampler.over[ch.pid] / 2**30:.2f} "
                                f"GiB of host memory, over its limit of {limit / 2**30:.2f} GiB, and was killed; "
                                f"keep host-side allocations small (the work belongs on the GPU)", t_start)
        if verdict is None:
            kind, message = _failure_of(cand, state["phase"], opts["timeout_s"])
            failed = state.get("failed_trial")
            if failed is not None and state["phase"].startswith("running forward"):
                # It raised (x.view(-1) on a transposed input, say) or hung in a layout trial's forward.
                message = _with_note(message, _layout_note(opts, failed, state))
            if failed is not None and failed.get("shape") and opts.get("shape_variant") is None:
                # A kernel that holds only at the benchmark's shape: say which shape it failed at.
                message = (f"failed at shape variant {failed['shape']} (benchmark: "
                           f"{state['shapes'].get('benchmark')}): " + message)
                state["shape_failed"] = failed["shape"]
            return res.fail(kind, message, t_start, stderr=cand.tail())
        res.max_abs_err = verdict.get("max_abs_err")
        res.checks["correctness"].update({k: verdict[k] for k in ("max_abs_err", "rel_err", "warnings")
                                          if k in verdict})
        if not verdict["ok"]:
            return res.fail(verdict["kind"], verdict["message"], t_start)
        if not perf:
            return res.ok(t_start)
        # The candidate was allowed to profile and time itself; it is now dead.
        if state.get("timed_problem") is not None:
            return res.fail(*state["timed_problem"], t_start)
        timing_json = _read_json(cand.path("timing.json"))
        got = state.get("timed_outputs") or {}
        wrong = _timed_output_problem(got)
        if cand.timed_out and state.get("gate") == "timing" and wrong is None:
            # Its outputs were all correct: the timed calls the harness planned
            # (or moving their outputs out) did not fit the deadline (a loaded
            # machine, calls slower than planned). The harness's failure, never
            # the candidate's. The gate is ours; the phase is the candidate's word.
            return res.no_verdict("pass_overrun", _overrun_message("timed calls", opts, state), t_start)
        if wrong is not None and (cand.timed_out or not isinstance(timing_json, dict)):
            # A timed output already found wrong outranks what became of the rest of the phase.
            return res.fail(*wrong, t_start)
        if cand.timed_out or not isinstance(timing_json, dict) or _read_json(cand.path("error.json")) is not None:
            kind, message = _failure_of(cand, state["phase"], opts["timeout_s"])
            return res.fail(kind, message + " (its outputs were correct; it failed while being profiled/timed)",
                            t_start, stderr=cand.tail())
        times = timing_json.get("times_ms")
        if not isinstance(times, list) or not times or not all(
                isinstance(x, (int, float)) and x == x and 0 <= x < 1e7 for x in times):
            return res.fail("malformed_result", "the candidate's timing record is malformed", t_start)
        from .timing import spread, summarize, wall_clock_verdict
        s = summarize([float(x) for x in times])
        res.runtime_ms = {"median": s["median"], "mean": s["mean"]}
        res.checks["timing"] = {"warmup": opts["warmup"], "extra_warmup": state.get("extra_warmup"),
                                "trials": len(times), "min_ms": s["min"], "max_ms": s["max"],
                                "l2_flush_bytes": timing_json.get("l2_flush_bytes"), "tf32": False,
                                "inputs": ("one set of buffers, read in place; the last call's inputs copied in "
                                           "before it (large inputs)" if state.get("in_place") else
                                           "same buffers refilled with new values before every call"),
                                "in_place": bool(state.get("in_place")),
                                "clock": "cuda events" if device == "cuda" else "cpu wall clock (test mode)",
                                **spread(times)}
        synced_median = s["median"]
        if device == "cuda":
            res.checks["timing"]["mode"] = opts["timing"]
            for k in ("spin_ms", "host_launch_ms"):
                if isinstance(timing_json.get(k), (int, float)):
                    res.checks["timing"][k] = float(timing_json[k])
            synced = timing_json.get("synced_times_ms")
            if isinstance(synced, list) and synced and all(
                    isinstance(x, (int, float)) and x == x and 0 <= x < 1e7 for x in synced):
                synced_median = summarize([float(x) for x in synced])["median"]
                res.checks["timing"]["synced_median_ms"] = synced_median
        problems: list[tuple[str, str]] = []
        # Runtime profile (its process also runs in test mode, without a profiler).
        prof = state.get("runtime")
        if opts["profile"]:
            if not isinstance(prof, dict):
                return res.fail("malformed_result", "the candidate's runtime profile is missing", t_start)
            if not prof["ok"] and prof["kind"] == "hang":
                # As above: the profiling pass the harness planned overran.
                return res.no_verdict("pass_overrun", _overrun_message("profiled calls", opts, state), t_start)
            if not prof["ok"]:
                return res.fail(prof["kind"], prof["message"] + " (its outputs were correct)", t_start,
                                stderr=prof.get("stderr", ""))
        if device == "cuda" and not opts["profile"]:
            res.checks["runtime"] = {"skipped": "profile=false: foreign kernels were not looked for"}
            res.uses_pytorch = None
        elif device == "cuda":
            rt = prof["record"]
            own = loader.triton_kernel_names(_own_files(kernel, state.get("files")))
            out_bytes = int(rt.get("output_nbytes") or 0)
            forwards = state["profiled_calls"]  # what it was told to make, not what it says
            from .runtime_check import judge
            acts = [a for a in rt["activities"] if isinstance(a, dict)]
            j = judge(acts, own, opts["allow_pytorch"], out_bytes, forwards=forwards)
            j["own_triton_functions"] = sorted(own)
            from .tritonmeta import runtime_fields
            j.update(runtime_fields(rt))  # registers, spills, occupancy (tritonmeta.py)
            res.checks["runtime"] = j
            subs = loader.subkernel_files(kernel)
            if subs:
                # A composed package: where its GPU time goes, per subkernel
                # (AllocateLLMBudget and the fuse prompt's shares read it).
                from .runtime_check import subkernel_runtimes
                per = subkernel_runtimes(acts, {n: loader.triton_kernel_names([f]) for n, f in subs.items()},
                                         forwards)
                self._subkernel_runtimes(res, subs, per, rt, forwards)
            res.uses_pytorch = j["uses_pytorch"]
            if not j["ok"]:
                problems += [(j["kind"], r) for r in j["reasons"]]
        else:
            res.checks["runtime"] = {"skipped": "test_cpu: no CUDA profile"}
            subs = loader.subkernel_files(kernel)
            if subs and isinstance(prof, dict) and prof.get("ok"):
                # Test mode: each subkernel module's wall time in the composed forward.
                self._subkernel_runtimes(res, subs, {}, prof["record"], state["profiled_calls"])
        # Output of the last timed call (and of the wall batch) on known
        # inputs, compared by the reference, which kept its expected output,
        # as each was handed over during the timed phase (on_timed_output).
        if "timed_last" not in got:
            return res.fail("malformed_result", "the candidate handed over no output of its last timed call "
                                                "(the timed phase hands it over before the synced calls)", t_start)
        stale = {"checked": bool(state["ref_last"])}
        if device == "cuda" and opts["wall_check"] and "wall_last" not in got:
            stale["ok"] = False
            problems.append(("stale_output", "integrity: the candidate handed over no output of its wall-clock "
                                             "batch, so its calls could not be checked"))
        if state["ref_last"]:
            if wrong is not None and wrong[0] == "malformed_result":
                return res.fail(*wrong, t_start)
            if wrong is not None:
                stale["ok"] = False
                problems.append(wrong)
            stale.setdefault("ok", True)
            if isinstance(got.get("wall_last_skipped"), str):
                stale["wall_last"] = "not compared: " + got["wall_last_skipped"]
        res.checks["timed_output"] = stale
        if device == "cuda" and opts["wall_check"]:
            w = wall_clock_verdict(cand.events, synced_median)
            if w is not None:
                w["rounds"] = state["wall_rounds"].rounds if "wall_rounds" in state else 0  # counted by the server
            res.checks["wall_clock"] = w if w is not None else {"ok": False, "missing": True}
            if w is None:
                problems.append(("timing_mismatch", "integrity: the wall-clock cross-check did not complete"))
            elif not w["ok"]:
                problems.append(("timing_mismatch",
                                 f"integrity: a synchronized call takes {w['per_call_ms']:.4g} ms of wall time but "
                                 f"CUDA events report {w['event_median_ms']:.4g} ms for a call launched onto an idle GPU "
                                 f"(limit {w['threshold_ms']:.4g} ms): "
                                 f"GPU work escapes the timed stream (side streams, async work) or the timer is "
                                 f"tampered with"))
        if problems:
            return res.fail(problems[0][0], problems[0][1], t_start, [p[1] for p in problems])
        return res.ok(t_start)

    @staticmethod
    def _subkernel_runtimes(res, subs: dict, profile: dict, record: dict, forwards: int) -> None:
        """subkernel_runtime_ms of a composed package: the profile's attribution
        when it covers every subkernel, else the module timing (ModuleTimer,
        from the profiling process) when that does; checks.subkernel_runtime
        says which, and holds both."""
        from .runtime_check import choose_subkernel_runtimes, module_runtimes
        mrec = record.get("modules") if isinstance(record, dict) else None
        modules = module_runtimes(mrec, subs, forwards)
        per, source = choose_subkernel_runtimes(subs, profile, modules)
        clock = mrec.get("clock") if isinstance(mrec, dict) and mrec.get("clock") in (
            "cpu wall clock", "cuda events") else None
        inst = mrec.get("instances") if isinstance(mrec, dict) else None
        inst = inst if isinstance(inst, dict) else {}
        res.checks["subkernel_runtime"] = {
            "source": {"profile": "profile: each file's own kernels' GPU time",
                       "modules": f"module calls in the composed forward ({clock})"}.get(source),
            "profile_ms": profile, "modules_ms": modules, "forwards": forwards,
            "instances": {k: v for k, v in inst.items() if k in subs and isinstance(v, int)}}
        if per:
            res.subkernel_runtime_ms = per

    # -- footprint --

    def footprint_estimate(self, problem, timeout_s: float = 120) -> dict:
        """Bytes of one call's inputs, outputs and parameters, found without
        allocating them: the problem runs on PyTorch's meta device in a
        forked child. {"method": "meta", ...} or {"method": "unknown", "error"}.
        The pool admits a problem's first evaluation by this estimate and
        every later one by the footprint measured (checks.footprint)."""
        problem = self._file(problem, "problem")
        child = isolation.spawn("fp", lambda ctx: children.footprint_body(ctx, {"problem": problem}),
                                cpu_seconds=timeout_s)
        try:
            isolation.supervise(child, timeout_s)
            out = _read_json(child.path("footprint.json"))
            if not isinstance(out, dict):
                return {"method": "unknown", "error": "the probe died: " + _first_line(child.tail() or "no output")}
            # How a GPU evaluation's inputs and outputs cross between its
            # processes: by CUDA IPC ("device": none of them through the
            # host but the timed calls' outputs) or as host files.
            out["handover"] = "device" if self.cuda_available() and children.cuda_ipc_possible() and (
                sandbox.PLAN is None or sandbox.PLAN.cuda_ipc) else "host"
            return out
        finally:
            isolation.cleanup_dir(child.dir)

    # -- baselines --

    def problem_check(self, problem, options=None) -> dict:
        """Pre-flight: loads the problem and runs its reference once, in a
        forked child on the device that will evaluate (children.problem_check_body).
        {"ok": bool, "message", ...}; never raises for the problem's own faults."""
        opts = self._options(options)
        try:
            problem = self._file(problem, "problem")
        except RequestError as e:
            return {"ok": False, "message": str(e)}
        device = self._device(opts)
        timeout = self._ref_timeout(opts)
        # It runs the reference on the GPU: never beside a neighbour's timed phase.
        job = {"problem": problem, "device": device, "shapes": opts["shapes"]}
        child = self._run_shared("pc", lambda ctx: children.problem_check_body(ctx, job),
                                 timeout, opts)
        try:
            out = _read_json(child.path("problem_check.json"))
            if isinstance(out, dict) and isinstance(out.get("ok"), bool):
                out["message"] = errors.redact_env_secrets(errors.shorten(str(out.get("message", ""))))
                out["device"] = device
                return out
            if child.timed_out:
                why = f"did not load and run its reference within {timeout:g} s"
            else:
                sig = child.term_signal()
                why = (f"killed the check's process ({errors.describe_signal(sig)})" if sig is not None
                       else f"ended the check's process with status {child.exit_code()}")
                tail = errors.redact_env_secrets(child.tail()[-600:]).strip()
                if tail:
                    why += f": {tail}"
            return {"ok": False, "message": f"{problem}: the problem {why}", "device": device}
        finally:
            isolation.cleanup_dir(child.dir)

    def calibrate(self, problem, options=None, runs=20) -> dict:
        """Calibrated tolerances of a problem (calibration.py): its reference
        in its own precision against a float64 run of it, over `runs` input
        seeds and every kind of trial input. {"outputs": ..., ...}; the
        problem's own faults raise ProblemError naming the file."""
        opts = self._options(options)
        problem = self._file(problem, "problem")
        if isinstance(runs, bool) or not isinstance(runs, int) or not 2 <= runs <= 1000:
            raise RequestError("calibrate: runs must be an integer from 2 to 1000")
        device = self._device(opts)
        self.progress("calibrating")
        timeout = self._ref_timeout(opts) * max(1.0, runs / 10)
        from . import calibration
        job = {"problem": problem, "device": device, "runs": runs, "seed": opts["seed"]}
        child = self._run_shared("cal", lambda ctx: calibration.calibrate_body(ctx, job), timeout, opts)
        try:
            out = _read_json(child.path("calibration.json"))
            if isinstance(out, dict) and "error" in out:
                raise ProblemError(errors.redact_env_secrets(errors.shorten(str(out["error"]))))
            if not isinstance(out, dict) or not isinstance(out.get("outputs"), dict):
                why = (f"did not finish within {timeout:g} s" if child.timed_out else
                       "died: " + (_first_line(child.tail()) or "no output"))
                raise ProblemError(f"{problem}: the calibration {why}")
            return out
        finally:
            isolation.cleanup_dir(child.dir)

    def baseline(self, problem, options=None) -> dict:
        opts = self._options(options)
        problem = self._file(problem, "problem")
        device = self._device(opts)
        job = {"problem": problem, "opts": opts, "device": device}
        self.progress("baselines")
        # The baseline child times eager, compiles, then times torch.compile's
        # module. Each timed phase runs only under the GPU's timing lock, taken
        # when the child says timing_ready. Loading and the compile step (its
        # autotuning and first calls run on the GPU) hold the lock shared, so
        # they never run beside a neighbour's timed phase; but the compile step
        # holds it at most compile_lock_s: past that a compile is CPU work
        # (tracing, code generation), and neighbours' timings go ahead. Within
        # it, the compile step gives way to a neighbour's timed phase that
        # waits: the child (its process group) is stopped, the lock dropped,
        # and the child continued once the lock is taken shared again; the
        # paused time counts against neither the cap nor the deadline. The
        # compile step has its own deadline: past it the baseline keeps eager.
        lock = gpulock.TimingLock()
        rec: dict = {"timing": {}, "compile_timing": {}, "compile_lock": None}
        clocks: dict = {}  # what -> gpuclock.Sampler, the GPU's clock while that phase was timed
        base_deadline = max(opts["timeout_s"], 60) * 2
        compile_deadline = opts["compile_timeout_s"] or base_deadline
        st = {"work": None, "work_rec": None, "compiling_since": None, "compile_timed_out": False,
              "timing": None, "paused_at": None, "paused_s": 0.0}
        st["work"], st["work_rec"] = self._take_shared(opts)

        def drop_shared():
            if st["work"] is not None:
                st["work"].release()
                st["work"] = None
                if st["compiling_since"] is not None and rec["compile_lock"] is not None:
                    rec["compile_lock"]["held_s"] = round(time.monotonic() - st["compiling_since"]
                                                          - st["paused_s"], 3)

        def end_timed_phase():
            lock.release()
            what, st["timing"] = st["timing"], None
            if what is not None and what in clocks and not isinstance(clocks[what], dict):
                clocks[what] = clocks[what].stop()

        def on_event(ch, ev):
            if ev.get("ev") == "timing_ready" and not lock.held:
                what = "compile" if ev.get("what") == "compile" else "eager"
                drop_shared()
                if what == "compile":
                    st["compiling_since"] = None
                self.launcher.wait_warm(opts["timeout_s"])
                rec["timing" if what == "eager" else "compile_timing"].update(lock.acquire(base_deadline))
                if device == "cuda":
                    clocks[what] = gpuclock.Sampler().start()
                st["timing"] = what
                ch.go()
            elif ev.get("ev") == "compiling" and st["compiling_since"] is None:
                end_timed_phase()
                st["work"], lock_rec = self._take_shared(opts)
                rec["compile_lock"] = {**lock_rec, "cap_s": opts["compile_lock_s"], "released_early": False,
                                       "gave_way": 0, "paused_s": 0.0}
                st["compiling_since"] = time.monotonic()
                ch.go()

        def on_tick(ch):
            since = st["compiling_since"]
            if since is None:
                return False
            now = time.monotonic()
            if st["paused_at"] is not None:
                # Given way to a timed phase: go on once the lock is shared again.
                again = gpulock.TimingLock(shared=True)
                if not again.acquire(0)["held"]:
                    return False
                st["paused_s"] += now - st["paused_at"]
                st["paused_at"] = None
                rec["compile_lock"]["paused_s"] = round(st["paused_s"], 3)
                st["work"] = again
                isolation._kill(ch, signal.SIGCONT)
                return False
            held = now - since - st["paused_s"]
            if st["work"] is not None and held >= opts["compile_lock_s"]:
                drop_shared()
                rec["compile_lock"]["released_early"] = True
            elif st["work"] is not None and gpulock.timed_phase_waiting():
                isolation._kill(ch, signal.SIGSTOP)
                time.sleep(0.02)  # what it had queued on the GPU drains (one autotuning step at most)
                st["work"].release()
                st["work"] = None
                st["paused_at"] = now
                rec["compile_lock"]["gave_way"] += 1
                return False
            if held >= compile_deadline:
                st["compile_timed_out"] = True
                return True
            return False

        try:
            child = isolation.spawn("base", lambda ctx: children.baseline_body(ctx, job), cut_network=False)
        except BaseException:
            drop_shared()
            raise
        try:
            try:
                isolation.supervise(child, base_deadline + compile_deadline, on_event, on_tick=on_tick)
            except BaseException:
                isolation.finish(child)
                raise
            finally:
                drop_shared()
                end_timed_phase()
            err = _read_json(child.path("error.json"))
            out = _read_json(child.path("baseline.json"))
            if st["compile_timed_out"]:
                out = _read_json(child.path("eager.json"))
                if isinstance(out, dict):
                    out["compile"] = None
                    out["compile_error"] = (f"torch.compile did not finish within {compile_deadline:g} s "
                                            "(the compile step's deadline); no torch.compile baseline")
                    out["compile_timed_out"] = True
            if child.timed_out:
                raise ProblemError(f"{problem}: timing the baselines took more than "
                                   f"{base_deadline + compile_deadline:g} s")
            if isinstance(err, dict):
                raise ProblemError(f"{problem}: {err.get('message')}")
            if not isinstance(out, dict):
                raise ProblemError(f"{problem}: the baseline child died: {_first_line(child.tail()) or 'no output'}")
            out["device"] = device
            out["timing_lock"] = rec["timing"]
            if rec["compile_timing"]:
                out["compile_timing_lock"] = rec["compile_timing"]
            out["warmup_lock"] = st["work_rec"]
            if rec["compile_lock"] is not None:
                out["compile_lock"] = rec["compile_lock"]
            if isinstance(clocks.get("eager"), dict):
                out["gpu_clock"] = clocks["eager"]
            if isinstance(clocks.get("compile"), dict):
                out["compile_gpu_clock"] = clocks["compile"]
            return out
        finally:
            isolation.cleanup_dir(child.dir)

    # -- decomposition --

    def verify_decomposition(self, problem, decomposed, subproblems_dir, options=None) -> dict:
        if options is not None and not isinstance(options, dict):
            raise RequestError("options must be a JSON object")
        options = dict(options or {})
        if options.get("test_cpu") and not self.test_mode:
            raise RequestError("option test_cpu is honoured only by a worker started with --test-mode")
        problem = self._file(problem, "problem")
        decomposed = self._file(decomposed, "decomposed")
        if not isinstance(subproblems_dir, str) or not os.path.isdir(subproblems_dir):
            raise RequestError(f"subproblems_dir {subproblems_dir}: no such directory")
        try:
            from . import decompose_check
        except ImportError as e:
            raise RequestError(f"decomposition checks unavailable (mkevolve_worker.decompose_check: {e})") from None
        bad = decompose_check.tolerance_option_error(
            {"decompose_tol_fraction": decompose_check.DEFAULT_TOL_FRACTION, **options})
        if bad:
            raise RequestError(bad)
        if options.pop("test_cpu", False):
            options["device"] = "cpu"
        elif options.get("device") == "cpu" and not self.test_mode:
            raise RequestError("verifying a decomposition on the CPU is honoured only with --test-mode")
        timeout = float(options.get("timeout_s", 300) or 300)
        job = {"problem": problem, "decomposed": decomposed, "subproblems_dir": os.path.abspath(subproblems_dir),
               "options": options}
        # The decomposition is LLM-written code: it runs in a candidate's
        # sandbox (sandbox.py), with copies of the files it needs in its box
        # (names and layout kept, so its failure lines name them as before).
        box = None
        if sandbox.active():
            box = sandbox.make_box(isolation.base_tmp(), sandbox.PLAN)
            copied = box.copy_kernel(decomposed)  # decomposed_problem.py with its subkernel_problems/
            subdir = box.copy_path(job["subproblems_dir"])  # mapped before another copy comes last
            job = dict(job, decomposed=copied, subproblems_dir=subdir, problem=box.copy_kernel(problem))
        # It runs the problem and its decomposition on the GPU: never beside a
        # neighbour's timed phase (the lock taken shared, as for trials).
        child = self._run_shared("decomp", lambda ctx: children.decomposition_body(ctx, job), timeout,
                                 {"timeout_s": timeout}, box=box)
        try:
            out = _read_json(child.path("decomposition.json"))
            if child.timed_out:
                return {"ok": False, "failures": [f"verification did not finish within {timeout:g} s (hang?)"],
                        "kind": "hang"}
            if not isinstance(out, dict) or not isinstance(out.get("ok"), bool):
                sig = child.term_signal()
                why = f"died of {errors.describe_signal(sig)}" if sig else f"exited with status {child.exit_code()}"
                return {"ok": False, "failures": [f"verification {why}: {errors.shorten(child.tail(), 1500)}"],
                        "kind": "crashed"}
            fails = out.get("failures")
            out["failures"] = [str(f) for f in fails] if isinstance(fails, list) else []
            return out
        finally:
            isolation.cleanup_dir(child.dir)


# ---------------------------------------------------------------------------


class _CandidateRun:
    """One candidate's evaluation in progress (Evaluator._evaluate_candidate):
    its processes and the reference's, the trial plan, and what the server
    has seen so far (state). Each public method is one step, called in the
    order they are defined; on_event and what it calls run inside
    run_trials, for each event of the candidate's process."""

    def __init__(self, ev: Evaluator, res: _Result, problem: str, kernel: str, opts: dict, device: str,
                 perf: bool, sampler: footprint.Sampler):
        self.ev, self.res, self.sampler = ev, res, sampler
        self.problem, self.kernel, self.opts, self.device, self.perf = problem, kernel, opts, device, perf
        self.ref_timeout = ev._ref_timeout(opts)
        self.state = {"phase": "starting", "verdict": None, "killed": False, "error": None, "ref_last": False,
                      "alt_skipped": {}, "trials_run": 0, "worst": {"max_abs_err": 0.0, "rel_err": 0.0},
                      "constant": [], "files": [], "held": [], "pool_fds": [],
                      "last_fd": None, "device_peaks": {}, "ref_s": 0.0, "input_bytes": 0, "output_bytes": 0,
                      "layouts": {}, "failed_trial": None}
        self.phase_s: list = []  # [phase, seconds since the candidate got its job]; for diagnosing slow evals
        self.sources_before = _sources_digest(problem)
        self.active = self.work = self.t_lock = None
        self.ref2 = self.cand = self.prof = None
        self.cov = self.lock = None
        self.n_configs = self.plan = self.ref_plan = self.first_fd = None
        self.keep = self.retain = frozenset()
        self.trial_no = 0  # the trial whose output is awaited

    def mark(self, name: str) -> None:
        """A milestone of the server's, reached now."""
        self.phase_s.append([name, round(time.monotonic() - self.cand.started, 3)])

    # -- the steps, in order --

    def start_reference(self) -> None:
        """Takes the GPU's timing lock shared and starts the reference's process."""
        ev, state = self.ev, self.state
        # The reference streams the trials (children.reference_body): it loads
        # the problem before any candidate code runs (a candidate that rewrote
        # the files could otherwise set its own expected outputs), then draws
        # each trial's inputs and computes its expected output.
        # Every GPU step of the correctness trials runs under the GPU's timing
        # lock taken shared, from the reference's start to the last comparison:
        # never while a neighbour is timed (gpulock.py).
        # A live evaluation of the search's critical chain (priority: the rounds
        # its subproblem has left) makes the shared steps of lower ones wait,
        # so that its timed phase need not wait for their compiles (gpulock.py).
        self.active = gpulock.register_active(ev.timing_priority) if ev.timing_priority > 0 else None
        state["defer"] = {"left": gpulock.MAX_DEFER_S}
        self.t_lock = time.monotonic()
        try:
            self.work, self.res.checks["trials_lock"] = ev._take_shared(self.opts, state["defer"])
        except BaseException:
            if self.active is not None:
                self.active.close()
            raise
        ev.progress("reference")
        job2 = {"problem": self.problem, "opts": self.opts, "device": self.device, "perf": self.perf}
        try:
            self.ref2 = ev.launcher.start("ref", "reference", job2)
        except BaseException:
            self.work.release()
            if self.active is not None:
                self.active.close()
            raise
        self.ref2.job_problem = self.problem
        self.cov = self.res.coverage or coverage.Tracker([])
        self.lock = gpulock.TimingLock(priority=ev.timing_priority)

    def load_problem(self) -> None:
        """Waits for the reference to load the problem; plans the trials."""
        ref2, state, opts = self.ref2, self.state, self.opts
        if not isolation.wait_event(ref2, "loaded", self.ref_timeout):
            self.ev._reference_failed(ref2, "loading the problem", self.ref_timeout)
        loaded = [e for e in ref2.events if e.get("ev") == "loaded"][-1]
        if isinstance(loaded.get("shapes"), dict):
            state["shapes"] = dict(loaded["shapes"], variants=[str(x) for x in loaded.get("variants") or []])
        if loaded.get("n_configs") == 0 and "shapes" in state:
            # The one shape variant asked for (check mode) is one the reference cannot run.
            skipped = state["shapes"].get("skipped") or [{"shape": "?", "error": "the reference skipped it"}]
            raise ShapeSkipped(skipped[0])
        self.n_configs = int(loaded.get("n_configs") or 1)
        self.plan = C.plan_trials(self.n_configs, opts, state.get("shapes", {}).get("variants"))
        self.ref_plan = self.plan + ([C.timing_inputs_trial(opts)] if self.perf else [])

    def draw_first_inputs(self) -> None:
        """The first trial's inputs from the reference (held until they are
        sent), and which trials' inputs the timed calls reuse."""
        state, opts, perf = self.state, self.opts, self.perf
        self.first_fd = first_fd = self.ev._ref_fd(self.ref2, "drawing the first trial's inputs", self.ref_timeout)
        state["held"].append(first_fd)
        try:
            # Its form only (meta tensors: device memory is not mapped here).
            first_obj, first_meta = tensorio.load_fd(first_fd, ipc="meta")
        except (OSError, tensorio.FormatError) as e:
            raise HarnessError(f"{self.problem}: the reference's inputs could not be read ({e})") from None
        state["input_bytes"] = C.tree_nbytes(first_obj)
        self.res.checks["handover"] = {"inputs": _handover_kind(first_meta)}
        # The timed calls refill their input buffers from a pool of the
        # trials' own input sets: every normal trial of config 0 when they
        # are small, only the first when one set is large (each set stays
        # on the GPU through the timed phase).
        # Large inputs (timing.in_place) are timed in place: the candidate
        # keeps the first set on the host until its timed phase, the
        # reference keeps none of them, the profiling process gets the last
        # call's only (docs/EVAL.md, Device memory of one evaluation).
        normal0 = [t["id"] for t in self.plan if t["config"] == 0 and not t["alt"]]
        pool_bytes = state["pool_bytes"] = timing.pool_bytes_of(opts, self.ev.test_mode)
        set_bytes = C.tree_nbytes(first_obj.get("inputs") if isinstance(first_obj, dict) else first_obj)
        state["in_place"] = bool(perf and timing.in_place(set_bytes, pool_bytes) and not opts.get("input_layouts"))
        k = timing.pool_size(len(normal0), set_bytes, pool_bytes) if perf else 0
        self.keep = set(normal0[:k])
        self.retain = set() if state["in_place"] else self.keep  # the reference's copies the profiling process gets

    def start_candidate(self) -> None:
        """Starts the candidate's process (and its profiling process, when it
        is timed) and records how it is isolated."""
        ev, res, state, opts, cov, sampler = self.ev, self.res, self.state, self.opts, self.cov, self.sampler
        job = {"kernel": self.kernel, "opts": opts, "device": self.device, "perf": self.perf,
               "extra_warmup": _RNG.randint(0, 15)}
        if cov.active:
            job["coverage"] = {"targets": cov.targets}  # the lines whose running decides (coverage.py)
        state["extra_warmup"] = job["extra_warmup"]
        state["profiled_calls"] = children.profiled_calls(job, len(self.retain))
        ev.progress("candidate")
        cand = self.cand = ev.launcher.start("cand", "candidate", job, cpu_seconds=opts["timeout_s"])
        cov.given("candidate", required=True)  # it imports the candidate at once
        sampler.watch(cand.pid, int(opts.get("host_mem_limit_bytes") or 0))
        # The runtime profile runs in a second process of the same candidate,
        # beside this one (children.profile_body).
        if self.perf and opts["profile"]:
            self.prof = ev.launcher.start("prof", "profile", job, cpu_seconds=opts["timeout_s"])
            cov.given("profiling")
            sampler.watch(self.prof.pid, int(opts.get("host_mem_limit_bytes") or 0))
        prof = state["prof"] = self.prof
        sampler.roles.update({self.ref2.pid: "reference", cand.pid: "candidate",
                              **({prof.pid: "profiling"} if prof is not None else {})})
        # The next candidate's processes warm up while this one runs,
        # unless the pool asked for them later (request field "spares":
        # "later"; it sends op "refill" once the GPU is quiet, so that
        # a round's warm-ups do not compete with the round's evaluations).
        if ev.refill_at_start:
            ev.launcher.refill()
        res.checks["isolation"] = {"pid": cand.pid, "network": "unknown", "cwd": "private temp dir",
                                   "env": "scrubbed", "prestarted": cand.prestarted,
                                   # what an fp32 tl.dot naming no precision computed in
                                   "triton_f32_default": ("triton's own (plain_env)" if opts.get("plain_env")
                                                          else spares.TRITON_F32_DEFAULT)}
        res.checks["phases_s"] = self.phase_s
        if res.checks["trials_lock"].get("deferred_s", 0) > 0:
            # Before the candidate's start: shows the wait as the step into the reference's first milestone.
            self.phase_s.append(["deferred to higher-priority evaluations", round(self.t_lock - cand.started, 3)])

    def run_trials(self) -> None:
        """Sends the first trial and supervises the candidate until it exits:
        the trials, its profile and its timed calls (on_event)."""
        state = self.state
        self.send_trial(0, self.first_fd)
        try:
            # The reference lives on when the candidate is done: it
            # compares the timed output, or shows that a trial the
            # candidate failed on is sound.
            isolation.supervise(self.cand, self.opts["timeout_s"], self.on_event, protect=frozenset({self.ref2.pid}))
        except BaseException:
            isolation.finish(self.cand)  # never leave the candidate running once the lock is gone
            raise
        finally:
            self.lock.release()
            if self.active is not None:
                self.active.close()  # its timed phase is over: lower ones need not wait for the rest
            if state.get("clock") is not None:
                # The GPU's clock while this candidate was timed (gpuclock.py).
                self.res.checks["gpu_clock"] = state.pop("clock").stop()
        self.mark("exited")

    def after_exit(self) -> None:
        """Records what the exited candidate's processes did; for a failure
        before an output, lets the reference show that the trial is sound."""
        res, state, opts, cand, plan = self.res, self.state, self.opts, self.cand, self.plan
        if state["ref_last"] and self.ref2.exit_status is None:
            # The timed outputs are compared: the reference lets its expected
            # output go and says what it held at most (its "mem").
            if isolation.send_msg(self.ref2, {"op": "done"}):
                isolation.wait_event(self.ref2, "mem", 10.0)
        # The reference's first-trial milestones, stamped by the reference itself.
        self.phase_s.extend(_child_milestones(self.ref2, "reference", cand.started, ev_name="ref_phase", clock="t"))
        res.checks["isolation"]["warm"] = _warm_record(cand)
        res.checks["isolation"].update(sandbox.isolation_fields(cand, self.prof))  # what was in force (sandbox.py)
        if state["error"] is not None:
            raise state["error"]
        if state["verdict"] is None and self.trial_no < len(plan) and not state["killed"]:
            # The candidate failed before handing over trial i's output.
            # Its failure is its own only if the reference gets through
            # the same trial (a broken problem is never charged to it).
            keep_pids = frozenset({cand.pid})
            failed = plan[self.trial_no]
            _keep_layout(state, failed["id"], self.ev._ref_step(self.ref2, f"on trial {failed['id']}",
                                                                self.ref_timeout, keep_pids))
            state["failed_trial"] = failed
        res.checks["correctness"] = {
            "configs": self.n_configs, "trials_per_config": opts["trials"],
            "candidate_first_trials": opts["candidate_first_trials"], "alt_dist_trials": opts["alt_dist_trials"],
            "trials_dist": opts["trials_dist"],
            "dist_trials": [t["id"] for t in plan if t.get("dist")],
            "alt_skipped": state["alt_skipped"], "tf32": False, "trials_run": state["trials_run"],
            # The tolerance each output dtype was judged by, with where each
            # value came from (flag, problem, dtype default); atol/rtol are
            # the first output's.
            **_tolerance_record(state["worst"], opts),
            "order": "trials streamed one at a time; each trial's expected output comes out of its own "
                     "process only after the candidate handed over its output for that trial",
        }
        if opts.get("input_layouts"):
            res.checks["layouts"] = _layouts_record(state, opts, self.perf)
        if "shapes" in state:
            res.checks["shapes"] = {"mode": opts["shapes"], **{k: state["shapes"].get(k) for k in (
                "benchmark", "variants", "skipped", "kept", "error")}}

    def clean_up(self) -> None:
        """Whatever happened: releases the lock, closes the held inputs,
        finishes every process, records the footprint and the coverage."""
        state, ref2, prof, cand = self.state, self.ref2, self.prof, self.cand
        self.work.release()
        if self.active is not None:
            self.active.close()
        for fd in _held_fds(state):
            try:
                os.close(fd)
            except OSError:
                pass
        self.sampler.held_bytes = 0
        for other in (ref2, prof):  # still running when the candidate failed early
            if other is not None:
                if other.exit_status is None:
                    isolation.finish(other)
        self.ev._record_footprint(self.res, state, ref2, prof, cand, perf=self.perf)
        if self.cov.active:
            _final_coverage(self.cov, cand, prof)
        for other in (ref2, prof, cand):
            if other is not None:
                isolation.cleanup_dir(other.dir)

    # -- the trials --

    def held_bytes(self) -> None:
        n = 0
        for fd in _held_fds(self.state):
            try:
                n += os.fstat(fd).st_size
            except OSError:
                pass
        self.sampler.held_bytes = n

    def send_trial(self, i: int, fd: int) -> None:
        state = self.state
        t = self.plan[i]
        self.cov.given("candidate")
        isolation.send_msg(self.cand, {"op": "trial", "trial": t, "keep": t["id"] in self.keep,
                                       "in_place": state["in_place"]}, [fd])
        if t["id"] in self.retain:
            state["pool_fds"].append(fd)
        else:
            os.close(fd)
        state["held"].remove(fd)
        self.held_bytes()

    def kill_candidate(self) -> None:
        self.work.release()
        self.state["killed"] = True
        for ch in (self.cand, self.prof):
            if ch is not None:
                try:
                    os.killpg(ch.pid, signal.SIGKILL)
                except OSError:
                    pass

    def on_trial_output(self, child, ev) -> None:
        i = self.trial_no
        t = self.plan[i]
        if ev.get("id") != t["id"]:
            self.state["verdict"] = {"ok": False, "kind": "malformed_result",
                                     "message": f"the candidate reported trial {ev.get('id')!r}, expected "
                                                f"{t['id']}"}
            return self.kill_candidate()
        out_fd, why = self.receive_output()
        if out_fd is None:
            self.state["verdict"] = {"ok": False, "kind": "malformed_result",
                                     "message": f"the candidate handed over {why} for trial {t['id']}"}
            return self.kill_candidate()
        try:
            return self.check_trial(i, t, out_fd)
        finally:
            os.close(out_fd)

    def receive_output(self) -> tuple[int | None, str]:
        """(the sealed file the candidate handed over with its event, "") or
        (None, what was wrong). It must come alone: a file queued beside it
        (or ahead of it) is not the harness's hand-over, so neither counts."""
        fd = isolation.receive_fd(self.cand, 10.0)
        extra = fd is not None and isolation.more_queued(self.cand)
        if fd is not None and tensorio.is_sealed(fd) and not extra:
            return fd, ""
        if fd is not None:
            os.close(fd)
        return None, "more than one file" if extra else "no sealed file"

    def check_trial(self, i: int, t: dict, out_fd: int) -> None:
        """Trial i's output, handed over as out_fd: its form checked here, its
        values compared by the reference; then the next trial, or the end
        of the trials."""
        ev, res, state, opts, cand, prof = self.ev, self.res, self.state, self.opts, self.cand, self.prof
        # The file is read here only to check its form and size (it is
        # mapped, not copied); the reference compares its values.
        try:
            cand_obj, cmeta = tensorio.load_fd(out_fd, ipc="meta" if self.device == "cuda" else "refuse")
            res.checks["handover"]["outputs"] = _handover_kind(cmeta)
            if not isinstance(cand_obj, dict) or "out" not in cand_obj:
                raise tensorio.FormatError("missing outputs")
            state["output_bytes"] = max(state["output_bytes"], C.tree_nbytes(cand_obj["out"]))
        except (OSError, tensorio.FormatError, RuntimeError, ValueError, OverflowError) as e:
            state["verdict"] = {"ok": False, "kind": "malformed_result",
                                "message": f"the candidate's output could not be read ({e})"}
            return self.kill_candidate()
        del cand_obj
        if isinstance(cmeta.get("mutated"), list) and any(m is True for m in cmeta["mutated"]):
            state["cand_mutated"] = True  # its profiling process then computes on a copy of its own
        if isinstance(cmeta.get("files"), list):
            # A boxed candidate names the copies in its box: the originals were checked.
            state["files"] = [cand.box.original_path(f) for f in cmeta["files"]] \
                if cand.box is not None else cmeta["files"]
        # Only now, with the candidate's output for this trial fixed,
        # is it compared, in the reference's process.
        keep_pids = frozenset({cand.pid} | ({prof.pid} if prof is not None else set()))
        if i == 0:
            ev.progress("reference")
            self.mark("output of the first trial received")
        rev = ev._ref_step(self.ref2, f"on trial {t['id']}", self.ref_timeout, keep_pids)
        _keep_layout(state, t["id"], rev)
        if i == 0:
            self.mark("reference ran the first trial")
        if isinstance(rev.get("ref_s"), (int, float)):
            state["ref_s"] = max(state["ref_s"], float(rev["ref_s"]))
        if isinstance(rev.get("device_peak"), int):
            if rev["device_peak"] > state["device_peaks"].get("ref", 0):
                state.setdefault("ref_peak_grew_at", []).append([t["id"], rev["device_peak"]])
            state["device_peaks"]["ref"] = max(state["device_peaks"].get("ref", 0), rev["device_peak"])
        if isinstance(rev.get("work"), dict) and "work" not in res.checks:
            res.checks["work"] = rev["work"]  # what one call must do, for the roofline (workmodel.py)
        if rev.get("skip"):
            state["alt_skipped"][t["id"]] = str(rev["skip"])[:300]
        else:
            r = wrong_device(t, cmeta, self.device)
            if r is None:
                if i == 0:
                    ev.progress("compare")
                r = verdict_for_trial(t, ev._ref_compare(self.ref2, "compare", t["id"], out_fd,
                                                         f"on trial {t['id']}", self.ref_timeout, keep_pids,
                                                         retain=t["id"] in self.retain),
                                      cmeta)
            state["trials_run"] += 1
            if i == 0:
                self.mark("first trial compared")
            if r.get("constant") is not None:
                state["constant"].append(r["constant"])
            if not r["ok"]:
                # On a layout trial, the message says which view of which input it was given.
                r["message"] = _with_note(r.get("message", ""), _layout_note(opts, t, state))
                if t.get("shape") and opts.get("shape_variant") is None:
                    r["message"] = (f"failed at shape variant {t['shape']} (benchmark: "
                                    f"{state['shapes'].get('benchmark')}): " + r["message"])
                    state["shape_failed"] = t["shape"]
                state["verdict"] = r
                return self.kill_candidate()
            C._merge_worst(state["worst"], r)
        # The reference draws the next trial only once this one is
        # compared (one trial's data at a time).
        next_fd = None
        if i + 1 < len(self.ref_plan):
            next_fd = ev._ref_fd(self.ref2, f"drawing the inputs of trial {self.ref_plan[i + 1]['id']}",
                                 self.ref_timeout, keep_pids)
            state["held"].append(next_fd)
            self.held_bytes()
        self.trial_no = i + 1
        if i + 1 < len(self.plan):
            return self.send_trial(i + 1, next_fd)
        return self.trials_passed(next_fd, keep_pids)

    def trials_passed(self, next_fd, keep_pids: frozenset) -> None:
        """Every trial passed. The last timed call's inputs (drawn last) go to
        the candidate; the reference keeps its expected output for the check
        after the timed calls. The profiling process gets the timed calls'
        inputs."""
        res, state, cand, prof, cov = self.res, self.state, self.cand, self.prof, self.cov
        if next_fd is not None:
            _keep_layout(state, "last", self.ev._ref_step(self.ref2, "on the timing trial", self.ref_timeout,
                                                          keep_pids))
            state["ref_last"] = True
            state["held"].remove(next_fd)
            state["last_fd"] = next_fd
            isolation.send_msg(cand, {"op": "last", "trial": self.ref_plan[-1], "in_place": state["in_place"]},
                               [next_fd])
        isolation.send_msg(cand, {"op": "done"})
        self.work.release()  # the correctness trials are over
        normal = [c for c in state["constant"] if c is not None]
        warnings = []
        if normal and all(normal):
            warnings.append("the reference output is constant on every trial, so correctness cannot tell "
                            "a no-op kernel from a real one")
        state["verdict"] = {"ok": True, **state["worst"], "warnings": warnings}
        if prof is not None and state["last_fd"] is not None:
            # The profiling process gets the timed calls' inputs now.
            n_pool = len(state["pool_fds"])
            plan_calls = pass_plan(state["profiled_calls"], n_pool, state.get("forward_s"), self.opts,
                                   state["ref_s"])
            if plan_calls["calls"] < state["profiled_calls"]:
                res.checks["profile_calls"] = plan_calls
            state["profiled_calls"] = plan_calls["calls"]
            state["burst_s"] = plan_calls["expected_s"]
            # Sent once the candidate says correctness_ready, having given back
            # the device blocks its trials left cached: the profiling process's
            # inputs and buffers never sit beside the candidate's trial peak
            # (footprint.device_phases). Held here till then (_held_fds).
            state["prof_pool"] = {"op": "pool", "n_more": state["profiled_calls"] - n_pool,
                                  "in_place": state["in_place"],
                                  # Large inputs left alone by every trial's forward: the
                                  # profiled calls read the reference's copy where it is.
                                  "map": state["in_place"] and not state.get("cand_mutated"),
                                  # each set's layout (input_layouts), as its trial's
                                  "layouts": [t.get("layout") for t in self.plan if t["id"] in self.retain]}
        else:
            self.close_timed_inputs()
        self.held_bytes()
        self.mark("compared")

    def close_timed_inputs(self) -> None:
        """Closes the sealed files of the timed calls' inputs (sent on, or no longer needed)."""
        state = self.state
        for fd in state["pool_fds"] + ([state["last_fd"]] if state["last_fd"] is not None else []):
            os.close(fd)
        state["pool_fds"], state["last_fd"] = [], None
        self.held_bytes()

    # -- the candidate's events --

    def on_event(self, child, ev) -> None:
        """One event of the candidate's process (isolation.supervise)."""
        state, cov = self.state, self.cov
        if ev.get("ev") in ("output", "correctness_ready") and cov.active:
            cov.reported("candidate", ev.get("cov"), f"trial {str(ev.get('id'))[:40]}"
                         if ev["ev"] == "output" else "the correctness trials")
        elif ev.get("ev") == "ran" and cov.active:  # a flagged line ran just now
            i = self.trial_no
            cov.ran_now("candidate", ev.get("i"), "the timed calls" if state.get("gate") == "timing" else
                        f"trial {self.plan[i]['id']}" if i < len(self.plan) else "the correctness trials")
        if ev.get("ev") == "phase" and isinstance(ev.get("phase"), str):
            self.on_phase(child, ev)
        elif ev.get("ev") == "isolation" and ev.get("network") in ("none", "shared"):
            self.res.checks["isolation"]["network"] = ev["network"]
        elif ev.get("ev") == "output" and state["verdict"] is None and state["error"] is None:
            self.on_output(child, ev)
        elif ev.get("ev") == "correctness_ready":
            self.on_correctness_ready(child, ev)
        elif ev.get("ev") == "wall" and ev.get("mark") == "round_end" and state.get("gate") == "timing":
            self.on_wall_round(child, ev)
        elif ev.get("ev") == "timing_ready" and state.get("gate") == "profiling" and not self.lock.held:
            self.on_timing_ready(child, ev)
        elif ev.get("ev") == "timed_output" and state.get("gate") == "timing" and state["error"] is None:
            try:
                self.on_timed_output(child, ev)
            except ProblemError as e:
                state["error"] = e
                self.kill_candidate()
        elif ev.get("ev") == "fwd" and state.get("gate") is None:  # the correctness trials' calls only
            # How long each forward call of its correctness trials took here
            # and now, on our clock (the call alone): what the harness's own
            # passes are sized by (pass_plan).
            if ev.get("at") == "start":
                state["fwd_start"] = ev["_t"]
            elif ev.get("at") == "end" and state.get("fwd_start") is not None:
                state.setdefault("forward_s", []).append(ev["_t"] - state.pop("fwd_start"))

    def on_phase(self, child, ev) -> None:
        state = self.state
        state["phase"] = ev["phase"][:200]
        if len(self.phase_s) < 64:
            self.phase_s.append([state["phase"], round(ev["_t"] - child.started, 3)])

    def on_output(self, child, ev) -> None:
        state = self.state
        try:
            if _sources_digest(self.problem) != self.sources_before:
                # A candidate that rewrites the problem's files is cheating,
                # whatever it hoped to gain.
                state["verdict"] = {"ok": False, "kind": "problem_tampered",
                                    "message": "the problem's source files changed while the "
                                               "candidate ran"}
                return self.kill_candidate()
            self.on_trial_output(child, ev)
        except ProblemError as e:
            state["error"] = e
            self.kill_candidate()

    def on_correctness_ready(self, child, ev) -> None:
        state, perf = self.state, self.perf
        if isinstance(ev.get("device_peak"), int):
            state["device_peaks"]["cand"] = ev["device_peak"]
        state["cand_ipc_released"] = ev.get("ipc_released")
        if state["verdict"] is not None and state["verdict"]["ok"] and perf and state["error"] is None:
            msg = state.pop("prof_pool", None)
            if msg is not None and self.prof is not None and state["last_fd"] is not None:
                self.cov.given("profiling", required=True)  # from now on it runs the candidate on inputs
                isolation.send_msg(self.prof, msg, state["pool_fds"] + [state["last_fd"]])
                self.close_timed_inputs()
            state["phase"] = "waiting for its profile"
            state["gate"] = "profiling"
            self.cov.given("candidate")
            child.go()
        elif not (state["verdict"] is not None and state["verdict"]["ok"] and not perf):
            self.kill_candidate()

    def on_wall_round(self, child, ev) -> None:
        # Another round of wall-clock batches only while the check fails:
        # other processes' work can inflate one round; work the events
        # miss inflates every round. The server counts the rounds and
        # answers each once, in order (anything else is ignored), so a
        # child cannot buy time with made-up events. The final verdict
        # (_finish) takes every round and the synced times from timing.json.
        rounds = self.state.setdefault("wall_rounds", timing.WallRounds())
        answer = rounds.answer(child.events, ev)
        if answer == "go":
            time.sleep(0.05 * rounds.rounds)  # let a burst of other work pass; the deadline is paused
            self.cov.given("candidate")
            child.go()
        elif answer == "stop":
            child.stop()

    def on_timing_ready(self, child, ev) -> None:
        """The candidate is ready to be timed: first its profiling process
        runs its burst and ends, then the timed calls start under the GPU's
        timing lock."""
        evr, res, state, opts, prof, cov = self.ev, self.res, self.state, self.opts, self.prof, self.cov
        if isinstance(ev.get("device_held"), int):
            state["cand_held"] = ev["device_held"]  # through the profiled burst (footprint.device_phases)
        if prof is not None:
            # The profiling process must be done: nothing else of this
            # candidate may run on the GPU while it is timed.
            evr.progress("profiling")
            state["runtime"] = evr._collect_profile(prof, opts, frozenset({child.pid, self.ref2.pid}),
                                                    state["defer"], state.get("burst_s"))
            ready = [e for e in prof.events if e.get("ev") == "profile_ready"]
            if ready and cov.active:  # it reported, then was let go for its burst
                cov.reported("profiling", ready[-1].get("cov"), "the profiling process's set-up")
                cov.given("profiling")
            res.checks["profile_lock"] = state["runtime"].pop("lock", None)
            go_t = (res.checks["profile_lock"] or {}).pop("go_t", None)
            if go_t is not None:
                self.phase_s.append(["profile burst let go", round(go_t - self.cand.started, 3)])
            self.phase_s.extend(_child_milestones(prof, "profiler", self.cand.started))
            self.mark("profile collected")
        # One timed phase per GPU at a time (gpulock.py); the wait does
        # not count against the deadline. Nor do the next candidate's
        # processes still warming up (spares.py) run beside it.
        evr.progress("waiting for the GPU")
        res.checks["spares_warm_wait_s"] = round(evr.launcher.wait_warm(opts["timeout_s"]), 3)
        self.mark("next candidate's spares warm")
        res.checks["timing_lock"] = self.lock.acquire(opts["timeout_s"])
        if self.device == "cuda":
            state["clock"] = gpuclock.Sampler().start()
        self.mark("timing lock taken")
        evr.progress("timing")
        state["phase"] = "timing"
        state["gate"] = "timing"
        # The timed pass's own time, from now (sized by the slower of the
        # candidate's and the reference's calls on the same inputs).
        child.min_left_s = timed_pass_s(opts, state.get("extra_warmup") or 0, state.get("forward_s"),
                                        state["ref_s"], self.device)
        res.checks["timed_pass_s"] = round(child.min_left_s, 3)
        cov.given("candidate")
        child.go()


    def on_timed_output(self, child, ev) -> None:
        """One output of the timed phase, handed over while the candidate
        waits (the last timed call's, then the wall-clock batch's): its form
        checked here, its values compared by the reference, still under this
        evaluation's exclusive timing lock and while nothing is timed; then
        the candidate goes on. On the GPU it crosses by CUDA IPC, so no timed
        output makes a trip through the host."""
        state = self.state
        got = state.setdefault("timed_outputs", {})
        key = ev.get("key")
        expected = next((k for k in TIMED_OUTPUTS if k not in got), None)
        if key != expected or (key == "wall_last" and not (self.device == "cuda" and self.opts["wall_check"])):
            state["timed_problem"] = ("malformed_result", f"the candidate handed over a timed output {key!r} out "
                                                          f"of turn (expected {expected!r})")
            return self.kill_candidate()
        fd, why = self.receive_output()
        if fd is None:
            state["timed_problem"] = ("malformed_result", f"the candidate handed over {why} for {key}")
            return self.kill_candidate()
        try:
            try:
                obj, _ = tensorio.load_fd(fd, ipc="meta" if self.device == "cuda" else "refuse")
                if not isinstance(obj, dict) or set(obj) != {key}:
                    raise tensorio.FormatError(f"it holds {sorted(obj) if isinstance(obj, dict) else type(obj).__name__}"
                                               f", expected {key} alone")
                if obj[key] is None:
                    raise tensorio.FormatError(f"{key} is None, not an output")
                del obj
            except (OSError, tensorio.FormatError, RuntimeError, ValueError, OverflowError) as e:
                state["timed_problem"] = ("malformed_result", f"the candidate's {key} could not be read ({e})")
                return self.kill_candidate()
            if state["ref_last"]:
                keep_pids = frozenset({self.cand.pid})
                try:
                    results = self.ev._ref_compare(self.ref2, "compare_last", "last", fd,
                                                   f"on {TIMED_OUTPUTS[key]}", self.ref_timeout, keep_pids, keys=[key])
                except HarnessError:
                    if self.cand.pid in self.sampler.over or isolation._exited(self.cand):
                        # It was killed for its memory (or died) while its output was read:
                        # its own failure, which _finish names.
                        return self.kill_candidate()
                    raise
                if key not in results and not isinstance(results.get(key + "_skipped"), str):
                    raise HarnessError(f"{self.problem}: the reference did not compare {TIMED_OUTPUTS[key]}")
                got[key] = results.get(key)
                if isinstance(results.get(key + "_skipped"), str):
                    got[key + "_skipped"] = results[key + "_skipped"]
            else:
                got[key] = None  # nothing to compare it with (no timing trial)
        finally:
            os.close(fd)
        self.mark(f"{key} compared")
        self.cov.given("candidate")
        child.go()


TIMED_OUTPUTS = {"timed_last": "the last timed call's output", "wall_last": "the last wall-clock call's output"}


def _timed_output_problem(got: dict) -> tuple[str, str] | None:
    """(kind, message) for the first timed output (on_timed_output, in their
    order) that the reference found wrong: `malformed_result` where its
    device memory could not be used, else `stale_output`; None where none was."""
    for key, label in TIMED_OUTPUTS.items():
        r = got.get(key)
        if not isinstance(r, dict) or r.get("ok"):
            continue
        if r.get("kind") == "malformed_result":
            return "malformed_result", f"{label}: {r.get('message')}"
        return "stale_output", (f"integrity: {label} is wrong after fresh values were written into the same input "
                                f"buffers ({r.get('message')}); results must not be cached or reused between calls")
    return None


def _child_milestones(child, label: str, since: float, ev_name: str = "phase", clock: str = "_t") -> list:
    """A child's milestone events (ev_name; `clock` holds when: "_t", our clock
    when the event arrived, or "t", the machine's monotonic clock as the child
    read it), as at most 16 phases_s entries "label: phase" relative to `since`
    (negative: before it)."""
    out = []
    for ev in child.events:
        if ev.get("ev") == ev_name and isinstance(ev.get("phase"), str) and \
                isinstance(ev.get(clock), (int, float)) and len(out) < 16:
            out.append([f"{label}: " + ev["phase"][:100], round(float(ev[clock]) - since, 3)])
    return out


def _record_released(handover: dict, who: str, counts) -> None:
    """checks.handover.released[who]: how many of the storages `who` handed
    over by CUDA IPC it released once its receiver was done (tensorio.
    ipc_release): "released", "already" (the receiver did), "unexpected" (a
    counter it could not reach or did not read 1 or 0: that storage stayed
    allocated). The candidate's own word, for diagnosis only."""
    if not isinstance(counts, dict):
        return
    keys = tensorio.RELEASE_KEYS
    if not all(isinstance(counts.get(k), int) and not isinstance(counts.get(k), bool) for k in keys):
        return
    if not any(counts[k] for k in keys):
        return  # nothing crossed by IPC (test mode, host files)
    handover.setdefault("released", {})[who] = {k: counts[k] for k in keys}


def _handover_kind(meta: dict) -> str:
    """How a tensor file crossed, from the meta tensorio.loads returned: its
    tensors' bytes in it, or references to device memory (CUDA IPC)."""
    return "device (CUDA IPC)" if meta.get("_ipc") else "host file"


def _held_fds(state: dict) -> list[int]:
    """The sealed inputs files the server holds during an evaluation."""
    return state["held"] + state["pool_fds"] + ([state["last_fd"]] if state["last_fd"] is not None else [])


def _warm_record(child) -> dict | None:
    """What the child's warm-up reported before any work reached it (spares.py)."""
    for ev in child.events:
        if ev.get("ev") == "warm":
            return {k: ev[k] for k in ("s", "cuda", "triton", "error")
                    if k in ev and isinstance(ev[k], (bool, int, float, str))}
    return None


def _violation_line(v) -> str:
    if isinstance(v, dict):
        f = os.path.basename(str(v.get("file", "")))
        line = v.get("line")
        loc = f"{f}:{line}" if line is not None else f
        return f"{loc}: {v.get('rule', 'rule')}: {v.get('message', '')}".strip()
    return str(v)


def _final_coverage(cov: coverage.Tracker, cand, prof) -> None:
    """The last reports of the candidate's processes, from the files they
    write when they are done or failed (children.write_error, _perf,
    profile_body): written after the last call, so they cover everything."""
    for child, role, files in ((cand, "candidate", (("error.json", "the call that failed"),
                                                    ("timing.json", "the timed calls"))),
                               (prof, "profiling", (("error.json", "the call that failed"),
                                                    ("runtime.json", "the profiled calls")))):
        if child is None:
            continue
        for name, where in files:
            rec = _read_json(child.path(name))
            if isinstance(rec, dict) and "coverage" in rec:
                cov.reported(role, rec["coverage"], where)
    if prof is not None:  # the moments its flagged lines first ran (the candidate's came as they happened)
        where = "the profiling process's set-up"
        for ev in prof.events:
            if ev.get("ev") == "profile_ready":
                where = "the profiled calls"
            elif ev.get("ev") == "ran":
                cov.ran_now("profiling", ev.get("i"), where)


def _coverage_lines(conditional: list, cov: coverage.Tracker) -> list[tuple[dict, dict]]:
    """Each conditional finding with what its line did: (violation, judged)."""
    judged = cov.judge()
    index = {tuple(t): i for i, t in enumerate(cov.targets)}
    out = []
    for v in conditional:
        i = index.get((os.path.abspath(str(v.get("file", ""))), int(v.get("line") or 0)))
        out.append((v, judged[i] if i is not None else {"ran": None, "why": "its line was not watched"}))
    return out


def _ran_line(v: dict, j: dict) -> str:
    if j["ran"]:
        return f"{_violation_line(v)}; this line ran in {j['where']}"
    return f"{_violation_line(v)}; whether this line ran is unknown ({j['why']}), which counts as ran"


def _warning_line(v: dict) -> str:
    f = os.path.basename(str(v.get("file", "")))
    return (f"{f}:{v.get('line')}: {v.get('rule')} (warning): {v.get('message', '')}; this line never ran in any "
            f"correctness trial or timed call, so it was not counted as cheating, but remove it: PyTorch compute "
            f"that runs is cheating")


def _own_files(kernel: str, reported) -> list[str]:
    files = set(loader.candidate_files(kernel))
    home = os.path.dirname(os.path.abspath(kernel)) + os.sep
    for f in reported or []:
        if isinstance(f, str) and os.path.abspath(f).startswith(home) and f.endswith(".py") and os.path.isfile(f):
            files.add(os.path.abspath(f))
    return sorted(files)


# The profiling pass is sized to take about this long (seconds, or a fifth of
# the candidate's deadline where that is more): its calls are cut where one
# forward call is slow (KernelBench's multi-GB inputs on a loaded machine).
PROFILE_BUDGET_S = 30.0
MIN_PROFILED_CALLS = 12


def pass_plan(full_calls: int, n_pool: int, forward_s: list | None, opts: dict, ref_s: float = 0.0) -> dict:
    """How many calls the profiling process makes, and how long they should
    take: all of them (one per pool set, then as many as the timed process
    makes) where that fits the budget at the speed its correctness trials ran
    (their slowest forward call after the first, the call alone, measured on
    our clock, or the reference's slowest trial on the same inputs, ref_s,
    where that was slower; what the first call took beyond that, a compile,
    is counted once), else as
    many as fit, never fewer than the pool sets and MIN_PROFILED_CALLS. Fewer
    profiled calls leave the runtime checks the same rules; only their number
    is judged against what it was told."""
    steady, first = _call_speeds(forward_s)
    per = max(steady, ref_s or 0.0) or None
    out = {"calls": full_calls, "full": full_calls, "per_call_s": None if per is None else round(per, 4),
           "expected_s": None}
    if not per or per <= 0:
        return out
    budget = max(PROFILE_BUDGET_S, opts["timeout_s"] / 5)
    fit = n_pool + max(MIN_PROFILED_CALLS, int(max(0.0, budget - first) / per))
    out["calls"] = max(n_pool + 1, min(full_calls, fit))
    out["expected_s"] = round(first + out["calls"] * per, 3)
    if first > 0:
        out["first_call_extra_s"] = round(first, 4)
    if out["calls"] < full_calls:
        call = "one forward call" if first <= 0 else "one forward call after the first"
        out["why"] = (f"{call} took up to {per:.3g} s in the correctness trials: {out['calls']} of "
                      f"{full_calls} calls profiled, to fit about {budget:g} s")
    return out


def _call_speeds(forward_s: list | None) -> tuple[float, float]:
    """(seconds a call takes once warm, extra seconds of the first call):
    the slowest of the calls after the first, and what the first took beyond
    that (a Triton compile, a library's first use). With one call, that call
    is the speed and there is no extra."""
    if not forward_s:
        return 0.0, 0.0
    if len(forward_s) == 1:
        return float(forward_s[0]), 0.0
    steady = float(max(forward_s[1:]))
    return steady, max(0.0, float(forward_s[0]) - steady)


def timed_pass_s(opts: dict, extra_warmup: int, forward_s: list | None, ref_s: float, device: str) -> float:
    """The time the timed calls get from their go at least: three times what
    they should take at the slower of the candidate's own calls in its trials
    and the reference's on the same inputs, plus 30 s, at most twice the
    deadline (the pool's own backstop is four times it). The candidate's
    deadline is then never what cuts a pass the harness planned short."""
    from .timing import SYNCED_TRIALS, WALL_MAX_ROUNDS, WALL_REPEATS
    per = max(max(forward_s) if forward_s else 0.0, ref_s or 0.0)
    calls = opts["warmup"] + extra_warmup + opts["perf_trials"]
    if device == "cuda":
        calls += SYNCED_TRIALS + (2 * WALL_REPEATS * WALL_MAX_ROUNDS * 10 if opts.get("wall_check") else 0)
    return min(2 * opts["timeout_s"], 3 * calls * per + 30)


def _overrun_message(what: str, opts: dict, state: dict) -> str:
    per = max(state["forward_s"]) if state.get("forward_s") else None
    return (f"every output was correct, but the {what} the harness planned did not finish within the deadline "
            f"({opts['timeout_s']:g} s" + (f"; one forward call took up to {per:.3g} s in the trials" if per else "")
            + "): the harness's pass did not fit this machine's load, so no verdict is given and nothing is "
            "charged to the candidate")


def _failure_of(child, phase: str, timeout_s: float) -> tuple[str, str]:
    """Kind and message for a candidate that produced no verdict-worthy output."""
    if child.timed_out:
        return "hang", (f"no result within the {timeout_s:g} s deadline; the candidate was {phase}. Look for an "
                        f"infinite loop, a kernel that never terminates, or a deadlock")
    err = _read_json(child.path("error.json"))
    # The error file comes from the candidate's process, so it can only ever
    # describe a failure; one claiming anything else is ignored.
    if isinstance(err, dict) and isinstance(err.get("message"), str) and err.get("kind") in errors.KINDS and \
            errors.status_of(err["kind"]) not in (errors.CORRECT, errors.INCORRECT, errors.CHEATING, errors.NO_VERDICT):
        return err["kind"], errors.shorten(err["message"])
    sig = child.term_signal()
    if sig is not None:
        tail = child.tail()[-1200:].strip()
        msg = f"the candidate process was killed by {errors.describe_signal(sig)} while {phase}"
        if sig == signal.SIGSEGV or sig == signal.SIGBUS:
            msg += " (invalid memory access on the host, e.g. a bad pointer or ctypes misuse)"
        elif sig == signal.SIGKILL:
            msg += " (possibly the kernel's out-of-memory killer)"
        return errors.kind_for_signal(sig), msg + (f"\nstderr:\n{tail}" if tail else "")
    code = child.exit_code()
    tail = child.tail()[-1200:].strip()
    return "exit_without_result", (f"the candidate process exited with status {code} while {phase} without "
                                   f"producing a result; a kernel must return its output and never call "
                                   f"sys.exit()/os._exit()" + (f"\nstderr:\n{tail}" if tail else ""))


def _trial_context(t: dict) -> str:
    if t.get("dist"):
        what = {"neg": "get_inputs() negated"}.get(t["dist"], f"get_inputs() scaled {t['dist'].replace('x', 'x ')}")
    elif t["alt"]:
        what = "signed-normal inputs (alternate distribution)"
    else:
        what = "random inputs from get_inputs()"
    if t.get("shape"):
        return f" [trial {t['id']}: shape variant {t['shape']}, {what}, seed {t['seed']}]"
    return f" [trial {t['id']}: config {t['config']}, {what}, seed {t['seed']}]"


def wrong_device(t: dict, cmeta: dict, device: str) -> dict | None:
    """The verdict for an output that is not on the GPU in a GPU evaluation."""
    devices = cmeta.get("devices") if isinstance(cmeta.get("devices"), list) else []
    if device == "cuda" and any(d != "cuda" for d in devices):
        return {"ok": False, "kind": "wrong_device",
                "message": "the output is not a CUDA tensor; compute it on the GPU with your Triton kernels"
                           + _trial_context(t), "max_abs_err": None}
    return None


def _keep_layout(state: dict, tid: str, rev: dict) -> None:
    """Keeps what the reference says it applied of trial tid's layout (its
    "expected" event's "layout": {"index", "applied", "skipped"}), checked."""
    rec = rev.get("layout") if isinstance(rev, dict) else None
    if not isinstance(rec, dict) or isinstance(rec.get("index"), bool) or not isinstance(rec.get("index"), int):
        return
    applied = [i for i in rec.get("applied") or [] if isinstance(i, int) and not isinstance(i, bool)]
    skipped = [{"input": s["input"], "why": str(s.get("why", ""))[:200]} for s in rec.get("skipped") or []
               if isinstance(s, dict) and isinstance(s.get("input"), int)]
    state["layouts"][tid] = {"index": rec["index"], "applied": applied, "skipped": skipped}


def _layout_note(opts: dict, t: dict, state: dict) -> str:
    """'on trial c0t1, input 0 was a non-contiguous view: shape [..], stride
    [..], ...' for a failure on a trial whose inputs took a layout, else ''."""
    rec = state["layouts"].get(t["id"])
    layout = layouts.for_trial(opts, t)
    if not rec or layout is None or not rec["applied"]:
        return ""
    return layouts.note(layout, rec["applied"], t["id"])


def _with_note(message: str, note: str) -> str:
    """The note at the end of the message's first line (the line a summary shows)."""
    if not note:
        return message
    head, sep, rest = message.partition("\n")
    return f"{head}; {note}{sep}{rest}"


def _layouts_record(state: dict, opts: dict, perf: bool) -> dict:
    """checks.layouts: which layouts the trials' inputs took, and which could
    not be applied and why (grouped, with the trials)."""
    applied: dict = {}
    skipped: dict = {}
    for tid, rec in state["layouts"].items():
        if rec["applied"]:
            applied.setdefault((rec["index"], tuple(rec["applied"])), []).append(tid)
        for s in rec["skipped"]:
            skipped.setdefault((rec["index"], s["input"], s["why"]), []).append(tid)
    return {"given": len(opts["input_layouts"]),
            "applied": [{"layout": k, "inputs": list(ins), "trials": ts} for (k, ins), ts in applied.items()],
            "skipped": [{"layout": k, "input": i, "why": why, "trials": ts} for (k, i, why), ts in skipped.items()],
            "timed": 0 if perf else None,
            "how": "each trial's inputs in layout k mod the number given (k: the trial's place in its "
                   "configuration), made by the reference and by the candidate from their own copies; the timed "
                   "calls' buffers in layout 0, refilled in place"}


def _tolerance_record(worst: dict, opts: dict) -> dict:
    tol = worst.get("tolerance") or C.tolerance_for("float32", opts)
    out = {"atol": tol["atol"], "rtol": tol["rtol"], "pass_rate": tol["pass_rate"], "scale_tol": tol["scale_tol"],
           "tolerances": worst.get("tolerances") or {C.tolerance_key(tol): tol}}
    if "pass_fraction" in worst:
        out["pass_fraction"] = worst["pass_fraction"]
    return out


def verdict_for_trial(t: dict, r: dict, cmeta: dict) -> dict:
    """One trial's verdict from the reference's comparison r (its
    children.reference_body result: compare_tree's, plus "ref_mutated", the
    inputs its own forward changed, and "constant", whether its output was
    constant; None on alternate trials): the values, and the inputs left
    alone where the reference leaves them alone."""
    r = dict(r)
    ref_mut = r.pop("ref_mutated", None) or []
    if not r["ok"]:
        r["message"] = str(r.get("message", "wrong output")) + _trial_context(t)
        r.setdefault("max_abs_err", None)
        r.pop("constant", None)
        return r
    cand_mut = cmeta.get("mutated") if isinstance(cmeta.get("mutated"), list) else []
    for j, changed in enumerate(cand_mut):
        if changed is True and not (j < len(ref_mut) and ref_mut[j]):
            return {"ok": False, "kind": "input_mutation",
                    "message": f"forward modified its input #{j} in place; the reference leaves it unchanged, "
                               f"so write results to a new tensor" + _trial_context(t),
                    "max_abs_err": r.get("max_abs_err")}
    if t["alt"]:
        r["constant"] = None
    return r


class _Result:
    """What an evaluation has found so far; fail, no_verdict and ok turn it
    into the verdict (verdict.WorkerVerdict)."""

    def __init__(self, opts: dict, device: str):
        self.opts = opts
        self.device = device
        self.checks: dict = {}
        self.max_abs_err = None
        self.runtime_ms = None
        self.uses_pytorch = False
        self.subkernel_runtime_ms: dict | None = None
        self.coverage: coverage.Tracker | None = None  # static findings judged by what ran (coverage.py)

    def _verdict(self, t_start: float, status: str, kind: str, message: str, reasons: list,
                 runtime_ms) -> WorkerVerdict:
        return WorkerVerdict(max_abs_err=self.max_abs_err, runtime_ms=runtime_ms, uses_pytorch=self.uses_pytorch,
                             device=self.device, checks=self.checks, elapsed_s=round(time.monotonic() - t_start, 3),
                             subkernel_runtime_ms=self.subkernel_runtime_ms or None,
                             status=status, kind=kind, message=message, reasons=reasons)

    def fail(self, kind: str, message: str, t_start: float, reasons: list | None = None,
             stderr: str = "") -> WorkerVerdict:
        message = errors.redact_env_secrets(errors.shorten(message))
        status = errors.status_of(kind)
        out = self._verdict(t_start, status, kind, message, reasons or [f"{kind}: {_first_line(message)}"],
                            runtime_ms=self.runtime_ms if status == errors.CORRECT else None)
        if stderr:
            out.stderr_tail = errors.redact_env_secrets(stderr[-1500:])
        return out

    def no_verdict(self, kind: str, message: str, t_start: float) -> WorkerVerdict:
        """The harness, not the candidate, failed (the reference side): no
        verdict on the candidate. The pool retries it; a search never charges it."""
        message = errors.redact_env_secrets(errors.shorten(message))
        out = self._verdict(t_start, errors.NO_VERDICT, kind, message, [f"{kind}: {_first_line(message)}"],
                            runtime_ms=None)
        out.retryable = True
        return out

    def ok(self, t_start: float) -> WorkerVerdict:
        c = self.checks.get("correctness", {})
        msg = (f"correct on {c.get('trials_run', '?')} trials over {c.get('configs', '?')} input configuration(s), "
               f"max_abs_err {self.max_abs_err:.3g}" if self.max_abs_err is not None else "correct")
        if self.runtime_ms:
            msg += f"; median {self.runtime_ms['median']:.4g} ms"
        if self.uses_pytorch:
            msg += " (uses PyTorch kernels: allowed by policy)"
        return self._verdict(t_start, errors.CORRECT, "ok", msg, [], runtime_ms=self.runtime_ms)
