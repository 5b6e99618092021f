#!/usr/bin/env python3
"""Compares `mkevolve eval --json` verdicts with examples/kernels/manifest.json.

    scripts/check_manifest.py [--manifest M] RESULTS.jsonl [RESULTS.jsonl ...]

Each results file holds one JSON object per line, as `mkevolve eval --json`
prints them (other lines are ignored). A verdict matches an entry when its
status equals the entry's status and, if the entry names a kind, its kind too;
an entry's also_accept lists other acceptable verdicts (a kind left out there
means any kind). Prints one row per manifest entry and exits 0 when every entry
has an acceptable verdict, 1 otherwise, 2 on bad input. Needs no torch.
"""
import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def read_results(paths):
    by_kernel = {}
    for path in paths:
        for n, line in enumerate(Path(path).read_text(errors="replace").splitlines(), 1):
            line = line.strip()
            if not line.startswith("{"):
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError:
                print(f"{path}:{n}: not JSON, ignored", file=sys.stderr)
                continue
            if isinstance(obj, dict) and "kernel" in obj and "status" in obj:
                by_kernel[Path(obj["kernel"]).stem] = obj
    return by_kernel


def judge(entry, result):
    """'exact', 'accepted' or 'WRONG'."""
    def fits(status, kind):
        return result.get("status") == status and (kind is None or result.get("kind") == kind)
    if fits(entry["status"], entry.get("kind")):
        return "exact"
    for alt in entry.get("also_accept", []):
        if fits(alt["status"], alt.get("kind")):
            return "accepted"
    return "WRONG"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--manifest", default=str(ROOT / "examples" / "kernels" / "manifest.json"))
    ap.add_argument("--json-out", help="also write the comparison as JSON here")
    ap.add_argument("results", nargs="+")
    args = ap.parse_args(argv)
    try:
        entries = json.loads(Path(args.manifest).read_text())["kernels"]
    except (OSError, ValueError, KeyError) as e:
        print(f"check_manifest: {args.manifest}: {e}", file=sys.stderr)
        return 2
    missing_files = [p for p in args.results if not Path(p).is_file()]
    if missing_files:
        print(f"check_manifest: no such results file: {', '.join(missing_files)}", file=sys.stderr)
        return 2
    results = read_results(args.results)
    rows, bad = [], 0
    for entry in entries:
        stem = Path(entry["kernel"]).stem
        expected = entry["status"] + (f"/{entry['kind']}" if entry.get("kind") else "")
        res = results.get(stem)
        if res is None:
            rows.append((stem, expected, "(no result)", "MISSING", ""))
            bad += 1
            continue
        got = f"{res.get('status')}/{res.get('kind') or '-'}"
        verdict = judge(entry, res)
        bad += verdict == "WRONG"
        speed = res.get("speedup") or {}
        extra = ""
        if res.get("status") == "correct":
            x = lambda v: f"x{v:.2f}" if isinstance(v, (int, float)) else "-"  # noqa: E731 (null: no baseline)
            extra = "{} eager, {} compile, err {:.1e}".format(
                x(speed.get("eager")), x(speed.get("compile")), res.get("max_abs_err") or 0)
        elif verdict == "WRONG":
            extra = (res.get("message") or "; ".join(res.get("reasons") or []))[:160].replace("\n", " ")
        rows.append((stem, expected, got, verdict, extra))
    width = max(len(r[0]) for r in rows)
    print(f"{'kernel':{width}}  {'expected':34} {'got':34} {'verdict':8} notes")
    for stem, expected, got, verdict, extra in rows:
        print(f"{stem:{width}}  {expected:34} {got:34} {verdict:8} {extra}")
    n_exact = sum(r[3] == "exact" for r in rows)
    n_acc = sum(r[3] == "accepted" for r in rows)
    print(f"manifest: {len(rows)} entries, {n_exact} exact, {n_acc} accepted alternatives, {bad} wrong or missing")
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(
            [dict(zip(("kernel", "expected", "got", "verdict", "notes"), r)) for r in rows], indent=1))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
