"""Observations, hyper-connections 0.4.11: no input validation, and a random init by default.

A state in the other module's layout is accepted without an error when the sizes happen to
fit (the folded module reads [B, T, n, d] as [(B·n), T, d]; mHCv2 reads a folded tensor as
[..., n, d]); and with layer_index=None the stream h_pre reads at init is drawn with Python's
random module. Neither is a failure of the kit's properties: its adapters validate the layout
and always pass layer_index.
Run (with hyper-connections==0.4.11 installed):
    python docs/findings/repro/hc_no_input_validation.py
"""
import random

import torch
from hyper_connections import HyperConnections, ManifoldConstrainedHyperConnections
from hyper_connections.mHCv2 import ManifoldConstrainedHyperConnections as V2

n, d = 3, 8
m = ManifoldConstrainedHyperConnections(n, dim=d, layer_index=0)
bi, add = m(torch.randn(3, 4, n, d))  # the kit's [B, T, n, d] given to the folded module
print("folded mHC given [3, 4, 3, 8]: branch input", list(bi.shape), "(no error)")
v2 = V2(n, dim=d, layer_index=0)
bi, add = v2(torch.randn(2 * n, n, d))  # a folded [(B·n), T, d] tensor given to mHCv2 (T = n)
print("mHCv2 given folded [6, 3, 8]: branch input", list(bi.shape), "(no error)")
picked = set()
for s in range(30):
    random.seed(s)
    h = HyperConnections(n, dim=d)   # layer_index=None
    picked.add(int(h.static_alpha[:, 0].argmax()))
print("layer_index=None: h_pre stream over 30 constructions:", sorted(picked))
