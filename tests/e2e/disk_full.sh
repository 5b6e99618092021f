#!/usr/bin/env bash
# Issue 14, finding 9: the disk fills part-way through a run. A real full disk:
# the run directory lies on a small tmpfs (mounted in a private mount namespace,
# so nothing outside this test sees it) that a filler file has almost filled,
# leaving about half of what an uninterrupted run writes.
#
# The run must stop at its first failed write with exit 3, naming the file and
# giving the resume command; no candidate is charged for it (no io_error verdict
# in the log). Once space is freed, `run --resume DIR` must finish with the
# uninterrupted run's solution and decisions, sending only the LLM requests whose
# replies it had not stored. The LLM is the exec: provider answering from a
# recording of the hand-written fixture session examples/sessions/mlp_small_cpu.jsonl.
set -uo pipefail
if [[ -z ${MK_DISK_FULL_NS:-} ]]; then
  # Re-run inside a private mount namespace, where mounting a tmpfs is allowed
  # to root (CAP_SYS_ADMIN); elsewhere there is no full disk to make.
  if command -v unshare >/dev/null && unshare -m --propagation private true 2>/dev/null; then
    exec unshare -m --propagation private env MK_DISK_FULL_NS=1 bash "$0" "$@"
  fi
  echo "skip: cannot make a private mount namespace here (unshare -m needs CAP_SYS_ADMIN)"
  exit 0
fi
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.bash" "$@"
need_torch

source "$REPO/tests/e2e/lib/exec_session.bash"

MK_TEST_CALL_LOG=$T/base.calls "$BIN" run "$PROBLEM" --out base "${ARGS[@]}" >base.out 2>&1
rc=$?
if [[ $rc -ne 0 ]]; then fail "uninterrupted run: exit $rc"; sed 's/^/     | /' base.out | tail -20; exit 1; fi
base_sent=$(sent base.calls)
need_kb=$(du -sk base | cut -f1)
pass "uninterrupted run: $base_sent LLM requests, ${need_kb} KiB written"

# One attempt: a fresh tmpfs with PCT% of what the run writes left free.
attempt() {
  local pct=$1 d=$T/small$1
  mkdir -p "$d"
  if ! mount -t tmpfs -o size=$((need_kb * 2 + 1024))k tmpfs "$d" 2>mount.err; then
    echo "skip: cannot mount a tmpfs here: $(cat mount.err)"; exit 0
  fi
  mounts+=("$d")
  local avail_kb
  avail_kb=$(df -k --output=avail "$d" | tail -1 | tr -d ' ')
  dd if=/dev/zero of="$d/filler" bs=1k count=$((avail_kb - need_kb * pct / 100)) status=none 2>/dev/null
  echo "  -- $pct%: $(df -k --output=avail "$d" | tail -1 | tr -d ' ') KiB free of the ${need_kb} KiB the run writes"
  MK_TEST_CALL_LOG=$T/full$pct.calls "$BIN" run "$PROBLEM" --out "$d/run" "${ARGS[@]}" >full$pct.out 2>&1
  local rc=$?
  cp "$d/run/events.jsonl" "$T/events$pct.jsonl" 2>/dev/null  # for a post-mortem (MKEVOLVE_TEST_KEEP=1)
  if [[ $rc -eq 0 ]]; then
    echo "     it fit (the run wrote less than measured); nothing to check at $pct%"
    return
  fi
  [[ $rc -eq 3 ]] && pass "$pct%: the run stops with exit 3 when the disk is full" || {
    fail "$pct%: exit $rc, wanted 3"; sed 's/^/     | /' full$pct.out | tail -20; }
  grep -qE "small$pct/run(/[^ ]+)?" full$pct.out && pass "$pct%: the message names the file or the run directory" || {
    fail "$pct%: no file of the run directory named"; sed 's/^/     | /' full$pct.out | tail -10; }
  grep -qE "No space left|space" full$pct.out && pass "$pct%: the message says the disk is full" \
    || fail "$pct%: no word of the full disk"
  if [[ -f $d/run/config.json ]]; then
    grep -q -- "--resume" full$pct.out && pass "$pct%: the message gives the resume command" \
      || fail "$pct%: no resume command printed"
  fi
  if [[ -f $d/run/events.jsonl ]] && grep -q '"io_error"' "$d/run/events.jsonl"; then
    fail "$pct%: an io_error verdict was logged: a harness failure charged to a candidate"
  else
    pass "$pct%: no candidate was charged for the failed write"
  fi
  if grep -q '"status": *"finished"' "$d/run/summary.json" 2>/dev/null || \
     grep -qE '"type":"run_end".*"result":"(ok|no_correct)"' "$d/run/events.jsonl" 2>/dev/null; then
    fail "$pct%: the stopped run is recorded as finished"
  else
    pass "$pct%: the stopped run is not recorded as finished"
  fi
  local cached
  cached=$(cache_entries "$d/run")
  echo "     stopped after $(sent full$pct.calls) requests sent, $cached replies stored"
  rm -f "$d/filler"
  if [[ ! -f $d/run/config.json ]]; then
    # Stopped before the run directory was made: a fresh start is the way on.
    rm -rf "$d/run"
    cached=0
    MK_TEST_CALL_LOG=$T/resume$pct.calls "$BIN" run "$PROBLEM" --out "$d/run" "${ARGS[@]}" >resume$pct.out 2>&1
  else
    MK_TEST_CALL_LOG=$T/resume$pct.calls "$BIN" run --resume "$d/run" --python "$PY" -q >resume$pct.out 2>&1
  fi
  rc=$?
  if [[ $rc -ne 0 ]]; then fail "$pct%: resume after freeing space: exit $rc"; sed 's/^/     | /' resume$pct.out | tail -15
    return; fi
  pass "$pct%: resume after freeing space"
  [[ "$(py_files base)" == "$(py_files "$d/run")" ]] && pass "$pct%: same solution files as the uninterrupted run" \
    || { fail "$pct%: solution files differ"; diff <(py_files base) <(py_files "$d/run") | head -5; }
  cmp -s <(shape base) <(shape "$d/run") && pass "$pct%: same events and decisions" \
    || { fail "$pct%: events differ"; diff <(shape base) <(shape "$d/run") | head -10; }
  local again
  again=$(sent resume$pct.calls)
  [[ $again -eq $((base_sent - cached)) ]] && pass "$pct%: the resume sent only the $again requests without a stored reply" \
    || fail "$pct%: the resume sent $again requests; $base_sent - $cached stored = $((base_sent - cached)) expected"
}
mounts=()
trap 'for m in "${mounts[@]}"; do umount -l "$m" 2>/dev/null; done; [[ -n ${MKEVOLVE_TEST_KEEP:-} ]] || rm -rf "$T"' EXIT
# Levels spread over the run: start-up, decomposition, each iteration, the final package.
for pct in ${MK_DISK_FULL_LEVELS:-2 5 10 15 20 30 45}; do attempt "$pct"; done
if [[ $fails -ne 0 ]]; then echo "$fails disk-full check(s) failed"; exit 1; fi
echo "all disk-full checks passed"
