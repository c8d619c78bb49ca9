"""Profiles are data: names come from one place, every knob is a field, no code compares a
profile's name, and a new profile is one entry."""

from __future__ import annotations

import ast
import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pytest

from hcspec.conformance import cli, profiles, pytest_plugin
from hcspec.conformance.outputs import report as rp
from hcspec.conformance.run import timeouts
from hcspec.conformance.run.session import check_implementation

CONFORMANCE = Path(__file__).resolve().parents[2] / "conformance"


def test_names_are_the_profiles_cheapest_first() -> None:
    # the general profiles grow in cost; kernel (for Triton's interpreter) is sized apart, last
    assert profiles.PROFILE_NAMES == ("quick", "ci", "thorough", "kernel")
    assert profiles.DEFAULT_PROFILE in profiles.PROFILE_NAMES
    general = [profiles.get_profile(n).max_examples for n in profiles.PROFILE_NAMES[:3]]
    assert general == sorted(general) and len(set(general)) == 3
    assert profiles.get_profile("kernel").max_examples <= general[0]


def test_every_profile_carries_its_own_knobs() -> None:
    """What code used to decide from the name is in each entry, the kernel profile's time
    limit included (it used to fall back to 600 s silently)."""
    got = {name: (p.timeout, p.compile_backend, p.stack_depth, p.trimmed_examples,
                  p.extra_examples) for name, p in profiles.PROFILES.items()}
    assert got == {"quick": (300.0, "eager", 16, True, False),
                   "ci": (600.0, "aot_eager", 16, False, False),
                   "thorough": (1800.0, "inductor", 32, False, True),
                   "kernel": (600.0, "aot_eager", 16, False, False)}
    assert dict(timeouts.DEFAULT_TIMEOUTS) == {n: p.timeout for n, p in got.items()
                                               for p in [profiles.PROFILES[n]]}
    with pytest.raises(ValueError, match="unknown profile 'nope'"):
        timeouts.default_timeout("nope")
    with pytest.raises(ValueError, match="compile_backend 'cudagraphs'"):
        dataclasses.replace(profiles.PROFILES["ci"], compile_backend="cudagraphs")


def _profile_name_comparisons(tree: ast.AST) -> Iterator[tuple[int, str]]:
    """Comparisons that decide on a profile's name: an operand that is a profile name as a
    string (``x == "quick"``, ``x in ("ci", "thorough")``), or that reads ``.name`` of
    something called ``profile``; and dicts keyed by profile names (a table by name)."""
    names = set(profiles.PROFILE_NAMES)

    def is_name(node: ast.AST) -> bool:
        if isinstance(node, ast.Constant) and node.value in names:
            return True
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            return any(is_name(e) for e in node.elts)
        return False

    def reads_profile_name(node: ast.AST) -> bool:
        return (isinstance(node, ast.Attribute) and node.attr == "name"
                and "profile" in ast.unparse(node.value).lower())

    def is_text(node: ast.AST) -> bool:
        if isinstance(node, ast.Constant):
            return isinstance(node.value, str)
        return isinstance(node, (ast.Tuple, ast.List, ast.Set)) and any(map(is_text, node.elts))

    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            if any(map(is_name, operands)) or (any(map(reads_profile_name, operands))
                                               and any(map(is_text, operands))):
                yield node.lineno, ast.unparse(node)
        elif isinstance(node, ast.Dict):
            keys = [k for k in node.keys if k is not None]
            if len(keys) > 1 and all(is_name(k) for k in keys):
                yield node.lineno, ast.unparse(node)[:80]


def test_the_name_check_finds_a_comparison() -> None:
    """The check below is not vacuous: each form it looks for is found."""
    code = ('if profile.name == "thorough": pass\n'
            'if ctx.profile.name in ("quick",): pass\n'
            'x = name == "kernel"\n'
            'T = {"quick": 1.0, "ci": 2.0}\n'
            'y = self.profile.name != "fast"\n')
    assert [line for line, _ in _profile_name_comparisons(ast.parse(code))] == [1, 2, 3, 4, 5]
    unrelated = 'd = x == "cpu"\nknown = profile.name in PROFILES\n'
    assert list(_profile_name_comparisons(ast.parse(unrelated))) == []


def test_no_code_in_the_kit_compares_a_profile_name() -> None:
    """Profile behaviour is a field of the profile, never a test on its name (the one table of
    profiles, in profiles.py, is the only place their names are written as keys)."""
    found = []
    for path in sorted(CONFORMANCE.rglob("*.py")):
        for line, text in _profile_name_comparisons(ast.parse(path.read_text("utf-8"))):
            if path.name == "profiles.py" and text.startswith("{'quick'"):
                continue  # the table itself
            found.append(f"{path.relative_to(CONFORMANCE)}:{line}: {text}")
    assert found == []


@pytest.fixture
def tiny() -> Iterator[profiles.Profile]:
    """A profile registered for the test only."""
    profile = profiles.Profile("tiny", max_examples=1, derandomize=True, max_batch=1,
                               max_tokens=2, max_n=2, max_d=4, extreme=False, timeout=123.0,
                               compile_backend="eager", stack_depth=3, trimmed_examples=True)
    profiles.register(profile)
    try:
        yield profile
    finally:
        profiles.unregister("tiny")


@pytest.mark.filterwarnings("ignore:A private pytest class:pytest.PytestDeprecationWarning")
def test_a_new_profile_is_one_entry(tiny: profiles.Profile,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    """Registering one Profile is all it takes: the CLI and the pytest plugin offer it, the
    runner runs with its time limit and the depth family stacks its depth."""
    assert "tiny" in profiles.PROFILE_NAMES and profiles.PROFILE_NAMES[-1] == "tiny"
    args = cli.build_parser().parse_args(["run", "reference:hc-static", "--profile", "tiny"])
    assert args.profile == "tiny"
    with pytest.raises(SystemExit):
        cli.build_parser().parse_args(["run", "--help"])
    assert "tiny 123 s" in " ".join(capsys.readouterr().out.split())
    from _pytest.config.argparsing import Parser

    parser = Parser()
    pytest_plugin.pytest_addoption(parser)
    assert parser.parse_known_args(["--hc-profile", "tiny"]).hc_profile == "tiny"
    report = check_implementation("reference:hc-static", profile="tiny", device="cpu",
                                  only=["depth.hc_growth"])
    assert report.profile == "tiny" and report.timeout == 123.0
    result = next(r for r in report.results if r.id == "depth.hc_growth")
    assert result.status == rp.PASSED, result.message
    assert result.examples == 2  # its first two explicit examples (trimmed); it draws none
    curves = result.series[next(iter(result.series))]
    assert {len(values) for values in curves.values()} == {tiny.stack_depth + 1}


def test_a_removed_profile_is_no_longer_offered(tiny: profiles.Profile) -> None:
    with pytest.raises(ValueError, match="a profile named 'tiny' exists"):
        profiles.register(tiny)
    profiles.unregister("tiny")
    assert "tiny" not in profiles.PROFILE_NAMES
    with pytest.raises(SystemExit):
        cli.build_parser().parse_args(["run", "--profile", "tiny"])
    profiles.register(tiny)  # for the fixture's clean-up
