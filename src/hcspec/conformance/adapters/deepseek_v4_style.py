"""A target from a module in the DeepSeek-V4 style: the module computes ``(pre, post, comb)``
from the stream state and the *caller* composes the step.

DeepSeek-V4 and the code derived from it (Hugging Face transformers, Megatron-LM, NeMo
Automodel, torchtitan, vLLM, SGLang) split one mHC step (mHC arXiv:2512.24880 Eq. 3, 7–9) in
two. A module reads the streams ``X [B, T, n, d]`` and returns

* ``pre [B, T, n]``: the read weights; the branch input is ``collapsed = Σ_i pre_i X_i``
  (often computed by the module itself and returned instead of ``pre``);
* ``post [B, T, n]``: the write weights;
* ``comb [B, T, n, n]``: the mixing matrix, Sinkhorn–Knopp-projected;

and the decoder layer composes ``X'_j = post_j · F(collapsed) + Σ_i comb[i, j] X_i`` (or with
``comb[j, i]``: the orientation is the package's choice, and getting it wrong is the classic
bug). :func:`v4_style_target` turns such a module into a complete kit target: ``forward``
(the composition, exactly once per call, written here once), ``weights`` in the kit's row
form, ``expand``/``reduce``, ``parameters``, train/eval and the declared
:class:`~hcspec.conformance.protocol.Conventions`. The user writes the module's construction
and one function that calls it (docs/conformance.md has a worked example)::

    from hcspec.conformance.adapters.deepseek_v4_style import Decomposition, v4_style_target
    from hcspec.conformance.protocol import Conventions

    def build(n, d, layer_index):              # the user's module, initialised as in training
        return MyHyperConnection(n, d)

    def decompose(module, x):                  # x [B, T, n, d] -> the module's own tensors
        pre, post, comb = module(x)
        return Decomposition(pre=pre, post=post, comb=comb)

    make = v4_style_target(
        build, decompose, comb="source_target",   # X'_j = Σ_i comb[i, j] X_i
        conventions=Conventions(sinkhorn_variant="softmax", sinkhorn_iterations=20,
                                sinkhorn_iterations_count="rounds_from_softmax"))

Then ``hc-conformance run mypackage.my_adapter:make``.

**Composing through the package's decoder layer.** The composition above is written from the
declared orientation, so a package whose *decoder layer* mis-orients ``comb`` would pass as
long as the declaration is right. Where the package has a decoder layer, pass
``decoder_layer=layer_of``: ``layer_of(module)`` (called once per impl) returns
``step(x, branch)``, which runs the package's own layer class with the module at one site, the
kit's branch in place of that site's sublayer (and its norm), and the layer's other site made
the identity step (:func:`identity_site`: ``post = 0``, ``comb = I``, a zero sublayer), so
``X'`` is exactly the layer's first site; ``forward`` returns it. ``weights`` still reads the
module's tensors in the declared orientation: a layer that composes otherwise than declared
fails the law family, and the published family sees the layer's own output::

    class Attention(nn.Module):          # the kit's branch, handed in through the layer's kwargs
        def forward(self, h, *, hc_branch, **kwargs):
            return hc_branch(h)

    def layer_of(module):
        layer = MyDecoderLayer.__new__(MyDecoderLayer); nn.Module.__init__(layer)
        layer.attn_hc, layer.ffn_hc = module, IdentityHC()  # identity_site, the package's order
        layer.attn, layer.mlp = Attention(), Zero()
        layer.attn_norm = layer.ffn_norm = nn.Identity()
        return lambda x, branch: layer(x, hc_branch=branch)

    make = v4_style_target(build, decompose, comb="source_target", conventions=...,
                           decoder_layer=layer_of)

**Published parameters.** A module that holds a published parameterization's tensors (a
DeepSeek-V4 checkpoint's ``hc_fn``, ``hc_scale``, ``hc_base`` under the package's own key
names) passes ``published=PublishedTensors("deepseek-v4", {"hc_fn": "fn", "hc_scale":
"scale", "hc_base": "base"}, settings)``: the target then declares
``conventions.published`` and offers ``published_parameters()`` (the module's own parameters
under the layout's names) and ``load_published(params)`` (through the module's
``load_state_dict``), and the ``published`` family checks it computes DeepSeek-V4's step from
them.

This module is the helper's public face: the vocabulary lives in ``_v4_terms``, the connection
and the target in ``_v4_style``; import from here.
"""

from __future__ import annotations

from hcspec.conformance.adapters._v4_style import (
    PublishedV4StyleConnection as PublishedV4StyleConnection,
)
from hcspec.conformance.adapters._v4_style import (
    StackOf as StackOf,
)
from hcspec.conformance.adapters._v4_style import (
    V4StyleConnection as V4StyleConnection,
)
from hcspec.conformance.adapters._v4_style import (
    v4_style_target as v4_style_target,
)
from hcspec.conformance.adapters._v4_terms import (
    Build as Build,
)
from hcspec.conformance.adapters._v4_terms import (
    CombOrientation as CombOrientation,
)
from hcspec.conformance.adapters._v4_terms import (
    ComposeDtype as ComposeDtype,
)
from hcspec.conformance.adapters._v4_terms import (
    DecoderLayerOf as DecoderLayerOf,
)
from hcspec.conformance.adapters._v4_terms import (
    Decompose as Decompose,
)
from hcspec.conformance.adapters._v4_terms import (
    Decomposition as Decomposition,
)
from hcspec.conformance.adapters._v4_terms import (
    IdentitySite as IdentitySite,
)
from hcspec.conformance.adapters._v4_terms import (
    LayerStep as LayerStep,
)
from hcspec.conformance.adapters._v4_terms import (
    Logits as Logits,
)
from hcspec.conformance.adapters._v4_terms import (
    PublishedTensors as PublishedTensors,
)
from hcspec.conformance.adapters._v4_terms import (
    ReadPre as ReadPre,
)
from hcspec.conformance.adapters._v4_terms import (
    Reduce as Reduce,
)
from hcspec.conformance.adapters._v4_terms import (
    V4Style as V4Style,
)
from hcspec.conformance.adapters._v4_terms import (
    identity_site as identity_site,
)
