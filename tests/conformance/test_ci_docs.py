"""docs/ci.md's GitHub Actions workflow and GitLab CI job, run: the commands are read from the
page itself (so the test cannot drift from it), the GitLab job must run the workflow's
commands line for line, and the workflow's ``run:`` steps are run with ``bash -e`` in a fresh
virtual environment, from a scratch project, with the page's expected-failures file.

Substitutions (the page says so): ``HCSPEC`` is this checkout (its tracked and untracked,
not ignored files, copied, so the build leaves nothing in the checkout), and pip uses the
index the test suite uses (the machine's pip configuration) with torch held at the version
running here, instead of PyTorch's CPU index."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from junitparser import JUnitXml

ROOT = Path(__file__).resolve().parents[2]
PAGE = (ROOT / "docs" / "ci.md").read_text(encoding="utf-8")

ADAPTER = '''\
"""my_hc's dynamic HC layer for hc-conformance: its head averages the streams (a known bug,
listed in hc-expected-failures.txt) while the adapter declares the sum."""

import torch

from hcspec.conformance.adapters.reference import REFERENCE_CONVENTIONS
from hcspec.reference import DynamicHyperConnection


class MyHC(DynamicHyperConnection):
    def reduce(self, x):
        return x.mean(dim=-2)


def make(n, d, *, layer_index=0, dtype=torch.float64, device="cpu", seed=0):
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        module = MyHC(n, d, layer_index, dtype=torch.float64)
    module = module.to(dtype=dtype, device=device)
    module.conventions = REFERENCE_CONVENTIONS
    return module
'''

PYPROJECT = '''\
[build-system]
requires = ["setuptools>=68"]
build-backend = "setuptools.build_meta"

[project]
name = "my-hc"
version = "0.0.1"
dependencies = ["torch"]

[tool.setuptools]
packages = ["my_hc"]
'''


def _yaml_blocks() -> tuple[str, str]:
    """The page's two YAML blocks: (GitHub Actions workflow, GitLab CI job)."""
    blocks = re.findall(r"^```yaml\n(.*?)^```", PAGE, flags=re.S | re.M)
    assert len(blocks) == 2, len(blocks)
    return blocks[0], blocks[1]


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _nested(lines: list[str], start: int) -> list[str]:
    """The lines after ``lines[start]`` indented deeper than it (blank lines kept)."""
    base, body = _indent(lines[start]), []
    for line in lines[start + 1:]:
        if line.strip() and _indent(line) <= base:
            break
        body.append(line)
    return body


def _mapping(block: str, key: str) -> dict[str, str]:
    """The ``key:`` mapping of plain ``NAME: value`` lines (quotes removed)."""
    lines = block.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip() == f"{key}:")
    values = {}
    for line in _nested(lines, start):
        name, _, value = line.strip().partition(": ")
        values[name] = value.strip().strip('"')
    return values


def github_steps(block: str) -> list[str]:
    """The workflow's ``run: |`` scripts, in order, dedented."""
    lines = block.splitlines()
    return [textwrap.dedent("\n".join(_nested(lines, i))).strip() + "\n"
            for i, line in enumerate(lines) if line.strip() == "run: |"]


def gitlab_script(block: str) -> list[str]:
    """The job's ``script:`` commands (a ``- >-`` item folded into one line)."""
    lines = block.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip() == "script:")
    items = _nested(lines, start)
    commands: list[str] = []
    for i, line in enumerate(items):
        if not line.strip().startswith("- "):
            continue
        text = line.strip()[2:]
        if text == ">-":
            body = []
            for more in items[i + 1:]:
                if more.strip().startswith("- "):
                    break
                body.append(more.strip())
            text = " ".join(body)
        commands.append(text)
    return commands


def shell_commands(script: str) -> list[str]:
    """A shell script's commands, backslash continuations joined (one space between)."""
    return [line.strip() for line in re.sub(r"\\\n\s*", "", script).splitlines()
            if line.strip()]


def test_the_gitlab_job_runs_the_workflows_commands() -> None:
    github, gitlab = _yaml_blocks()
    commands = [c for step in github_steps(github) for c in shell_commands(step)]
    assert commands == gitlab_script(gitlab)
    assert any(c.startswith("hc-conformance run ") for c in commands)
    run = next(c for c in commands if c.startswith("hc-conformance run "))
    for option in ("--profile ci", "--junit ", "--html ", "--expected-failures "):
        assert option in run, option
    assert _mapping(github, "env") == _mapping(gitlab, "variables")
    assert "actions/upload-artifact@" in github and "if: always()" in github
    assert "when: always" in gitlab and "junit: reports/" in gitlab


def test_the_blocks_are_valid_yaml_with_the_same_content() -> None:
    yaml = pytest.importorskip("yaml", reason="PyYAML not installed: the YAML syntax is not "
                                              "checked (the commands still are)")
    github, gitlab = _yaml_blocks()
    workflow = yaml.safe_load(github)
    job = workflow["jobs"]["hc-conformance"]
    assert [s["run"] for s in job["steps"] if "run" in s] == github_steps(github)
    assert job["env"] == _mapping(github, "env")
    upload = next(s for s in job["steps"] if s.get("uses", "").startswith(
        "actions/upload-artifact@"))
    assert upload["if"] == "always()" and upload["with"]["path"] == "reports/"
    gl = yaml.safe_load(gitlab)["hc-conformance"]
    assert gl["script"] == gitlab_script(gitlab)
    assert gl["artifacts"]["reports"]["junit"] == "reports/hc-conformance.xml"


def _expected_failures_file() -> str:
    blocks = re.findall(r"^```text\n(.*?)^```", PAGE, flags=re.S | re.M)
    found = [b for b in blocks if b.startswith("# hc-expected-failures.txt")]
    assert len(found) == 1
    return found[0]


def _copy_checkout(dest: Path) -> Path:
    """This checkout's tracked and untracked-but-not-ignored files, copied to ``dest``."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others",
                             "--exclude-standard"], cwd=ROOT, capture_output=True, check=False)
    if listed.returncode != 0:
        pytest.skip("not a git checkout: cannot tell which files to install from")
    for name in listed.stdout.decode().split("\0"):
        source = ROOT / name
        if name and source.is_symlink():  # <layer> -> src/hcspec/<layer>
            target = dest / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.symlink_to(os.readlink(source))
        elif name and source.is_file():
            target = dest / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    return dest


def _path_without_the_kit() -> str:
    """``PATH`` without directories holding an ``hc-conformance`` (e.g. the suite's venv), so
    a command missing from the fresh venv is not found elsewhere."""
    kept = [p for p in os.environ.get("PATH", "").split(os.pathsep)
            if p and not (Path(p) / "hc-conformance").exists()]
    return os.pathsep.join(kept)


@pytest.mark.slow
def test_the_workflow_runs_in_a_fresh_venv(tmp_path: Path) -> None:
    import torch

    github, _ = _yaml_blocks()
    env_from_page = _mapping(github, "env")
    project = tmp_path / "project"
    (project / "my_hc").mkdir(parents=True)
    (project / "my_hc" / "__init__.py").write_text("", encoding="utf-8")
    (project / "my_hc" / "adapter.py").write_text(ADAPTER, encoding="utf-8")
    (project / "pyproject.toml").write_text(PYPROJECT, encoding="utf-8")
    (project / "hc-expected-failures.txt").write_text(_expected_failures_file(),
                                                       encoding="utf-8")
    checkout = _copy_checkout(tmp_path / "hcspec")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    constraints = tmp_path / "constraints.txt"
    constraints.write_text(f"torch=={torch.__version__.split('+')[0]}\n", encoding="utf-8")
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "VIRTUAL_ENV", "HC_CONFORMANCE_TARGET", "PYTHONHOME")}
    env.update({k: v for k, v in env_from_page.items() if k != "PIP_EXTRA_INDEX_URL"})
    env.update(HCSPEC=str(checkout), PIP_CONSTRAINT=str(constraints), OMP_NUM_THREADS="1",
               PATH=f"{venv / 'bin'}{os.pathsep}{_path_without_the_kit()}")
    for step in github_steps(github):
        done = subprocess.run(["bash", "-e", "-c", step], cwd=project, env=env,
                              capture_output=True, text=True, timeout=1800, check=False)
        assert done.returncode == 0, (step, done.stdout[-4000:], done.stderr[-4000:])
    assert "result: OK" in done.stdout and "xfail" in done.stdout
    reports = project / "reports"
    suite = next(iter(JUnitXml.fromfile(str(reports / "hc-conformance.xml"))))
    cases = {case.name: case for case in suite}
    assert "conventions.reduce_scale" in cases and cases["conventions.reduce_scale"].is_passed
    assert len(cases) > 40 and not any(c.is_failure or c.is_error for c in cases.values())
    page = (reports / "hc-conformance.html").read_text(encoding="utf-8")
    assert env_from_page["HC_TARGET"] in page and "failure-conventions.reduce_scale" in page
    installed = subprocess.run([str(venv / "bin" / "python"), "-c",
                                "import hcspec.conformance as c; print(c.__file__)"],
                               capture_output=True, text=True, check=True, env=env)
    assert str(venv) in installed.stdout  # the kit ran from the fresh venv, not the checkout
