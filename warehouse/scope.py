"""Who is asking, and which teams they may see: shared by the dashboard, the report and the API.

``finance`` sees every team; ``lead`` sees only its teams; ``scheduler`` reads recommendations of
every team (it places jobs for all of them) but no cost figures. ``teams`` of None means every team.
"""

from __future__ import annotations

from dataclasses import dataclass

ROLES = ("finance", "lead", "scheduler")


@dataclass(frozen=True)
class Scope:
    role: str
    teams: tuple[str, ...] | None = None  # None: every team
    actor: str = "anonymous"

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise ValueError(f"unknown role {self.role!r} (known: {', '.join(ROLES)})")
        if self.role == "lead" and not self.teams:
            raise ValueError("a lead must name at least one team")
        if self.role != "lead" and self.teams is not None:
            object.__setattr__(self, "teams", None)

    @property
    def team_filter(self) -> list[str] | None:
        """The value for a query's ``team=`` filter: None for every team, else the allowed list."""
        return None if self.teams is None else list(self.teams)

    def allows(self, team: str | None) -> bool:
        return self.teams is None or team in self.teams

    @property
    def sees_costs(self) -> bool:
        return self.role != "scheduler"
