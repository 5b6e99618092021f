"""The work one forward call must do, for the roofline (issue 15): the bytes it
must move at least (its inputs, its output, its parameters and buffers, each
once) and the FLOPs of its matrix products, convolutions and attention,
counted from the ATen ops the reference runs. Runs in the reference's child
around its first trial's forward; the evaluation's verdict never depends on it.

Elementwise and reduction ops are not counted as FLOPs (they are bound by
memory, whose bytes the model already counts); an op whose FLOPs this module
does not know is listed, so a reader can tell a model that undercounts.
"""
from __future__ import annotations

import math

from . import correctness as C

# ATen ops that do heavy arithmetic and are counted below.
_COUNTED = {"mm", "addmm", "bmm", "baddbmm", "addbmm", "matmul", "linear", "convolution", "_convolution",
            "cudnn_convolution", "cudnn_convolution_transpose", "convolution_overrideable",
            "_scaled_dot_product_flash_attention", "_scaled_dot_product_efficient_attention",
            "_scaled_dot_product_cudnn_attention", "_scaled_dot_product_attention_math",
            "scaled_dot_product_attention"}
# Ops that do heavy arithmetic this model does not count (recurrent layers).
_UNCOUNTED_HEAVY = {"_cudnn_rnn", "lstm", "gru", "rnn_tanh", "rnn_relu", "_thnn_fused_lstm_cell",
                    "_thnn_fused_gru_cell", "einsum", "tensordot", "_flash_attention_forward",
                    "_efficient_attention_forward"}


def _numel(shape) -> int:
    return int(math.prod(int(s) for s in shape))


def op_flops(name: str, args, out) -> int | None:
    """FLOPs (multiply and add counted as 2) of one ATen call, or None when
    this model does not count the op."""
    import torch
    shp = [a.shape if isinstance(a, torch.Tensor) else None for a in args]
    if name == "mm":
        (m, k), (_, n) = shp[0], shp[1]
        return 2 * m * k * n
    if name in ("addmm",):
        (m, k), (_, n) = shp[1], shp[2]
        return 2 * m * k * n
    if name == "bmm":
        (b, m, k), (_, _, n) = shp[0], shp[1]
        return 2 * b * m * k * n
    if name in ("baddbmm", "addbmm"):
        (b, m, k), (_, _, n) = shp[1], shp[2]
        return 2 * b * m * k * n
    if name in ("convolution", "_convolution", "convolution_overrideable"):
        x, w = args[0], args[1]
        transposed = bool(args[6]) if len(args) > 6 else False
        o = out[0] if isinstance(out, (tuple, list)) else out
        kernel = _numel(w.shape[2:])
        if transposed:
            # Weight (in_channels, out_channels/groups, *kernel): each input
            # element meets out_channels/groups x kernel weights.
            return 2 * _numel(x.shape) * (w.shape[1]) * kernel
        # Weight (out_channels, in_channels/groups, *kernel): each output element
        # sums in_channels/groups x kernel products.
        return 2 * _numel(o.shape) * (w.shape[1]) * kernel
    if name.startswith("_scaled_dot_product") or name == "scaled_dot_product_attention":
        q, k = args[0], args[1]
        *batch, lq, d = q.shape
        lk = k.shape[-2]
        dv = args[2].shape[-1] if len(args) > 2 and isinstance(args[2], torch.Tensor) else d
        return 2 * _numel(batch) * lq * lk * (d + dv)
    return None


def module_bytes(model) -> int:
    """Parameters and buffers, each storage once."""
    seen, total = set(), 0
    for t in list(model.parameters()) + list(model.buffers()):
        key = (t.device.type, t.data_ptr()) if t.device.type != "meta" else id(t)
        if key in seen:
            continue
        seen.add(key)
        total += t.numel() * t.element_size()
    return total


def counter():
    """A TorchDispatchMode that sums FLOPs by op; None where torch lacks one."""
    try:
        from torch.utils._python_dispatch import TorchDispatchMode
    except ImportError:
        return None

    class FlopCounter(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.flops: dict[str, int] = {}
            self.uncounted: dict[str, int] = {}

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            try:
                name = func.overloadpacket.__name__
                if name in _COUNTED:
                    f = op_flops(name, args, out)
                    if f is None:
                        self.uncounted[name] = self.uncounted.get(name, 0) + 1
                    else:
                        self.flops[name] = self.flops.get(name, 0) + int(f)
                elif name in _UNCOUNTED_HEAVY:
                    self.uncounted[name] = self.uncounted.get(name, 0) + 1
            except Exception:  # noqa: BLE001 - counting never breaks the reference's forward
                pass
            return out

    return FlopCounter()


def record(model, inputs_bytes: int, output, flop_counter) -> dict:
    """The work record: {"inputs_bytes", "output_bytes", "params_bytes", "bytes",
    "flops", "flops_by_op", "uncounted_ops", "dtype", "method"}."""
    dtypes = sorted({str(t.dtype).replace("torch.", "") for t in C._tensors_in(output, [])})
    rec = {"inputs_bytes": int(inputs_bytes), "output_bytes": C.tree_nbytes(output), "params_bytes": module_bytes(model),
           "dtype": dtypes[0] if len(dtypes) == 1 else ",".join(dtypes) or None,
           "method": "aten ops of the reference's forward (matmul, convolution, attention)"}
    rec["bytes"] = rec["inputs_bytes"] + rec["output_bytes"] + rec["params_bytes"]
    if flop_counter is None:
        rec.update(flops=None, flops_by_op={}, uncounted_ops=[], method="no TorchDispatchMode in this torch")
    else:
        rec.update(flops=sum(flop_counter.flops.values()), flops_by_op=dict(flop_counter.flops),
                   uncounted_ops=sorted(flop_counter.uncounted))
    return rec

