#!/usr/bin/env bash
# Proof that a restructuring changed nothing a person is shown: every run
# directory given (or found under the folders given) is snapshotted by two
# builds' report_snapshot (report.md, report.html, summary.json, the status
# line's lines, every event read into its typed record and written back), and
# the snapshots are compared byte for byte.
#
#   scripts/proof_unchanged.sh BEFORE_BUILD AFTER_BUILD DIR...
#
# BEFORE_BUILD, AFTER_BUILD: build directories that hold report_snapshot (for
# an older commit: `git worktree add`, copy tests/tools/report_snapshot.cc and
# its CMake lines in, build the report_snapshot target). Exit status 0 when
# every snapshot is identical, 1 when any differs (the differences are shown).
set -euo pipefail
if [[ $# -lt 3 ]]; then
  sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
fi
before="$1/report_snapshot"
after="$2/report_snapshot"
shift 2
for b in "$before" "$after"; do
  [[ -x "$b" ]] || { echo "proof_unchanged: $b: not built (cmake --build DIR --target report_snapshot)" >&2; exit 2; }
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mapfile -t runs < <(for d in "$@"; do find "$d" -name events.jsonl -printf '%h\n'; done | sort -u)
same=0 differ=0 events=0
for r in "${runs[@]}"; do
  k=$(printf '%s' "$r" | md5sum | cut -c1-12)
  "$before" "$r" "$work/$k.before" >/dev/null 2>&1 || true
  "$after" "$r" "$work/$k.after" >/dev/null 2>&1 || true
  events=$((events + $(wc -l < "$r/events.jsonl")))
  if diff -r "$work/$k.before" "$work/$k.after" > "$work/$k.diff"; then
    same=$((same + 1))
  else
    differ=$((differ + 1))
    echo "DIFFERS: $r"
    head -20 "$work/$k.diff"
  fi
done
echo "proof_unchanged: ${#runs[@]} run directories ($events events): $same identical, $differ differ"
[[ $differ -eq 0 ]]
