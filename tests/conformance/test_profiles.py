"""Profile names come from one place."""

from __future__ import annotations

from hcspec.conformance import profiles


def test_names_are_the_profiles_cheapest_first() -> None:
    # the general profiles grow in cost; kernel (for Triton's interpreter) is sized apart, last
    assert profiles.PROFILE_NAMES == ("quick", "ci", "thorough", "kernel")
    assert profiles.DEFAULT_PROFILE in profiles.PROFILE_NAMES
    general = [profiles.get_profile(n).max_examples for n in profiles.PROFILE_NAMES[:3]]
    assert general == sorted(general) and len(set(general)) == 3
    assert profiles.get_profile("kernel").max_examples <= general[0]
