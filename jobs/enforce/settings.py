"""``[enforce]``: how budget quotas reach the clusters (``enforce = "cap" | "hold" | "drain"`` on a budget).

```toml
[enforce]
apply = true              # `serve` applies the quotas after each load (server-side apply, manager gpufinops)
warn_hours = 24           # alert this many hours before a cap or hold takes effect
kubeconfig = "~/.kube/config"
context = "prod"          # the kubeconfig context (default: its current-context)
interval_hours = 1        # `enforce simulate`: hours between recomputations (serve's load interval)
```
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from gpufinops.jobs.config_checks import ConfigError, ConfigSection
from gpufinops.warehouse.options import Section, option


def _flag(value: Any, key: str) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(f"{key}: must be true or false, not {value!r}")
    return value


def _hours(low: float) -> Any:
    def check(value: Any, key: str) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < low:
            raise ConfigError(f"{key}: must be a number of hours >= {low:g}, not {value!r}")
        return float(value)

    return check


def _text(value: Any, key: str) -> str:
    if not isinstance(value, str) or not value.strip() or any(c in value for c in "\r\n\0"):
        raise ConfigError(f"{key}: must be a non-empty string on one line, not {value!r}")
    return value


@dataclass(frozen=True)
class EnforceSettings(ConfigSection):
    """``[enforce]``: how budget quotas reach the clusters."""

    apply: bool = option(False, "`serve` applies the budget quotas after each load", check=_flag)
    warn_hours: float = option(24.0, "alert this many hours before a cap or hold takes effect", check=_hours(0))
    kubeconfig: str | None = option(None, "the kubeconfig (default: $KUBECONFIG, else ~/.kube/config)", check=_text)
    context: str | None = option(None, "the kubeconfig context (default: its current-context)", check=_text)
    interval_hours: float = option(
        1.0, "`enforce simulate`: hours between recomputations (serve's load interval)", check=_hours(1)
    )


def parse(table: dict[str, Any] | None) -> EnforceSettings:
    """The validated ``[enforce]`` table; raises ConfigError naming the key at fault."""
    return EnforceSettings.parse(table or {}, "enforce")


SECTION = Section("enforce", parse, (EnforceSettings,))
