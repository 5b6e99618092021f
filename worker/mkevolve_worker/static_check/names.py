"""What torch, tensor and Python names do: the tables that type inference
(valuetypes.py, the walker) and the classification of qualified names
(classify.py) read."""

from __future__ import annotations


TORCH_ALLOC = {
    "empty", "empty_like", "empty_strided", "empty_permuted", "zeros", "zeros_like",
    "ones", "ones_like", "full", "full_like", "arange", "range", "linspace", "logspace",
    "eye", "tensor", "as_tensor", "asarray", "from_numpy", "scalar_tensor",
    "rand", "rand_like", "randn", "randn_like", "randint", "randint_like", "randperm",
}
TORCH_VIEW = {
    "reshape", "view_as_real", "view_as_complex", "transpose", "permute", "t", "flatten",
    "unflatten", "squeeze", "unsqueeze", "narrow", "select", "chunk", "split",
    "tensor_split", "unbind", "movedim", "moveaxis", "swapaxes", "swapdims",
    "broadcast_to", "as_strided", "atleast_1d", "atleast_2d", "atleast_3d",
    "detach", "clone",
}
TORCH_META = {
    "is_tensor", "is_floating_point", "is_complex", "is_storage", "numel", "typename",
    "finfo", "iinfo", "device", "dtype", "Size", "Tensor", "Generator", "get_default_dtype",
    "set_default_dtype", "get_default_device", "set_default_device", "broadcast_shapes",
    "promote_types", "result_type", "can_cast", "no_grad", "enable_grad", "inference_mode",
    "set_grad_enabled", "is_grad_enabled", "is_inference_mode_enabled", "autocast",
    "manual_seed", "seed", "initial_seed", "get_rng_state", "set_rng_state",
    "use_deterministic_algorithms", "are_deterministic_algorithms_enabled",
    "memory_format", "contiguous_format", "channels_last", "channels_last_3d",
    "preserve_format", "strided", "layout", "version", "__version__", "get_num_threads",
    "is_autocast_enabled", "float32", "float", "float16", "half", "bfloat16", "float64",
    "double", "int8", "int16", "short", "int32", "int", "int64", "long", "uint8", "bool",
    "complex64", "cfloat", "complex128", "cdouble", "float8_e4m3fn", "float8_e5m2",
    "float8_e4m3fnuz", "float8_e5m2fnuz", "uint16", "uint32", "uint64", "qint8", "quint8",
    "FloatTensor", "HalfTensor", "LongTensor", "IntTensor", "BoolTensor", "DoubleTensor",
    "ByteTensor", "BFloat16Tensor", "cuda", "backends", "types", "random",
}
TORCH_COMPUTE_NAMESPACES = {
    "linalg", "fft", "special", "sparse", "nested", "masked", "distributions", "signal",
    "quantization", "ao", "testing", "func", "vmap", "utils",
}
TORCH_CUDA_STREAM = {
    "Stream", "stream", "set_stream", "StreamContext", "ExternalStream", "streams",
    "graph", "graphs", "CUDAGraph", "make_graphed_callables", "graph_pool_handle",
}
NN_CONTAINERS = {"Module", "ModuleList", "ModuleDict", "Sequential", "ParameterList",
                 "ParameterDict"}
NN_PARAM = {"Parameter", "Buffer", "UninitializedParameter", "UninitializedBuffer"}

# Tensor attributes that are not tensors, and ones that are views.
TENSOR_SCALAR_ATTRS = {
    "shape", "dtype", "device", "ndim", "is_cuda", "is_cpu", "requires_grad", "layout",
    "is_leaf", "names", "itemsize", "nbytes", "is_sparse", "is_quantized", "is_meta",
    "is_mps", "grad_fn", "is_nested",
}
TENSOR_VIEW_ATTRS = {"T", "mT", "H", "mH", "data", "grad", "real", "imag"}
# Tensor methods that only allocate, view, move, copy or describe.
TENSOR_METHOD_VIEW = {
    "contiguous", "view", "view_as", "reshape", "reshape_as", "permute", "transpose",
    "transpose_", "t", "t_", "expand", "expand_as", "unsqueeze", "unsqueeze_", "squeeze",
    "squeeze_", "flatten", "unflatten", "narrow", "select", "chunk", "split",
    "tensor_split", "unbind", "movedim", "moveaxis", "swapaxes", "swapdims", "as_strided",
    "unfold", "diagonal", "to", "cuda", "cpu", "float", "half", "double", "bfloat16",
    "int", "long", "short", "bool", "byte", "char", "type", "type_as", "detach", "detach_",
    "clone", "copy_", "fill_", "zero_", "requires_grad_", "pin_memory", "share_memory_",
    "numpy", "__getitem__", "__setitem__", "record_stream", "retain_grad",
}
TENSOR_METHOD_ALLOC = {"new_empty", "new_zeros", "new_ones", "new_full", "new_tensor",
                       "new_empty_strided"}
TENSOR_METHOD_META = {
    "size", "stride", "numel", "nelement", "dim", "ndimension", "element_size", "data_ptr",
    "storage_offset", "is_contiguous", "get_device", "is_floating_point", "is_complex",
    "is_pinned", "is_set_to", "item", "tolist", "untyped_storage", "storage",
    "is_shared", "__len__", "dim_order",
}
# Python container / string methods: never flagged, whatever we think the receiver is.
CONTAINER_METHODS = {
    "append", "extend", "insert", "pop", "remove", "clear", "index", "count", "keys",
    "values", "items", "get", "update", "setdefault", "add", "discard", "copy", "format",
    "join", "startswith", "endswith", "strip", "lower", "upper", "replace", "encode",
    "decode", "popitem", "sort", "reverse", "union", "intersection", "difference",
}
CONTAINER_MUTATORS = {"append", "extend", "insert", "update", "setdefault", "add",
                      "__setitem__", "put", "put_nowait", "appendleft"}
CONTAINER_READERS = {"get", "pop", "setdefault", "popitem", "__getitem__", "values", "items"}
# Names that are compute whatever the receiver seems to be.
DISTINCTIVE_COMPUTE = {
    "matmul", "mm", "bmm", "addmm", "addmv", "addbmm", "baddbmm", "mv", "einsum",
    "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
    "conv_transpose3d", "softmax", "log_softmax", "linear", "layer_norm", "group_norm",
    "batch_norm", "instance_norm", "scaled_dot_product_attention", "tensordot", "kron",
    "__matmul__", "__rmatmul__", "__imatmul__",
}
ARITH_DUNDERS = {
    "__matmul__", "__rmatmul__", "__imatmul__", "__mul__", "__rmul__", "__imul__",
    "__add__", "__radd__", "__iadd__", "__sub__", "__rsub__", "__isub__", "__truediv__",
    "__rtruediv__", "__itruediv__", "__floordiv__", "__rfloordiv__", "__mod__",
    "__pow__", "__rpow__", "__neg__", "__abs__", "__and__", "__or__", "__xor__",
    "__lt__", "__le__", "__gt__", "__ge__", "__eq__", "__ne__", "__invert__",
}
FRAME_ATTRS = {"f_back", "f_globals", "f_locals", "f_code", "f_builtins", "tb_frame",
               "gi_frame", "cr_frame", "ag_frame"}
DYNAMIC_ATTRS = {"__globals__", "__code__", "__closure__", "__subclasses__", "__bases__",
                 "__mro__", "__builtins__", "__getattribute__", "__reduce__",
                 "__reduce_ex__", "__import__", "__loader__", "__spec__"}
LAYER_OK_METHODS = {
    "parameters", "named_parameters", "buffers", "named_buffers", "children",
    "named_children", "modules", "named_modules", "to", "cuda", "cpu", "float", "half",
    "double", "bfloat16", "train", "eval", "requires_grad_", "zero_grad", "state_dict",
    "register_buffer", "register_parameter", "reset_parameters", "extra_repr", "type",
    "get_parameter", "get_buffer", "get_submodule", "add_module", "apply",
}
MODULE_OK_METHODS = LAYER_OK_METHODS | {"__init__", "__setattr__", "__getattr__",
                                        "register_module", "__repr__", "__new__"}
HOOK_METHODS = {"register_forward_hook", "register_forward_pre_hook",
                "register_full_backward_hook", "register_backward_hook",
                "register_full_backward_pre_hook", "register_module_forward_hook",
                "register_module_forward_pre_hook", "register_state_dict_pre_hook",
                "register_load_state_dict_post_hook"}
FILE_METHODS = {"read_text", "read_bytes", "write_text", "write_bytes", "tofile"}
BUILTIN_NAMES = set(dir(__import__("builtins")))
SCALAR_BUILTINS = {"len", "int", "float", "bool", "str", "isinstance", "issubclass",
                   "hasattr", "id", "hash", "callable", "repr", "ord", "chr", "print",
                   "format", "hex", "bin", "oct", "all", "any"}
TENSORY_BUILTINS = {"abs", "sum", "min", "max", "pow", "round", "divmod"}
SCALAR_ANNOTATIONS = {"int", "float", "bool", "str", "tuple", "list", "dict", "Tuple",
                      "List", "Dict", "Sequence", "Optional", "Union"}
