"""Profile names come from one place."""

from __future__ import annotations

from hcspec.conformance import profiles


def test_names_are_the_profiles_cheapest_first() -> None:
    assert profiles.PROFILE_NAMES == ("quick", "ci", "thorough")
    assert profiles.DEFAULT_PROFILE in profiles.PROFILE_NAMES
    sizes = [profiles.get_profile(n).max_examples for n in profiles.PROFILE_NAMES]
    assert sizes == sorted(sizes) and len(set(sizes)) == 3
