#!/usr/bin/env bash
# What a new user reads first: every command's help fits 80 columns, groups its
# options, shows examples and lists its exit statuses, with no parser notation
# ("FLOAT:FLOAT in [1e-09 - 1]"); a mistyped flag gets the nearest flag, as a
# mistyped command gets the nearest command; flags that contradict each other
# are refused, naming the conflict. No worker, GPU or LLM needed.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.bash" "$@"
need_binary

wide() { awk 'length($0) > 80 { print FILENAME ":" FNR ": " length($0) " columns" }' "$@"; }
"$BIN" --help >top.txt 2>&1
[[ -z $(wide top.txt) ]] && pass "mkevolve --help fits 80 columns" || { fail "mkevolve --help is wider than 80"; wide top.txt; }
commands=$(sed -n '/^commands:/,/^$/p' top.txt | awk '/^  [a-z]/ { print $1 }')
[[ $(wc -w <<<"$commands") -ge 10 ]] || fail "no command list in mkevolve --help: $commands"
for c in $commands; do
  "$BIN" help "$c" >"help_$c.txt" 2>&1
  rc=$?
  [[ $rc -eq 0 ]] || { fail "help $c: exit $rc"; continue; }
  problems=()
  [[ -z $(wide "help_$c.txt") ]] || problems+=("lines over 80 columns: $(wide "help_$c.txt" | head -3)")
  grep -q '^Exit status:$' "help_$c.txt" || problems+=("no 'Exit status:' section")
  grep -qE '^  0 +[a-z]' "help_$c.txt" || problems+=("exit status 0 is not explained")
  grep -qE '^  2 +[a-z]' "help_$c.txt" || problems+=("exit status 2 (bad usage) is not explained")
  [[ $(grep -cE "^  mkevolve $c |^  [A-Z_]+=[^ ]+ mkevolve $c " "help_$c.txt") -ge 2 ]] ||
    problems+=("fewer than two examples")
  grep -qE 'FLOAT|TEXT:|INT:| in \[|->' "help_$c.txt" && problems+=("parser notation: $(grep -E 'FLOAT|TEXT:|INT:| in \[|->' "help_$c.txt" | head -2)")
  if [[ ${#problems[@]} -eq 0 ]]; then pass "help $c: 80 columns, examples, exit statuses, plain value names"
  else fail "help $c: ${problems[*]}"; fi
done
# The run commands' many options come in named groups.
for g in "Input and output:" "Method:" "Budget:" "LLM:" "Machine:" "Evaluation:"; do
  grep -qx "$g" help_run.txt || fail "help run has no group '$g'"
done
pass "help run groups its options"
grep -qE '^  3 +.*(LLM|endpoint)' help_run.txt && grep -qE '^  3 +.*(LLM|endpoint)' help_ask.txt &&
  pass "run and ask both say what exit 3 means for an LLM" || fail "exit 3 of run/ask does not mention the LLM"

# A mistyped flag: the nearest flag, one line, exit 2 (not "arguments were not expected: 3 --iteratons").
expect "a mistyped flag names the nearest" 2 "unknown option '--iteratons' \(did you mean '--iterations'\?\)" -- \
  "$BIN" run p.py --out r --iteratons 3
grep -q "not expected" "$T/err" && fail "CLI11's raw message leaks: $(cat "$T/err")" || pass "no raw parser message"
expect "a mistyped --flag=value" 2 "unknown option '--beam-widht' \(did you mean '--beam-width'\?\)" -- \
  "$BIN" evolve p.py --beam-widht=8
expect "a flag of another command" 2 "unknown option '--zzzzzz'" -- "$BIN" report r --zzzzzz
grep -q "did you mean" "$T/err" && fail "a far-off flag got a suggestion: $(cat "$T/err")" || pass "no suggestion when none is near"
expect "a mistyped command still names the nearest" 2 "did you mean 'report'" -- "$BIN" reprot r

# adapt takes the evaluator's settings run takes (a large variant needs them):
# the flags parse, and the command stops at the run directory that is not there.
expect "adapt takes --trials/--perf-trials/--warmup/--timeout" 2 "noSuchRun" -- \
  "$BIN" adapt noSuchRun variant.py --out adapted --trials 2 --perf-trials 2 --warmup 1 --timeout 120
grep -qE "unknown option|not expected" "$T/err" && fail "adapt refused an evaluator flag: $(cat "$T/err")" ||
  pass "adapt accepts the evaluator flags"
for f in --trials --perf-trials --warmup --timeout --tolerance; do
  grep -q -- "^  $f " help_adapt.txt || fail "help adapt does not list $f"
done

# Flags that contradict each other are refused, naming the conflict.
mkdir -p someRun
expect "run P.py --resume DIR is refused" 2 "either a problem file .* or --resume DIR .*not both" -- \
  "$BIN" run p.py --resume someRun
expect "eval: the problem twice is refused" 2 "either as the first file or with --problem, not both" -- \
  "$BIN" eval a.py b.py --problem c.py

if [[ $fails -ne 0 ]]; then echo "$fails e2e check(s) failed"; exit 1; fi
echo "all help e2e checks passed"
