"""Native targets: implementations in C (or any code that can abort the process) run by the kit
in a worker process, so that an abort, a segfault or a hang becomes a failed property with the
signal and the native stderr, never a dead kit.

* :mod:`~hcspec.conformance.native.build`: finds or builds llama.cpp's ggml (CPU backend) from
  the llama-cpp-python sdist (``python -m hcspec.conformance.native.build``); no torch.
* :mod:`~hcspec.conformance.native.ggml`: a small typed ctypes binding of the ggml C API and
  the DeepSeek-V4 hyper-connection step composed as llama.cpp's graph composes it (NumPy
  float32 in and out); no torch.
* :mod:`~hcspec.conformance.native.worker`: the worker process and its client
  (:class:`~hcspec.conformance.native.worker.NativeWorker`,
  :class:`~hcspec.conformance.native.worker.WorkerDied`); no torch.
* :mod:`~hcspec.conformance.native.frames`: the native frames of a worker that crashed (a small
  C signal handler the worker loads) or hung (gdb), or why they are unavailable; no torch.
* :mod:`~hcspec.conformance.native.framework`: a native target as a
  :mod:`hcspec.conformance.bridge` framework whose every call runs in the worker (the kit-side
  impl is the proxy), generic over the native library; a worker's death becomes
  :class:`~hcspec.conformance.native.fault.NativeFault` (a property failure).

Importing this package imports nothing else.
"""
