"""``[enforce]``: how budget quotas reach the clusters (``enforce = "cap" | "hold" | "drain"`` on a budget).

```toml
[enforce]
apply = true              # `serve` applies the quotas after each load (server-side apply, manager gpufinops)
kubeconfig = "~/.kube/config"
context = "prod"          # the kubeconfig context (default: its current-context)
cluster = "dc1"           # the cluster that context reaches (as `export` names it)
formats = ["kueue"]       # what is applied: kueue, karpenter, resourcequota
interval_hours = 1        # `enforce simulate`: hours between recomputations (serve's load interval)
```
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from gpufinops.jobs.config_checks import ConfigError, ConfigSection
from gpufinops.kernel.options import Section, option


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


def _formats(value: Any, key: str) -> tuple[str, ...]:
    known = ("kueue", "karpenter", "resourcequota")
    if not isinstance(value, list) or not value or any(v not in known for v in value):
        raise ConfigError(f"{key}: must be a non-empty list of {', '.join(known)}, not {value!r}")
    return tuple(dict.fromkeys(value))


@dataclass(frozen=True)
class EnforceSettings(ConfigSection):
    """``[enforce]``: how budget quotas reach the clusters."""

    apply: bool = option(False, "`serve` applies the budget quotas after each load", check=_flag)
    kubeconfig: str | None = option(None, "the kubeconfig (default: $KUBECONFIG, else ~/.kube/config)", check=_text)
    context: str | None = option(None, "the kubeconfig context (default: its current-context)", check=_text)
    cluster: str | None = option(None, "the cluster the kubeconfig context reaches (its name or label)", check=_text)
    formats: tuple[str, ...] = option(
        ("kueue",), "what `serve` and `enforce` apply: kueue, karpenter, resourcequota", check=_formats
    )
    interval_hours: float = option(
        1.0, "`enforce simulate`: hours between recomputations (serve's load interval)", check=_hours(1)
    )

    def validated(self, given: frozenset[str], where: str) -> EnforceSettings:
        if self.apply and self.cluster is None:
            raise ConfigError(f"{where}.cluster: apply = true needs the cluster the kubeconfig context reaches")
        return self


def parse(table: dict[str, Any] | None) -> EnforceSettings:
    """The validated ``[enforce]`` table; raises ConfigError naming the key at fault."""
    return EnforceSettings.parse(table or {}, "enforce")


SECTION = Section("enforce", parse, (EnforceSettings,))
