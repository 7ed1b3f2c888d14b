"""The lab's scenarios, in one explicit registry (`seamwatch lab list` prints it in this order)."""

from __future__ import annotations

from lab.framework import Scenario
from lab.scenarios import clean_modern, clean_resume

SCENARIOS: tuple[Scenario, ...] = (
    # --- lab A: official-SDK servers and scripted clients ---
    clean_resume.SCENARIO,
    clean_modern.SCENARIO,
    # --- lab B: purpose-built servers, balancer, fault proxy, TypeScript ---
)


def by_name(name: str) -> Scenario | None:
    """The registered scenario called `name`, if any."""
    return next((scenario for scenario in SCENARIOS if scenario.name == name), None)
