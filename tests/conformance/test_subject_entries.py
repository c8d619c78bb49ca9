"""One entry per target: the findings and lanes in the declarations, the expected-failures files
generated from them, and target declarations shipped by other packages (entry points)."""

from __future__ import annotations

import re
import shutil
import sys
import textwrap
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from hcspec.conformance import cli
from hcspec.conformance.adapters._builtin import BuiltinTarget, Finding, Lane
from hcspec.conformance.adapters.declarations import sglang_ihc
from hcspec.conformance.subjects import entries, expected, plugins, targets

ROOT = Path(__file__).resolve().parents[2]


def _with_lane() -> list[entries.Entry]:
    return entries.entries()


def test_committed_files_are_the_generated_ones() -> None:
    assert entries.stale(ROOT) == [], (
        "run `python -m hcspec.conformance.subjects.expected --write`")


def test_every_third_party_target_has_a_lane_and_a_file() -> None:
    laned = {e.target.name for e in _with_lane()}
    third_party = {name for name, t in targets.BUILTIN.items()
                   if t.distribution != "hcspec" and name not in targets.PLUGIN_TARGETS}
    # torchtitan's adapter loads one file of a checkout: no lane builds it
    assert third_party - laned == {"torchtitan:deepseek-v4"}
    assert len(laned) == 41
    for entry in _with_lane():
        assert (ROOT / entry.path).is_file()


def test_generated_files_parse_against_the_catalogue() -> None:
    from hcspec.conformance.families import BY_ID

    pairs = 0
    for entry in _with_lane():
        # unknown ids, globs matching nothing and a property scoped twice are errors here
        pairs += len(expected.load(ROOT / entry.path, known=BY_ID))
    assert pairs == 96


def test_one_root_cause_is_one_entry() -> None:
    dropout = next(e for e in _with_lane() if e.target.name == "hyper_connections:hc-dropout")
    assert len(dropout.target.findings) == 1
    lines = [line for line in entries.render(dropout).splitlines()
             if not line.startswith("#")]
    assert len(lines) == 19
    assert all(line.endswith("[dropout-on-residual]") for line in lines)
    assert lines[0].startswith("law.reported: bug: (training mode only) dropout is applied")
    # the mHC module shows the same root cause on other properties: the same key
    mhc = next(e for e in _with_lane() if e.target.name == "hyper_connections:mhc-dropout")
    assert mhc.target.findings[0].key == dropout.target.findings[0].key


def test_the_findings_index_has_one_row_per_root_cause() -> None:
    text = (ROOT / "docs/findings/index.md").read_text(encoding="utf-8")
    rows = [line for line in text.splitlines() if line.startswith("| `")]
    dropout = [row for row in rows if row.startswith("| `dropout-on-residual` | bug |")]
    assert len(dropout) == 1
    assert "`hyper_connections:hc-dropout`, `hyper_connections:mhc-dropout`" in dropout[0]
    assert dropout[0].count("`, `") >= 25  # the union of the 19 and 20 properties, and targets
    keys = {(e.target.distribution, f.key) for e in _with_lane() for f in e.target.findings}
    assert len(rows) == len(keys) == 25


def test_a_finding_is_scoped_by_profile() -> None:
    ihc = next(t for t in sglang_ihc.TARGETS if t.name == "sglang:ihc")
    assert ihc.lane is not None and ihc.lane.profile == "kernel"
    assert entries.scoped(ihc) == []
    assert entries.scoped(ihc, "ci") == [sglang_ihc.FORWARD_ONLY]
    assert "gradients.fd_input" in entries.expected_failures(ihc, "ci")
    assert entries.expected_failures(ihc) == {}
    text = (ROOT / ".ci/expected-failures/sglang/ihc.txt").read_text(encoding="utf-8")
    assert "gradients." not in text and "# none: every applicable property passes" in text


def test_dtypes_and_notes_are_rendered() -> None:
    text = (ROOT / ".ci/expected-failures/hyper_connections/mhc.txt").read_text(encoding="utf-8")
    assert ("gradients.finite_extreme: bug: the default plain-domain Sinkhorn–Knopp fails at "
            "large logit gaps (log_domain_sinkhorn=True does not); NaN gradients (in float32), "
            "docs/findings/repro/hc_plain_sinkhorn_large_logits.py "
            "[plain-sinkhorn-large-logits]") in text.splitlines()


def test_findings_point_at_files_that_exist() -> None:
    for entry in _with_lane():
        for finding in entry.target.findings:
            assert (ROOT / finding.page).is_file(), (entry.target.name, finding.page)
            if finding.reproducer is not None:
                assert (ROOT / finding.reproducer).is_file(), (entry.target.name, finding.key)


def test_lane_install_pins_are_the_scripts_and_written_for() -> None:
    checked = 0
    for entry in _with_lane():
        lane, target = entry.target.lane, entry.target
        assert lane is not None
        script = (ROOT / lane.script).read_text(encoding="utf-8")
        pins = dict(re.findall(r'([A-Za-z0-9_.\-]+(?:\[[a-z]+\])?)==([^\s;"]+)', lane.install))
        for name, version in pins.items():
            # literally, or as `name==$release` with the release among the script's words
            # (.ci/thirdparty builds one venv per transformers release)
            assert f"{name}=={version}" in script or (
                f"{name}==$" in script and re.search(rf"\s{re.escape(version)}\s", script)
            ), (target.name, lane.script, name)
        assert pins or lane.install in script, (target.name, lane.install)
        pinned = pins.get(target.distribution)
        # vllm:mhc-torch is written for a commit; the lane pins the wheel of that code
        if pinned is not None and not re.fullmatch(r"[0-9a-f]{40}", target.written_for or ""):
            assert pinned == target.written_for, target.name
            checked += 1
    assert checked >= 30


def _assigned(script: str, variable: str) -> list[str]:
    """The words of the shell assignment ``variable="..."`` in ``script``."""
    text = (ROOT / script).read_text(encoding="utf-8")
    found = re.search(rf'^{variable}="([^"]*)"', text, re.MULTILINE)
    assert found is not None, (script, variable)
    return found[1].split()


def test_kernel_lanes_match_the_scripts() -> None:
    """The targets whose lane runs the kernel profile are those .ci/thirdparty and the engine
    lanes run under Triton's interpreter."""
    kernel = set(_assigned(".ci/thirdparty", "KERNEL_TARGETS"))
    for engine in ("sglang", "vllm"):
        kernel |= {f"{engine}:{name}"
                   for name in _assigned(f".ci/lanes/{engine}", "kernel_targets")}
    declared = {e.target.name for e in _with_lane()
                if e.target.lane is not None and e.target.lane.profile == "kernel"}
    assert declared == kernel


def test_stale_and_write(tmp_path: Path) -> None:
    shutil.copytree(ROOT / ".ci/expected-failures", tmp_path / ".ci/expected-failures")
    folder = tmp_path / ".ci/expected-failures"
    assert entries.stale(tmp_path) == ["docs/findings/index.md: missing"]
    (tmp_path / "docs/findings").mkdir(parents=True)
    shutil.copy(ROOT / "docs/findings/index.md", tmp_path / "docs/findings/index.md")
    assert entries.stale(tmp_path) == []
    edited = folder / "x_transformers/hc.txt"
    edited.write_text("\n".join(edited.read_text(encoding="utf-8").splitlines()[:-1]) + "\n",
                      encoding="utf-8")
    (folder / "hyper_connections/mhc.txt").unlink()
    (folder / "hyper_connections/gone.txt").write_text("# old\n", encoding="utf-8")
    assert entries.stale(tmp_path) == [
        ".ci/expected-failures/hyper_connections/gone.txt: no built-in target with a lane "
        "declares it",
        ".ci/expected-failures/hyper_connections/mhc.txt: missing",
        ".ci/expected-failures/x_transformers/hc.txt: differs from its declaration",
    ]
    assert entries.main(["--root", str(tmp_path)]) == 1
    written = entries.write(tmp_path)
    assert [str(p) for p in written] == [
        ".ci/expected-failures/hyper_connections/gone.txt",
        ".ci/expected-failures/hyper_connections/mhc.txt",
        ".ci/expected-failures/x_transformers/hc.txt",
    ]
    assert entries.stale(tmp_path) == []
    assert entries.main(["--check", "--root", str(tmp_path)]) == 0


def test_two_findings_on_one_property_is_an_error() -> None:
    one = Finding("a", "bug", "one cause", ("law.reported",), "docs/findings/README.md")
    target = BuiltinTarget("x:y", "m:f", "d", lane=Lane(".ci/thirdparty", "pip install x"),
                           findings=(one, replace(one, key="b")))
    with pytest.raises(ValueError, match=r"law\.reported is scoped by two findings"):
        entries.expected_failures(target)


def test_an_unknown_profile_is_an_error() -> None:
    one = Finding("a", "bug", "one cause", ("law.reported",), "docs/findings/README.md",
                  profiles=("nightly",))
    target = BuiltinTarget("x:y", "m:f", "d", lane=Lane(".ci/thirdparty", "pip install x"),
                           findings=(one,))
    with pytest.raises(ValueError, match="finding 'a' names the profile 'nightly'"):
        entries.scoped(target)
    laned = replace(target, findings=(), lane=Lane(".ci/thirdparty", "x", profile="weekly"))
    with pytest.raises(ValueError, match="its lane names the profile 'weekly'"):
        entries.expected_failures(laned)


@pytest.mark.parametrize(("change", "message"), [
    ({"classification": "theirs"}, "classification must be one of"),
    ({"properties": ()}, "scopes no property"),
    ({"properties": ("law.reported: x",)}, "bad property id"),
    ({"reason": "two\nlines"}, "one non-empty line"),
    ({"dtypes": ("float8",)}, "unknown dtypes"),
    ({"notes": {"law.probed": "x"}}, "notes for properties it does not scope"),
])
def test_a_bad_finding_is_refused(change: dict[str, Any], message: str) -> None:
    good = Finding("k", "bug", "r", ("law.reported",), "p")
    with pytest.raises(ValueError, match=message):
        replace(good, **change)


# --- entry points ---------------------------------------------------------------------------

_DECLARATION = '''
from hcspec.conformance.subjects import BuiltinTarget, Finding

TARGETS = (
    BuiltinTarget(
        "fakehc:mhc", "fake_hc_targets.adapter:make", "fake-hc-targets: the reference mHC",
        requires="fake_hc_targets", distribution="fake-hc-targets", written_for="1.0",
        findings=(Finding("none-really", "limitation", "a finding of a plug-in target",
                          ("constraints.h_post_span",), "README.md"),),
    ),
)
'''

_ADAPTER = '''
from hcspec.reference.targets import mhc


def make(n, d, **options):
    """The reference mHC, shipped by a third-party package."""
    return mhc(n, d, **options)
'''


def _distribution(root: Path, entry_points: str) -> None:
    package = root / "fake_hc_targets"
    package.mkdir()
    (package / "__init__.py").write_text(_DECLARATION, encoding="utf-8")
    (package / "adapter.py").write_text(_ADAPTER, encoding="utf-8")
    info = root / "fake_hc_targets-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: fake-hc-targets\n"
                                   "Version: 1.0\n", encoding="utf-8")
    (info / "entry_points.txt").write_text(textwrap.dedent(entry_points), encoding="utf-8")


@pytest.fixture
def plugin_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.syspath_prepend(str(tmp_path))
    before = dict(targets.BUILTIN)
    yield tmp_path
    for name in set(targets.BUILTIN) - set(before):
        del targets.BUILTIN[name]
        targets.PLUGIN_TARGETS.pop(name, None)
    for module in [m for m in sys.modules if m.startswith("fake_hc_targets")]:
        del sys.modules[module]


def test_an_entry_point_target_is_listed_and_runs(plugin_dir: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    from hcspec.conformance.outputs import report as rp
    from hcspec.conformance.run.session import Options, check_implementation

    _distribution(plugin_dir, """
        [hcspec.targets]
        fake = fake_hc_targets:TARGETS
    """)
    assert "fakehc:mhc" not in targets.BUILTIN
    assert targets.discover_plugins() == []
    assert targets.PLUGIN_TARGETS == {"fakehc:mhc": "fake-hc-targets:fake"}
    row = next(r for r in targets.builtin_status() if r.target.name == "fakehc:mhc")
    assert (row.importable, row.version, row.problem) == (True, "1.0", "")
    assert entries.expected_failures(row.target)["constraints.h_post_span"].startswith(
        "limitation: a finding of a plug-in target")
    assert targets.discover_plugins() == []  # a second call registers nothing twice
    assert cli.main(["targets"]) == 0
    out = capsys.readouterr().out
    listed = [line for line in out.splitlines() if "fakehc:mhc" in line]
    assert len(listed) == 1 and "fake-hc-targets" in listed[0], listed
    flat = " ".join(out.replace("│", " ").split())  # the cells' words, however wrapped
    assert "[1 known finding]" in flat and "entry point fake-hc-targets:fake" in flat
    report = check_implementation("fakehc:mhc", Options(profile="quick", device="cpu",
                                                        only=("shape.output",)))
    statuses = {r.id: r.status for r in report.results}
    assert statuses["shape.output"] == rp.PASSED
    assert report.versions["fake-hc-targets"] == "1.0"


def test_a_bad_entry_point_is_a_warning(plugin_dir: Path) -> None:
    _distribution(plugin_dir, """
        [hcspec.targets]
        broken = fake_hc_targets.missing:TARGETS
        other = hcspec.conformance.adapters.declarations.reference:TARGETS
        number = fake_hc_targets:__name__
    """)
    with pytest.warns(RuntimeWarning) as warned:
        problems = targets.discover_plugins()
    from hcspec.conformance.adapters.declarations import reference

    # the import, the str, and each reference:* name, already taken
    assert len(problems) == 1 + 1 + len(reference.TARGETS)
    assert len(reference.TARGETS) >= 7
    assert [str(w.message) for w in warned] == [f"hcspec: {p}" for p in problems]
    assert "'reference:mhc' is already taken" in " ".join(problems)
    assert "ModuleNotFoundError" in problems[0]
    assert "expected a tuple of BuiltinTarget" in " ".join(problems)
    assert targets.PLUGIN_TARGETS == {}
    declared = plugins.load(frozenset())
    assert {t.name for _, t in declared.targets} >= {"reference:mhc"}
