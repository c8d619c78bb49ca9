"""hcspec benchmarks: connection cost, roofline, Sinkhorn–Knopp, the kit's own speed.

Run ``python -m benchmarks`` (or ``python benchmarks/run.py``); ``--quick`` is the smoke-test
size. The figures go to docs/benchmarks.md and the plots to docs/benchmarks/. Speed and memory
goals live here, in figures the scripts print, never in timed tests.
"""
