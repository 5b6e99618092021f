#!/usr/bin/env python3
"""A fake mkevolve worker server that speaks protocol v1 and misbehaves on command.

Used by the C++ pool tests (src/eval/pool_test.cc); it needs no torch.

Start-up behaviour comes from MKEVOLVE_WORKER_FAKE_HELLO:
  ok (default), bad_version, no_torch, no_triton, no_cuda, garbage, silent, exit.
Per request, `eval` reads directives from the kernel file, lines of the form
`# FAKE: <action> [arg]`, applied in order:
  correct [median_ms]   verdict correct (default runtime 2.0 ms)
  incorrect             verdict incorrect, kind mismatch
  hang                  never answer
  exit                  the server exits (status 3) without answering
  kill                  the server SIGKILLs itself
  garbage               write a non-JSON line on the protocol channel
  wrong_id              answer with another request id
  unknown_status        a result with status "splendid"
  no_status             a result without status
  error                 an error message instead of a result
  slow <seconds>        sleep, then continue
  until <path>          wait until <path> exists (at most 60 s): a candidate the test lets go
  progress              send two progress lines first
  grandchild <marker> [clean]
                        start a setsid, orphaned grandchild (`sleep 1000` with
                        MKEVOLVE_FAKE_GRANDCHILD=<marker> in its environment;
                        clean: without the pool's MKEVOLVE_WORKER_TOKEN)
  env                   put the server's environment in the result ("env")
  unlocked              timed without the GPU timing lock (checks.timing_lock.held false)
  no_verdict            the reference side failed: status no_verdict, kind reference_failed
  footprint <GiB> [<device GiB> [partial]]
                        report a measured footprint of that many GiB of host memory
                        (and of GPU memory; partial: measured by rule 2, not every
                        phase seen, as a candidate wrong at its first trial reports)
  oom_over <GiB>        runtime_error/oom unless the request's host_mem_limit_bytes
                        allows that many GiB (a kernel that needs that much host memory)
  spares_idle <N>       say that N idle spares are left after this eval (serve.py's
                        spares_idle: those it did not take)
  concurrency <path> [S]  count this eval in <path> (under flock) while it runs, for
                        S seconds (0.3 by default), and keep the most seen at once
                        in <path>.max
Every request is logged, one line "op kernel-or-problem", to MKEVOLVE_WORKER_FAKE_LOG
if set. `baseline` answers eager 4.0 ms and compile 2.0 ms (or what
MKEVOLVE_WORKER_FAKE_BASELINE says: "fail", "hang", "unlocked"). `footprint` answers
what MKEVOLVE_WORKER_FAKE_FOOTPRINT says: "unknown" (default), or "IN_GiB,OUT_GiB"
(a meta-device estimate of one call's inputs and outputs). `gpu_info` gives the
GPU MKEVOLVE_WORKER_FAKE_GPU_MEMORY_GB of memory when that is set. `calibrate` answers
atol 1e-3 for every trial kind of one output, counted as `concurrency` does in
MKEVOLVE_WORKER_FAKE_CALIBRATE_COUNT when that is set.
"""
import json
import os
import signal
import sys
import time

OUT = os.fdopen(os.dup(1), "w", buffering=1)
os.dup2(2, 1)  # like the real server: stray prints go to stderr


def send(obj):
    OUT.write(json.dumps(obj) + "\n")
    OUT.flush()


def log(op, what):
    path = os.environ.get("MKEVOLVE_WORKER_FAKE_LOG")
    if path:
        with open(path, "a") as f:
            f.write("%s %s\n" % (op, what))


def hang():
    while True:
        time.sleep(3600)


def hello():
    mode = os.environ.get("MKEVOLVE_WORKER_FAKE_HELLO", "ok")
    msg = {"type": "hello", "protocol": 1, "pid": os.getpid(), "python": "3.11.0",
           "torch": "0.0-fake", "triton": "0.0-fake", "cuda": True,
           "test_mode": "--test-mode" in sys.argv}
    if mode == "bad_version":
        msg["protocol"] = 99
    elif mode == "no_torch":
        msg["torch"] = None
        msg["error"] = "No module named 'torch'"
    elif mode == "no_triton":
        msg["triton"] = None
    elif mode == "no_cuda":
        msg["cuda"] = False
    elif mode == "garbage":
        OUT.write("Welcome to the fake worker!\n")
        OUT.flush()
        return
    elif mode == "silent":
        hang()
    elif mode == "exit":
        sys.stderr.write("fake worker: exiting at start as asked\n")
        sys.exit(1)
    elif mode.startswith("slow "):  # "slow S": the start takes S seconds, said in startup_s as serve.py does
        time.sleep(float(mode.split()[1]))
        msg["startup_s"] = {"preimport": float(mode.split()[1]), "total": float(mode.split()[1])}
    send(msg)


def grandchild(marker, clean):
    """Double fork + setsid, then exec `sleep` with MKEVOLVE_FAKE_GRANDCHILD=marker
    in its environment (tests find it by that). clean: also drop the pool's token."""
    pid = os.fork()
    if pid == 0:
        os.setsid()
        if os.fork() == 0:
            env = dict(os.environ)
            env["MKEVOLVE_FAKE_GRANDCHILD"] = marker
            if clean:
                env.pop("MKEVOLVE_WORKER_TOKEN", None)
            os.execve("/bin/sleep", ["sleep", "1000"], env)
        os._exit(0)
    os.waitpid(pid, 0)


def do_eval(req):
    rid = req["id"]
    kernel = req.get("kernel", "")
    log("eval", kernel)
    try:
        with open(kernel) as f:
            lines = f.read().splitlines()
    except OSError as e:
        send({"id": rid, "type": "result", "status": "compile_error", "kind": "import_error",
              "reasons": [str(e)], "message": str(e)})
        return
    result = {"id": rid, "type": "result", "status": "correct", "kind": "",
              "reasons": [], "message": "", "max_abs_err": 0.0,
              "runtime_ms": {"median": 2.0, "mean": 2.1}, "checks": {}}
    for line in lines:
        line = line.strip()
        if not line.startswith("# FAKE:"):
            continue
        parts = line[len("# FAKE:"):].split()
        action, args = parts[0], parts[1:]
        if action == "correct":
            if args:
                result["runtime_ms"] = {"median": float(args[0]), "mean": float(args[0])}
        elif action == "incorrect":
            result.update(status="incorrect", kind="mismatch", max_abs_err=0.5,
                          reasons=["output mismatch at [0, 3]: expected 1.0, got 1.5"],
                          message="output mismatch at [0, 3]: expected 1.0, got 1.5")
        elif action == "hang":
            hang()
        elif action == "exit":
            os._exit(3)
        elif action == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        elif action == "garbage":
            OUT.write("this is not json\n")
            OUT.flush()
            return
        elif action == "wrong_id":
            result["id"] = rid + 1000
        elif action == "unknown_status":
            result["status"] = "splendid"
        elif action == "no_status":
            del result["status"]
        elif action == "error":
            send({"id": rid, "type": "error", "message": "fake failure"})
            return
        elif action == "slow":
            time.sleep(float(args[0]))
        elif action == "until":  # until PATH exists (at most 60 s): a candidate the test lets go
            end = time.monotonic() + 60
            while not os.path.exists(args[0]) and time.monotonic() < end:
                time.sleep(0.02)
        elif action == "progress":
            send({"id": rid, "type": "progress", "phase": "correctness"})
            send({"id": rid, "type": "progress", "phase": "timing"})
        elif action == "grandchild":
            grandchild(args[0], len(args) > 1 and args[1] == "clean")
        elif action == "env":
            result["env"] = dict(os.environ)
            result["cwd"] = os.getcwd()
        elif action == "unlocked":
            result["checks"]["timing_lock"] = {"held": False, "waited_s": 300.0, "error": "busy"}
        elif action == "no_verdict":
            result.update(status="no_verdict", kind="reference_failed", runtime_ms=None,
                          message="problem.py: the reference died of signal 9 (SIGKILL) on trial c0t1",
                          reasons=["reference_failed: the reference died"])
        elif action == "spares_idle":
            result["spares_idle"] = int(args[0])
        elif action == "footprint":
            gib = float(args[0]) * (1 << 30)
            result["checks"]["footprint"] = {"host_peak_bytes": gib, "output_bytes": 1024, "input_bytes": 1024}
            if len(args) > 1:
                result["checks"]["footprint"]["device_peak_bytes"] = float(args[1]) * (1 << 30)
            if len(args) > 2 and args[2] == "partial":
                result["checks"]["footprint"].update(device_rule_version=2, device_complete=False)
        elif action == "oom_over":
            limit = float((req.get("options") or {}).get("host_mem_limit_bytes") or 0)
            if 0 < limit < float(args[0]) * (1 << 30):
                result.update(status="runtime_error", kind="oom", runtime_ms=None,
                              message=f"the candidate process of the candidate used more than its limit of "
                                      f"{limit / (1 << 30):.2f} GiB of host memory, and was killed",
                              reasons=["oom: over its host memory limit"])
                break
        elif action == "concurrency":
            count_concurrency(args[0], float(args[1]) if len(args) > 1 else 0.3)
    # Logged before the answer: the pool may act on the answer (another slot's
    # refill) before this process could log after it.
    log("eval_end", kernel)
    send(result)
    return True


def count_concurrency(path, seconds=0.3):
    import fcntl

    def bump(delta):
        with open(path + ".lock", "a") as lk:
            fcntl.flock(lk, fcntl.LOCK_EX)
            try:
                now = int(open(path).read() or 0) if os.path.exists(path) else 0
                now += delta
                open(path, "w").write(str(now))
                most = int(open(path + ".max").read() or 0) if os.path.exists(path + ".max") else 0
                if now > most:
                    open(path + ".max", "w").write(str(now))
            finally:
                fcntl.flock(lk, fcntl.LOCK_UN)
    bump(1)
    time.sleep(seconds)
    bump(-1)


def do_footprint(req):
    log("footprint", req.get("problem", ""))
    mode = os.environ.get("MKEVOLVE_WORKER_FAKE_FOOTPRINT", "unknown")
    if mode == "unknown":
        send({"id": req["id"], "type": "result", "method": "unknown", "error": "no meta device here"})
        return
    i, o = (float(x) * (1 << 30) for x in mode.split(","))
    send({"id": req["id"], "type": "result", "method": "meta", "input_bytes": i, "output_bytes": o,
          "param_bytes": 0})


def do_baseline(req):
    log("baseline", req.get("problem", ""))
    mode = os.environ.get("MKEVOLVE_WORKER_FAKE_BASELINE", "ok")
    if mode == "hang":
        hang()
    if mode == "fail":
        send({"id": req["id"], "type": "error", "message": "baseline exploded"})
        return
    res = {"id": req["id"], "type": "result", "eager": {"median_ms": 4.0, "mean_ms": 4.2},
           "compile": {"median_ms": 2.0, "mean_ms": 2.1}, "gpu": "Fake GPU", "torch": "0.0-fake"}
    if mode == "unlocked":
        res["timing_lock"] = {"held": False, "waited_s": 600.0, "error": "busy"}
    send(res)


def main():
    hello()
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        req = json.loads(line)
        op = req.get("op")
        rid = req.get("id")
        if op == "eval":
            log("spares", "%s %s" % (req.get("spares", "-"), req.get("kernel", "")))
            log("priority", "%s %s" % (req.get("priority", "-"), req.get("kernel", "")))
            if not do_eval(req):
                log("eval_end", req.get("kernel", ""))
        elif op == "refill":
            log("refill", "")
            send({"id": rid, "type": "result", "ok": True, "forked": ["ref", "cand", "prof"]})
        elif op == "baseline":
            do_baseline(req)
        elif op == "footprint":
            do_footprint(req)
        elif op == "calibrate":
            # One output, every trial kind at 1e-3; counted like an eval's
            # "concurrency" directive in MKEVOLVE_WORKER_FAKE_CALIBRATE_COUNT.
            log("calibrate", req.get("problem", ""))
            if os.environ.get("MKEVOLVE_WORKER_FAKE_CALIBRATE_COUNT"):
                count_concurrency(os.environ["MKEVOLVE_WORKER_FAKE_CALIBRATE_COUNT"])
            kinds = {k: {"atol": 1e-3, "runs": req.get("runs", 20)} for k in ("x1", "signed", "x3", "x0.01", "neg")}
            send({"id": rid, "type": "result", "configs": 1, "device": "cuda",
                  "outputs": {"": {"by_kind": kinds, "dtype": "float32"}}})
        elif op == "problem_check":
            log("problem_check", req.get("problem", ""))
            send({"id": req["id"], "type": "result", "ok": True, "message": "fake: the problem is sound"})
        elif op == "ping":
            log("ping", "")
            send({"id": rid, "type": "result", "ok": True})
        elif op == "gpu_info":
            log("gpu_info", "")
            gpu = {"name": "Fake GPU", "capability": [9, 0], "sm_count": 132}
            if os.environ.get("MKEVOLVE_WORKER_FAKE_GPU_MEMORY_GB"):
                gpu["memory_bytes"] = float(os.environ["MKEVOLVE_WORKER_FAKE_GPU_MEMORY_GB"]) * (1 << 30)
            send({"id": rid, "type": "result", "gpus": [gpu]})
        elif op == "check":
            log("check", req.get("kernel", ""))
            send({"id": rid, "type": "result", "clean": True, "violations": []})
        elif op == "verify_decomposition":
            log("verify_decomposition", req.get("problem", ""))
            bad = "bad" in os.path.basename(req.get("decomposed", ""))
            send({"id": rid, "type": "result", "ok": not bad,
                  "failures": ([{"file": "decomposed_problem.py", "line": 3, "rule": "mismatch",
                                 "message": "outputs differ"}] if bad else [])})
        elif op == "shutdown":
            log("shutdown", "")
            send({"id": rid, "type": "result", "ok": True})
            return
        else:
            send({"id": rid, "type": "error", "message": "unknown op %r" % op})


if __name__ == "__main__":
    main()
