"""Built-in third-party targets: registered, listed by ``hc-conformance targets`` with
importable yes/no and the version found, options bound, import failures and import-name
clashes reported clearly."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import sys
import types
from pathlib import Path

import pytest

from hcspec.conformance import cli
from hcspec.conformance.subjects import targets
from hcspec.conformance.subjects.targets import BuiltinTarget, TargetError

THIRD_PARTY = {
    "hyper_connections:hc": "hyper_connections", "hyper_connections:mhc": "hyper_connections",
    "hyper_connections:mhc-v2": "hyper_connections", "hyper_connections:mhc-log":
    "hyper_connections", "hyper_connections:hc-dropout": "hyper_connections",
    "mhc_pytorch:mhc": "mhc",
}


def test_third_party_targets_are_registered() -> None:
    for name, module in THIRD_PARTY.items():
        assert targets.BUILTIN[name].requires == module
    assert targets.BUILTIN["hyper_connections:mhc-log"].options == {"log_domain_sinkhorn": True}
    assert targets.BUILTIN["hyper_connections:mhc-iters10"].options == {"sinkhorn_iters": 10}


def test_adapter_modules_import_without_their_packages() -> None:
    # the kit must load (and list its targets) where the packages are absent
    importlib.import_module("hcspec.conformance.adapters.hyper_connections")
    importlib.import_module("hcspec.conformance.adapters.mhc_pytorch")


def test_targets_command_lists_every_builtin_with_importability(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["targets"]) == 0
    out = capsys.readouterr().out
    rows = {line.split("│")[1].strip(): line for line in out.splitlines()
            if line.startswith("│") and ":" in line.split("│")[1]}
    assert set(targets.BUILTIN) <= set(rows)
    assert "yes" in rows["reference:mhc"]
    for name, module in THIRD_PARTY.items():
        present = importlib.util.find_spec(module) is not None
        dist = targets.BUILTIN[name].distribution
        if present:
            assert "yes" in rows[name] and importlib.metadata.version(dist) in rows[name]
        else:
            assert " no " in rows[name] and "not installed" in rows[name]
            # one line per package: its targets, then the reason
            said = [line for line in out.splitlines() if f": needs the package {dist!r}" in line]
            assert len(said) == 1 and name in said[0].split(": needs")[0].split(", ")


def _fake_package(monkeypatch: pytest.MonkeyPatch, name: str, providers: list[str]) -> None:
    module = types.ModuleType(name)
    module.make = lambda n, d, **kw: (n, d, kw)  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, name, module)
    real = importlib.metadata.packages_distributions
    monkeypatch.setattr(importlib.metadata, "packages_distributions",
                        lambda: {**real(), name: providers})


def test_import_name_clash_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_package(monkeypatch, "fakehc_clash", ["someone-else"])
    builtin = BuiltinTarget("fakehc:x", "fakehc_clash:make", "fake", requires="fakehc_clash",
                            distribution="fake-hc")
    monkeypatch.setitem(targets.BUILTIN, builtin.name, builtin)
    with pytest.raises(TargetError, match="provided by someone-else, not by 'fake-hc'"):
        targets.resolve("fakehc:x")
    row = next(r for r in targets.builtin_status() if r.target.name == "fakehc:x")
    assert not row.importable and "separate environments" in row.problem


def test_options_are_bound_and_shown(monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_package(monkeypatch, "fakehc_ok", ["fake-hc"])
    builtin = BuiltinTarget("fakehc:y", "fakehc_ok:make", "fake", requires="fakehc_ok",
                            distribution="fake-hc", options={"iters": 3}, written_for="1.0")
    monkeypatch.setitem(targets.BUILTIN, builtin.name, builtin)
    monkeypatch.setattr(targets, "_version", lambda dist: "2.0" if dist == "fake-hc" else None)
    resolved = targets.resolve("fakehc:y")
    assert resolved.factory(2, 3) == (2, 3, {"iters": 3})
    assert "[options: iters=3]" in resolved.description
    assert "adapter written for fake-hc 1.0, found 2.0" in resolved.description
    assert resolved.versions["fake-hc"] == "2.0"


def test_missing_package_is_a_target_error(monkeypatch: pytest.MonkeyPatch) -> None:
    builtin = BuiltinTarget("fakehc:z", "nonexistent_pkg_xyz:make", "fake",
                            requires="nonexistent_pkg_xyz", distribution="nonexistent")
    monkeypatch.setitem(targets.BUILTIN, builtin.name, builtin)
    with pytest.raises(TargetError, match="does not import: ModuleNotFoundError"):
        targets.resolve("fakehc:z")
    assert cli.main(["run", "fakehc:z", "--no-progress"]) == 2


def test_every_adapter_module_declares_its_targets_and_the_registry_has_exactly_them() -> None:
    declared = [t.name for m in targets.declaration_modules()
                for t in targets.declared_targets(m)]
    assert len(declared) == len(set(declared))
    assert set(declared) == set(targets.BUILTIN)
    assert "hcspec.conformance.adapters.reference" in targets.adapter_modules()
    # one declarations module per adapter module, same name
    adapters = {m.rpartition(".")[2] for m in targets.adapter_modules()}
    assert adapters == {m.rpartition(".")[2] for m in targets.declaration_modules()}
    for module in targets.declaration_modules():
        name = module.rpartition(".")[2]
        for builtin in targets.declared_targets(module):
            path, _, attr = builtin.factory_path.partition(":")
            expected = ("hcspec.reference.targets" if name == "reference"
                        else f"hcspec.conformance.adapters.{name}")
            assert path == expected, builtin.name
            assert callable(getattr(importlib.import_module(path), attr)), builtin.name
            if builtin.detail == "hcspec.conformance.native.build:describe":
                if targets.package_problem(builtin) is None:
                    assert "ggml" in targets.describe(builtin)
            elif builtin.detail is not None:
                assert builtin.detail in ("hcspec.conformance.adapters._triton:environment_note",)
                assert "Triton here: " in targets.describe(builtin)


def test_the_reference_description_states_the_reference_sinkhorn_rounds() -> None:
    from hcspec.conformance.adapters.declarations.reference import SINKHORN_ROUNDS
    from hcspec.reference.sinkhorn import DEFAULT_ITERATIONS

    assert SINKHORN_ROUNDS == DEFAULT_ITERATIONS
    assert f"{DEFAULT_ITERATIONS} rounds" in targets.BUILTIN["reference:mhc"].description
    assert targets.BUILTIN["reference:mhc"].factory_path == "hcspec.reference.targets:mhc"
    assert targets.BUILTIN["hyper_connections:mhc"].written_for == "0.4.11"


def test_a_module_without_targets_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    module = types.ModuleType("fake_adapter_without_targets")
    monkeypatch.setitem(sys.modules, module.__name__, module)
    with pytest.raises(TypeError, match="must declare TARGETS"):
        targets.declared_targets(module.__name__)
    module.TARGETS = ["not a BuiltinTarget"]  # type: ignore[attr-defined]
    with pytest.raises(TypeError, match="must declare TARGETS"):
        targets.declared_targets(module.__name__)


def test_the_registry_and_the_adapters_do_not_import_the_property_catalogue() -> None:
    import subprocess

    code = ("import importlib, sys, hcspec.conformance.subjects.targets as t\n"
            "[t.declared_targets(m) for m in t.declaration_modules()]\n"
            "[importlib.import_module(m) for m in t.adapter_modules()]\n"
            "bad = sorted(m for m in sys.modules\n"
            "             if m.startswith(('hcspec.conformance.machinery',\n"
            "                             'hcspec.conformance.families')))\n"
            "assert not bad, bad\n")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_reference_declares_its_conventions_without_importing_the_kit() -> None:
    import subprocess

    code = ("import sys, hcspec.reference.targets as r\n"
            "m = r.mhc(2, 3)\n"
            "assert m.conventions['reduce'] == 'sum' and m.sinkhorn_iterations == 20\n"
            "bad = sorted(k for k in sys.modules if k.startswith('hcspec.conformance'))\n"
            "assert not bad, bad\n"
            "assert 'hypothesis' not in sys.modules\n")
    # this checkout's sources, not an installed copy
    src = str(Path(__file__).resolve().parents[2] / "src")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([src, os.environ.get("PYTHONPATH", "")]))
    subprocess.run([sys.executable, "-c", code], check=True, env=env)


def test_transformers_targets_name_the_release_and_the_model_module() -> None:
    want = {"transformers:deepseek-v4": ("5.23.0", "deepseek_v4"),
            "transformers:glm5-next": ("5.23.0", "glm5_next"),
            "transformers:hy-v4": ("5.23.0", "hy_v4"),
            "transformers:deepseek-v4-5.8.0": ("5.8.0", "deepseek_v4")}
    for name, (release, model) in want.items():
        builtin = targets.BUILTIN[name]
        assert (builtin.written_for, builtin.distribution) == (release, "transformers")
        assert builtin.requires == f"transformers.models.{model}.modeling_{model}"


def test_a_missing_model_module_makes_the_target_not_importable(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "transformers.models.hy_v4.modeling_hy_v4", None)
    problem = targets.package_problem(targets.BUILTIN["transformers:hy-v4"])
    assert problem is not None and "module 'transformers.models.hy_v4.modeling_hy_v4'" in problem
