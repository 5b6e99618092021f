"""Subkernels are tested with the layouts the composition gives them (eval
option input_layouts; worker/mkevolve_worker/layouts.py): unit tests of the
layout functions, then evaluations through the server in CPU test mode with
PyTorch stand-ins for Triton kernels."""

from __future__ import annotations

import pytest

from conftest import cand, problem

torch = pytest.importorskip("torch")

from mkevolve_worker import correctness as C  # noqa: E402
from mkevolve_worker import layouts  # noqa: E402

# x (16, 32) as the composed model may pass it: y.t() of a contiguous (32, 16) y,
# a column slice of a (16, 64) tensor, and a row broadcast by expand.
TRANSPOSED = {"shape": [16, 32], "stride": [1, 16], "offset": 0}
SLICED = {"shape": [16, 32], "stride": [64, 1], "offset": 3}
EXPANDED = {"shape": [16, 32], "stride": [0, 1], "offset": 0}


# -- the layout functions ------------------------------------------------------------

def test_apply_reproduces_strides_and_offset_with_the_same_values():
    x = torch.randn(16, 32)
    for entry in (TRANSPOSED, SLICED):
        y, why = layouts.apply(x, entry)
        assert why is None
        assert list(y.stride()) == entry["stride"] and y.storage_offset() == entry["offset"]
        assert not y.is_contiguous() and torch.equal(y, x)
    # What a transpose of a contiguous tensor looks like, to the byte.
    t = torch.randn(32, 16).t()
    y, _ = layouts.apply(t.contiguous(), layouts.describe(t))
    assert y.stride() == t.stride() and torch.equal(y, t)


def test_expanded_layout_is_a_real_broadcast_view_of_the_first_slice():
    x = torch.randn(16, 32)
    y, why = layouts.apply(x, EXPANDED)
    assert why is None and y.stride() == (0, 1)
    assert torch.equal(y, x[0:1].expand(16, 32))
    # All rows are one memory: a write to one row shows in every row.
    assert y.data_ptr() == y[5].data_ptr()


def test_layouts_that_cannot_hold_the_values_are_skipped_with_a_reason():
    x = torch.randn(16, 32)
    overlapping = {"shape": [16, 32], "stride": [1, 1], "offset": 0}
    y, why = layouts.apply(x, overlapping)
    assert y is x and "overlap" in why
    y, why = layouts.apply(x, {"shape": [8, 8], "stride": [8, 1], "offset": 0})
    assert y is x and why == "its shape [16, 32] is not the layout's [8, 8]"
    y, why = layouts.apply(x, {"shape": [16, 32], "stride": [1 << 20, 1], "offset": 0})
    assert y is x and "spans" in why
    xs, rec = layouts.apply_all([x, 3], [overlapping, None])
    assert xs[0] is x and xs[1] == 3
    assert rec == {"applied": [], "skipped": [{"input": 0, "why": why_overlap(x, overlapping)}]}


def why_overlap(x, entry):
    return layouts.apply(x, entry)[1]


def test_refill_keeps_strides_and_broadcast():
    from mkevolve_worker import timing
    for entry in (TRANSPOSED, SLICED, EXPANDED):
        buf, _ = layouts.apply(torch.randn(16, 32), entry)
        stride, ptr = buf.stride(), buf.data_ptr()
        new = torch.randn(16, 32)
        timing.make_refill([buf], [[new]], [new])(0, False)
        assert buf.stride() == stride and buf.data_ptr() == ptr
        expected = new[0:1].expand(16, 32) if entry is EXPANDED else new
        assert torch.equal(buf, expected)


def test_fingerprints_see_writes_into_a_strided_input():
    y, _ = layouts.apply(torch.randn(16, 32), TRANSPOSED)
    before = C.fingerprint(y)
    assert C.fingerprint(y) == before
    y[3, 4] += 1
    assert C.fingerprint(y) != before


def test_option_is_checked_and_trials_cycle_through_the_layouts():
    opts = C.normalize_options({"input_layouts": [[None], [dict(TRANSPOSED, dtype="float32",
                                                                contiguous=False)]]})
    assert opts["input_layouts"] == [[None], [dict(TRANSPOSED, dtype="float32")]]
    plan = C.plan_trials(2, opts)
    for c in (0, 1):
        mine = [t for t in plan if t["config"] == c]
        assert [t["layout"] for t in mine] == [k % 2 for k in range(len(mine))]
    assert C.timing_inputs_trial(opts)["layout"] == 0
    assert "layout" not in C.plan_trials(1, C.normalize_options({}))[0]
    for bad in ([], [[{"shape": [2], "stride": [1, 1]}]], [[{"shape": [2], "stride": [-1]}]],
                [[{"shape": [2], "stride": [1], "offset": 1.5}]], [["x"]], "nope"):
        with pytest.raises(ValueError, match="input_layouts"):
            C.normalize_options({"input_layouts": bad})


def test_note_names_the_layout():
    assert layouts.note([TRANSPOSED], [0], "c0t2") == (
        "on trial c0t2, input 0 was a non-contiguous view: shape [16, 32], stride [1, 16], as the "
        "composed model passes it to this subkernel; index inputs through their strides (x.stride(), "
        "x.storage_offset()) or make them contiguous first")
    assert "an expanded (broadcast) view: shape [16, 32], stride [0, 1] (stride 0 in dim 0" in \
        layouts.note([EXPANDED], [0], "c0t0")
    assert "storage offset 3" in layouts.note([SLICED], [0], "c0t0")


# -- evaluations with input_layouts -------------------------------------------------------

def run(worker_server, kernel, input_layouts, **options):
    return worker_server.eval(problem("scale_shift"), cand(kernel), input_layouts=input_layouts, **options)


def test_contiguity_assuming_kernel_fails_on_the_transposed_layout_naming_it(worker_server):
    # Passes on get_inputs()'s contiguous tensors, as before...
    assert worker_server.eval(problem("scale_shift"), cand("lay_flat_storage"))["status"] == "correct"
    # ...and fails once its input is laid out as the composed model passes it.
    r = run(worker_server, "lay_flat_storage", [[TRANSPOSED]])
    assert r["status"] == "incorrect" and r["kind"] == "mismatch", r
    assert "on trial c0t0, input 0 was a non-contiguous view: shape [16, 32], stride [1, 16]" \
        in r["message"]
    assert r["checks"]["layouts"]["applied"][0]["inputs"] == [0]


def test_view_on_a_transposed_input_raises_and_the_message_names_the_layout(worker_server):
    r = run(worker_server, "lay_view_flat", [[TRANSPOSED]])
    assert r["status"] == "runtime_error", r
    first = r["message"].splitlines()[0]
    assert "view" in first and \
        "on trial c0t0, input 0 was a non-contiguous view: shape [16, 32], stride [1, 16]" in first


def test_every_layout_of_the_list_is_exercised(worker_server):
    # Layout 0 leaves the input alone, layout 1 transposes it: the second trial fails.
    r = run(worker_server, "lay_flat_storage", [[None], [TRANSPOSED]])
    assert r["status"] == "incorrect", r
    assert "on trial c0t1, input 0 was a non-contiguous view" in r["message"]
    # A slice with gaps: the kernel reads the gap, not the next column.
    r = run(worker_server, "lay_flat_storage", [[SLICED]])
    assert r["status"] == "incorrect" and "storage offset 3" in r["message"], r


def test_stride_aware_kernel_passes_every_layout(worker_server):
    r = run(worker_server, "lay_strided_ok", [[TRANSPOSED], [SLICED], [EXPANDED], [None]])
    assert r["status"] == "correct", r
    rec = r["checks"]["layouts"]
    assert rec["given"] == 4 and rec["skipped"] == []
    assert [a["layout"] for a in rec["applied"]] == [0, 1, 2]
    assert rec["applied"][0]["trials"] == ["c0t0", "c0t4", "c0neg"]
    assert rec["applied"][1]["trials"] == ["c0t1", "c0a0"]


def test_expanded_layout_reaches_reference_candidate_and_timed_calls_as_a_broadcast_view(worker_server):
    # Right only if every call gets a genuine broadcast view and the reference's
    # expected output was computed on the same broadcast values.
    r = run(worker_server, "lay_needs_broadcast", [[EXPANDED]], perf=True, perf_trials=5, warmup=2)
    assert r["status"] == "correct", r
    assert r["checks"]["layouts"]["applied"][0]["trials"][-1] == "last"
    assert r["checks"]["timed_output"] == {"checked": True, "ok": True}
    assert run(worker_server, "lay_needs_broadcast", [[TRANSPOSED]])["status"] == "runtime_error"


def test_timed_and_profiled_calls_keep_the_layout(worker_server):
    r = run(worker_server, "lay_needs_transposed", [[TRANSPOSED]], perf=True, perf_trials=5, warmup=2)
    assert r["status"] == "correct", r
    assert r["checks"]["layouts"]["timed"] == 0


def test_mutating_a_strided_input_is_caught(worker_server):
    r = run(worker_server, "lay_mutates", [[TRANSPOSED]])
    assert r["kind"] == "input_mutation", r
    assert "input #0" in r["message"] and "non-contiguous view" in r["message"]


def test_a_layout_that_does_not_fit_is_skipped_and_recorded(worker_server):
    r = run(worker_server, "lay_flat_storage", [[{"shape": [8, 8], "stride": [1, 8], "offset": 0}]])
    assert r["status"] == "correct", r
    [skip] = r["checks"]["layouts"]["skipped"]
    assert skip["input"] == 0 and skip["why"] == "its shape [16, 32] is not the layout's [8, 8]"
    assert r["checks"]["layouts"]["applied"] == []


def test_bad_input_layouts_is_a_protocol_error(worker_server):
    msg, _ = worker_server.request("eval", problem=problem("scale_shift"), kernel=cand("lay_strided_ok"),
                                   options={"test_cpu": True, "perf": False,
                                            "input_layouts": [[{"shape": [16, 32]}]]})
    assert msg["type"] == "error" and "input_layouts[0][0].stride" in msg["message"], msg
