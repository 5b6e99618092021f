"""The trusted side of an evaluation (runs in the server or the one-shot CLI).

Order of one eval:
 1. syntax and static checks on the candidate's files (no code runs);
 2. reference child #1 (problem file only): every trial's inputs; it runs the
    model only to vet the problem and to drop alternate-distribution trials
    where the reference raises or is not finite; no output leaves it;
 3. reference child #2 (problem file only), started before the candidate and
    beside it: loads the problem, computes every expected output and holds
    them in its own (non-dumpable) process;
 4. candidate child (candidate files only; inputs from the sealed copy of
    reference #1's file, mapped copy-on-write): every trial; writes its
    outputs; waits. Only then does reference child #2 write the expected
    outputs, so every trial is "candidate first" and no expected value is
    anywhere the candidate's process can read while it computes (its own
    memory holds none: it was forked from the server before this eval's
    expected outputs existed, and the server wipes what it frees, so earlier
    evals' outputs are not left in its heap either);
 5. beside it, a second process of the same candidate (profile_body)
    profiles every forward call it makes: the trials and as many more as the
    timed process makes (runtime_check.py);
Children 2-5 are usually pre-started spares (spares.py): forked and warmed
(CUDA, Triton, the profiler) before the candidate arrived, used once.
 6. the server compares (CPU torch) and either kills the candidate (wrong) or,
    once the profiling process has finished, lets it time itself under the
    GPU's timing lock;
 7. after the candidate and every descendant are dead, the server judges the
    profile, the wall-clock cross-check and the output of the last timed call.
Nothing the candidate process does can reach the verdict: it only ever hands
over tensors and timings through files and a pipe.
"""

from __future__ import annotations

import json
import os
import random
import signal
import time
from collections import OrderedDict

from . import children, errors, gpulock, isolation, loader, spares, tensorio, timing
from . import correctness as C


class RequestError(Exception):
    """A bad request or a missing capability: answered as a protocol error."""


class ProblemError(Exception):
    """The reference problem itself failed: answered as a protocol error."""


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
_INPUTS_CACHE_ENTRIES = 4             # problems whose trial inputs a server keeps
_INPUTS_CACHE_MAX_BYTES = 1 << 30      # larger input sets are drawn afresh each time


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


def _inputs_key(problem: str, opts: dict, device: str, timing_trial) -> str | None:
    """What reference child #1's output depends on: the problem's sources, the
    options and the device. None when the sources cannot be read (then nothing
    is cached)."""
    import hashlib
    src = _sources_digest(problem)
    if src is None:
        return None
    extra = json.dumps({"opts": opts, "device": device, "timing_trial": timing_trial}, sort_keys=True, default=str)
    return hashlib.sha256((src + extra).encode()).hexdigest()


class Evaluator:
    def __init__(self, test_mode: bool = False, progress=None, keep_spares: bool = False):
        self.test_mode = test_mode
        # key -> (inputs, meta, fd of their sealed tensor file)
        self._inputs_cache: OrderedDict = OrderedDict()
        self.launcher = spares.Launcher(keep_spares)
        self.progress = progress or (lambda phase: None)
        self._gpu = None

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
        return {"clean": not res["violations"], "violations": res["violations"]}

    # -- helpers --

    def _options(self, options) -> dict:
        if options is not None and not isinstance(options, dict):
            raise RequestError("options must be a JSON object")
        try:
            opts = C.normalize_options(options)
        except ValueError as e:
            raise RequestError(str(e)) from None
        if opts["test_cpu"] and not self.test_mode:
            raise RequestError("option test_cpu is honoured only by a worker started with --test-mode")
        if not opts["static_check"] and not self.test_mode:
            raise RequestError("option static_check=false is honoured only by a worker started with --test-mode")
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

    def _run_reference(self, job: dict, timeout_s: float, protect=frozenset()):
        child = self.launcher.start("ref", "reference", job)
        self.launcher.refill()
        return self._collect_reference(child, job, timeout_s, protect)

    def close(self) -> None:
        """Kills the spares and closes the cached inputs."""
        self.launcher.close()
        while self._inputs_cache:
            os.close(self._inputs_cache.popitem()[1][2])

    def _collect_reference(self, child, job: dict, timeout_s: float, protect=frozenset()):
        """Waits for a reference child to exit; ProblemError if it failed."""
        isolation.supervise(child, timeout_s, protect=protect)
        err = _read_json(child.path("error.json"))
        if child.timed_out:
            isolation.cleanup_dir(child.dir)
            raise ProblemError(f"{job['problem']}: the reference took more than {timeout_s:g} s")
        if err or child.exit_code() != 0:
            msg = (err or {}).get("message") if isinstance(err, dict) else None
            if not msg:
                sig = child.term_signal()
                msg = (f"died of {errors.describe_signal(sig)}" if sig else f"exited with status {child.exit_code()}")
                msg += ": " + child.tail()[-800:]
            isolation.cleanup_dir(child.dir)
            raise ProblemError(f"{job['problem']}: {errors.redact_env_secrets(str(msg))}")
        return child

    # -- eval --

    def evaluate(self, problem, kernel, options=None) -> dict:
        """One candidate's verdict; with options.baselines, also the baselines
        (timed in their own child, only for a correct candidate)."""
        res = self._evaluate(problem, kernel, options)
        opts = self._options(options)
        if opts["baselines"] and res["status"] == errors.CORRECT and opts["perf"]:
            b = self.baseline(problem, options)
            res["baseline_ms"] = {k: ({"median": b[k]["median_ms"], "mean": b[k]["mean_ms"]} if b.get(k) else None)
                                  for k in ("eager", "compile")}
            if b.get("compile_error"):
                res["checks"]["baseline_compile_error"] = b["compile_error"]
        return res

    def _evaluate(self, problem, kernel, options=None) -> dict:
        t_start = time.monotonic()
        opts = self._options(options)
        problem = self._file(problem, "problem")
        kernel = self._file(kernel, "kernel")
        device = self._device(opts)
        res = _Result(opts, device)
        files = loader.candidate_files(kernel)

        err = loader.syntax_check(files)
        if err is not None:
            return res.fail("syntax_error", "syntax error: " + errors.trimmed_traceback(err), t_start)

        static = self.static_check(kernel, opts["allow_pytorch"])
        if opts["test_cpu"] or not opts["static_check"]:
            # Test mode only: torch-only CPU candidates necessarily break the rules,
            # and GPU tests switch the layer off to exercise the runtime layers alone.
            static["enforced"] = False
        elif not static["available"]:
            raise RequestError(static["error"])
        else:
            static["enforced"] = True
        res.checks["static"] = static
        if static.get("enforced") and static.get("violations"):
            reasons = [_violation_line(v) for v in static["violations"]]
            return res.fail("static_violation", "static check: " + "; ".join(reasons[:5]), t_start, reasons)

        perf = bool(opts["perf"]) and opts["perf_trials"] > 0
        timing_trial = C.timing_inputs_trial(opts) if perf else None
        # Reference child #1 only draws the inputs and vets the problem: its
        # result depends on nothing but the problem's sources, the options and
        # the device, so the next candidate for the same problem reuses it.
        key = _inputs_key(problem, opts, device, timing_trial)
        hit = self._inputs_cache.get(key) if key else None
        own_fd = None  # a sealed inputs file not kept in the cache: closed after this eval
        if hit is not None:
            self._inputs_cache.move_to_end(key)
            inputs_obj, meta, inputs_fd = hit
            res.checks["reference_inputs"] = "reused from an earlier eval of the same problem"
        else:
            self.progress("reference")
            job1 = {"problem": problem, "opts": opts, "device": device, "phase": 1, "timing_trial": timing_trial}
            ref1 = self._run_reference(job1, opts["timeout_s"])
            try:
                # One sealed copy: the server maps it, and so does every child
                # that needs the inputs; nobody can change it any more.
                inputs_fd = tensorio.sealed_copy(ref1.path("inputs.mkt"))
                try:
                    inputs_obj, meta = tensorio.load_fd(inputs_fd)
                except BaseException:
                    os.close(inputs_fd)
                    raise
            except (OSError, tensorio.FormatError) as e:
                raise ProblemError(f"{problem}: the reference wrote no usable inputs ({e})") from None
            finally:
                isolation.cleanup_dir(ref1.dir)
            res.checks["reference_inputs"] = "drawn by reference child #1"
            if key and C.tree_nbytes(inputs_obj) <= _INPUTS_CACHE_MAX_BYTES:
                self._inputs_cache[key] = (inputs_obj, meta, inputs_fd)
                while len(self._inputs_cache) > _INPUTS_CACHE_ENTRIES:
                    os.close(self._inputs_cache.popitem(last=False)[1][2])
            else:
                own_fd = inputs_fd
        try:
            return self._evaluate_candidate(res, problem, kernel, opts, device, perf, inputs_obj, meta, inputs_fd,
                                            t_start)
        finally:
            if own_fd is not None:
                os.close(own_fd)

    def _evaluate_candidate(self, res, problem, kernel, opts, device, perf, inputs_obj, meta, inputs_fd, t_start):
        n_configs = int(meta.get("n_configs", 1))
        skipped = meta.get("alt_skipped") or {}
        plan = [t for t in C.plan_trials(n_configs, opts) if t["id"] not in skipped]
        inputs = inputs_obj["inputs"]
        init = inputs_obj["init"]
        res.checks["correctness"] = {
            "configs": n_configs, "trials_per_config": opts["trials"],
            "candidate_first_trials": opts["candidate_first_trials"], "alt_dist_trials": opts["alt_dist_trials"],
            "alt_skipped": skipped, "atol": opts["atol"], "rtol": opts["rtol"], "scale_tol": opts["scale_tol"],
            "tf32": False, "trials_run": len(plan),
            "order": "expected outputs come out of their own process only after the candidate handed over its outputs",
        }
        # What the candidate's processes get: this (JSON) and the sealed inputs file.
        job = {"kernel": kernel, "opts": opts, "device": device, "trials": plan, "perf": perf}
        state = {"phase": "starting", "verdict": None, "killed": False, "error": None, "expected": None}
        phase_s: list = []  # [phase, seconds since the candidate was forked]; for diagnosing slow evals

        def on_event(child, ev):
            if ev.get("ev") == "phase" and isinstance(ev.get("phase"), str):
                state["phase"] = ev["phase"][:200]
                if len(phase_s) < 64:
                    phase_s.append([state["phase"], round(ev["_t"] - child.started, 3)])
            elif ev.get("ev") == "isolation" and ev.get("network") in ("none", "shared"):
                res.checks["isolation"]["network"] = ev["network"]
            elif ev.get("ev") == "correctness_ready" and state["verdict"] is None:
                try:
                    if _sources_digest(problem) != sources_before:
                        # A candidate that rewrites the problem's files is cheating,
                        # whatever it hoped to gain.
                        state["verdict"] = {"ok": False, "kind": "problem_tampered",
                                            "message": "the problem's source files changed while the candidate ran"}
                    else:
                        state["verdict"] = self._judge_correctness(child, problem, opts, device, plan, inputs,
                                                                   init, perf, state)
                except ProblemError as e:
                    state["error"] = e
                phase_s.append(["compared", round(time.monotonic() - child.started, 3)])
                if state["verdict"] is not None and state["verdict"]["ok"] and perf and state["error"] is None:
                    state["phase"] = "waiting for its profile"
                    state["gate"] = "profiling"
                    child.go()
                else:
                    state["killed"] = True
                    try:
                        os.killpg(child.pid, signal.SIGKILL)
                    except OSError:
                        pass
            elif ev.get("ev") == "wall" and ev.get("mark") == "round_end" and state.get("gate") == "timing":
                # Another round of wall-clock batches only while the check fails:
                # other processes' work can inflate one round; work the events
                # miss inflates every round. The server counts the rounds and
                # answers each once, in order (anything else is ignored), so a
                # child cannot buy time with made-up events. The final verdict
                # (_finish) takes every round and the synced times from timing.json.
                rounds = state.setdefault("wall_rounds", timing.WallRounds())
                answer = rounds.answer(child.events, ev)
                if answer == "go":
                    time.sleep(0.05 * rounds.rounds)  # let a burst of other work pass; the deadline is paused
                    child.go()
                elif answer == "stop":
                    child.stop()
            elif ev.get("ev") == "timing_ready" and state.get("gate") == "profiling" and not lock.held:
                if prof is not None:
                    # The profiling process must be done: nothing else of this
                    # candidate may run on the GPU while it is timed.
                    self.progress("profiling")
                    state["runtime"] = self._collect_profile(prof, opts, frozenset({child.pid}))
                    res.checks["profile_lock"] = state["runtime"].pop("lock", None)
                    phase_s.append(["profile collected", round(time.monotonic() - child.started, 3)])
                # One timed phase per GPU at a time (gpulock.py); the wait does
                # not count against the deadline. Nor do the next candidate's
                # processes still warming up (spares.py) run beside it.
                self.progress("waiting for the GPU")
                res.checks["spares_warm_wait_s"] = round(self.launcher.wait_warm(opts["timeout_s"]), 3)
                res.checks["timing_lock"] = lock.acquire(opts["timeout_s"])
                phase_s.append(["timing lock taken", round(time.monotonic() - child.started, 3)])
                self.progress("timing")
                state["phase"] = "timing"
                state["gate"] = "timing"
                child.go()

        sources_before = _sources_digest(problem)
        # Reference child #2 computes every expected output beside the
        # candidate and holds them; it writes them only after the candidate
        # has handed over its outputs (on_event -> _judge_correctness).
        job2 = {"problem": problem, "opts": opts, "device": device, "phase": 2, "hold": True,
                "trials": list(plan) + ([C.timing_inputs_trial(opts)] if perf else [])}
        ref2 = self.launcher.start("ref", "reference", job2, inputs_fd)
        state["ref2"] = ref2
        # It loads the problem's code before any candidate code runs (a
        # candidate that rewrote the files could otherwise set its own expected
        # outputs). A child that fails to load reports it when collected.
        isolation.wait_event(ref2, "loaded", opts["timeout_s"])
        job["extra_warmup"] = state["extra_warmup"] = _RNG.randint(0, 15)
        state["profiled_calls"] = children.profiled_calls(job)
        self.progress("candidate")
        cand = self.launcher.start("cand", "candidate", job, inputs_fd, cpu_seconds=opts["timeout_s"])
        # The runtime profile runs in a second process of the same candidate,
        # beside this one (children.profile_body).
        prof = None
        if perf and opts["profile"]:
            prof = self.launcher.start("prof", "profile", job, inputs_fd, cpu_seconds=opts["timeout_s"])
        state["prof"] = prof
        # The next candidate's processes warm up while this one runs.
        self.launcher.refill()
        res.checks["isolation"] = {"pid": cand.pid, "network": "unknown", "cwd": "private temp dir",
                                   "env": "scrubbed", "prestarted": cand.prestarted}
        res.checks["phases_s"] = phase_s
        lock = gpulock.TimingLock()
        try:
            try:
                isolation.supervise(cand, opts["timeout_s"], on_event)
            except BaseException:
                isolation.finish(cand)  # never leave the candidate running once the lock is gone
                raise
            finally:
                lock.release()
            phase_s.append(["exited", round(time.monotonic() - cand.started, 3)])
            res.checks["isolation"]["warm"] = _warm_record(cand)
            if state["error"] is not None:
                raise state["error"]
            return self._finish(res, cand, state, kernel, opts, device, perf, t_start)
        finally:
            C.wipe_tree(state.get("expected"))
            state["expected"] = None
            for other in (ref2, prof):  # still running when the candidate failed early
                if other is not None:
                    if other.exit_status is None:
                        isolation.finish(other)
                    isolation.cleanup_dir(other.dir)
            isolation.cleanup_dir(cand.dir)

    def _collect_profile(self, prof, opts: dict, protect: frozenset) -> dict:
        """Lets the profiling process run its burst of profiled calls (under the
        GPU's timing lock taken shared: never while a candidate is timed) and
        waits for it; its runtime record, or why there is none."""
        shared = gpulock.TimingLock(shared=True)
        rec = None

        def left() -> float:  # one deadline for the whole process, from its start; lock waits excepted
            return max(0.05, opts["timeout_s"] - (time.monotonic() - prof.started) + waited)
        waited = 0.0
        try:
            if isolation.wait_event(prof, "profile_ready", left()):
                rec = shared.acquire(opts["timeout_s"])
                waited = rec.get("waited_s", 0.0)
                prof.go()
            isolation.supervise(prof, left(), protect=protect)
        finally:
            shared.release()
        rt = _read_json(prof.path("runtime.json"))
        if not prof.timed_out and isinstance(rt, dict) and isinstance(rt.get("activities"), list):
            return {"ok": True, "record": rt, "lock": rec}
        kind, message = _failure_of(prof, "being profiled", opts["timeout_s"])
        return {"ok": False, "kind": kind, "message": "in the second, profiled process of the candidate: " + message,
                "stderr": prof.tail()}

    def _judge_correctness(self, child, problem, opts, device, plan, inputs, init, perf, state) -> dict:
        try:
            cand_obj, cmeta = tensorio.load(child.path("candidate.mkt"), max_bytes=1 << 38)
            os.unlink(child.path("candidate.mkt"))
            if not isinstance(cand_obj, dict) or not isinstance(cand_obj.get("out"), dict):
                raise tensorio.FormatError("missing outputs")
        except (OSError, tensorio.FormatError) as e:
            return {"ok": False, "kind": "malformed_result",
                    "message": f"the candidate's output could not be read ({e})"}
        state["files"] = cmeta.get("files") if isinstance(cmeta.get("files"), list) else []
        state["devices"] = cmeta.get("devices") if isinstance(cmeta.get("devices"), dict) else {}
        # Only now, with the candidate's outputs in our hands, does any expected
        # output leave reference child #2 (the candidate waits, its outputs fixed).
        self.progress("reference")
        ref2 = state["ref2"]
        ref2.go()
        keep = frozenset({child.pid} | ({state["prof"].pid} if state.get("prof") is not None else set()))
        # The expected outputs come as a sealed in-memory file over ref2's own
        # socket, never by path: the waiting candidate can write to files.
        fd = isolation.receive_fd(ref2, opts["timeout_s"])
        try:
            self._collect_reference(ref2, {"problem": problem}, opts["timeout_s"], protect=keep)
            if fd is None:
                raise ProblemError(f"{problem}: the reference handed over no expected outputs")
            try:
                expected, _ = tensorio.load_fd(fd)
            except (OSError, tensorio.FormatError) as e:
                raise ProblemError(f"{problem}: the reference handed over no usable result ({e})") from None
        finally:
            if fd is not None:
                os.close(fd)
        state["expected"] = expected
        self.progress("compare")
        try:
            return verdict_for_trials(plan, expected, cand_obj, state["devices"], inputs, device, opts)
        finally:
            C.wipe_tree(cand_obj)  # a correct candidate's outputs are the expected ones

    def _finish(self, res, cand, state, kernel, opts, device, perf, t_start) -> dict:
        verdict = state["verdict"]
        if verdict is None:
            kind, message = _failure_of(cand, state["phase"], opts["timeout_s"])
            return res.fail(kind, message, t_start, stderr=cand.tail())
        res.max_abs_err = verdict.get("max_abs_err")
        res.checks["correctness"].update({k: verdict[k] for k in ("max_abs_err", "rel_err", "warnings")
                                          if k in verdict})
        if not verdict["ok"]:
            return res.fail(verdict["kind"], verdict["message"], t_start)
        if not perf:
            return res.ok(t_start)
        # The candidate was allowed to profile and time itself; it is now dead.
        timing_json = _read_json(cand.path("timing.json"))
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
                                "inputs": "same buffers refilled with new values before every call",
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
            res.checks["runtime"] = j
            res.uses_pytorch = j["uses_pytorch"]
            if not j["ok"]:
                problems += [(j["kind"], r) for r in j["reasons"]]
        else:
            res.checks["runtime"] = {"skipped": "test_cpu: no CUDA profile"}
        # Output of the last timed call (and of the wall batch) on known inputs.
        try:
            timed, _ = tensorio.load(cand.path("timed.mkt"), max_bytes=1 << 38)
        except (OSError, tensorio.FormatError) as e:
            return res.fail("malformed_result", f"the candidate's timed output could not be read ({e})", t_start)
        exp_last = (state["expected"] or {}).get("out", {}).get("last")
        stale = {"checked": exp_last is not None}
        if exp_last is not None:
            for key, label in (("timed_last", "the last timed call"), ("wall_last", "the last wall-clock call")):
                if key == "wall_last" and timed.get(key) is None:
                    continue
                r = C.compare_tree(exp_last, timed.get(key), opts)
                if not r["ok"]:
                    stale["ok"] = False
                    problems.append(("stale_output",
                                     f"integrity: the output of {label} is wrong after fresh values were written "
                                     f"into the same input buffers ({r['message']}); results must not be cached "
                                     f"or reused between calls"))
                    break
            stale.setdefault("ok", True)
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

    # -- baselines --

    def baseline(self, problem, options=None) -> dict:
        opts = self._options(options)
        problem = self._file(problem, "problem")
        device = self._device(opts)
        job = {"problem": problem, "opts": opts, "device": device}
        self.progress("baselines")
        # The baseline child compiles, then says timing_ready and waits: its
        # timed calls, like a candidate's, run only under the GPU's timing lock.
        lock = gpulock.TimingLock()
        lock_rec: dict = {}

        def on_event(ch, ev):
            if ev.get("ev") == "timing_ready" and not lock.held and not lock_rec:
                self.launcher.wait_warm(opts["timeout_s"])
                lock_rec.update(lock.acquire(max(opts["timeout_s"], 60) * 2))
                ch.go()
        child = isolation.spawn("base", lambda ctx: children.baseline_body(ctx, job), cut_network=False)
        try:
            try:
                isolation.supervise(child, max(opts["timeout_s"], 60) * 2, on_event)
            except BaseException:
                isolation.finish(child)
                raise
            finally:
                lock.release()
            err = _read_json(child.path("error.json"))
            out = _read_json(child.path("baseline.json"))
            if child.timed_out:
                raise ProblemError(f"{problem}: timing the baselines took more than {max(opts['timeout_s'], 60) * 2:g} s")
            if isinstance(err, dict):
                raise ProblemError(f"{problem}: {err.get('message')}")
            if not isinstance(out, dict):
                raise ProblemError(f"{problem}: the baseline child died: {_first_line(child.tail()) or 'no output'}")
            out["device"] = device
            out["timing_lock"] = lock_rec
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
            from . import decompose_check  # noqa: F401
        except ImportError as e:
            raise RequestError(f"decomposition checks unavailable (mkevolve_worker.decompose_check: {e})") from None
        if options.pop("test_cpu", False):
            options["device"] = "cpu"
        elif options.get("device") == "cpu" and not self.test_mode:
            raise RequestError("verifying a decomposition on the CPU is honoured only with --test-mode")
        timeout = float(options.get("timeout_s", 300) or 300)
        job = {"problem": problem, "decomposed": decomposed, "subproblems_dir": os.path.abspath(subproblems_dir),
               "options": options}
        child = isolation.spawn("decomp", lambda ctx: children.decomposition_body(ctx, job), cpu_seconds=timeout)
        try:
            isolation.supervise(child, timeout)
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


def _own_files(kernel: str, reported) -> list[str]:
    files = set(loader.candidate_files(kernel))
    home = os.path.dirname(os.path.abspath(kernel)) + os.sep
    for f in reported or []:
        if isinstance(f, str) and os.path.abspath(f).startswith(home) and f.endswith(".py") and os.path.isfile(f):
            files.add(os.path.abspath(f))
    return sorted(files)


def _failure_of(child, phase: str, timeout_s: float) -> tuple[str, str]:
    """Kind and message for a candidate that produced no verdict-worthy output."""
    if child.timed_out:
        return "hang", (f"no result within the {timeout_s:g} s deadline; the candidate was {phase}. Look for an "
                        f"infinite loop, a kernel that never terminates, or a deadlock")
    err = _read_json(child.path("error.json"))
    # The error file comes from the candidate's process, so it can only ever
    # describe a failure; one claiming anything else is ignored.
    if isinstance(err, dict) and isinstance(err.get("message"), str) and err.get("kind") in errors.KINDS and \
            errors.status_of(err["kind"]) not in (errors.CORRECT, errors.INCORRECT, errors.CHEATING):
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
    what = "signed-normal inputs (alternate distribution)" if t["alt"] else "random inputs from get_inputs()"
    return f" [trial {t['id']}: config {t['config']}, {what}, seed {t['seed']}]"


def verdict_for_trials(plan, expected, cand_obj, devices, inputs, device, opts) -> dict:
    import torch
    out = cand_obj["out"]
    post = cand_obj.get("post") if isinstance(cand_obj.get("post"), dict) else {}
    worst_abs, worst_rel = 0.0, 0.0
    warnings = []
    for t in plan:
        tid = t["id"]
        if tid not in expected["out"]:
            continue  # alt trial skipped by the reference
        if tid not in out:
            return {"ok": False, "kind": "malformed_result", "message": f"the candidate handed over no output for {tid}"}
        if device == "cuda":
            devs = devices.get(tid) or []
            if any(d != "cuda" for d in devs):
                return {"ok": False, "kind": "wrong_device",
                        "message": "the output is not a CUDA tensor; compute it on the GPU with your Triton kernels"
                                   + _trial_context(t), "max_abs_err": None}
        r = C.compare_tree(expected["out"][tid], out[tid], opts)
        if not r["ok"]:
            r["message"] = r["message"] + _trial_context(t)
            r.setdefault("max_abs_err", None)
            return r
        worst_abs = max(worst_abs, r.get("max_abs_err", 0.0) or 0.0)
        worst_rel = max(worst_rel, r.get("rel_err", 0.0) or 0.0)
        ref_mut = expected["mutated"].get(tid) or []
        cand_post = post.get(tid) or []
        for j, orig in enumerate(inputs[tid]):
            if not isinstance(orig, torch.Tensor) or j >= len(cand_post):
                continue
            if j < len(ref_mut) and ref_mut[j]:
                continue
            if not C.tensors_equal(cand_post[j], orig):
                return {"ok": False, "kind": "input_mutation",
                        "message": f"forward modified its input #{j} in place; the reference leaves it unchanged, "
                                   f"so write results to a new tensor" + _trial_context(t),
                        "max_abs_err": worst_abs}
    normal = [expected["out"][t["id"]] for t in plan if not t["alt"] and t["id"] in expected["out"]]
    if normal and all(C.is_constant_tree(o) for o in normal):
        warnings.append("the reference output is constant on every trial, so correctness cannot tell a no-op "
                        "kernel from a real one")
    return {"ok": True, "max_abs_err": worst_abs, "rel_err": worst_rel, "warnings": warnings}


class _Result:
    def __init__(self, opts: dict, device: str):
        self.opts = opts
        self.device = device
        self.checks: dict = {}
        self.max_abs_err = None
        self.runtime_ms = None
        self.uses_pytorch = False

    def _base(self, t_start: float) -> dict:
        return {"max_abs_err": self.max_abs_err, "runtime_ms": self.runtime_ms, "uses_pytorch": self.uses_pytorch,
                "device": self.device, "checks": self.checks, "elapsed_s": round(time.monotonic() - t_start, 3)}

    def fail(self, kind: str, message: str, t_start: float, reasons: list | None = None, stderr: str = "") -> dict:
        message = errors.redact_env_secrets(errors.shorten(message))
        out = self._base(t_start)
        out.update(status=errors.status_of(kind), kind=kind, message=message,
                   reasons=reasons or [f"{kind}: {_first_line(message)}"])
        if stderr:
            out["stderr_tail"] = errors.redact_env_secrets(stderr[-1500:])
        if out["status"] != errors.CORRECT:
            out["runtime_ms"] = None
        return out

    def ok(self, t_start: float) -> dict:
        out = self._base(t_start)
        c = self.checks.get("correctness", {})
        msg = (f"correct on {c.get('trials_run', '?')} trials over {c.get('configs', '?')} input configuration(s), "
               f"max_abs_err {self.max_abs_err:.3g}" if self.max_abs_err is not None else "correct")
        if self.runtime_ms:
            msg += f"; median {self.runtime_ms['median']:.4g} ms"
        if self.uses_pytorch:
            msg += " (uses PyTorch kernels: allowed by policy)"
        out.update(status=errors.CORRECT, kind="ok", message=msg, reasons=[])
        return out
