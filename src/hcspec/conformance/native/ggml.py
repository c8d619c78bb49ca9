"""A small typed ctypes binding of llama.cpp's ggml C API, and DeepSeek-V4's hyper-connection
step composed with it as llama.cpp's own graph composes it.

Written against the ggml vendored by llama-cpp-python 0.3.36 (llama.cpp 0c1e5709; headers
``ggml/include/ggml.h``, ``ggml-backend.h``, ``ggml-alloc.h``, ``ggml-cpu.h``). No C code of
llama.cpp is copied: only the public functions are declared, by their signatures.

**What is bound.** A context (:class:`Graph`: ``ggml_init`` with ``no_alloc``, ``ggml_free``),
tensors (``ggml_new_tensor_{1,2,3}d``, views, reshapes), the ops below, a graph
(``ggml_new_graph``, ``ggml_build_forward_expand``), a backend (``ggml_backend_cpu_init`` or,
with the registry library, ``ggml_backend_init_by_name``: ``"CPU"``, ``"CUDA0"`` ...), the
tensors' memory on that backend (``ggml_backend_alloc_ctx_tensors``), data in and out
(``ggml_backend_tensor_set``/``get`` from and into NumPy) and the computation
(``ggml_backend_graph_compute``, the CPU thread count by ``ggml_backend_cpu_set_n_threads``).

**Dtypes.** float32 only (``GGML_TYPE_F32``): every array crosses as C-contiguous float32
(:func:`Graph.tensor` converts), every result comes back float32. The fused hyper-connection
ops assert float32 themselves.

**Axes.** ggml numbers axes from the fastest (``ne0``); a NumPy array of shape
``(a, b, c)`` (C order) is the ggml tensor ``ne = (c, b, a)``. A state ``X [B, T, n, d]`` is
therefore the ggml ``x [n_embd = d, hc = n, n_tokens = B·T]`` of deepseek4.cpp.

**Failures.** A violated ``GGML_ASSERT`` prints ``file:line: GGML_ASSERT(...) failed`` on stderr
and calls ``abort()``: the process dies (SIGABRT). Run this in a worker process
(:mod:`hcspec.conformance.native.worker`).

No torch.
"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import numpy as np
import numpy.typing as npt

from hcspec.conformance.native import build as _build

F32: Final = 0
"""``GGML_TYPE_F32``."""

SUPPORTED_DTYPES: Final[tuple[str, ...]] = ("float32",)
"""The dtypes the bridge moves in and out (NumPy names)."""

FloatArray = npt.NDArray[np.float32]

_P = ctypes.c_void_p
_I64 = ctypes.c_int64
_F = ctypes.c_float
_SZ = ctypes.c_size_t


class _InitParams(ctypes.Structure):
    """``struct ggml_init_params`` (ggml.h)."""

    _fields_ = [("mem_size", ctypes.c_size_t), ("mem_buffer", ctypes.c_void_p),
                ("no_alloc", ctypes.c_bool)]


_SIGNATURES: Final[dict[str, tuple[object, list[object]]]] = {
    # context and graph (libggml-base)
    "ggml_init": (_P, [_InitParams]),
    "ggml_free": (None, [_P]),
    "ggml_tensor_overhead": (_SZ, []),
    "ggml_graph_overhead": (_SZ, []),
    "ggml_new_graph": (_P, [_P]),
    "ggml_build_forward_expand": (None, [_P, _P]),
    # tensors
    "ggml_new_tensor_1d": (_P, [_P, ctypes.c_int, _I64]),
    "ggml_new_tensor_2d": (_P, [_P, ctypes.c_int, _I64, _I64]),
    "ggml_new_tensor_3d": (_P, [_P, ctypes.c_int, _I64, _I64, _I64]),
    "ggml_view_1d": (_P, [_P, _P, _I64, _SZ]),
    "ggml_view_2d": (_P, [_P, _P, _I64, _I64, _SZ, _SZ]),
    "ggml_reshape_2d": (_P, [_P, _P, _I64, _I64]),
    "ggml_reshape_3d": (_P, [_P, _P, _I64, _I64, _I64]),
    "ggml_nbytes": (_SZ, [_P]),
    # primitive ops
    "ggml_rms_norm": (_P, [_P, _P, _F]),
    "ggml_mul_mat": (_P, [_P, _P, _P]),
    "ggml_mul": (_P, [_P, _P, _P]),
    "ggml_add": (_P, [_P, _P, _P]),
    "ggml_sigmoid": (_P, [_P, _P]),
    "ggml_silu": (_P, [_P, _P]),
    "ggml_scale": (_P, [_P, _P, _F]),
    "ggml_scale_bias": (_P, [_P, _P, _F, _F]),
    # the fused DeepSeek-V4 hyper-connection ops
    "ggml_dsv4_hc_comb": (_P, [_P, _P, _P, _P, _F, ctypes.c_int32]),
    "ggml_dsv4_hc_pre": (_P, [_P, _P, _P]),
    "ggml_dsv4_hc_pre_gated": (_P, [_P, _P, _P, _F]),
    "ggml_dsv4_hc_post": (_P, [_P, _P, _P, _P, _P]),
    # backends
    "ggml_backend_alloc_ctx_tensors": (_P, [_P, _P]),
    "ggml_backend_buffer_free": (None, [_P]),
    "ggml_backend_free": (None, [_P]),
    "ggml_backend_tensor_set": (None, [_P, _P, _SZ, _SZ]),
    "ggml_backend_tensor_get": (None, [_P, _P, _SZ, _SZ]),
    "ggml_backend_graph_compute": (ctypes.c_int, [_P, _P]),
    "ggml_backend_name": (ctypes.c_char_p, [_P]),
}
_CPU_SIGNATURES: Final[dict[str, tuple[object, list[object]]]] = {
    "ggml_backend_cpu_init": (_P, []),
    "ggml_backend_cpu_set_n_threads": (None, [_P, ctypes.c_int]),
    "ggml_backend_is_cpu": (ctypes.c_bool, [_P]),
}
_REGISTRY_SIGNATURES: Final[dict[str, tuple[object, list[object]]]] = {
    "ggml_backend_init_by_name": (_P, [ctypes.c_char_p, ctypes.c_char_p]),
    "ggml_backend_dev_count": (_SZ, []),
    "ggml_backend_dev_get": (_P, [_SZ]),
    "ggml_backend_dev_name": (ctypes.c_char_p, [_P]),
}


class Library:
    """The ggml shared libraries of one directory, loaded once (``RTLD_GLOBAL``), with the
    signatures above set.

    Attributes:
        directory: where the libraries are.
        base, cpu: ``libggml-base`` and ``libggml-cpu``.
        registry: ``libggml`` (backend registry) or None when the directory lacks it.

    Raises:
        ImportError: (construction) a required library is missing.
        OSError: (construction) a library does not load.
        AttributeError: (construction) a bound symbol is absent (another ggml version).
    """

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        missing = _build.missing_libraries(directory)
        if missing:
            raise ImportError(f"{directory}: missing {missing}")
        mode = ctypes.RTLD_GLOBAL
        self.base = ctypes.CDLL(str(_build.library_file(directory, "ggml-base")), mode=mode)
        self.cpu = ctypes.CDLL(str(_build.library_file(directory, "ggml-cpu")), mode=mode)
        registry = _build.library_file(directory, "ggml")
        self.registry = None if registry is None else ctypes.CDLL(str(registry), mode=mode)
        for lib, table in ((self.base, _SIGNATURES), (self.cpu, _CPU_SIGNATURES),
                           (self.registry, _REGISTRY_SIGNATURES)):
            if lib is None:
                continue
            for name, (restype, argtypes) in table.items():
                fn = getattr(lib, name)
                fn.restype = restype
                fn.argtypes = argtypes

    def devices(self) -> list[str]:
        """The names of the backend devices the registry offers (``["CPU"]`` without the
        registry library)."""
        if self.registry is None:
            return ["CPU"]
        count = int(self.registry.ggml_backend_dev_count())
        return [self.registry.ggml_backend_dev_name(self.registry.ggml_backend_dev_get(i)).decode()
                for i in range(count)]


_LOADED: dict[Path, Library] = {}


def load(directory: Path | None = None) -> Library:
    """The :class:`Library` of ``directory`` (default: :func:`build.find_library`), loaded once
    per process.

    Raises:
        ImportError: no library (the message names the build command).
    """
    where = (directory or _build.find_library()).resolve()
    if where not in _LOADED:
        _LOADED[where] = Library(where)
    return _LOADED[where]


@dataclass(frozen=True)
class Backend:
    """Where a graph is computed.

    Attributes:
        name: ``"CPU"`` (the CPU backend of ``libggml-cpu``) or a registry device name
            (``"CUDA0"``), which needs ``libggml`` built with that backend.
        threads: the CPU backend's thread count (ignored by other backends).
    """

    name: str = "CPU"
    threads: int = 1


class Graph:
    """One ggml context and the graph built in it, computed once on a :class:`Backend`.

    Use: create input tensors with :meth:`tensor` (data given now, copied in after
    allocation), build ops through :attr:`lib` with :attr:`ctx`, then :meth:`compute` the
    outputs, which returns them as NumPy float32 arrays of the requested shapes. Freed by
    :meth:`close` (or the ``with`` statement).

    Raises:
        RuntimeError: (construction) ``ggml_init`` or the backend's initialisation returned
            NULL; (compute) allocation failed, or the computation returned a non-zero status.
    """

    def __init__(self, lib: Library, backend: Backend, max_tensors: int = 256) -> None:
        self.lib = lib
        self.backend_spec = backend
        size = max_tensors * int(lib.base.ggml_tensor_overhead()) + int(
            lib.base.ggml_graph_overhead())
        self.ctx = lib.base.ggml_init(_InitParams(size, None, True))
        if not self.ctx:
            raise RuntimeError("ggml_init returned NULL")
        self._inputs: list[tuple[int, FloatArray]] = []
        self._buffer: int | None = None
        self._graph: int | None = None
        self.backend = self._init_backend(backend)

    def _init_backend(self, spec: Backend) -> int:
        if spec.name == "CPU" or self.lib.registry is None:
            if spec.name != "CPU":
                raise RuntimeError(f"backend {spec.name!r} needs libggml (the registry), absent "
                                   f"from {self.lib.directory}")
            handle = self.lib.cpu.ggml_backend_cpu_init()
        else:
            handle = self.lib.registry.ggml_backend_init_by_name(spec.name.encode(), None)
        if not handle:
            raise RuntimeError(f"cannot initialise the ggml backend {spec.name!r} "
                               f"(devices: {self.lib.devices()})")
        if self.lib.cpu.ggml_backend_is_cpu(handle):
            self.lib.cpu.ggml_backend_cpu_set_n_threads(handle, int(spec.threads))
        return int(handle)

    def tensor(self, array: npt.ArrayLike) -> int:
        """A new float32 tensor of ``array``'s shape (reversed into ggml's ``ne``; 1 to 3
        axes) whose data is ``array``, copied in at :meth:`compute`.

        Raises:
            ValueError: not 1 to 3 axes.
        """
        data = np.ascontiguousarray(array, dtype=np.float32)
        ne = tuple(reversed(data.shape))
        base = self.lib.base
        if len(ne) == 1:
            t = base.ggml_new_tensor_1d(self.ctx, F32, *ne)
        elif len(ne) == 2:
            t = base.ggml_new_tensor_2d(self.ctx, F32, *ne)
        elif len(ne) == 3:
            t = base.ggml_new_tensor_3d(self.ctx, F32, *ne)
        else:
            raise ValueError(f"tensor: expected 1 to 3 axes, got shape {data.shape}")
        self._inputs.append((int(t), data))
        return int(t)

    def compute(self, outputs: Sequence[tuple[int, tuple[int, ...]]]) -> list[FloatArray]:
        """Build the graph of ``outputs`` (``(tensor, numpy shape)`` each), allocate every
        tensor of the context on the backend, copy the inputs in, compute, and return the
        outputs as float32 arrays of their shapes (:meth:`prepare`, :meth:`run`,
        :meth:`fetch`).

        Raises:
            RuntimeError: see the class.
        """
        self.prepare([t for t, _ in outputs])
        self.run()
        return self.fetch(outputs)

    def prepare(self, outputs: Sequence[int]) -> None:
        """Build the graph of ``outputs``, allocate the context's tensors on the backend and
        copy the inputs in (once; :meth:`run` may then compute it again and again, as
        llama.cpp reuses its compute buffers).

        Raises:
            RuntimeError: allocation failed.
        """
        base = self.lib.base
        self._graph = base.ggml_new_graph(self.ctx)
        for t in outputs:
            base.ggml_build_forward_expand(self._graph, t)
        buffer = base.ggml_backend_alloc_ctx_tensors(self.ctx, self.backend)
        if not buffer:
            raise RuntimeError("ggml_backend_alloc_ctx_tensors returned NULL")
        self._buffer = int(buffer)
        for t, data in self._inputs:
            base.ggml_backend_tensor_set(t, data.ctypes.data, 0, data.nbytes)

    def run(self) -> None:
        """Compute the prepared graph on the backend.

        Raises:
            RuntimeError: a non-zero status.
        """
        status = self.lib.base.ggml_backend_graph_compute(self.backend, self._graph)
        if status != 0:
            raise RuntimeError(f"ggml_backend_graph_compute returned status {status}")

    def fetch(self, outputs: Sequence[tuple[int, tuple[int, ...]]]) -> list[FloatArray]:
        """The tensors ``outputs`` (``(tensor, numpy shape)`` each) as float32 arrays.

        Raises:
            RuntimeError: a shape of another size than the tensor.
        """
        base = self.lib.base
        results: list[FloatArray] = []
        for t, shape in outputs:
            out = np.empty(shape, dtype=np.float32)
            if int(base.ggml_nbytes(t)) != out.nbytes:
                raise RuntimeError(f"output of {int(base.ggml_nbytes(t))} bytes, expected "
                                   f"shape {shape}")
            base.ggml_backend_tensor_get(t, out.ctypes.data, 0, out.nbytes)
            results.append(out)
        return results

    def close(self) -> None:
        """Free the buffer, the backend and the context (idempotent)."""
        base = self.lib.base
        if self._buffer is not None:
            base.ggml_backend_buffer_free(self._buffer)
            self._buffer = None
        if self.backend:
            base.ggml_backend_free(self.backend)
            self.backend = 0
        if self.ctx:
            base.ggml_free(self.ctx)
            self.ctx = None

    def __enter__(self) -> Graph:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


