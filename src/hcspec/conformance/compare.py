"""``hc-conformance compare TARGET_A TARGET_B``: the same published parameters into two targets,
and a per-case table of how far apart their steps are, against the floor.

Both targets must declare the same published parameterization (``conventions.published``) and
offer ``published_parameters()``; at least one offers ``load_published(params)``. For each case
(the ``published`` family's explicit examples and a few larger ones), the source target is
built with the case's perturbed parameters, its published tensors are loaded into the other
through that one's own loading path, and both run on the same state with the same branch. The
table shows each target's scaled error against the float64 oracle of the published step of
its own tensors, their difference, and the allowance: the sum of the two targets' allowances
(:func:`hcspec.conformance.machinery.published_step.step_allowance`: the law rule in each one's
effective dtype; below float32 the same-precision floor).

Exit status: 0 when every case agrees within the allowance, 1 when a case differs by more, 2
on bad input (an unknown target, a target that declares no or another layout, no loader), one
line on stderr without a traceback.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any

EXIT_OK, EXIT_DIFFER, EXIT_USAGE = 0, 1, 2

CASES = ((2, 3, 4, 8, 0, 0.5), (1, 2, 2, 5, 1, 1.0), (2, 2, 3, 6, 2, 0.3), (1, 4, 4, 16, 3, 1.0))
"""``(batch, tokens, n, d, seed, perturbation)`` of the compared cases."""


class CompareError(ValueError):
    """Bad input to ``compare`` (the message is the one line printed)."""


@dataclass(frozen=True)
class Row:
    """One case of the table (scaled errors, float64)."""

    case: str
    a_vs_oracle: float
    b_vs_oracle: float
    a_vs_b: float
    allowance: float

    @property
    def agrees(self) -> bool:
        """The two steps are within the allowance of each other."""
        return self.a_vs_b <= self.allowance


def register(sub: Any) -> None:
    """Add the ``compare`` subcommand to the CLI's subparsers."""
    parser = sub.add_parser(
        "compare", help="put the same published parameters into two targets and compare "
                        "their steps",
        description=__doc__.split("\n\n")[1].replace("\n", " ") if __doc__ else None)
    parser.add_argument("target_a", metavar="TARGET_A")
    parser.add_argument("target_b", metavar="TARGET_B")
    parser.add_argument("--seed", type=int, default=0, help="added to every case's seed")
    parser.add_argument("--device", default="cpu", help="cpu (default) or cuda")
    parser.set_defaults(handler=command)


def _context(target: Any, device: str, seed: int) -> Any:
    """A property context for ``target`` (float64 unless its factory rejects it)."""
    import torch

    from hcspec.conformance.machinery.base import Context
    from hcspec.conformance.profiles import get_profile
    from hcspec.conformance.protocol import capabilities, conventions_of

    dtype = torch.float64
    try:
        sample = target.factory(2, 4, dtype=dtype, device=device, seed=seed)
    except Exception:
        dtype = torch.float32
        try:
            sample = target.factory(2, 4, dtype=dtype, device=device, seed=seed)
        except Exception as exc:
            raise CompareError(f"{target.name}: the factory rejected float64 and float32: "
                               f"{type(exc).__name__}: {exc}") from exc
    conventions = conventions_of(sample)
    if conventions.published is None:
        raise CompareError(f"{target.name} declares no published parameterization "
                           "(conventions.published)")
    caps = capabilities(sample)
    if "published_parameters" not in caps:
        raise CompareError(f"{target.name} declares {conventions.published} but offers no "
                           "published_parameters()")
    return Context(factory=target.factory, target_name=target.name, kind=sample.kind,
                   conventions=conventions, capabilities=caps, dtype=dtype, device=device,
                   profile=get_profile("ci"), seed=seed)


def _settings(params: dict[str, object]) -> dict[str, object]:
    return {k: v for k, v in params.items() if isinstance(v, (int, float))}


def _order(orders: list[tuple[Any, Any]]) -> tuple[Any, Any]:
    """The first ``(source, sink)`` after whose loading both hold the same settings (the
    sink's loader may take the source's ``hc_eps``/``sinkhorn_iters``; a package's loader
    keeps its configuration's).

    Raises:
        CompareError: the settings differ whichever way the tensors are loaded.
    """
    from hcspec.conformance.machinery import published_step as step
    from hcspec.conformance.strategies import Case

    case = Case(1, 1, 2, 4, seed=0)
    seen = ""
    for source, sink in orders:
        params = step.read(source, source.build.make(case, perturb=False))
        impl = sink.build.make(case, perturb=False)
        impl.load_published(params)
        mine, theirs = _settings(params), _settings(step.read(sink, impl))
        if mine == theirs:
            return source, sink
        seen = (f"{source.target_name} {mine}, {sink.target_name} {theirs}")
    raise CompareError(f"the targets' settings differ and no loader takes them ({seen}): "
                       "they compute different published functions")


def compare(name_a: str, name_b: str, *, device: str = "cpu", seed: int = 0) -> list[Row]:
    """The table of :func:`command` as rows.

    Raises:
        CompareError: as described in the module docstring.
    """
    import torch

    from hcspec.conformance import metrics
    from hcspec.conformance.machinery import published_step as step
    from hcspec.conformance.machinery.base import f64
    from hcspec.conformance.strategies import Case
    from hcspec.conformance.subjects.targets import TargetError, resolve

    try:
        a, b = resolve(name_a), resolve(name_b)
    except (TargetError, ImportError) as exc:
        raise CompareError(str(exc).splitlines()[0]) from exc
    ctx_a, ctx_b = _context(a, device, seed), _context(b, device, seed)
    if ctx_a.conventions.published != ctx_b.conventions.published:
        raise CompareError(f"{a.name} declares {ctx_a.conventions.published}, {b.name} "
                           f"declares {ctx_b.conventions.published}: nothing to compare")
    orders = [(src, dst) for src, dst in ((ctx_a, ctx_b), (ctx_b, ctx_a))
              if "load_published" in dst.capabilities]
    if not orders:
        raise CompareError(f"neither {a.name} nor {b.name} offers load_published(params)")
    source, sink = _order(orders)
    rows: list[Row] = []
    for batch, tokens, n, d, case_seed, perturb in CASES:
        case = Case(batch, tokens, n, d, seed=case_seed + seed, perturb=perturb)
        try:
            impl_src = source.build.make(case)
            impl_sink = sink.build.make(case, perturb=False)
        except Exception as exc:
            raise CompareError(f"n={n}, d={d}: {type(exc).__name__}: "
                               f"{str(exc).splitlines()[0]}") from exc
        params = {k: (v.detach().clone() if isinstance(v, torch.Tensor) else v)
                  for k, v in step.read(source, impl_src).items()}
        impl_sink.load_published(params)
        outs, errors, floors = [], [], []
        for ctx, impl in ((source, impl_src), (sink, impl_sink)):
            x = ctx.inputs.state(case)
            own = step.read(ctx, impl)
            with torch.no_grad():
                out = f64(ctx.observe.forward(impl, x, ctx.inputs.branch(case)))
            want = step.oracle(ctx, case, own, x)
            scale = max(float(f64(x).abs().max()), float(want.abs().max()))
            outs.append(out)
            errors.append(metrics.scaled_error(out, want, scale))
            floors.append(step.step_allowance(ctx, case, own, x, want, scale))
        scale = max(float(outs[0].abs().max()), 1.0)
        by_role = (errors, floors) if source is ctx_a else (errors[::-1], floors[::-1])
        rows.append(Row(f"B={batch} T={tokens} n={n} d={d} seed={case.seed}",
                        by_role[0][0], by_role[0][1],
                        metrics.scaled_error(outs[0], outs[1], scale), sum(by_role[1])))
    return rows


def command(args: argparse.Namespace) -> int:
    """Print the table; exit 0 (agree), 1 (a case differs beyond the allowance), 2 (bad
    input, one line on stderr)."""
    import sys

    from rich.console import Console
    from rich.table import Table

    try:
        rows = compare(args.target_a, args.target_b, device=args.device, seed=args.seed)
    except CompareError as exc:
        print(f"hc-conformance compare: {exc}", file=sys.stderr)
        return EXIT_USAGE
    console = Console() if Console().is_terminal else Console(width=160)
    table = Table(header_style="bold", title=f"{args.target_a} vs {args.target_b}: the same "
                  "published parameters (scaled errors)")
    for column in ("case", "A vs oracle", "B vs oracle", "A vs B", "allowance", "verdict"):
        table.add_column(column)
    for row in rows:
        table.add_row(row.case, f"{row.a_vs_oracle:.3g}", f"{row.b_vs_oracle:.3g}",
                      f"{row.a_vs_b:.3g}", f"{row.allowance:.3g}",
                      "agree" if row.agrees else "[red]DIFFER[/]")
    console.print(table)
    differ = [r for r in rows if not r.agrees]
    console.print(f"result: {'DIFFER' if differ else 'AGREE'} "
                  f"({len(rows) - len(differ)}/{len(rows)} cases within the allowance)",
                  highlight=False)
    return EXIT_DIFFER if differ else EXIT_OK
