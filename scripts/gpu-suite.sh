#!/usr/bin/env bash
# The whole GPU test suite and the benchmarks, in one run on a GPU machine.
#
#   scripts/gpu-suite.sh            (from anywhere; it cds to the repository root)
#
# Stages (each under its own time limit; later stages run even if one fails):
#   build     use $MKEVOLVE_BIN or build/mkevolve if it runs here, else build it with CMake
#   pytest    python3 -m pytest tests/gpu                (the standalone GPU tests)
#   manifest  mkevolve eval --json over every examples/kernels/manifest.json entry,
#             one pool per problem, checked by scripts/check_manifest.py
#   repeat    the same kernels measured twice, each time with fresh baselines and
#             verdicts: speedups must agree within 2%
#   bench     scripts/bench_eval_throughput.py: evaluations per minute, one pool
#             versus a fresh Python process per candidate
#
# Environment: OUT (results folder; default build-gpu-suite/), MKEVOLVE_PYTHON
# (default python3), MKEVOLVE_BIN, GPU_SUITE_STAGES (default "build pytest manifest
# repeat bench"). TF32 is off everywhere (the worker and the tests turn it off).
# Exit status: 0 when every stage that ran passed, 1 otherwise.
#
# Binary: the GPU machine may lack the -dev headers the build needs (curl, ssl,
# toml++), so build here and carry it: `cmake --build build --target mkevolve`, then
# run with carry ["build/mkevolve"] (a Debian 12 build runs on Ubuntu 24.04).
# Time: all stages take roughly 8-10 minutes on one H200 (pytest about 1). Where
# one command may run at most 10 minutes, split it in two calls:
#   GPU_SUITE_STAGES="build pytest manifest" scripts/gpu-suite.sh
#   GPU_SUITE_STAGES="build repeat bench" scripts/gpu-suite.sh
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
# Everything is written under WORK; when $OUT is set (the device tool brings back
# at most 8 files from it), the main files and a tarball of the rest go there.
if [ -n "${OUT:-}" ]; then
  WORK=$(mktemp -d /tmp/gpu-suite.XXXXXX)
else
  WORK=$ROOT/build-gpu-suite
  mkdir -p "$WORK"
fi
OUTDIR=$WORK
CACHES=$(mktemp -d /tmp/gpu-suite-cache.XXXXXX)   # verdict and baseline caches, never kept
PY=${MKEVOLVE_PYTHON:-python3}
export MKEVOLVE_PYTHON=$PY
export MKEVOLVE_HOME=$ROOT          # the binary finds worker/ and src/prompts here
export PYTHONUNBUFFERED=1
STAGES=${GPU_SUITE_STAGES:-build pytest manifest repeat bench}
SUMMARY=$OUTDIR/summary.txt
: >"$SUMMARY"
FAILED=0

note() { printf '%s\n' "$*" | tee -a "$SUMMARY"; }
stage_result() {  # name rc seconds
  local verdict=PASS
  [ "$2" -ne 0 ] && verdict="FAIL (exit $2)" && FAILED=1
  note "$(printf 'stage %-9s %-14s %4ss' "$1" "$verdict" "$3")"
}
want() { [[ " $STAGES " == *" $1 "* ]]; }

note "gpu-suite $(date -u +%Y-%m-%dT%H:%M:%SZ)  $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)"
note "$("$PY" -c 'import sys, torch, triton; print("python", sys.version.split()[0], "torch", torch.__version__, "triton", triton.__version__)' 2>&1 | tail -1)"

# --- build -------------------------------------------------------------------
BIN=${MKEVOLVE_BIN:-}
if want build || want manifest || want repeat || want bench; then
  t0=$SECONDS
  rc=0
  if [ -z "$BIN" ]; then
    for cand in build/mkevolve build-gpu-suite/cmake/mkevolve; do
      if [ -x "$cand" ] && "$cand" --help >/dev/null 2>&1; then BIN=$ROOT/$cand; break; fi
    done
  fi
  if [ -z "$BIN" ]; then
    note "build: no runnable build/mkevolve here; building with CMake (log: build.log)"
    gen=(); command -v ninja >/dev/null && gen=(-G Ninja)
    { cmake -S . -B build-gpu-suite/cmake "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=OFF &&
      cmake --build build-gpu-suite/cmake --target mkevolve -j"$(nproc)"; } >"$OUTDIR/build.log" 2>&1
    rc=$?
    [ $rc -eq 0 ] && BIN=$ROOT/build-gpu-suite/cmake/mkevolve
    [ $rc -ne 0 ] && note "build failed; last lines:" && tail -n 15 "$OUTDIR/build.log" | tee -a "$SUMMARY"
  fi
  [ -n "$BIN" ] && note "binary: $BIN"
  stage_result build $rc $((SECONDS - t0))
fi

# --- pytest ------------------------------------------------------------------
if want pytest; then
  t0=$SECONDS
  MK_GPU_RESULTS_DIR=$OUTDIR timeout 420 "$PY" -m pytest -q -p no:cacheprovider tests/gpu >"$OUTDIR/pytest.log" 2>&1
  rc=$?
  tail -n 25 "$OUTDIR/pytest.log"
  [ -f "$OUTDIR/examples_gpu_summary.txt" ] && cat "$OUTDIR/examples_gpu_summary.txt"
  note "pytest: $(tail -n 1 "$OUTDIR/pytest.log")"
  stage_result pytest $rc $((SECONDS - t0))
fi

# --- manifest: every example through `mkevolve eval` --------------------------
if want manifest; then
  t0=$SECONDS
  if [ -z "$BIN" ]; then
    note "manifest: skipped, no mkevolve binary"
    stage_result manifest 1 0
  else
    export XDG_CACHE_HOME=$CACHES/manifest   # fresh verdicts and baselines
    : >"$OUTDIR/manifest_results.jsonl"
    # One `mkevolve eval` per (problem, deadline) group, so each pool evaluates many kernels.
    "$PY" - "$ROOT/examples/kernels/manifest.json" >"$OUTDIR/manifest_groups.txt" <<'PYEOF'
import json, sys
groups = {}
for e in json.load(open(sys.argv[1]))["kernels"]:
    groups.setdefault((e["problem"], int(e.get("timeout_s", 120))), []).append(e["kernel"])
for (problem, timeout), kernels in groups.items():
    print(problem, timeout, " ".join(kernels))
PYEOF
    while read -r problem timeout kernels; do
      args=()
      for k in $kernels; do args+=(--kernel "$k"); done
      echo "== mkevolve eval --problem $problem (${#args[@]} / 2 kernels, --timeout $timeout)"
      timeout 300 "$BIN" eval --json --no-cache --problem "$problem" --timeout "$timeout" "${args[@]}" \
        >>"$OUTDIR/manifest_results.jsonl" 2>>"$OUTDIR/manifest_stderr.log" </dev/null
      echo "   exit $?"
    done <"$OUTDIR/manifest_groups.txt"
    "$PY" scripts/check_manifest.py --json-out "$OUTDIR/manifest_check.json" "$OUTDIR/manifest_results.jsonl" \
      | tee "$OUTDIR/manifest_check.txt"
    rc=${PIPESTATUS[0]}
    tail -n 1 "$OUTDIR/manifest_check.txt" >>"$SUMMARY"
    stage_result manifest "$rc" $((SECONDS - t0))
  fi
fi

# --- repeat: speedups measured twice agree within 2% --------------------------
if want repeat; then
  t0=$SECONDS
  if [ -z "$BIN" ]; then
    note "repeat: skipped, no mkevolve binary"
    stage_result repeat 1 0
  else
    REPEAT_SET=(
      "examples/problems/03_linear_gelu.py examples/kernels/03_linear_gelu__tiled.py"
      "examples/problems/05_layernorm_residual.py examples/kernels/05_layernorm_residual__rowwise.py"
    )
    for run in 1 2; do
      : >"$OUTDIR/repeat_$run.jsonl"
      for pair in "${REPEAT_SET[@]}"; do
        read -r problem kernel <<<"$pair"
        # A fresh cache folder per run: both runs measure candidate and baselines anew.
        XDG_CACHE_HOME=$CACHES/repeat-$run timeout 200 "$BIN" eval --json --no-cache \
          --problem "$problem" --kernel "$kernel" >>"$OUTDIR/repeat_$run.jsonl" 2>>"$OUTDIR/repeat_stderr.log" </dev/null
      done
    done
    "$PY" - "$OUTDIR/repeat_1.jsonl" "$OUTDIR/repeat_2.jsonl" <<'PYEOF' | tee "$OUTDIR/repeat.txt"
import json, sys
from pathlib import Path
def load(p):
    out = {}
    for line in open(p):
        if line.startswith("{"):
            o = json.loads(line)
            out[Path(o["kernel"]).stem] = o
    return out
a, b = load(sys.argv[1]), load(sys.argv[2])
bad = 0
print(f"{'kernel':40} {'base':8} {'run 1':>8} {'run 2':>8} {'diff':>7}  verdict")
for name in sorted(set(a) | set(b)):
    for base in ("eager", "compile"):
        s1 = ((a.get(name) or {}).get("speedup") or {}).get(base)
        s2 = ((b.get(name) or {}).get("speedup") or {}).get(base)
        if not s1 or not s2:
            print(f"{name:40} {base:8} {str(s1):>8} {str(s2):>8} {'-':>7}  MISSING")
            bad += 1
            continue
        diff = abs(s1 - s2) / max(s1, s2)
        ok = diff <= 0.02
        bad += not ok
        print(f"{name:40} {base:8} {s1:8.3f} {s2:8.3f} {100 * diff:6.2f}%  {'ok' if ok else 'OVER 2%'}")
print(f"repeatability: {'PASS' if bad == 0 else 'FAIL'} ({bad} pairs missing or over 2%)")
sys.exit(1 if bad else 0)
PYEOF
    rc=${PIPESTATUS[0]}
    tail -n 1 "$OUTDIR/repeat.txt" >>"$SUMMARY"
    stage_result repeat "$rc" $((SECONDS - t0))
  fi
fi

# --- bench: evaluation throughput ----------------------------------------------
if want bench; then
  t0=$SECONDS
  if [ -z "$BIN" ]; then
    note "bench: skipped, no mkevolve binary"
    stage_result bench 1 0
  else
    # Reuses the baselines the manifest stage measured (no clock includes baselines).
    timeout 400 "$PY" scripts/bench_eval_throughput.py --mkevolve "$BIN" --python "$PY" \
      --cache-home "$CACHES/manifest" --json-out "$OUTDIR/throughput.json" 2>&1 | tee "$OUTDIR/throughput.txt"
    rc=${PIPESTATUS[0]}
    grep -E '^(pool|fresh|ratio|NOT A|verdicts differ)' "$OUTDIR/throughput.txt" >>"$SUMMARY"
    stage_result bench "$rc" $((SECONDS - t0))
  fi
fi

echo
echo "==================== gpu-suite summary ===================="
cat "$SUMMARY"
if [ -n "${OUT:-}" ]; then
  mkdir -p "$OUT"
  for f in summary.txt pytest.log examples_gpu.json manifest_results.jsonl manifest_check.txt repeat.txt throughput.json; do
    [ -f "$WORK/$f" ] && cp "$WORK/$f" "$OUT/"
  done
  tar -czf "$OUT/suite-logs.tgz" -C "$WORK" . 2>/dev/null
  echo "results under $OUT (everything in suite-logs.tgz)"
else
  echo "results under $WORK"
fi
rm -rf "$CACHES"
exit $FAILED
