"""The one label table: the human name of every code a person reads (kinds, patterns, pricing terms,
alert rules, workloads, roles, units) and the one name of spend that no team can be charged for.

Pure Python, no UI import: the dashboard, the weekly report, the CLI tables and the API's ``*_label``
fields all read it, so a code reads the same on every surface.
"""

from __future__ import annotations

# Spend (or GPU-hours) that no team can be charged for: one name on every surface.
NO_TEAM = "(unattributed)"


def team_label(team: str | None) -> str:
    """A team as people read it: the tag's value, or :data:`NO_TEAM` where there is none."""
    return team if team else NO_TEAM
