#!/usr/bin/env bash
# A REAL one-node Slurm cluster (Debian's slurm-wlm and munge) runs
# docs/slurm/mkevolve-array.sbatch as a 2-task job array over a 2-problem suite
# (CPU worker, a hand-written exec: LLM), both shards writing into one
# directory; bench-report then finds every problem exactly once. Needs root (the
# daemons) and the slurm binaries; otherwise prints SKIPPED and exits 0.
# slurmctld/slurmd are always stopped on exit; munged is stopped only if this
# script started it.
set -uo pipefail
BIN=${1:?usage: slurm.sh path/to/mkevolve}
BIN=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")
PY=${MKEVOLVE_TEST_PYTHON:-/usr/bin/python3}
REPO=$(pwd)
for b in slurmctld slurmd sbatch sinfo munged; do
  if ! command -v "$b" >/dev/null 2>&1 && [[ ! -x /usr/sbin/$b ]]; then
    echo "SKIPPED: $b is not installed (apt-get install slurm-wlm munge)"; exit 0
  fi
done
if [[ $(id -u) -ne 0 ]]; then echo "SKIPPED: the Slurm daemons need root"; exit 0; fi
if ! "$PY" -c 'import torch' 2>/dev/null; then echo "SKIPPED: $PY has no torch (the CPU worker needs it)"; exit 0; fi
export PATH=$PATH:/usr/sbin

T=$(mktemp -d /tmp/mkevolve-slurm.XXXXXX)
chmod 755 "$T"
CTLD_PID= SLURMD_PID= MUNGED_STARTED=
cleanup() {
  [[ -n $SLURMD_PID ]] && kill "$SLURMD_PID" 2>/dev/null
  [[ -n $CTLD_PID ]] && kill "$CTLD_PID" 2>/dev/null
  for p in $SLURMD_PID $CTLD_PID; do
    for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$p" 2>/dev/null
  done
  if [[ -n $MUNGED_STARTED ]]; then
    # Found by its command line, which names this run's folder: the daemon runs
    # as user munge, which cannot write its pid file into $T (root's, 755).
    for p in $(pgrep -f -- "munged --pid-file=$T/munged.pid"); do
      kill "$p" 2>/dev/null
      for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
      kill -9 "$p" 2>/dev/null
    done
  fi
  rm -rf "$T"
}
trap cleanup EXIT
fails=0
pass() { echo "ok   $1"; }
fail() { echo "FAIL $1"; fails=$((fails + 1)); }
die() { echo "FAIL $1"; for f in "$T"/log/*.log; do echo "--- $f"; tail -20 "$f"; done; exit 1; }

# munge: a key, and the daemon (as user munge) unless one runs already.
if [[ ! -f /etc/munge/munge.key ]]; then
  mkdir -p /etc/munge
  dd if=/dev/urandom of=/etc/munge/munge.key bs=1 count=1024 status=none
  chown munge:munge /etc/munge/munge.key 2>/dev/null; chmod 0400 /etc/munge/munge.key
fi
if ! munge -n </dev/null >/dev/null 2>&1; then
  mkdir -p /run/munge && chown munge:munge /run/munge 2>/dev/null
  runuser -u munge -- munged --pid-file="$T/munged.pid" 2>"$T/munged.err" ||
    { echo "FAIL could not start munged: $(cat "$T/munged.err")"; exit 1; }
  MUNGED_STARTED=1
  for _ in $(seq 50); do munge -n </dev/null >/dev/null 2>&1 && break; sleep 0.1; done
fi
munge -n </dev/null | unmunge >/dev/null 2>&1 && pass "munge works" || die "munge credentials do not verify"

# The cluster: this host, its CPUs, private ports and state.
HOST=$(hostname -s)
free_port() { "$PY" -c 'import socket; s=socket.socket(); s.bind(("",0)); print(s.getsockname()[1])'; }
CPORT=$(free_port); DPORT=$(free_port)
while [[ $DPORT == "$CPORT" ]]; do DPORT=$(free_port); done
mkdir -p "$T"/{state,spool,log}
cat >"$T/slurm.conf" <<CONF
ClusterName=mktest
SlurmctldHost=$HOST
SlurmctldPort=$CPORT
SlurmdPort=$DPORT
SlurmUser=root
AuthType=auth/munge
StateSaveLocation=$T/state
SlurmdSpoolDir=$T/spool
SlurmctldPidFile=$T/slurmctld.pid
SlurmdPidFile=$T/slurmd.pid
SlurmctldLogFile=$T/log/slurmctld.log
SlurmdLogFile=$T/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
MpiDefault=none
MailProg=/bin/true
SlurmctldTimeout=30
SlurmdTimeout=30
NodeName=$HOST CPUs=$(nproc) State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
CONF
export SLURM_CONF=$T/slurm.conf
slurmctld -D -c -f "$SLURM_CONF" >"$T/log/slurmctld.out" 2>&1 &
CTLD_PID=$!
slurmd -D -f "$SLURM_CONF" >"$T/log/slurmd.out" 2>&1 &
SLURMD_PID=$!
ready=
for _ in $(seq 60); do
  if [[ $(timeout 5 sinfo -h -N -o '%T' 2>/dev/null) == idle* ]]; then ready=1; break; fi
  sleep 0.5
done
[[ -n $ready ]] && pass "one-node cluster up ($HOST, $(nproc) CPUs, ports $CPORT/$DPORT)" ||
  die "the node did not become idle within 30 s: $(timeout 5 sinfo -N 2>&1)"

# The suite and the LLM (as in tests/e2e/bench.sh).
W=$T/work
source "$REPO/tests/e2e/lib/scale_suite.bash"
write_scale_suite "$W/suite"
cat >"$W/llm.sh" <<'SH'
#!/bin/sh
n=${MKEVOLVE_TASK%%_*}
printf '```python file=kernel.py\nimport torch\nimport torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n    def __init__(self):\n        super().__init__()\n\n    def forward(self, x):\n        return torch.clamp(x, min=0) * %s\n```\n' "$n"
SH
chmod +x "$W/llm.sh"
chmod -R a+rX "$T"

export HOME=$W/home XDG_CACHE_HOME=$W/cache MKEVOLVE="$BIN" SUITE="$W/suite" OUT="$W/out" METHOD=parallel
export MKEVOLVE_ARGS="--llm exec:$W/llm.sh --iterations 1 --calls-per-iter 2 --trials 1 --perf-trials 2 --warmup 1 --timeout 120 --python $PY --test-cpu-unsafe"
mkdir -p "$HOME"
if timeout 150 sbatch --wait --array=0-1 --chdir="$W" --output="$W/task-%a.out" --time=5 \
     "$REPO/docs/slurm/mkevolve-array.sbatch" >"$T/sbatch.out" 2>&1; then
  pass "sbatch --array=0-1 --wait of docs/slurm/mkevolve-array.sbatch"
else
  fail "sbatch: $(cat "$T/sbatch.out")"
  for f in "$W"/task-*.out; do echo "--- $f"; tail -20 "$f"; done
fi
for a in 0 1; do
  grep -q "shard $a/2" "$W/task-$a.out" 2>/dev/null && pass "array task $a ran shard $a/2" ||
    { fail "array task $a"; tail -20 "$W/task-$a.out" 2>/dev/null; }
done
if timeout 60 "$BIN" bench-report "$W/out" >"$T/report.out" 2>&1; then pass "bench-report of the array's directory"
else fail "bench-report: $(tail -5 "$T/report.out")"; fi
for n in 1 2; do
  c=$(grep -c "^parallel,level1-${n}_Scale-" "$W/out/report.csv" 2>/dev/null)
  [[ $c -eq 1 ]] && pass "problem ${n}_Scale reported exactly once" || fail "problem ${n}_Scale reported $c times"
done
s=$(find "$W/out" -name summary.json | wc -l)
[[ $s -eq 2 ]] && pass "one summary.json per problem" || fail "summaries: $s"

# Nothing is left running once this script ends (the cleanup on exit stops
# the daemons): checked here by stopping them and looking.
cleanup_daemons_now() {
  trap - EXIT
  cleanup
  mkdir -p "$T"  # cleanup removed it; nothing else needs it
  local left
  left=$(pgrep -f -- "$T" || true)
  if [[ -n $left ]]; then fail "processes left running: $(ps -o pid=,args= -p $left | head -3)"; else pass "no daemon left running"; fi
  rm -rf "$T"
}
cleanup_daemons_now

[[ $fails -eq 0 ]] || { echo "$fails slurm e2e check(s) failed"; exit 1; }
echo "all slurm e2e checks passed"
