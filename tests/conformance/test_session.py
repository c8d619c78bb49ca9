"""The session (:mod:`hcspec.conformance.run.session`): one :class:`Options`, one
:class:`Listener`, the keyword form as sugar for both, and the per-family setup hooks."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from hcspec.conformance.machinery.base import Context
from hcspec.conformance.machinery.declaration import Property
from hcspec.conformance.machinery.requirements import DISTRIBUTED, Distributed
from hcspec.conformance.machinery.setup import SetupRequest
from hcspec.conformance.outputs import report as rp
from hcspec.conformance.run.inspection import prepare
from hcspec.conformance.run.session import Listener, Options, check_implementation, set_up_families
from hcspec.conformance.strategies import Case


class Recording(Listener):
    def __init__(self) -> None:
        self.calls: list[str] = []

    def on_resolved(self, header: rp.Report) -> None:
        self.calls.append(f"resolved {header.target}")

    def on_setup(self, header: rp.Report) -> None:
        self.calls.append(f"setup {len(header.results)}")

    def on_start(self, prop: Property, index: int, total: int) -> None:
        self.calls.append(f"start {prop.id} {index}/{total}")

    def on_result(self, result: rp.PropertyResult) -> None:
        self.calls.append(f"result {result.id} {result.status}")


def test_the_listener_is_told_in_order_and_the_unoverridden_methods_do_nothing() -> None:
    listener = Recording()
    report = check_implementation("reference:mhc", Options(profile="quick", device="cpu",
                                                           only=["shape.output"]), listener)
    assert [r.status for r in report.results] == [rp.PASSED]
    assert listener.calls == ["resolved reference:mhc", "setup 0", "start shape.output 0/1",
                              "result shape.output passed"]


def test_the_keywords_build_the_same_options_and_callbacks() -> None:
    seen: list[str] = []
    report = check_implementation("reference:mhc", profile="quick", device="cpu",
                                  only=("shape.output",), on_result=lambda r: seen.append(r.id))
    assert seen == ["shape.output"] and report.profile == "quick"


def test_keywords_with_options_and_an_unknown_keyword_are_type_errors() -> None:
    with pytest.raises(TypeError, match="not both"):
        check_implementation("reference:mhc", Options(), profile="quick")
    with pytest.raises(TypeError, match="unexpected keyword argument 'profiles'"):
        check_implementation("reference:mhc", profiles="quick")


def test_options_are_frozen_and_keep_the_selection_as_a_tuple() -> None:
    options = Options(only=["shape"], expected_failures={"shape.output": "why"})
    assert options.only == ("shape",)
    with pytest.raises(AttributeError):
        options.seed = 1  # type: ignore[misc]


@dataclass
class Ready:
    facts: Distributed | None
    annotated: int = 0

    def annotate(self, report: rp.Report) -> None:
        self.annotated += 1


def _check(ctx: Context, case: Case) -> None:
    """Never run here."""


def test_each_setup_hook_runs_once_and_the_properties_read_what_it_prepared() -> None:
    requests: list[SetupRequest] = []
    verdicts: list[bool] = []

    def hook(request: SetupRequest) -> Ready:
        requests.append(request)
        ready = Ready(Distributed(request.world_size or 1))
        verdicts.append(request.applies(ready))
        verdicts.append(request.applies(Ready(None)))
        return ready

    def nothing(request: SetupRequest) -> None:
        requests.append(request)

    first = Property(id="fake.first", statement="s", check=_check, requires=(DISTRIBUTED,),
                     setup=hook)
    second = Property(id="fake.second", statement="s", check=_check, requires=(DISTRIBUTED,),
                      setup=hook)
    other = Property(id="fake.other", statement="s", check=_check, setup=nothing)
    plain = Property(id="fake.plain", statement="s", check=_check)
    setup = prepare("reference:mhc", profile="quick", device="cpu", world_size=3)
    told: list[str] = []
    set_up_families(setup, [first, plain, second, other], told.append)
    assert [r.world_size for r in requests] == [3, 3]  # hook once, nothing once
    assert verdicts == [True, False]  # DISTRIBUTED met by the hook's facts only
    assert setup.prepared_for(first) is setup.prepared_for(second) is not None
    assert setup.prepared_for(other) is None and setup.prepared_for(plain) is None
    assert told == ["setting up the fake properties on 3 ranks"] * 2
