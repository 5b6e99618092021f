"""A pickle-free file format for handing tensors between processes.

Children write their inputs and outputs with save(); the trusted server reads
them with load(). load() never executes anything from the file: the header is
JSON and each tensor is raw bytes with a dtype from a fixed table, so a
candidate that writes a malicious file can at worst produce wrong tensors.

Layout: b"MKT1", 8-byte little-endian header length, UTF-8 JSON header, then
64-byte-aligned blobs. Header: {"tree": node, "blobs": [{"dtype", "shape",
"offset", "nbytes"}], "meta": {...}}. A node is {"t": i, "dev": "cuda"} for
tensor i, {"list": [...]}, {"tuple": [...]}, {"dict": [[key, node], ...]},
{"v": number|bool|str} or {"none": 1}.

On the GPU a tensor may instead cross as a CUDA IPC reference (save_sealed
with ipc=True): its blob has no bytes in the file but an "ipc" entry (the
allocation's handle, the storage's offset and size, the view's offset and
strides, torch's reference-counter handle). The receiving process
maps the sender's device memory: no copy through the host. Whoever loads a
file says what it does with such a blob: "open" it (a child on the GPU),
describe it as a meta tensor ("meta", the server, which has no GPU context),
or reject the file ("refuse", the default). An opened reference is checked
against the mapping the driver reports, so a forged offset or size cannot
reach memory outside the allocation the handle names.

No CUDA IPC event crosses: the sender waits for its device before the file
is written (IPC_EVENTS), and a receiver ignores any event handle it is sent.
An event handle is opened through a shared-memory file of the exporting
process's /dev/shm, which a sandboxed candidate (a /dev/shm of its own)
cannot see; and a candidate's event is nothing the reference should wait on.
"""

from __future__ import annotations

import json
import os
import re
import stat
import struct

MAGIC = b"MKT1"
ALIGN = 64
MAX_HEADER = 64 << 20

_DTYPES = [
    "float32", "float64", "float16", "bfloat16", "int8", "int16", "int32", "int64", "uint8", "bool",
    "complex64", "complex128",
]


class FormatError(ValueError):
    pass


def _torch():
    import torch
    return torch


def _dtype_name(dt) -> str:
    name = str(dt).replace("torch.", "")
    if name not in _DTYPES:
        raise FormatError(f"unsupported tensor dtype {dt}")
    return name


def _encode(obj, blobs: list, tensors: list, depth: int = 0, ipc: bool = False):
    torch = _torch()
    if depth > 32:
        raise FormatError("output nests too deeply")
    if isinstance(obj, torch.Tensor):
        t = obj.detach()
        dev = t.device.type
        blob = {"dtype": _dtype_name(t.dtype), "shape": list(t.shape)}
        ref = _ipc_export(t) if ipc and dev == "cuda" else None
        if ref is not None:
            blob["ipc"] = ref
        blobs.append(blob)
        tensors.append(None if ref is not None else t)
        return {"t": len(blobs) - 1, "dev": dev}
    if obj is None:
        return {"none": 1}
    if isinstance(obj, bool) or isinstance(obj, (int, float, str)):
        if isinstance(obj, float) and (obj != obj or obj in (float("inf"), float("-inf"))):
            return {"v": repr(obj), "float": 1}
        return {"v": obj}
    if isinstance(obj, tuple):
        return {"tuple": [_encode(x, blobs, tensors, depth + 1, ipc) for x in obj]}
    if isinstance(obj, list):
        return {"list": [_encode(x, blobs, tensors, depth + 1, ipc) for x in obj]}
    if isinstance(obj, dict):
        return {"dict": [[str(k), _encode(v, blobs, tensors, depth + 1, ipc)] for k, v in obj.items()]}
    if hasattr(obj, "item") and callable(obj.item):  # numpy scalars
        return _encode(obj.item(), blobs, tensors, depth + 1, ipc)
    raise FormatError(f"cannot hand over a value of type {type(obj).__name__}")


_CHUNK_BYTES = 64 << 20   # tensors are written in slices this large: no whole extra copy in memory


def flat_bytes(t):
    """A flat uint8 view of tensor t's data on its own device (a contiguous
    copy only for a non-contiguous tensor)."""
    torch = _torch()
    t = t.detach()
    if not t.is_contiguous():
        t = t.contiguous()
    flat = t.reshape(-1)
    if flat.dtype == torch.bool:
        flat = flat.to(torch.uint8)
    elif flat.dtype.is_complex:
        flat = torch.view_as_real(flat).reshape(-1)
    if flat.dtype != torch.uint8:
        flat = flat.view(torch.uint8)
    return flat


def _nbytes(t) -> int:
    return t.numel() * t.element_size()


def _write_tensor(f, t) -> None:
    """Writes t's bytes; a device tensor comes over in slices of _CHUNK_BYTES,
    so writing an output never holds a second whole copy of it on the host."""
    if t.numel() == 0:
        return
    flat = flat_bytes(t)
    if flat.device.type == "cpu":
        f.write(flat.numpy().data)
        return
    n = flat.numel()
    for a in range(0, n, _CHUNK_BYTES):
        f.write(flat[a:a + _CHUNK_BYTES].to("cpu").numpy().data)


# Whether IPC references carry torch's event handle (a probe's switch; the
# worker never sets it: see the module docstring).
IPC_EVENTS = False


def _write(f, obj, meta: dict | None, ipc: bool = False, sent: list | None = None) -> None:
    blobs: list = []
    tensors: list = []
    tree = _encode(obj, blobs, tensors, ipc=ipc)
    if sent is not None:
        sent.extend((b["ipc"]["rc"], b["ipc"]["rco"]) for b in blobs if "ipc" in b)
    if ipc and not IPC_EVENTS and any(t is None for t in tensors):
        # The receiver waits on no event: what it maps is complete by now.
        _torch().cuda.synchronize()
    offset = 0
    for b, t in zip(blobs, tensors):
        if t is None:  # an IPC reference: no bytes here
            b["nbytes"] = _shape_nbytes(b["dtype"], b["shape"])
            continue
        b["nbytes"] = _nbytes(t)
        b["offset"] = offset
        offset += (b["nbytes"] + ALIGN - 1) // ALIGN * ALIGN
    header = json.dumps({"tree": tree, "blobs": blobs, "meta": meta or {}}).encode()
    start = len(MAGIC) + 8 + len(header)
    pad = (-start) % ALIGN
    header += b" " * pad
    f.write(MAGIC)
    f.write(struct.pack("<Q", len(header)))
    f.write(header)
    for b, t in zip(blobs, tensors):
        if t is not None:
            _write_tensor(f, t)
            f.write(b"\0" * ((-b["nbytes"]) % ALIGN))


def save(path: str, obj, meta: dict | None = None) -> None:
    tmp = path + ".part"
    with open(tmp, "wb") as f:
        _write(f, obj, meta)
    os.replace(tmp, path)


def _new_memfd() -> int:
    try:
        return os.memfd_create("mk-tensors", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    except (AttributeError, OSError) as e:
        raise OSError(f"memfd_create is not available ({e}); the worker hands tensors between processes "
                      f"only through sealed in-memory files (Linux 3.17 or newer)") from None


def _seal(fd: int) -> None:
    import fcntl
    fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_WRITE | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_SEAL)


def save_sealed(obj, meta: dict | None = None, ipc: bool = False, sent: list | None = None) -> int:
    """Writes obj into an anonymous in-memory file, seals it (no writes, no
    growth, no shrinking, for anyone) and returns its descriptor: how a
    trusted child hands results to the server where no other process can
    change them on the way (a file by path could be swapped). With ipc,
    CUDA tensors go as IPC references where the driver allows it (bytes
    otherwise): the caller must keep them alive while a receiver may map
    them, and, once every receiver is done with them, release them
    (ipc_release) before dropping them; `sent` (a list) collects what to
    release."""
    fd = _new_memfd()
    try:
        with os.fdopen(os.dup(fd), "wb") as f:
            _write(f, obj, meta, ipc, sent)
        _seal(fd)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _open_regular(path: str, max_bytes: int):
    """(fd, stat) of a regular file opened without following links or blocking
    on FIFOs, at most max_bytes long; FormatError otherwise."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise
    except OSError as e:
        raise FormatError(f"{os.path.basename(path)}: cannot open ({e.strerror})") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise FormatError(f"{os.path.basename(path)} is not a regular file")
        if st.st_size > max_bytes:
            raise FormatError(f"{os.path.basename(path)} is {st.st_size} bytes, more than the {max_bytes} allowed")
    except BaseException:
        os.close(fd)
        raise
    return fd, st


def open_regular(path: str, max_bytes: int) -> int:
    """A read-only descriptor of the regular file at path (no links followed,
    no FIFOs), at most max_bytes long: for mapping it with load_fd()."""
    return _open_regular(path, max_bytes)[0]


def _read_untrusted(path: str, max_bytes: int) -> bytearray:
    """Reads a regular file without following links or blocking on FIFOs."""
    fd, st = _open_regular(path, max_bytes)
    try:
        buf = bytearray(st.st_size)
        view = memoryview(buf)
        got = 0
        while got < st.st_size:
            n = os.readv(fd, [view[got:]])
            if n <= 0:
                break
            got += n
        if got != st.st_size:
            raise FormatError(f"{os.path.basename(path)}: short read")
        return buf
    finally:
        os.close(fd)


def read_fd(fd: int, max_bytes: int) -> bytearray:
    """Reads a whole file from an open descriptor (e.g. one already unlinked)."""
    st = os.fstat(fd)
    if st.st_size > max_bytes:
        raise FormatError(f"file is {st.st_size} bytes, more than the {max_bytes} allowed")
    buf = bytearray(st.st_size)
    view = memoryview(buf)
    got = 0
    while got < st.st_size:
        n = os.preadv(fd, [view[got:]], got)
        if n <= 0:
            break
        got += n
    if got != st.st_size:
        raise FormatError("short read")
    return buf


def load(path: str, max_bytes: int = 1 << 40):
    """Returns (obj, meta) from a file written by save(). Raises FormatError if malformed."""
    return loads(_read_untrusted(path, max_bytes))


def sealed_copy(path: str, max_bytes: int = 1 << 40) -> int:
    """Copies a tensor file into an anonymous in-memory file that nobody can
    change any more (memfd sealed against writes, growth and shrinking) and
    returns its descriptor: the server hands one such copy of a problem's
    inputs to every child that needs them (isolation.hand_over). The format
    is checked by whoever loads it."""
    src, st = _open_regular(path, max_bytes)
    fd = -1
    try:
        fd = _new_memfd()
        done = 0
        while done < st.st_size:
            n = os.sendfile(fd, src, done, st.st_size - done)
            if n <= 0:
                raise FormatError(f"{os.path.basename(path)}: short read")
            done += n
        _seal(fd)
        return fd
    except BaseException:
        if fd >= 0:
            os.close(fd)
        raise
    finally:
        os.close(src)


def is_sealed(fd: int) -> bool:
    """True when fd is a memfd that nobody can write, grow or shrink any more
    (what the server demands of a file an untrusted child hands it)."""
    import fcntl
    want = fcntl.F_SEAL_WRITE | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SHRINK
    try:
        return (fcntl.fcntl(fd, fcntl.F_GET_SEALS) & want) == want
    except OSError:
        return False


def load_fd(fd: int, ipc: str = "refuse"):
    """(obj, meta) from a tensor file open at fd, mapped copy-on-write: the
    tensors share the file's pages until written, and writes stay private.
    ipc: what to do with a CUDA IPC reference ("open", "meta" or "refuse")."""
    import mmap
    size = os.fstat(fd).st_size
    if size == 0:
        raise FormatError("empty tensor file")
    return loads(mmap.mmap(fd, size, access=mmap.ACCESS_COPY), ipc)


def loads(buf: bytearray, ipc: str = "refuse"):
    torch = _torch()
    if len(buf) < 12 or bytes(buf[:4]) != MAGIC:
        raise FormatError("not a tensor file (bad magic)")
    (hlen,) = struct.unpack("<Q", bytes(buf[4:12]))
    if hlen > MAX_HEADER or 12 + hlen > len(buf):
        raise FormatError("bad header length")
    try:
        header = json.loads(bytes(buf[12:12 + hlen]).decode())
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise FormatError(f"bad header: {e}") from None
    if not isinstance(header, dict) or not isinstance(header.get("blobs"), list):
        raise FormatError("bad header structure")
    base = 12 + hlen
    tensors = []
    n_ipc = 0
    for b in header["blobs"]:
        if not isinstance(b, dict):
            raise FormatError("bad blob entry")
        name = b.get("dtype")
        shape = b.get("shape")
        off = b.get("offset")
        nbytes = b.get("nbytes")
        if name not in _DTYPES or not isinstance(shape, list) or not all(isinstance(s, int) and s >= 0 for s in shape):
            raise FormatError(f"bad blob dtype/shape {name} {shape}")
        dt = getattr(torch, name)
        if "ipc" in b:
            if ipc == "refuse":
                raise FormatError("the file refers to device memory (CUDA IPC), which is not accepted here")
            if nbytes != _shape_nbytes(name, shape):
                raise FormatError(f"blob size {nbytes} does not match shape {shape} of {name}")
            tensors.append(torch.empty(shape, dtype=dt, device="meta") if ipc == "meta"
                           else _ipc_open(b["ipc"], shape, dt))
            n_ipc += 1
            continue
        if not isinstance(off, int) or not isinstance(nbytes, int) or off < 0 or nbytes < 0:
            raise FormatError("bad blob offset")
        numel = 1
        for s in shape:
            numel *= s
        itemsize = torch.empty((), dtype=dt).element_size()
        if numel * itemsize != nbytes:
            raise FormatError(f"blob size {nbytes} does not match shape {shape} of {name}")
        if base + off + nbytes > len(buf):
            raise FormatError("blob runs past the end of the file")
        if nbytes == 0:
            t = torch.empty(shape, dtype=dt)
        else:
            raw = torch.frombuffer(buf, dtype=torch.uint8, count=nbytes, offset=base + off)
            if dt == torch.bool:
                t = raw.clone().to(torch.bool)
            elif dt.is_complex:
                real = torch.float32 if dt == torch.complex64 else torch.float64
                t = torch.view_as_complex(raw.view(real).reshape(numel, 2)).clone()
            else:
                t = raw.view(dt)  # shares buf (frombuffer keeps it alive): no copy
            t = t.reshape(shape)
        tensors.append(t)

    # A module-level function, not a closure: a recursive closure is a reference
    # cycle that would keep every tensor (and the mapping under it) alive until
    # the garbage collector ran.
    obj = _decode(header.get("tree"), tensors)
    meta = dict(header["meta"]) if isinstance(header.get("meta"), dict) else {}
    if n_ipc:
        meta["_ipc"] = n_ipc   # how many tensors are references to device memory
    return obj, meta


def _decode(node, tensors: list, depth: int = 0):
    if depth > 64 or not isinstance(node, dict):
        raise FormatError("bad tree node")
    if "t" in node:
        i = node["t"]
        if not isinstance(i, int) or not 0 <= i < len(tensors):
            raise FormatError("bad tensor reference")
        return tensors[i]
    if "none" in node:
        return None
    if "v" in node:
        if node.get("float"):
            return float(node["v"])
        v = node["v"]
        if not isinstance(v, (int, float, str, bool)):
            raise FormatError("bad scalar")
        return v
    if "tuple" in node:
        return tuple(_decode(x, tensors, depth + 1) for x in node["tuple"])
    if "list" in node:
        return [_decode(x, tensors, depth + 1) for x in node["list"]]
    if "dict" in node:
        return {str(k): _decode(v, tensors, depth + 1) for k, v in node["dict"]}
    raise FormatError("unknown tree node")


# -- CUDA IPC ----------------------------------------------------------------

_HEX_MAX = 512         # a handle's hex digits at most (CUDA's are 64 bytes)
_IPC_HANDLE_BYTES = 64  # CUDA_IPC_HANDLE_SIZE
_IPC_KEYS = ("device", "handle", "ssize", "soff", "rc", "rco", "event", "sync", "toff", "stride")


def _shape_nbytes(name: str, shape: list) -> int:
    torch = _torch()
    numel = 1
    for s in shape:
        numel *= s
    return numel * torch.empty((), dtype=getattr(torch, name)).element_size()


def _hex(v):
    return None if v is None else bytes(v).hex()


def _ipc_export(t):
    """t's CUDA IPC reference (a dict for the header), or None where the
    driver or this torch cannot share it (the bytes go in the file then)."""
    try:
        st = t.untyped_storage()
        if st.nbytes() == 0:
            return None
        dev, handle, ssize, soff, rc, rco, event, sync = st._share_cuda_()
        if not IPC_EVENTS:
            event, sync = None, False
        return {"device": int(dev), "handle": _hex(handle), "ssize": int(ssize), "soff": int(soff),
                "rc": _hex(rc), "rco": int(rco), "event": _hex(event), "sync": bool(sync),
                "toff": int(t.storage_offset()), "stride": [int(x) for x in t.stride()]}
    except Exception:  # noqa: BLE001 - e.g. a storage mapped from another process
        return None


def _unhex(v, what: str, optional: bool = False):
    if v is None and optional:
        return None
    if not isinstance(v, str) or len(v) > _HEX_MAX:
        raise FormatError(f"bad IPC {what}")
    try:
        return bytes.fromhex(v)
    except ValueError:
        raise FormatError(f"bad IPC {what}") from None


def _mapping_range(ptr: int):
    """(base, size) of the device allocation that holds address ptr, as the
    driver reports it (cuMemGetAddressRange)."""
    import ctypes
    global _CUDA
    if _CUDA is None:
        _CUDA = ctypes.CDLL("libcuda.so.1")
        _CUDA.cuMemGetAddressRange_v2.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_size_t),
                                                 ctypes.c_uint64]
    base, size = ctypes.c_uint64(0), ctypes.c_size_t(0)
    rc = _CUDA.cuMemGetAddressRange_v2(ctypes.byref(base), ctypes.byref(size), ctypes.c_uint64(ptr))
    if rc != 0:
        raise FormatError(f"the IPC reference points at no device allocation (CUDA error {rc})")
    return base.value, size.value


_CUDA = None


# torch's reference counters of exported storages: a shared-memory file
# (RefcountedMapAllocator: a header of _RC_HEADER bytes, then _RC_SLOTS
# int64 counters) in the exporting process's /dev/shm. Exporting sets the
# storage's counter to 1; a receiver that frees its mapping decrements it
# through the same file, by name; the exporter frees the storage only once
# it reads 0, and until then keeps it ("limbo"), whatever its own tensors do.
_RC_HEADER = 64
_RC_SLOTS = 10000
_RC_NAME = re.compile(r"/torch_[0-9_]+")


#: What ipc_release counts (checks.handover.released).
RELEASE_KEYS = ("released", "already", "unexpected")


def release_tally() -> dict:
    """A process's running tally of ipc_release, every count at 0."""
    return dict.fromkeys(RELEASE_KEYS, 0)


def ipc_release(sent: list, counts: dict | None = None) -> dict:
    """The exporter's side of a hand-over that is over: every receiver is
    done with the storages `sent` lists (save_sealed's), so their counters go
    to 0 and the storages are freed as soon as this process drops them.

    A receiver cannot do it where it has a /dev/shm of its own (a sandboxed
    candidate; the reference, which receives the candidate's outputs, never
    sees the candidate's /dev/shm either): its decrement fails silently in
    torch, and without this every storage ever handed over stays allocated
    until the process ends (9 GB a trial at KernelBench's 19_ReLU). Only a
    counter that still reads 1 is set to 0; one at 0 was released by its
    receiver; any other value is left alone and counted as "unexpected".
    Returns {"released", "already", "unexpected"}, added to `counts` when
    given (a process's running tally, release_tally()). Never raises: a counter that cannot
    be reached leaves its storage to torch."""
    import mmap
    if counts is None:
        counts = release_tally()
    by_file: dict = {}
    for rc, slot in sent:
        by_file.setdefault(rc, []).append(slot)
    for rc, slots in by_file.items():
        try:
            name = bytes.fromhex(rc).decode("ascii")  # as _ipc_export wrote it
            if not _RC_NAME.fullmatch(name):
                raise ValueError(f"not a torch counter file: {name!r}")
            fd = os.open("/dev/shm" + name, os.O_RDWR | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0))
        except (OSError, ValueError, UnicodeDecodeError):
            counts["unexpected"] += len(slots)
            continue
        try:
            size = os.fstat(fd).st_size
            with mmap.mmap(fd, size) as m:
                for slot in slots:
                    if not isinstance(slot, int) or slot < 0 or slot >= _RC_SLOTS or _RC_HEADER + 8 * slot + 8 > size:
                        counts["unexpected"] += 1
                        continue
                    at = _RC_HEADER + 8 * slot
                    v = struct.unpack_from("<q", m, at)[0]
                    if v == 1:
                        struct.pack_into("<q", m, at, 0)
                        counts["released"] += 1
                    elif v == 0:
                        counts["already"] += 1
                    else:
                        counts["unexpected"] += 1
        except (OSError, ValueError):
            counts["unexpected"] += len(slots)
        finally:
            os.close(fd)
    return counts


def _ipc_open(ref, shape: list, dt):
    """Maps the device memory an IPC reference names and returns the tensor
    view it describes. Every field comes from another process, so each is
    checked: the storage must lie inside the allocation the handle maps
    (the driver's range, not the sender's word), and the view inside the
    storage (torch's own bounds check in set_)."""
    torch = _torch()
    if not isinstance(ref, dict) or any(k not in ref for k in _IPC_KEYS):
        raise FormatError("bad IPC reference")
    ints = [ref[k] for k in ("device", "ssize", "soff", "rco", "toff")]
    if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in ints):
        raise FormatError("bad IPC reference numbers")
    stride = ref["stride"]
    if (not isinstance(stride, list) or len(stride) != len(shape)
            or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in stride)):
        raise FormatError("bad IPC strides")
    handle = _unhex(ref["handle"], "handle")
    rc = _unhex(ref["rc"], "counter handle")
    event = _unhex(ref["event"], "event handle", optional=True)
    sync = bool(ref["sync"])
    if not IPC_EVENTS:
        # torch wants bytes here even where it waits on no event
        event, sync = bytes(_IPC_HANDLE_BYTES), False
    if not rc.startswith(b"/torch_") or not all(c in b"/torch_0123456789" for c in rc):
        raise FormatError("bad IPC counter handle")
    if ref["device"] != torch.cuda.current_device():
        raise FormatError(f"the IPC reference is on device {ref['device']}, not this process's")
    ssize, soff = ref["ssize"], ref["soff"]
    try:
        st = torch.UntypedStorage._new_shared_cuda(ref["device"], handle, ssize, soff, rc, ref["rco"], event, sync)
    except RuntimeError as e:
        raise FormatError(f"the IPC reference could not be mapped ({str(e)[:200]})") from None
    ptr = st.data_ptr()
    alloc = ptr - soff
    base, size = _mapping_range(alloc)
    if base != alloc or soff + ssize > size:
        raise FormatError(f"the IPC reference reaches outside its allocation ({soff}+{ssize} of {size} bytes)")
    t = torch.empty(0, dtype=dt, device=st.device)
    try:
        t.set_(st, ref["toff"], shape, stride)
    except RuntimeError as e:
        raise FormatError(f"the IPC view does not fit its storage ({str(e)[:200]})") from None
    return t
