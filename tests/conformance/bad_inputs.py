"""The bad-input catalogue: targets and command lines that go wrong in the ways users' code
does (hostile adapters included: hangs, signals, changes to torch's global state), what the
kit must say, and the generator of docs/bad-input.md.

Each :class:`BadInput` is one ``hc-conformance run`` command line (profile ``quick``, the JSON,
JUnit and Markdown reports requested); :func:`observe` runs it — in-process, or in a
subprocess for the cases that hang or are sent a signal — and records the exit code, the
statuses, the reports, the message the user sees and what of torch's global state differs
afterwards. tests/conformance/test_bad_input.py checks every case, and that docs/bad-input.md
is what :func:`render` produces::

    python -m tests.conformance.bad_inputs        # rewrite docs/bad-input.md
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import signal
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from hcspec.conformance import cli
from hcspec.conformance.adapters.reference import make_hc_dynamic, make_hc_static
from hcspec.conformance.run import isolation
from tests.conformance.signalled import run_signalled

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


class _WrongDevice(_Wrapped):
    def forward(self, x: torch.Tensor, branch: Branch) -> Any:
        return self.inner.forward(x, branch).to("meta")


forward_wrong_device = _wrap(_WrongDevice)


def factory_returns_none(n: int, d: int, **kwargs: Any) -> Any:
    """A factory that forgets its ``return``."""
    make_hc_static(n, d, **kwargs)


def factory_allocates_huge(n: int, d: int, **kwargs: Any) -> Any:
    """A factory that asks for 8 TiB (a size computed from the wrong variable)."""
    torch.empty(1 << 40, dtype=torch.float64)
    return make_hc_static(n, d, **kwargs)


def factory_ignores_dtype(n: int, d: int, *, dtype: torch.dtype = torch.float64,
                          **kwargs: Any) -> Any:
    """Builds float32 parameters whatever ``dtype`` asks for."""
    return make_hc_dynamic(n, d, dtype=torch.float32, **kwargs)


def factory_sets_default_dtype(n: int, d: int, **kwargs: Any) -> Any:
    """Calls ``torch.set_default_dtype(torch.float16)`` (a training script's habit)."""
    torch.set_default_dtype(torch.float16)
    return make_hc_static(n, d, **kwargs)


def _patched_forward(impl: Any, before: Callable[[Any], None]) -> Any:
    inner = impl.forward

    def forward(x: torch.Tensor, branch: Branch) -> Any:
        before(impl)
        return inner(x, branch)

    impl.forward = forward
    return impl


def forward_reseeds(n: int, d: int, **kwargs: Any) -> Any:
    """A forward that calls ``torch.manual_seed(1234)`` (to make dropout "reproducible")."""
    return _patched_forward(make_hc_static(n, d, **kwargs), lambda impl: torch.manual_seed(1234))


def _hang(impl: Any = None) -> None:
    print("bad_inputs: this forward hangs now", file=sys.stderr, flush=True)  # a signal cue
    while True:  # a deadlock, as far as the kit can tell
        time.sleep(0.05)


def hang_on_first_call(n: int, d: int, **kwargs: Any) -> Any:
    """A forward that never returns, from its first call."""
    return _patched_forward(make_hc_static(n, d, **kwargs), _hang)


def hang_in_eval(n: int, d: int, **kwargs: Any) -> Any:
    """A forward that never returns in eval mode (only state.deterministic_eval uses it)."""
    def maybe_hang(impl: Any) -> None:
        if getattr(impl, "training", True) is False:
            _hang()
    return _patched_forward(make_hc_static(n, d, **kwargs), maybe_hang)


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
        send: a signal and the stderr text after which it is sent (a subprocess case).
        subprocess: run ``python -m hcspec.conformance`` in a subprocess (a case that hangs
            or is sent a signal); False: in-process.
        slow: the case takes more than a few seconds (its tests are marked slow).
    """

    name: str
    what: str
    argv: tuple[str, ...]
    exit_code: int
    statuses: dict[str, str]
    message: str
    json: str | None = None
    send: tuple[int, str] | None = None
    subprocess: bool = False
    slow: bool = False


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
             "[2, 3, 4, 8] on cpu (the input's shape and device)"),
    BadInput("forward: wrong dtype", "forward returns float32 for a float64 input",
             (f"{HERE}:forward_wrong_dtype",), 1, BLOCKED_BY_OUTPUT,
             "forward returned tensor [2, 3, 4, 8] torch.float32 on cpu, expected tensor "
             "[2, 3, 4, 8] on cpu (the input's shape and device), dtype torch.float64"),
    BadInput("forward: a tuple", "forward returns (output, aux)",
             (f"{HERE}:forward_returns_tuple",), 1, BLOCKED_BY_OUTPUT,
             "forward returned tuple, expected tensor [2, 3, 4, 8] on cpu"),
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
    BadInput("TARGET module does not exist", "a mistyped TARGET: no such module",
             ("nosuch_hc_module:make",), 2, {},
             "TARGET 'nosuch_hc_module:make': there is no module 'nosuch_hc_module' (searched "
             "the current directory and sys.path)"),
    BadInput("TARGET attribute missing", "the TARGET names a factory the module lacks",
             (f"{HERE}:no_such_factory",), 2, {},
             f"module '{HERE}' has no attribute 'no_such_factory'"),
    BadInput("--only unknown id", "--only names a property that does not exist (a typo)",
             ("reference:hc-static", "--only", "law.probe"), 2, {},
             "unknown property id or family 'law.probe'; did you mean law.probed"),
    BadInput("--json unwritable", "--json points into a directory that does not exist",
             ("reference:hc-static", "--only", "shape.output"), 2, {},
             f"cannot write the report to {UNWRITABLE}", json=UNWRITABLE),
    BadInput("forward: wrong device", "forward returns its output on another device (meta)",
             (f"{HERE}:forward_wrong_device",), 1, BLOCKED_BY_OUTPUT,
             "expected tensor [2, 3, 4, 8] on cpu", slow=True),
    BadInput("factory returns None", "the factory forgets its return",
             (f"{HERE}:factory_returns_none",), 1, BLOCKED_BY_OUTPUT,
             "the factory returned a NoneType without the required n, d, kind", slow=True),
    BadInput("factory allocates a huge tensor", "the factory asks for 8 TiB",
             (f"{HERE}:factory_allocates_huge",), 1, BLOCKED_BY_OUTPUT,
             "can't allocate memory", slow=True),
    BadInput("factory ignores dtype", "the factory builds float32 parameters when float64 "
             "is asked for", (f"{HERE}:factory_ignores_dtype",), 1, {},
             "parameters are float32 but float64 was requested", slow=True),
    BadInput("sets the default dtype", "the factory calls torch.set_default_dtype(float16); "
             "the kit restores it, says so in the header, and every property passes",
             (f"{HERE}:factory_sets_default_dtype",), 0, {"law.probed": "passed"},
             "default dtype torch.float32 -> torch.float16", slow=True),
    BadInput("reseeds the global RNG", "forward calls torch.manual_seed(1234)",
             (f"{HERE}:forward_reseeds",), 1, {"law.probed": "passed"},
             "forward calls torch.manual_seed", slow=True),
    BadInput("hang on first call", "forward never returns, from its first call "
             "(--timeout 2)", (f"{HERE}:hang_on_first_call", "--timeout", "2"), 1,
             {"shape.output": "timeout", "law.probed": "blocked"},
             "shape.output did not finish within 2 s", subprocess=True, slow=True),
    BadInput("hang in one property", "forward never returns in eval mode (--timeout 5)",
             (f"{HERE}:hang_in_eval", "--only", "state.deterministic_eval,state.input_unchanged",
              "--timeout", "5"), 1,
             {"state.deterministic_eval": "timeout", "state.input_unchanged": "passed",
              "shape.output": "passed"},
             "state.deterministic_eval did not finish within 5 s", subprocess=True,
             slow=True),
    BadInput("SIGINT before any property", "Ctrl-C while the first forward hangs",
             (f"{HERE}:hang_on_first_call", "--timeout", "0"), 130, {},
             "interrupted (SIGINT) while running setup: calling forward",
             send=(signal.SIGINT, "... calling forward"), subprocess=True, slow=True),
    BadInput("SIGTERM mid-run", "a CI job's timeout (SIGTERM) while a property hangs",
             (f"{HERE}:hang_in_eval", "--only", "state.input_unchanged,state.deterministic_eval",
              "--timeout", "0"), 143,
             {"shape.output": "passed", "state.input_unchanged": "passed"},
             "interrupted (SIGTERM) while running state.deterministic_eval",
             send=(signal.SIGTERM, "bad_inputs: this forward hangs now"), subprocess=True,
             slow=True),
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
    markdown: str | None = None
    leaked: list[str] = field(default_factory=list)


def _in_subprocess(case: BadInput, argv: list[str], cwd: str) -> tuple[int, str, str]:
    """Run ``python -m hcspec.conformance ARGV`` (from the repository root, so the targets
    here import); send the case's signal once its trigger text shows on stderr."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH",
                                                                                  "")]),
               OMP_NUM_THREADS="1")
    return run_signalled([sys.executable, "-m", "hcspec.conformance", *argv], cwd=cwd,
                         env=env, send=case.send)


def observe(case: BadInput) -> Observed:
    """Run the case's command line (``quick``, CPU) with JSON, JUnit and Markdown reports,
    in-process or in a subprocess (:attr:`BadInput.subprocess`); an in-process run records
    what of torch's global state differs afterwards (``leaked``, and restores it)."""
    with tempfile.TemporaryDirectory() as tmp:
        json_path = case.json or str(Path(tmp) / "report.json")
        junit_path = str(Path(tmp) / "report.xml")
        markdown_path = str(Path(tmp) / "report.md")
        argv = ["run", *case.argv, "--profile", "quick", "--device", "cpu", "--no-progress",
                "--json", json_path, "--junit", junit_path, "--markdown", markdown_path]
        if case.subprocess:
            code, stdout, stderr = _in_subprocess(case, argv, str(ROOT))
            seen = Observed(code, stdout, stderr)
        else:
            out, err = io.StringIO(), io.StringIO()
            before = isolation.snapshot()
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                code = cli.main(argv)
            seen = Observed(code, out.getvalue(), err.getvalue())
            seen.leaked = isolation.changes(before, isolation.snapshot())
            isolation.restore(before)
        if Path(markdown_path).exists():
            seen.markdown = Path(markdown_path).read_text(encoding="utf-8")
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
    for status in ("failed", "error", "timeout", "not_applicable"):
        for pid, st in seen.statuses.items():
            if st == status and case.message in seen.messages[pid]:
                return f"{pid} {status}: {seen.messages[pid].splitlines()[0]}"
    for line in (seen.stderr + seen.stdout).splitlines():
        if case.message in line:
            return line.strip()
    return ""


def selection(case: BadInput) -> list[str]:
    """The ids the case's command line runs, in catalogue order (``--only``, with the
    prerequisites it adds; else the whole catalogue)."""
    from hcspec.conformance.families import select

    only = [case.argv[i + 1] for i, a in enumerate(case.argv) if a == "--only"]
    return [p.id for p in select(only or None)]


def invariant(case: BadInput) -> str:
    """What the statuses of the case's JSON report must satisfy, in words (the page states this,
    never the counts, so a new property changes no row; :func:`count_problems` checks it)."""
    listed = ", ".join(f"`{pid}` {status.replace('_', ' ')}"
                       for pid, status in case.statuses.items())
    scope = "every selected property" if "--only" in case.argv else "every property"
    if case.exit_code == 2:
        said = ("no JSON report (the path is unwritable)" if case.json
                else "no results (`setup_error` set)")
    elif case.exit_code == 0:
        said = f"{scope} reported once, each passed or not applicable"
    elif case.exit_code == 1:
        said = (f"{scope} reported once; at least one failed or timed out, the others passed, "
                "blocked or not applicable")
    else:
        said = (f"partial: {scope} either finished or is listed as not run (the running one "
                "among them); none failed")
    return f"{listed}; {said}" if listed else said


def count_problems(case: BadInput, seen: Observed) -> list[str]:
    """Where the report's counts break :func:`invariant` (empty: they keep it): the summary
    counts equal the statuses of the results, every property selected is reported exactly once
    (an interrupted run: finished or not run), and the statuses allowed by the exit code."""
    if seen.report is None or seen.report.get("setup_error"):
        return [] if case.exit_code == 2 else ["no report, or a setup error"]
    problems: list[str] = []
    results = [r["status"] for r in seen.report["results"]]
    ids = [r["id"] for r in seen.report["results"]]
    counted = {s: n for s, n in seen.report["summary"].items() if n}
    tallied = {s: results.count(s) for s in set(results)}
    if counted != tallied:
        problems.append(f"summary {counted} != the results' statuses {tallied}")
    selected = selection(case)
    if case.exit_code in (130, 143):
        covered = ids + [pid for pid in seen.report["not_run"] if pid not in ids]
        if sorted(covered) != sorted(selected):
            problems.append(f"finished + not run {len(covered)} != selected {len(selected)}")
        allowed = {"passed", "not_applicable", "blocked"}
    else:
        if sorted(ids) != sorted(selected):
            problems.append(f"reported {len(ids)} ids, selected {len(selected)}")
        allowed = ({"passed", "not_applicable"} if case.exit_code == 0
                   else {"passed", "not_applicable", "blocked", "failed", "timeout"})
    if case.exit_code == 1 and not {"failed", "timeout"} & set(results):
        problems.append("exit 1 without a failed or timed-out property")
    unexpected = sorted(set(results) - allowed)
    if unexpected:
        problems.append(f"statuses {unexpected} with exit code {case.exit_code}")
    return problems


_NOT_RUN = re.compile(r"not run: ((?:[a-z0-9_]+\.[a-z0-9_]+, ){3,}[a-z0-9_]+\.[a-z0-9_]+)")
_FAMILIES = re.compile(r"expected a family \(([a-z0-9_]+, )+[a-z0-9_]+\)")


def stable(line: str) -> str:
    """``line`` with the lists that grow with the catalogue shortened (the ids not run, the
    family names), so that adding a property or a family changes no row of the page."""
    line = _NOT_RUN.sub(lambda m: "not run: " + ", ".join(m.group(1).split(", ")[:2])
                        + ", … (the others not run, in catalogue order)", line)
    return _FAMILIES.sub("expected a family (shape, law, …)", line)


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
        "cpu --json PATH --junit PATH --markdown PATH` (in a subprocess for the cases that hang "
        "or are sent a signal); the targets live in `tests/conformance/bad_inputs.py`. "
        "In every case the message names what was expected, the properties that do not depend "
        "on the broken part still run (the rest are reported *blocked*, naming the failed "
        "prerequisite, except those that cannot apply to the target's kind or capabilities: "
        "they are *not applicable*, with the reason), the JSON and JUnit reports are still "
        "written (a usage error writes them with `setup_error` set and no results; an "
        "unwritable path is found before the run, and the other report is written that way) and "
        "the exit code is "
        "the documented one: 0 nothing failed, 1 a property failed (or ran past `--timeout`), "
        "2 usage error, 130 interrupted by SIGINT, 143 terminated by SIGTERM (both write the "
        "partial reports: `interrupted: true`, the finished results, the running property, "
        "the ids not run). Whatever a target changes in torch's global state (default dtype, "
        "RNG, grad mode, flags) is named in the header and restored: nothing leaks into the "
        "caller's process.",
        "",
        "The *statuses* column states what the JSON report's statuses must satisfy (never "
        "their counts, which change with every property): the properties named get the status "
        "shown, and the rest follow the exit code. tests/conformance/test_bad_input.py checks "
        "it on every run: the summary's counts equal the results' statuses, every property "
        "selected is reported exactly once (an interrupted run: finished or not run), and no "
        "status contradicts the exit code.",
        "",
        "| case | situation | exit | statuses (checked) | what the user sees |",
        "| --- | --- | --- | --- | --- |",
    ]
    for case in CASES:
        seen = observed[case.name]
        message = stable(shown(case, seen)).replace("|", "\\|")
        lines.append(f"| {case.name} | {case.what} | {seen.exit_code} | {invariant(case)} | "
                     f"`{message}` |")
    lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    DOC.write_text(render(), encoding="utf-8")
    print(f"wrote {DOC}")
