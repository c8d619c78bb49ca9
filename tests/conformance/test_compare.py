"""``hc-conformance compare``: the same published parameters into two targets; exit 0 when
they agree within the floor, 1 when they differ, 2 on bad input (one line, no traceback)."""

from __future__ import annotations

import pytest

from hcspec.conformance.cli import main
from hcspec.conformance.compare import compare

DEEPSEEK_V4 = "hcspec.reference.targets:deepseek_v4"


def test_two_implementations_of_the_mhc_paper_agree(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compare", "reference:mhc", "reference:mhc-fast"]) == 0
    out = capsys.readouterr().out
    assert "result: AGREE (4/4 cases within the allowance)" in out


def test_a_mis_oriented_comb_differs(capsys: pytest.CaptureFixture[str]) -> None:
    rows = compare(DEEPSEEK_V4, "tests.mutants.published_comb_orientation:make")
    assert not any(r.agrees for r in rows)
    # n = 2: a doubly stochastic 2×2 comb is symmetric, only hc_eps (1e-6) breaks the symmetry
    assert rows[1].a_vs_b < 1e-4 and min(rows[i].a_vs_b for i in (0, 2, 3)) > 0.1
    assert rows[0].a_vs_oracle == 0.0 and rows[0].b_vs_oracle > 0.1
    assert main(["compare", DEEPSEEK_V4, "tests.mutants.published_comb_orientation:make"]) == 1
    assert "DIFFER" in capsys.readouterr().out


@pytest.mark.parametrize(("a", "b", "said"), [
    ("nosuch:thing", "reference:mhc", "no module 'nosuch'"),
    ("reference:mhc", DEEPSEEK_V4, "declares mhc-paper"),
    ("reference:hc-static", "reference:hc-dynamic", "declares hc-static"),
])
def test_bad_input_exits_2_in_one_line(capsys: pytest.CaptureFixture[str], a: str, b: str,
                                       said: str) -> None:
    assert main(["compare", a, b]) == 2
    err = capsys.readouterr().err
    assert said in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err
