#!/usr/bin/env bash
# Builds MKEvolve and runs it on a bundled example, doing as much as this
# machine allows and saying plainly what is missing.
#
#   GPU + LLM endpoint : mkevolve run examples/problems/06_mlp3.py with your LLM.
#   GPU, no LLM        : the same run driven by a HAND-WRITTEN FIXTURE session
#                        (examples/sessions/mlp3_gpu.jsonl): its kernels were
#                        written by a person, not an LLM.
#   no GPU             : the static cheat checker on the bundled kernels, then a
#                        whole run in the worker's CPU test mode on a small MLP,
#                        driven by a hand-written fixture session whose "kernels"
#                        are PyTorch stand-ins. It exercises decomposition
#                        verification, beam search, composition, the report and
#                        the solution package; its speedups mean nothing.
#
# The LLM comes from $MKEVOLVE_LLM (e.g. anthropic:claude-opus-4-5,
# openai:gpt-5, or openai:MODEL with OPENAI_BASE_URL for vLLM/SGLang/Ollama/LiteLLM),
# else from ANTHROPIC_API_KEY / OPENAI_API_KEY with a default model.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)

# Bold only on a terminal, and never with NO_COLOR set (https://no-color.org).
if [[ -t 1 && -z ${NO_COLOR:-} ]]; then
  say() { printf '\033[1mdemo:\033[0m %s\n' "$*"; }
else
  say() { printf 'demo: %s\n' "$*"; }
fi

say "checking Debian's packages (a fresh machine installs about 250 of them: about 3 minutes)"
./scripts/install-deps.sh
say "building build/mkevolve only, -O2 without debug info (about 3 minutes on 2 cores the first time, seconds after; then the run)"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build --target mkevolve -j"$(nproc)"
BIN=$ROOT/build/mkevolve

# An interpreter with torch for the worker.
PY=${MKEVOLVE_PYTHON:-}
if [[ -z $PY ]]; then
  for cand in python3 /usr/bin/python3; do
    if command -v "$cand" >/dev/null 2>&1 && "$cand" -c "import torch" >/dev/null 2>&1; then PY=$cand; break; fi
  done
fi
if [[ -z $PY ]]; then
  say "missing: no Python interpreter with torch (set MKEVOLVE_PYTHON); the demo needs one for the worker"
  exit 3
fi

GPU=0
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then GPU=1; fi
HAVE_TRITON=0
if "$PY" -c "import triton" >/dev/null 2>&1; then HAVE_TRITON=1; fi

LLM=${MKEVOLVE_LLM:-}
if [[ -z $LLM && -n ${ANTHROPIC_API_KEY:-} ]]; then LLM=anthropic:claude-opus-4-5; fi
if [[ -z $LLM && -n ${OPENAI_API_KEY:-} ]]; then LLM=openai:gpt-5; fi

STAMP=$(date +%Y%m%d-%H%M%S)
OUT=$ROOT/runs/demo-$STAMP

if [[ $GPU == 1 && $HAVE_TRITON == 1 ]]; then
  if [[ -n $LLM ]]; then
    say "GPU found; LLM: $LLM. Running MKEvolve on examples/problems/06_mlp3.py (this takes a while and spends tokens)."
    exec "$BIN" run examples/problems/06_mlp3.py --llm "$LLM" --python "$PY" --out "$OUT"
  fi
  say "GPU found, but no LLM endpoint is configured (set MKEVOLVE_LLM, ANTHROPIC_API_KEY or OPENAI_API_KEY)."
  say "Running with a HAND-WRITTEN FIXTURE session instead: its kernels were written by a person, not an LLM."
  exec "$BIN" run examples/problems/06_mlp3.py --llm "replay:examples/sessions/mlp3_gpu.jsonl" --python "$PY" \
    --out "$OUT" --iterations 2 --calls-per-iter 4 --decompose-workers 1
fi

if [[ $GPU == 0 ]]; then
  say "missing: no CUDA GPU is visible. Kernels cannot be evaluated or timed on this machine."
else
  say "missing: a GPU is visible but $PY has no Triton. Kernels cannot be evaluated here."
fi
[[ -z $LLM ]] && say "missing: no LLM endpoint is configured (set MKEVOLVE_LLM, ANTHROPIC_API_KEY or OPENAI_API_KEY)."
say "Doing what runs without a GPU:"
say "1) the static cheat checker on two bundled Triton kernels (an honest one and a PyTorch fallback):"
"$BIN" check examples/kernels/03_linear_gelu__tiled.py --python "$PY" && echo "   clean"
"$BIN" check examples/kernels/03_linear_gelu__torch_fallback.py --python "$PY" || true
say "2) a whole run in the worker's CPU TEST MODE, driven by a HAND-WRITTEN FIXTURE session whose kernels are"
say "   PyTorch stand-ins (not Triton, not an LLM's): decomposition verified for real, beam search, composition."
"$BIN" run examples/sessions/mlp_small.py --llm "replay:examples/sessions/mlp_small_cpu.jsonl" \
  --python "$PY" --test-cpu-unsafe --out "$OUT" --iterations 2 --calls-per-iter 4 --refine-every 3 \
  --decompose-workers 1 --trials 2 --perf-trials 2 --warmup 1 --timeout 120 || true
say "The run directory is $OUT (report.md, report.html, solution/)."
say "With a GPU and an LLM endpoint, run: build/mkevolve run examples/problems/06_mlp3.py --llm SPEC --out runs/mine"
