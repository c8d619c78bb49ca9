"""The adapter protocol: what an HC/mHC implementation provides to be checked by the kit.

A *target* is a factory (:class:`Factory`)::

    make(n, d, *, layer_index=0, dtype=torch.float64, device="cpu", seed=0) -> impl

returning one hyper-connected sublayer (an *impl*, :class:`HyperConnectionImpl`) with expansion
rate ``n`` (number of residual streams) and hidden size ``d``. The factory must build the impl
for sublayer ``layer_index`` (HC's static init depends on it: ``h_pre = e_{k mod n}``), with its
parameters in ``dtype`` on ``device``, and make any random initialisation depend only on ``seed``
(two calls with the same arguments give the same impl).

Required of every impl: attributes ``n``, ``d``, ``kind`` (one of :data:`KINDS`) and
``forward(x, branch)`` with ``x: [B, T, n, d]`` (streams on axis -2) and
``branch: Callable[[Tensor [B, T, d]], Tensor [B, T, d]]``; it returns ``X' [B, T, n, d]`` and
calls the branch exactly once (HC arXiv:2409.19606 Eq. 3–5; mHC arXiv:2512.24880 Eq. 3).

Optional capabilities, detected by presence of the attribute (:func:`capabilities`); a property
that needs an absent capability is reported *not applicable* with the reason:

* ``weights(x) -> (h_pre [B,T,n], h_post [B,T,n], H_res [B,T,n,n])`` — the effective per-token
  weights in the row convention ``X' = H_res X + h_post zᵀ``, ``x_in = h_preᵀ X``
  (:class:`SupportsWeights`). Differentiable w.r.t. ``x`` where the weights depend on it.
* ``expand(h [B,T,d]) -> [B,T,n,d]`` and ``reduce(x [B,T,n,d]) -> [B,T,d]`` — stream
  expansion at the network input and reduction at its output (:class:`SupportsExpand`,
  :class:`SupportsReduce`).
* ``parameters() -> Iterable[Tensor]`` — the learnable tensors, as on ``torch.nn.Module``
  (:class:`SupportsParameters`). The kit perturbs them in place (under ``torch.no_grad``) to test
  away from the init and scales them to stress Sinkhorn–Knopp; every impl it perturbs is fresh.
* ``train(mode)`` / ``eval()`` — as on ``torch.nn.Module`` (:class:`SupportsTrainEval`); the
  state properties call ``eval()`` before checking determinism.
* ``conventions`` — a :class:`Conventions`, or a plain ``Mapping`` with its field names (so a
  third party need not import the kit), declaring how the impl differs from the defaults
  (:class:`DeclaresConventions`, :func:`conventions_of`). A declaration changes how a property
  is checked; where a property cannot apply to what is declared (probing the weights on a
  declared replicated state domain) it is not applicable, with the reason. The report shows
  the declaration.
* ``sinkhorn_iterations`` — an int attribute, read as the declared Sinkhorn–Knopp rounds when
  ``conventions`` does not declare them.
* ``published_parameters() -> Mapping[str, Tensor | float]`` — for an impl that declares a
  published parameterization (``conventions.published``): the tensors of that layout, read
  from the module's own state under its own key names (the adapter maps the names; a tensor
  may be a view of a parameter, e.g. transposed, so that gradients reach the parameter), and
  optionally the layout's settings (``hc_eps``, ``norm_eps``, ``sinkhorn_iters``)
  (:mod:`hcspec.reference.published`). ``load_published(params)`` — optional too: set the
  impl's parameters from such a mapping through the package's own loading path.
* ``elementwise_weights(x) -> (h_pre [B,T,n,d], h_post [B,T,n])`` — for an impl whose read is
  element-wise (``conventions.read = "elementwise"``, Qwen4-exp's gated read): the branch input
  is ``x_in = Σ_s h_pre_s ⊙ X_s`` and the write ``X' = H_res X + h_post zᵀ``
  (:class:`SupportsElementwiseWeights`; spec ``gated.general_law``). Such an impl has no
  per-stream ``weights``: the properties that need them are not applicable.
* ``read_map(x) -> (x_in [B,T,d], h_post [B,T,n])`` — the branch input and the write at ``x``
  as the impl computes them, for a read that is not per-stream (``conventions.read`` is
  ``"elementwise"`` or ``"map"``) when element-wise weights are not at hand (e.g. a module that
  returns its branch input and its write, as transformers' ``Qwen4ExpTextGatedResidual``)
  (:class:`SupportsReadMap`). Differentiable w.r.t. ``x``.
* ``logits(x) -> (H̃_pre [B,T,n], H̃_post [B,T,n], H̃_res [B,T,n,n])`` — mHC's pre-activation
  logits (mHC Eq. 7) in the row convention of ``weights`` (:class:`SupportsLogits`),
  differentiable w.r.t. ``x``. With it the kit applies the declared Sinkhorn variant and gates
  to the target's own logits and compares with its weights at identical parameters.
* ``stack(layers) -> Stack`` — ``layers`` consecutive sublayers run with the implementation's
  own carried state (DeepSeek-V4.1's "single-pass" mHC computes the next sublayer's pre-mix at
  the end of the current one and carries it) (:class:`SupportsStack`, :class:`Stack`). Sublayer
  0 is the factory's ``layer_index``; each sublayer has its own parameters. The ``Stack`` has
  ``n``, ``d``, ``layers`` and ``forward(x, branches)`` (``branches[k]`` called once, for
  sublayer k), optionally ``weights(x, branches)`` (the coefficients each sublayer used,
  carried ones included), ``sublayer(k)`` (sublayer k alone, same parameters, no carried
  state) and ``parameters()``; the ``stack.*`` family checks them across sublayers.

* ``threads(count) -> impl`` — the same impl (same parameters) computing with ``count`` CPU
  threads, for native code with its own thread pool (:class:`SupportsThreads`); the
  ``determinism.thread_count`` property compares 1, 2 and 4 threads.

Implementations whose modules use another layout (streams on columns, streams folded into the
batch as ``[B·n, T, d]``, a transposed mixing matrix) are wrapped by a small adapter that
translates to this protocol; docs/conformance.md has a complete worked adapter.

This package is the protocol's public face: it re-exports the target side
(:mod:`~hcspec.conformance.protocol.target`), the declaration record
(:mod:`~hcspec.conformance.protocol.conventions`, with its flat keywords in
:mod:`~hcspec.conformance.protocol.keywords`) and the probes
(:mod:`~hcspec.conformance.protocol.probing`). Import from here.
"""


from hcspec.conformance.protocol.conventions import (
    BranchInput as BranchInput,
)
from hcspec.conformance.protocol.conventions import (
    Conventions as Conventions,
)
from hcspec.conformance.protocol.conventions import (
    ConventionsError as ConventionsError,
)
from hcspec.conformance.protocol.conventions import (
    DeclaresConventions as DeclaresConventions,
)
from hcspec.conformance.protocol.conventions import (
    Read as Read,
)
from hcspec.conformance.protocol.conventions import (
    ReduceScale as ReduceScale,
)
from hcspec.conformance.protocol.conventions import (
    ResidualMixing as ResidualMixing,
)
from hcspec.conformance.protocol.conventions import (
    SinkhornGradient as SinkhornGradient,
)
from hcspec.conformance.protocol.conventions import (
    StackPreMix as StackPreMix,
)
from hcspec.conformance.protocol.conventions import (
    StateDomain as StateDomain,
)
from hcspec.conformance.protocol.conventions import (
    conventions_of as conventions_of,
)
from hcspec.conformance.protocol.probing import (
    UnknownKind as UnknownKind,
)
from hcspec.conformance.protocol.probing import (
    capabilities as capabilities,
)
from hcspec.conformance.protocol.probing import (
    check_required as check_required,
)
from hcspec.conformance.protocol.probing import (
    has_custom_ops as has_custom_ops,
)
from hcspec.conformance.protocol.probing import (
    has_elementwise_weights as has_elementwise_weights,
)
from hcspec.conformance.protocol.probing import (
    has_expand as has_expand,
)
from hcspec.conformance.protocol.probing import (
    has_load_published as has_load_published,
)
from hcspec.conformance.protocol.probing import (
    has_logits as has_logits,
)
from hcspec.conformance.protocol.probing import (
    has_parameters as has_parameters,
)
from hcspec.conformance.protocol.probing import (
    has_published_parameters as has_published_parameters,
)
from hcspec.conformance.protocol.probing import (
    has_read_map as has_read_map,
)
from hcspec.conformance.protocol.probing import (
    has_reduce as has_reduce,
)
from hcspec.conformance.protocol.probing import (
    has_stack as has_stack,
)
from hcspec.conformance.protocol.probing import (
    has_stack_sublayer as has_stack_sublayer,
)
from hcspec.conformance.protocol.probing import (
    has_stack_weights as has_stack_weights,
)
from hcspec.conformance.protocol.probing import (
    has_threads as has_threads,
)
from hcspec.conformance.protocol.probing import (
    has_train_eval as has_train_eval,
)
from hcspec.conformance.protocol.probing import (
    has_weights as has_weights,
)
from hcspec.conformance.protocol.probing import (
    stack_pre_mix as stack_pre_mix,
)
from hcspec.conformance.protocol.target import (
    CAPABILITIES as CAPABILITIES,
)
from hcspec.conformance.protocol.target import (
    CUSTOM_OPS as CUSTOM_OPS,
)
from hcspec.conformance.protocol.target import (
    ELEMENTWISE_WEIGHTS as ELEMENTWISE_WEIGHTS,
)
from hcspec.conformance.protocol.target import (
    EXPAND as EXPAND,
)
from hcspec.conformance.protocol.target import (
    LOAD_PUBLISHED as LOAD_PUBLISHED,
)
from hcspec.conformance.protocol.target import (
    LOGITS as LOGITS,
)
from hcspec.conformance.protocol.target import (
    PARAMETERS as PARAMETERS,
)
from hcspec.conformance.protocol.target import (
    PUBLISHED_PARAMETERS as PUBLISHED_PARAMETERS,
)
from hcspec.conformance.protocol.target import (
    READ_MAP as READ_MAP,
)
from hcspec.conformance.protocol.target import (
    REDUCE as REDUCE,
)
from hcspec.conformance.protocol.target import (
    STACK as STACK,
)
from hcspec.conformance.protocol.target import (
    THREADS as THREADS,
)
from hcspec.conformance.protocol.target import (
    TRAIN_EVAL as TRAIN_EVAL,
)
from hcspec.conformance.protocol.target import (
    WEIGHTS as WEIGHTS,
)
from hcspec.conformance.protocol.target import (
    Branch as Branch,
)
from hcspec.conformance.protocol.target import (
    Factory as Factory,
)
from hcspec.conformance.protocol.target import (
    HyperConnectionImpl as HyperConnectionImpl,
)
from hcspec.conformance.protocol.target import (
    Stack as Stack,
)
from hcspec.conformance.protocol.target import (
    SupportsElementwiseWeights as SupportsElementwiseWeights,
)
from hcspec.conformance.protocol.target import (
    SupportsExpand as SupportsExpand,
)
from hcspec.conformance.protocol.target import (
    SupportsLogits as SupportsLogits,
)
from hcspec.conformance.protocol.target import (
    SupportsParameters as SupportsParameters,
)
from hcspec.conformance.protocol.target import (
    SupportsReadMap as SupportsReadMap,
)
from hcspec.conformance.protocol.target import (
    SupportsReduce as SupportsReduce,
)
from hcspec.conformance.protocol.target import (
    SupportsStack as SupportsStack,
)
from hcspec.conformance.protocol.target import (
    SupportsThreads as SupportsThreads,
)
from hcspec.conformance.protocol.target import (
    SupportsTrainEval as SupportsTrainEval,
)
from hcspec.conformance.protocol.target import (
    SupportsWeights as SupportsWeights,
)
from hcspec.conformance.protocol.target import (
    Weights as Weights,
)
from hcspec.spec.kinds import KINDS as KINDS
from hcspec.spec.kinds import Kind as Kind
