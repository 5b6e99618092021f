"""Shape variants (issue #35): a kernel must hold at the shapes users run,
not only at the benchmark's one. Test mode, CPU, torch-only candidates."""

from __future__ import annotations

from conftest import cand, problem

from mkevolve_worker import shapes

PROB = "kb_linear_softmax"
VARIANTS = ["batch_size=7, seq_len=5", "batch_size=15, seq_len=11", "batch_size=10, seq_len=19"]


def test_variants_rebind_only_what_get_inputs_alone_reads():
    d = shapes.derive(problem(PROB))
    assert d["benchmark"] == "batch_size=16, seq_len=12"
    assert [v["label"] for v in d["variants"]] == VARIANTS
    assert "in_features" in d["kept"] and "out_features" not in d["variants"][0]["bindings"]
    # Never more elements than the benchmark's (the admission's memory holds).
    for v in d["variants"]:
        assert v["bindings"]["batch_size"] * v["bindings"]["seq_len"] <= 16 * 12
    # A problem that lists its own configurations, or has no constant, gets none.
    assert shapes.derive(problem("configs"))["variants"] == []
    assert "no module-level int constant" in shapes.derive(problem("linear_relu"))["error"]


def test_constants_the_model_or_init_read_stay():
    src = ("n = 8\nd = 4\nk = 3\nclass Model:\n    def f(self):\n        return k\n"
           "def get_inputs():\n    return [n, d, k]\ndef get_init_inputs():\n    return [d]\n")
    found = shapes.size_constants(src)
    assert list(found["constants"]) == ["n"] and set(found["kept"]) == {"d", "k"}


def test_hardcoded_shape_passes_the_benchmark_only(worker_server):
    r = worker_server.eval(problem(PROB), cand("kb_linear_softmax_hardcoded"), shapes="benchmark")
    assert r["status"] == "correct", r
    assert "shapes" not in r["checks"]


def test_hardcoded_shape_fails_in_search_mode_naming_the_shape(worker_server):
    r = worker_server.eval(problem(PROB), cand("kb_linear_softmax_hardcoded"), shapes="search")
    assert r["status"] != "correct", r
    assert "failed at shape variant batch_size=7, seq_len=5" in r["message"], r["message"]
    assert "benchmark: batch_size=16, seq_len=12" in r["message"]
    s = r["checks"]["shapes"]
    assert s["mode"] == "search" and s["held"] == []
    assert s["failed"][0]["shape"] == VARIANTS[0] and s["not_reached"] == VARIANTS[1:]


def test_check_mode_keeps_the_verdict_and_says_where_it_holds(worker_server):
    r = worker_server.eval(problem(PROB), cand("kb_linear_softmax_hardcoded"), shapes="check")
    assert r["status"] == "correct", r
    s = r["checks"]["shapes"]
    assert s["mode"] == "check" and s["held"] == [] and s["skipped"] == []
    assert [f["shape"] for f in s["failed"]] == VARIANTS
    assert all("shape '[192, -1]' is invalid" in f["error"] for f in s["failed"]), s["failed"]
    assert not any("failed at shape variant" in f["error"] for f in s["failed"])  # the shape is said once


def test_honest_candidate_holds_in_every_mode(worker_server):
    for mode in ("benchmark", "check", "search"):
        r = worker_server.eval(problem(PROB), cand("kb_linear_softmax_ok"), shapes=mode)
        assert r["status"] == "correct", (mode, r)
        if mode != "benchmark":
            assert r["checks"]["shapes"]["held"] == VARIANTS, (mode, r["checks"]["shapes"])
            assert r["checks"]["shapes"]["failed"] == []
    # search mode: one trial per variant on top of the benchmark's own.
    assert r["checks"]["correctness"]["configs"] == 1 + len(VARIANTS)


def test_a_variant_the_reference_cannot_run_is_skipped_not_charged(worker_server):
    for mode in ("search", "check"):
        r = worker_server.eval(problem("kb_even_only"), cand("kb_even_only_ok"), shapes=mode)
        assert r["status"] == "correct", (mode, r)
        s = r["checks"]["shapes"]
        assert s["held"] == [] and s["failed"] == [], (mode, s)
        assert len(s["skipped"]) == 3 and all("reference cannot run it" in x["error"] for x in s["skipped"]), s
        assert "seq_len must be even" in s["skipped"][0]["error"]


def test_the_preflight_says_which_variants_run_and_which_are_skipped(worker_server):
    # Before any LLM call (a run's problem_check): the variants the reference
    # runs, and those it cannot, with the error.
    msg, _ = worker_server.request("problem_check", problem=problem("kb_even_only"),
                                   options={"test_cpu": True, "shapes": "check"})
    assert msg["ok"], msg
    s = msg["shapes"]
    assert s["variants"] == [] and len(s["skipped"]) == 3, s
    assert "seq_len must be even" in s["skipped"][0]["error"]
    msg, _ = worker_server.request("problem_check", problem=problem(PROB), options={"test_cpu": True, "shapes": "search"})
    assert msg["shapes"]["variants"] == VARIANTS and msg["shapes"]["skipped"] == []
    # benchmark: nothing derived.
    msg, _ = worker_server.request("problem_check", problem=problem(PROB), options={"test_cpu": True})
    assert "shapes" not in msg
