"""What the figures were measured on: CPU model, cores, torch, threads, load."""

from __future__ import annotations

import os
import platform
import sys

import torch


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo (Linux), else :func:`platform.processor`."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.partition(":")[2].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def load_average() -> str:
    """The 1/5/15-minute load averages, or ``n/a`` where the OS has none."""
    try:
        return " / ".join(f"{v:.2f}" for v in os.getloadavg())
    except OSError:
        return "n/a"


def transparent_huge_pages() -> str:
    """The kernel's transparent-huge-page mode (the bracketed choice), or ``n/a``."""
    try:
        with open("/sys/kernel/mm/transparent_hugepage/enabled") as f:
            text = f.read()
    except OSError:
        return "n/a"
    start, end = text.find("["), text.find("]")
    return text[start + 1:end] if 0 <= start < end else text.strip()


def describe(device: str) -> dict[str, str]:
    """The machine description printed at the top of the report."""
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = os.cpu_count() or 0
    info = {
        "CPU": cpu_model(),
        "cores (logical / usable by this process)": f"{os.cpu_count()} / {usable}",
        "torch": torch.__version__,
        "torch intra-op threads": str(torch.get_num_threads()),
        "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "unset"),
        "BLAS": ("MKL" if torch.backends.mkl.is_available()  # type: ignore[no-untyped-call]
                 else "not MKL (see torch.__config__.show())"),
        "Python": f"{sys.version.split()[0]} ({platform.platform()})",
        "transparent huge pages": transparent_huge_pages(),
        "THP_MEM_ALLOC_ENABLE": os.environ.get("THP_MEM_ALLOC_ENABLE", "unset"),
        "device": device,
    }
    if torch.cuda.is_available():
        info["CUDA device"] = torch.cuda.get_device_name(0)
    return info
