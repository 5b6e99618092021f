"""Command line: `python -m mkevolve_worker {serve,eval,check,gpu-info}`.

serve     the protocol server the C++ pool starts (docs/ARCHITECTURE.md)
eval      one evaluation in this process, through the same fork machinery
check     static checks only (no torch needed)
gpu-info  what the GPU probe child sees

Exit statuses follow src/cli/registry.h: 0 ok (correct / clean), 1 a "no"
answer (incorrect, cheating, violations), 2 bad usage or input, 3 something
missing on this machine (torch, GPU).
"""

from __future__ import annotations

import argparse
import json
import sys

EXIT_OK, EXIT_NO, EXIT_USAGE, EXIT_MISSING = 0, 1, 2, 3


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m mkevolve_worker", description="MKEvolve's PyTorch/Triton worker")
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("serve", help="JSON-lines protocol server on stdin/stdout")
    s.add_argument("--test-mode", action="store_true", help="accept test-only options (test_cpu)")
    s.add_argument("--no-spares", action="store_true",
                   help="fork each candidate's processes on demand instead of keeping warm spares")
    s.add_argument("--sandbox", choices=("best-effort", "require", "off"),
                   help="the candidates' sandbox (default: $MKEVOLVE_SANDBOX, else best-effort; docs/EVAL.md)")

    e = sub.add_parser("eval", help="evaluate one candidate against a problem")
    e.add_argument("--problem", required=True)
    e.add_argument("--kernel", required=True)
    e.add_argument("--json", action="store_true", help="print the result object as JSON")
    e.add_argument("--trials", type=int)
    e.add_argument("--candidate-first-trials", type=int)
    e.add_argument("--alt-dist-trials", type=int)
    e.add_argument("--atol", type=float)
    e.add_argument("--rtol", type=float)
    e.add_argument("--seed", type=int)
    e.add_argument("--warmup", type=int)
    e.add_argument("--perf-trials", type=int)
    e.add_argument("--timeout", type=float, dest="timeout_s")
    e.add_argument("--no-perf", action="store_true", help="correctness only")
    e.add_argument("--baselines", action="store_true", help="also time eager and torch.compile")
    e.add_argument("--allow-pytorch", action="store_true", help="Swap's policy: PyTorch kernels may pass")
    e.add_argument("--test-mode", action="store_true", help=argparse.SUPPRESS)
    e.add_argument("--test-cpu", action="store_true", help=argparse.SUPPRESS)
    e.add_argument("--sandbox", choices=("best-effort", "require", "off"),
                   help="the candidate's sandbox (default: $MKEVOLVE_SANDBOX, else best-effort)")

    c = sub.add_parser("check", help="static checks of a candidate file")
    c.add_argument("kernel")
    c.add_argument("--allow-pytorch", action="store_true")
    c.add_argument("--json", action="store_true")

    sub.add_parser("gpu-info", help="GPUs as the worker sees them")
    return p


def _eval(args) -> int:
    from .serve import preimport
    from . import isolation
    info = preimport()
    if not info["torch"]:
        print(f"error: {info['error']}", file=sys.stderr)
        return EXIT_MISSING
    from .evaluate import Evaluator, ProblemError, RequestError
    from . import sandbox, spares
    isolation.become_supervisor()
    try:
        sandbox.configure(args.sandbox, args.test_mode, spares.Launcher.triton_cache())
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_USAGE
    opts = {k: v for k, v in {
        "trials": args.trials, "candidate_first_trials": args.candidate_first_trials,
        "alt_dist_trials": args.alt_dist_trials, "atol": args.atol, "rtol": args.rtol, "seed": args.seed,
        "warmup": args.warmup, "perf_trials": args.perf_trials, "timeout_s": args.timeout_s}.items() if v is not None}
    opts.update(perf=not args.no_perf, baselines=args.baselines, allow_pytorch=args.allow_pytorch,
                test_cpu=args.test_cpu)
    ev = Evaluator(test_mode=args.test_mode)
    try:
        res = ev.evaluate(args.problem, args.kernel, opts)
    except RequestError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_MISSING if "no CUDA GPU" in str(e) or "unavailable" in str(e) else EXIT_USAGE
    except sandbox.SandboxError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_MISSING
    except ProblemError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_USAGE
    finally:
        isolation.kill_descendants(spares_too=True)
        isolation.cleanup_dir(isolation.base_tmp())
    if args.json:
        from .protocol import dumps
        print(dumps(res))
    else:
        print(f"status:      {res['status']} ({res['kind']})")
        if res.get("max_abs_err") is not None:
            print(f"max_abs_err: {res['max_abs_err']:.3g}")
        if res.get("runtime_ms"):
            print(f"runtime:     {res['runtime_ms']['median']:.4g} ms median, {res['runtime_ms']['mean']:.4g} ms mean")
        for k, v in (res.get("baseline_ms") or {}).items():
            if v:
                print(f"{k + ':':<12} {v['median']:.4g} ms median")
        print(res["message"])
    return EXIT_OK if res["status"] == "correct" else EXIT_NO


def _check(args) -> int:
    from .evaluate import Evaluator, RequestError, _violation_line
    try:
        res = Evaluator().check(args.kernel, args.allow_pytorch)
    except RequestError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_USAGE if "no such file" in str(e) else EXIT_MISSING
    if args.json:
        print(json.dumps(res))
    else:
        for v in res["violations"]:
            print(_violation_line(v))
    return EXIT_OK if res["clean"] else EXIT_NO


def _gpu_info() -> int:
    from .serve import preimport
    info = preimport()
    if not info["torch"]:
        print(f"error: {info['error']}", file=sys.stderr)
        return EXIT_MISSING
    from . import isolation
    from .evaluate import Evaluator
    isolation.become_supervisor()
    try:
        print(json.dumps(Evaluator().gpu_info(), indent=2))
    finally:
        isolation.cleanup_dir(isolation.base_tmp())
    return EXIT_OK


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    from .serve import drop_cwd_from_path
    drop_cwd_from_path()
    if args.cmd == "serve":
        from .serve import main as serve_main
        return serve_main(args.test_mode, spares=not args.no_spares, sandbox_mode=args.sandbox)
    if args.cmd == "eval":
        if args.test_cpu and not args.test_mode:
            print("error: --test-cpu is honoured only with --test-mode", file=sys.stderr)
            return EXIT_USAGE
        return _eval(args)
    if args.cmd == "check":
        return _check(args)
    return _gpu_info()


if __name__ == "__main__":
    sys.exit(main())
