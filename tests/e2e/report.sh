#!/usr/bin/env bash
# End-to-end test of `mkevolve report`: builds report.md and report.html from the
# fixture run (src/report/testdata/cvit), checks their content, and renders the
# HTML in headless Chromium when /usr/bin/chromium exists.
# Usage: tests/e2e/report.sh path/to/mkevolve
set -euo pipefail
bin=${1:?usage: report.sh path/to/mkevolve}
here=$(cd "$(dirname "$0")/../.." && pwd)
fixture="$here/src/report/testdata/cvit"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# A copy of the fixture, so the report lands beside the run as by default.
cp -r "$fixture" "$tmp/run"
"$bin" report "$tmp/run" > "$tmp/stdout" || fail "mkevolve report exited $?"
grep -qx "$tmp/run/report.md" "$tmp/stdout" || fail "report.md path not printed"
grep -qx "$tmp/run/report.html" "$tmp/stdout" || fail "report.html path not printed"
md="$tmp/run/report.md"
html="$tmp/run/report.html"
for needle in "1.34× (iteration 5; as the search measured it, no final check)" "4c_transformer_block" "TF32 is off" "65 calls (62 of 400 in the kernel budget" "t=2 (split)"; do
  grep -qF -- "$needle" "$md" || fail "report.md lacks '$needle'"
done
grep -q "<svg" "$html" || fail "report.html has no SVG"
if grep -qE "https?://" "$html"; then fail "report.html references the network"; fi
if grep -q "<script" "$html"; then fail "report.html has a script"; fi

# A run whose end-to-end kernel fails: the report names the failing subkernel
# and flags the PyTorch one.
cp -r "$here/src/report/testdata/failing" "$tmp/failing"
"$bin" report "$tmp/failing" -q || fail "report on the failing run exited $?"
grep -qF "Contains PyTorch subkernels: not pure Triton" "$tmp/failing/report.md" || fail "PyTorch subkernel not flagged"
grep -qF "Subkernel failing its own check: group_norm." "$tmp/failing/report.md" || fail "failure not traced to group_norm"
grep -qF "Contains PyTorch subkernels: not pure Triton" "$tmp/failing/report.html" || fail "PyTorch banner missing in html"

# A run of `mkevolve adapt` (src/report/testdata/adapted, a hand-written fixture):
# both reports have the reuse section, with the LLM calls saved, and mark the
# reused subkernels.
cp -r "$here/src/report/testdata/adapted" "$tmp/adapted"
"$bin" report "$tmp/adapted" -q || fail "report on the adapted run exited $?"
amd="$tmp/adapted/report.md"
ahtml="$tmp/adapted/report.html"
for needle in "## Reused subkernels" "LLM calls saved: 4 (" "| conv_relu (reused from /home/user/runs/conv_pool) |" \
  "| pointwise_conv | /home/user/runs/conv_pool: pointwise_conv | same source | ✓ correct | 2 |"; do
  grep -qF -- "$needle" "$amd" || fail "adapted report.md lacks '$needle'"
done
for needle in "<h2>Reused subkernels</h2>" "LLM calls saved: <b>4</b>" "5 calls · 4 saved by reuse" \
  '<td class="path"><code>/home/user/runs/conv_pool</code>: conv_relu</td><td>same source</td><td><span class="pill ok">✓ correct</span></td><td>2</td>' \
  '<span class="pill reused">reused</span><div class="note">from /home/user/runs/conv_pool</div>'; do
  grep -qF -- "$needle" "$ahtml" || fail "adapted report.html lacks '$needle'"
done
[[ $(grep -o 'pill reused' "$ahtml" | wc -l) -eq 2 ]] || fail "report.html should mark exactly the two reused subkernels"
grep -q "Reused subkernels" "$html" && fail "a run that adapted nothing has a reuse section"

# --out, and errors that name the problem.
"$bin" report "$tmp/run" --out "$tmp/elsewhere" -q > "$tmp/quiet" || fail "--out failed"
[[ -s "$tmp/elsewhere/report.html" && ! -s "$tmp/quiet" ]] || fail "--out/-q did not behave"
set +e
"$bin" report "$tmp/none" 2> "$tmp/err"; rc=$?
set -e
[[ $rc -eq 2 ]] || fail "a missing run directory should exit 2, got $rc"
grep -q "no such run directory" "$tmp/err" || fail "unclear error: $(cat "$tmp/err")"

# Render it in headless Chromium: the page must load and paint.
if [[ -x /usr/bin/chromium ]]; then
  png="$tmp/report.png"
  timeout 120 /usr/bin/chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
    --disable-background-networking --disable-component-update --disable-sync \
    --user-data-dir="$(mktemp -d -p "$tmp")" --screenshot="$png" --window-size=1200,2000 \
    "file://$html" > "$tmp/chromium.log" 2>&1 || { cat "$tmp/chromium.log" >&2; fail "chromium failed"; }
  [[ -f "$png" ]] || fail "no screenshot"
  size=$(stat -c %s "$png")
  # A blank 1200x2000 page compresses to a few KB; charts and tables make it far larger.
  [[ $size -gt 60000 ]] || fail "screenshot is only $size bytes: the page did not render"
  [[ -n "${MKEVOLVE_KEEP_SCREENSHOT:-}" ]] && cp "$png" "$MKEVOLVE_KEEP_SCREENSHOT"
  echo "report.sh: rendered in chromium ($size bytes)"
  # The adapted run's page: it loads, paints, and its DOM has the reuse table.
  timeout 120 /usr/bin/chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
    --disable-background-networking --disable-component-update --disable-sync \
    --user-data-dir="$(mktemp -d -p "$tmp")" --screenshot="$tmp/adapted.png" --window-size=1200,2400 \
    "file://$ahtml" > "$tmp/chromium.log" 2>&1 || { cat "$tmp/chromium.log" >&2; fail "chromium failed on the adapted run"; }
  timeout 120 /usr/bin/chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
    --disable-background-networking --disable-component-update --disable-sync \
    --user-data-dir="$(mktemp -d -p "$tmp")" --dump-dom "file://$ahtml" > "$tmp/adapted.dom" 2> "$tmp/chromium.log" \
    || { cat "$tmp/chromium.log" >&2; fail "chromium --dump-dom failed on the adapted run"; }
  grep -qF "<h2>Reused subkernels</h2>" "$tmp/adapted.dom" || fail "the rendered DOM has no reuse section"
  asize=$(stat -c %s "$tmp/adapted.png")
  [[ $asize -gt 60000 ]] || fail "the adapted run's screenshot is only $asize bytes: the page did not render"
  [[ -n "${MKEVOLVE_KEEP_SCREENSHOT:-}" ]] && cp "$tmp/adapted.png" "${MKEVOLVE_KEEP_SCREENSHOT%.png}-adapted.png"
  echo "report.sh: the adapted run rendered in chromium ($asize bytes)"
else
  echo "report.sh: SKIP screenshot: /usr/bin/chromium is not installed (scripts/install-deps.sh installs it)"
fi
echo "report.sh: ok"
