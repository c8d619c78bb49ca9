"""The bad-input catalogue: targets and command lines that go wrong in the ways users'
code does, what the kit must say, and the generator of docs/bad-input.md.

Each :class:`BadInput` is one ``hc-conformance run`` command line (profile ``quick``, the JSON
report requested); :func:`observe` runs it in-process and records the exit code, the statuses,
the JSON report and the message the user sees. tests/conformance/test_bad_input.py checks every
case, and that docs/bad-input.md is what :func:`render` produces::

    python -m tests.conformance.bad_inputs        # rewrite docs/bad-input.md
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from hcspec.conformance import cli
from hcspec.conformance.adapters.reference import make_hc_dynamic, make_hc_static

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "bad-input.md"
HERE = "tests.conformance.bad_inputs"
UNWRITABLE = "/nonexistent-hcspec-dir/report.json"

Branch = Callable[[torch.Tensor], torch.Tensor]


# --- targets that go wrong ------------------------------------------------------------------
def factory_raises(n: int, d: int, **kwargs: Any) -> Any:
    """A factory that cannot build anything (e.g. a missing checkpoint)."""
    raise RuntimeError("checkpoint 'hc.pt' not found")


def factory_returns_weights(n: int, d: int, **kwargs: Any) -> Any:
    """Returns a dict of weights instead of a module."""
    return {"h_pre": torch.zeros(n), "h_post": torch.ones(n), "H_res": torch.eye(n)}


class _Wrapped:
    """Delegates to a reference module, overriding ``forward`` or ``weights``."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.n, self.d, self.kind = inner.n, inner.d, inner.kind
        self.conventions = inner.conventions

    def parameters(self) -> Any:
        return self.inner.parameters()

    def weights(self, x: torch.Tensor) -> Any:
        return self.inner.weights(x)

    def forward(self, x: torch.Tensor, branch: Branch) -> Any:
        return self.inner.forward(x, branch)


def _wrap(cls: type[_Wrapped]) -> Callable[..., Any]:
    def make(n: int, d: int, **kwargs: Any) -> Any:
        return cls(make_hc_static(n, d, **kwargs))
    return make


class _OneStream(_Wrapped):
    def forward(self, x: torch.Tensor, branch: Branch) -> Any:
        return self.inner.forward(x, branch)[..., :1, :]


class _Float32(_Wrapped):
    def forward(self, x: torch.Tensor, branch: Branch) -> Any:
        return self.inner.forward(x, branch).float()


class _Tuple(_Wrapped):
    def forward(self, x: torch.Tensor, branch: Branch) -> Any:
        out = self.inner.forward(x, branch)
        return out, {"aux_loss": 0.0}


class _NaN(_Wrapped):
    def forward(self, x: torch.Tensor, branch: Branch) -> Any:
        out = self.inner.forward(x, branch).clone()
        out[..., 0, 0] = float("nan")
        return out


class _WeightsShape(_Wrapped):
    def weights(self, x: torch.Tensor) -> Any:
        h_pre, h_post, H_res = self.inner.weights(x)
        return h_pre, h_post, H_res[0, 0]  # one [n, n] matrix instead of [B, T, n, n]


class _WeightsInf(_Wrapped):
    def weights(self, x: torch.Tensor) -> Any:
        h_pre, h_post, H_res = self.inner.weights(x)
        return h_pre, h_post * float("inf"), H_res


class _NoBranch(_Wrapped):
    def forward(self, x: torch.Tensor, branch: Branch) -> Any:
        H_res = self.inner.weights(x)[2]
        return H_res @ x  # the sublayer is never called


forward_wrong_shape = _wrap(_OneStream)
forward_wrong_dtype = _wrap(_Float32)
forward_returns_tuple = _wrap(_Tuple)
forward_returns_nan = _wrap(_NaN)
weights_wrong_shape = _wrap(_WeightsShape)
weights_not_finite = _wrap(_WeightsInf)
branch_never_called = _wrap(_NoBranch)


def float32_only(n: int, d: int, *, dtype: torch.dtype = torch.float64, **kwargs: Any) -> Any:
    """A correct dynamic HC that refuses every dtype but float32."""
    if dtype != torch.float32:
        raise ValueError(f"dtype: only torch.float32 is supported, got {dtype}")
    return make_hc_dynamic(n, d, dtype=dtype, **kwargs)


def n4_only(n: int, d: int, **kwargs: Any) -> Any:
    """A correct dynamic HC that refuses every expansion rate but n = 4."""
    if n != 4:
        raise ValueError(f"n: only n=4 is supported, got {n}")
    return make_hc_dynamic(n, d, **kwargs)


# --- the catalogue --------------------------------------------------------------------------
@dataclass(frozen=True)
class BadInput:
    """One bad input.

    Attributes:
        name: short id.
        what: the situation, for the docs.
        argv: ``hc-conformance run`` arguments (TARGET and options) before the common ones.
        exit_code: the documented exit code.
        statuses: property id -> the status it must get.
        message: a fragment the user must see (in the failing property's message, or on the
            terminal for usage errors).
        json: the path the JSON report goes to (None: a temporary file).
    """

    name: str
    what: str
    argv: tuple[str, ...]
    exit_code: int
    statuses: dict[str, str]
    message: str
    json: str | None = None


BLOCKED_BY_OUTPUT = {"shape.output": "failed", "law.probed": "blocked"}
CASES: tuple[BadInput, ...] = (
    BadInput("factory raises", "the factory raises for every configuration",
             (f"{HERE}:factory_raises",), 1, BLOCKED_BY_OUTPUT,
             "expected the factory to build the canonical case (n=4, d=8): factory(n=4, d=8, "
             "dtype=torch.float64) raised RuntimeError: checkpoint 'hc.pt' not found"),
    BadInput("factory returns a non-module", "the factory returns a dict of weights",
             (f"{HERE}:factory_returns_weights",), 1, BLOCKED_BY_OUTPUT,
             "the factory returned a dict without the required n, d, kind, forward(x, branch)"),
    BadInput("forward: wrong shape", "forward returns one stream, [B, T, 1, d]",
             (f"{HERE}:forward_wrong_shape",), 1, BLOCKED_BY_OUTPUT,
             "forward returned tensor [2, 3, 1, 8] torch.float64 on cpu, expected tensor "
             "[2, 3, 4, 8] torch.float64 on cpu (the input's)"),
    BadInput("forward: wrong dtype", "forward returns float32 for a float64 input",
             (f"{HERE}:forward_wrong_dtype",), 1, BLOCKED_BY_OUTPUT,
             "forward returned tensor [2, 3, 4, 8] torch.float32 on cpu, expected tensor "
             "[2, 3, 4, 8] torch.float64 on cpu"),
    BadInput("forward: a tuple", "forward returns (output, aux)",
             (f"{HERE}:forward_returns_tuple",), 1, BLOCKED_BY_OUTPUT,
             "forward returned tuple, expected tensor [2, 3, 4, 8] torch.float64 on cpu"),
    BadInput("forward: NaN", "forward returns a NaN entry",
             (f"{HERE}:forward_returns_nan",), 1, BLOCKED_BY_OUTPUT,
             "forward returned 6 non-finite values (NaN/inf) for a finite input, expected "
             "finite values"),
    BadInput("weights: wrong shape", "weights(x) returns H_res as one [n, n] matrix",
             (f"{HERE}:weights_wrong_shape",), 1,
             {"shape.weights": "failed", "law.reported": "blocked", "law.probed": "passed"},
             "weights(x): H_res has shape [4, 4], expected [2, 3, 4, 4]"),
    BadInput("weights: not finite", "weights(x) returns an infinite h_post",
             (f"{HERE}:weights_not_finite",), 1,
             {"shape.weights": "failed", "law.reported": "blocked", "law.probed": "passed"},
             "weights(x): h_post has 24 non-finite entries, expected finite weights"),
    BadInput("branch never called", "forward mixes the streams and never calls the branch",
             (f"{HERE}:branch_never_called",), 1,
             {"shape.output": "passed", "shape.branch_once": "failed", "law.probed": "blocked"},
             "the branch was called 0 times in one forward, expected once"),
    BadInput("float32 only", "a correct impl whose factory refuses every dtype but float32",
             (f"{HERE}:float32_only",), 0,
             {"law.probed": "passed", "gradients.fd_input": "not_applicable",
              "dtype.low_precision": "not_applicable"},
             "the gradient checks run in float64 (finite differences, the spec's closed form at "
             "1e-11); the factory rejected float64 (runs in torch.float32)"),
    BadInput("n = 4 only", "a correct impl whose factory refuses every n but 4",
             (f"{HERE}:n4_only",), 0,
             {"law.probed": "passed", "reduction.n1_prenorm_forward": "not_applicable"},
             "the factory rejected every case"),
    BadInput("TARGET does not import", "the TARGET module fails to import",
             ("tests.conformance.broken_target:make",), 2, {},
             "importing 'tests.conformance.broken_target' failed: ModuleNotFoundError: No "
             "module named 'hcspec_no_such_dependency'"),
    BadInput("TARGET attribute missing", "the TARGET names a factory the module lacks",
             (f"{HERE}:no_such_factory",), 2, {},
             f"module '{HERE}' has no attribute 'no_such_factory'"),
    BadInput("--only unknown id", "--only names a property that does not exist (a typo)",
             ("reference:hc-static", "--only", "law.probe"), 2, {},
             "unknown property id or family 'law.probe'; did you mean law.probed"),
    BadInput("--json unwritable", "--json points into a directory that does not exist",
             ("reference:hc-static", "--only", "shape.output"), 2, {},
             f"cannot write the report to {UNWRITABLE}", json=UNWRITABLE),
)


@dataclass
class Observed:
    """What a case produced."""

    exit_code: int
    stdout: str
    stderr: str
    statuses: dict[str, str] = field(default_factory=dict)
    messages: dict[str, str] = field(default_factory=dict)
    report: dict[str, Any] | None = None
    junit: str | None = None


def observe(case: BadInput) -> Observed:
    """Run the case's command line in-process (``quick``, CPU) with a JSON and a JUnit report."""
    with tempfile.TemporaryDirectory() as tmp:
        json_path = case.json or str(Path(tmp) / "report.json")
        junit_path = str(Path(tmp) / "report.xml")
        argv = ["run", *case.argv, "--profile", "quick", "--device", "cpu", "--no-progress",
                "--json", json_path, "--junit", junit_path]
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = cli.main(argv)
        seen = Observed(code, out.getvalue(), err.getvalue())
        if Path(json_path).exists():
            seen.report = json.loads(Path(json_path).read_text(encoding="utf-8"))
            for r in seen.report["results"]:
                seen.statuses[r["id"]] = r["status"]
                seen.messages[r["id"]] = r["message"]
        if Path(junit_path).exists():
            seen.junit = Path(junit_path).read_text(encoding="utf-8")
    return seen


def shown(case: BadInput, seen: Observed) -> str:
    """The line the user sees for this case: the first failing (else not-applicable) property's
    message containing the case's fragment, else the terminal line containing it."""
    for status in ("failed", "error", "not_applicable"):
        for pid, st in seen.statuses.items():
            if st == status and case.message in seen.messages[pid]:
                return f"{pid} {status}: {seen.messages[pid].splitlines()[0]}"
    for line in (seen.stderr + seen.stdout).splitlines():
        if case.message in line:
            return line.strip()
    return ""


def _summary(seen: Observed) -> str:
    if seen.report is None:
        return "—"
    counts = {s: n for s, n in seen.report["summary"].items() if n}
    text = ", ".join(f"{n} {s.replace('_', ' ')}" for s, n in counts.items()) or "no results"
    if seen.report.get("setup_error"):
        text += " (setup_error set)"
    return text


def render(observed: dict[str, Observed] | None = None) -> str:
    """docs/bad-input.md, from running every case."""
    observed = observed or {c.name: observe(c) for c in CASES}
    lines = [
        "# Bad input: what the kit says",
        "",
        "<!-- generated by `python -m tests.conformance.bad_inputs`; "
        "tests/conformance/test_bad_input.py fails when it is stale -->",
        "",
        "Every case below is a real run of `hc-conformance run TARGET --profile quick --device "
        "cpu --json PATH --junit PATH`; the targets live in `tests/conformance/bad_inputs.py`. "
        "In every case the message names what was expected, the properties that do not depend "
        "on the broken part still run (the rest are reported *blocked*, naming the failed "
        "prerequisite, except those that cannot apply to the target's kind or capabilities: "
        "they are *not applicable*, with the reason), the JSON and JUnit reports are still "
        "written (a usage error writes them with `setup_error` set and no results; an "
        "unwritable path is found before the run, and the other report is written that way) and "
        "the exit code is "
        "the documented one: 0 nothing failed, 1 a property failed, 2 usage error.",
        "",
        "| case | situation | exit | statuses (JSON summary) | what the user sees |",
        "| --- | --- | --- | --- | --- |",
    ]
    for case in CASES:
        seen = observed[case.name]
        message = shown(case, seen).replace("|", "\\|")
        lines.append(f"| {case.name} | {case.what} | {seen.exit_code} | {_summary(seen)} | "
                     f"`{message}` |")
    lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    DOC.write_text(render(), encoding="utf-8")
    print(f"wrote {DOC}")
