"""Input layouts: the strides a composed model gives a subkernel's inputs.

A decomposition's top level (decomposed_problem.py's ModelNew) may hand a
subproblem a view: x.transpose(0, 1), a permute, a slice, an expand. A
subkernel tested only on the fresh, contiguous tensors get_inputs() makes can
pass every local trial and still fail in place (a kernel that indexes its
input as if it were contiguous reads the wrong elements). So the decomposition
check records each subproblem call's input layouts (describe(), in
decompose_check's _Recorder: "input_layouts_seen"), and an evaluation may be
asked to reproduce them (eval option "input_layouts"): trial k of a
configuration feeds its inputs in layout k mod len(input_layouts).

A layout is a list with one entry per positional input: None (the input as
get_inputs() made it) or {"shape", "stride" (in elements), "offset" (the
storage offset, in elements)}. apply() turns a tensor holding the trial's
values into one with exactly those strides and that offset, holding the same
values, as a pure function of (values, layout): the reference, the candidate
and its profiling process each apply it to their own device copy of the
inputs (inputs cross processes as sealed files or CUDA IPC references to
dense copies, which do not keep a view's strides), so all of them compute on
the same values in the same layout. Dimensions of stride 0 (an expanded,
broadcast view) cannot hold distinct values: the first slice along them is
taken and broadcast, so the input is a genuine broadcast view and the
reference's expected output is computed on exactly those values.

The candidate applies the layout in its own process: this is a test of the
kernel's handling of strides, not a security boundary (a candidate that
undid it would only test itself on easier inputs; the reference's values
decide the verdict either way).

torch is imported lazily.
"""

from __future__ import annotations

MAX_LAYOUTS = 64        # layouts an eval may be given (distinct calls of one subkernel)
MAX_INPUTS = 64         # entries per layout
MAX_DIMS = 16
# A layout whose storage would be larger than this many times the tensor
# (a narrow slice of a much wider tensor) is not reproduced: the memory is
# better spent elsewhere, and the stride pattern is still exercised by any
# layout of the same kind that fits.
MAX_SPAN_FACTOR = 16
MAX_SPAN_SLACK = 1 << 20


def _torch():
    import torch  # noqa: PLC0415 (lazy on purpose)
    return torch


def _dtype_name(dtype) -> str:
    return str(dtype).replace("torch.", "")


def is_contiguous(shape, stride) -> bool:
    """Row-major dense with no gaps (dims of size 1 have any stride), as
    torch's is_contiguous() says it for a tensor of this shape and stride."""
    expected = 1
    for n, s in reversed(list(zip(shape, stride))):
        if n != 1 and s != expected:
            return False
        expected *= n
    return True


def describe(t) -> dict:
    """A tensor's layout, as the decomposition check records it."""
    return {"shape": [int(d) for d in t.shape], "stride": [int(s) for s in t.stride()],
            "offset": int(t.storage_offset()), "dtype": _dtype_name(t.dtype),
            "contiguous": bool(t.is_contiguous())}


def _nonneg_ints(v, what: str, limit: int = MAX_DIMS) -> list:
    if not isinstance(v, list) or len(v) > limit or \
            any(isinstance(d, bool) or not isinstance(d, int) or d < 0 for d in v):
        raise ValueError(f"{what} must be a list of at most {limit} non-negative integers")
    return [int(d) for d in v]


def parse_input_layouts(v):
    """The input_layouts option, checked: None, or a non-empty list of layouts,
    each a list of None or {"shape": [int], "stride": [int], "offset": int}
    (as the decomposition check's input_layouts_seen gives them: "dtype", when
    present, must match the input; "contiguous" is ignored). Raises
    ValueError saying what is wrong."""
    if v is None:
        return None
    if not isinstance(v, list) or not v or len(v) > MAX_LAYOUTS:
        raise ValueError(f"option input_layouts must be null or a list of 1 to {MAX_LAYOUTS} layouts, each a "
                         "list with one entry per input: null or {\"shape\", \"stride\", \"offset\"}")
    out = []
    for k, layout in enumerate(v):
        if not isinstance(layout, list) or len(layout) > MAX_INPUTS:
            raise ValueError(f"option input_layouts[{k}] must be a list of at most {MAX_INPUTS} entries, one per input")
        entries = []
        for i, e in enumerate(layout):
            where = f"option input_layouts[{k}][{i}]"
            if e is None:
                entries.append(None)
                continue
            if not isinstance(e, dict):
                raise ValueError(f"{where} must be null or {{\"shape\", \"stride\", \"offset\"}}")
            shape = _nonneg_ints(e.get("shape"), f"{where}.shape")
            stride = _nonneg_ints(e.get("stride"), f"{where}.stride")
            if len(stride) != len(shape):
                raise ValueError(f"{where}: stride has {len(stride)} entries, shape {len(shape)}")
            offset = e.get("offset", 0)
            if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
                raise ValueError(f"{where}.offset must be a non-negative integer")
            entry = {"shape": shape, "stride": stride, "offset": int(offset)}
            if e.get("dtype") is not None:
                if not isinstance(e["dtype"], str):
                    raise ValueError(f"{where}.dtype must be a string")
                entry["dtype"] = e["dtype"]
            entries.append(entry)
        out.append(entries)
    return out


def for_trial(opts: dict, t: dict):
    """The layout trial t feeds its inputs in (correctness.plan_trials gives
    each trial its index), or None."""
    layouts = opts.get("input_layouts")
    k = t.get("layout")
    if not layouts or not isinstance(k, int) or not 0 <= k < len(layouts):
        return None
    return layouts[k]


def apply(x, entry):
    """(tensor, why): x's values in the layout `entry` (exact strides and
    storage offset, in fresh storage; gaps hold zeros), or x itself and why
    the layout could not be applied (why is None when entry is None)."""
    torch = _torch()
    if entry is None:
        return x, None
    if not isinstance(x, torch.Tensor):
        return x, "it is not a tensor"
    shape, stride, offset = entry["shape"], entry["stride"], entry["offset"]
    if list(x.shape) != shape:
        return x, f"its shape {list(x.shape)} is not the layout's {shape}"
    if entry.get("dtype") is not None and entry["dtype"] != _dtype_name(x.dtype):
        return x, f"its dtype {_dtype_name(x.dtype)} is not the layout's {entry['dtype']}"
    if x.numel() == 0:
        return x, "it is empty"
    # Dims of stride 0 broadcast one slice; the others must not overlap one
    # another (sufficient test: sorted by stride, each steps past all the
    # memory the smaller ones span). Any other overlap cannot hold x's values.
    expanded = [d for d, (n, s) in enumerate(zip(shape, stride)) if s == 0 and n > 1]
    reach = 0
    for s, n in sorted((s, n) for n, s in zip(shape, stride) if n > 1 and s > 0):
        if s <= reach:
            return x, f"its stride {stride} makes elements overlap (other than by broadcasting)"
        reach += (n - 1) * s
    span = offset + reach + 1
    if span > max(MAX_SPAN_FACTOR * x.numel(), x.numel() + MAX_SPAN_SLACK):
        return x, f"the layout spans {span} elements of storage for {x.numel()} elements"
    src = x.detach()
    short = list(shape)
    for d in expanded:
        src = src.narrow(d, 0, 1)
        short[d] = 1
    base = torch.zeros(span, dtype=x.dtype, device=x.device)
    torch.as_strided(base, short, stride, offset).copy_(src)
    return torch.as_strided(base, shape, stride, offset), None


def apply_all(xs: list, layout) -> tuple[list, dict]:
    """(inputs, record): each input in its entry's layout, and
    {"applied": [input indices], "skipped": [{"input", "why"}]}."""
    out, applied, skipped = [], [], []
    for i, x in enumerate(xs):
        entry = layout[i] if layout is not None and i < len(layout) else None
        y, why = apply(x, entry)
        if entry is not None:
            if why is None:
                applied.append(i)
            else:
                skipped.append({"input": i, "why": why})
        out.append(y)
    return out, {"applied": applied, "skipped": skipped}


def copy_into(dst, src) -> None:
    """dst.copy_(src) in place, keeping dst's strides; along dst's broadcast
    dims (stride 0) only src's first slice is written (the memory holds one)."""
    expanded = [d for d in range(dst.dim()) if dst.stride(d) == 0 and dst.shape[d] > 1]
    for d in expanded:
        dst = dst.narrow(d, 0, 1)
        src = src.narrow(d, 0, 1) if src.dim() == dst.dim() else src
    dst.copy_(src)


def kind_text(entry: dict) -> str:
    """'a non-contiguous view: shape [16, 32], stride [1, 16]' and the like."""
    shape, stride, offset = entry["shape"], entry["stride"], entry["offset"]
    where = f"shape {shape}, stride {stride}" + (f", storage offset {offset}" if offset else "")
    broadcast = [d for d, (n, s) in enumerate(zip(shape, stride)) if s == 0 and n > 1]
    if broadcast:
        dims = ", ".join(str(d) for d in broadcast)
        return f"an expanded (broadcast) view: {where} (stride 0 in dim {dims}: one value along it)"
    if not is_contiguous(shape, stride):
        return f"a non-contiguous view: {where}"
    return f"contiguous but at storage offset {offset} (shape {shape})" if offset else \
        f"contiguous (shape {shape})"


def note(layout, applied: list, trial_id: str) -> str:
    """One sentence for a failure on a layout trial, for the LLM to act on."""
    parts = [f"input {i} was {kind_text(layout[i])}" for i in applied
             if layout is not None and i < len(layout) and layout[i] is not None]
    if not parts:
        return ""
    return (f"on trial {trial_id}, " + "; ".join(parts) + ", as the composed model passes it to this "
            "subkernel; index inputs through their strides (x.stride(), x.storage_offset()) or make them "
            "contiguous first")
