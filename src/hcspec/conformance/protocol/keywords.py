"""The flat constructor keywords of :class:`~hcspec.conformance.protocol.Conventions`
(``sinkhorn_iterations``, ``h_post_multiplier``, ``h_res_construction``, ...) applied to the
one :class:`~hcspec.spec.record.Formula` record, each checked with a message naming the
keyword."""

from __future__ import annotations

import dataclasses

from hcspec.spec.kinds import KINDS as KINDS  # the one vocabulary of kinds, defined by the spec
from hcspec.spec.kinds import Kind as Kind
from hcspec.spec.record import (
    ACTIVATIONS,
    AXES,
    CONSTRUCTIONS,
    COUNTS,
    STARTS,
    Activation,
    Axis,
    Construction,
    Count,
    Formula,
    Gate,
    SinkhornSpec,
    Start,
)


def _with_keywords(f: Formula, sinkhorn_iterations: int | None,
                   sinkhorn_exact_axis: Axis | None, sinkhorn_variant: Start | None,
                   sinkhorn_additive_eps: float | None, sinkhorn_denominator_eps: float | None,
                   sinkhorn_iterations_count: Count | None, h_pre_eps: float | None,
                   h_post_eps: float | None, h_post_multiplier: float | None) -> Formula:
    """``f`` with the fields the flat constructor keywords of :class:`Conventions` give (None:
    not given) set, each checked with a message naming the keyword.

    Raises:
        ValueError: a keyword's value outside the allowed ones, or a count from the softmax
            without a softmax start.
    """
    sk = f.sinkhorn
    for name, given, allowed in (("sinkhorn_exact_axis", sinkhorn_exact_axis, AXES),
                                 ("sinkhorn_variant", sinkhorn_variant, STARTS),
                                 ("sinkhorn_iterations_count", sinkhorn_iterations_count,
                                  COUNTS)):
        if given is not None:
            _one_of(name, given, allowed)
    for name, value in (("sinkhorn_additive_eps", sinkhorn_additive_eps),
                        ("sinkhorn_denominator_eps", sinkhorn_denominator_eps),
                        ("h_pre_eps", h_pre_eps), ("h_post_eps", h_post_eps)):
        if value is not None and (isinstance(value, bool) or not isinstance(
                value, (int, float)) or not 0.0 <= value < 1.0):
            raise ValueError(f"conventions.{name}: expected 0 <= eps < 1, got {value!r}")
    multiplier = h_post_multiplier
    if multiplier is not None and (isinstance(multiplier, bool) or not isinstance(
            multiplier, (int, float)) or not (0.0 < multiplier < float("inf"))):
        raise ValueError(
            f"conventions.h_post_multiplier: expected a finite number > 0, got {multiplier!r}")
    start = sk.start if sinkhorn_variant is None else sinkhorn_variant
    count = sk.count if sinkhorn_iterations_count is None else sinkhorn_iterations_count
    if count == "rounds_from_softmax" and start != "softmax":
        raise ValueError("conventions.sinkhorn_iterations_count: 'rounds_from_softmax' "
                         "needs sinkhorn_variant='softmax'")
    iterations = sinkhorn_iterations
    if iterations is not None and (
        isinstance(iterations, bool) or not isinstance(iterations, int) or iterations < 1
    ):
        raise ValueError(
            f"conventions.sinkhorn_iterations: expected an int >= 1 or None, "
            f"got {iterations!r}"
        )
    sinkhorn = SinkhornSpec(
        start, count, sk.exact_axis if sinkhorn_exact_axis is None else sinkhorn_exact_axis,
        _given(sinkhorn_additive_eps, sk.additive_eps),
        _given(sinkhorn_denominator_eps, sk.denominator_eps),
        sk.iterations if iterations is None else iterations)
    h_pre = Gate(f.h_pre.multiplier, _given(h_pre_eps, f.h_pre.eps), f.h_pre.activation)
    h_post = Gate(_given(h_post_multiplier, f.h_post.multiplier),
                  _given(h_post_eps, f.h_post.eps), f.h_post.activation)
    if (sinkhorn, h_pre, h_post) == (sk, f.h_pre, f.h_post):
        return f
    return dataclasses.replace(f, sinkhorn=sinkhorn, h_pre=h_pre, h_post=h_post)


def _with_construction(f: Formula, construction: Construction | None,
                       permutations: tuple[tuple[int, ...], ...] | None,
                       h_pre_activation: Activation | None,
                       h_post_activation: Activation | None) -> Formula:
    """``f`` with the flat keywords ``h_res_construction`` (``construction``),
    ``birkhoff_permutations`` (``permutations``; lists are read as tuples),
    ``h_pre_activation`` and ``h_post_activation`` (the gates' ``activation``) set where given.

    Raises:
        ValueError: a value the record rejects (the message names the keyword).
    """
    if construction is None and permutations is None and h_pre_activation is None and (
            h_post_activation is None):
        return f
    for name, given, allowed in (("h_res_construction", construction, CONSTRUCTIONS),
                                 ("h_pre_activation", h_pre_activation, ACTIVATIONS),
                                 ("h_post_activation", h_post_activation, ACTIVATIONS)):
        if given is not None:
            _one_of(name, given, allowed)
    perms = f.permutations
    if permutations is not None:
        try:
            perms = tuple(tuple(int(i) for i in p) for p in permutations)
        except TypeError as exc:
            raise ValueError(f"conventions.birkhoff_permutations: expected a sequence of "
                             f"permutations, got {permutations!r}") from exc
    h_pre = Gate(f.h_pre.multiplier, f.h_pre.eps, _given_str(h_pre_activation,
                                                              f.h_pre.activation))
    h_post = Gate(f.h_post.multiplier, f.h_post.eps, _given_str(h_post_activation,
                                                                f.h_post.activation))
    try:
        return dataclasses.replace(
            f, construction=construction or f.construction, permutations=perms,
            h_pre=h_pre, h_post=h_post)
    except ValueError as exc:
        raise ValueError(f"conventions: {exc}") from exc


def _given_str(value: Activation | None, otherwise: Activation) -> Activation:
    return otherwise if value is None else value


def _given(value: float | None, otherwise: float) -> float:
    """A constructor keyword's value when given, else the record's."""
    return otherwise if value is None else value


def _one_of(name: str, value: object, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ValueError(f"conventions.{name}: expected one of {allowed}, got {value!r}")
