"""The range a numeric setting may take, declared on the setting itself (``kernel.options.option``:
a source option, a config section's key, a ``[models]`` setting): one mechanism every
numeric setting is checked through at start-up. A leaf module: it imports nothing of gpufinops, so
every package may use it. A number without a declared range must be non-negative."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Range:
    low: float = 0.0
    high: float | None = None
    words: str = "a non-negative number"
    low_open: bool = False  # the low end itself is outside (a timeout of 0 s)

    def problem(self, value: Any) -> str | None:
        """Why ``value`` is outside the range ("must be …"), or None."""
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return f"must be {self.words} (got {value!r})"
        if not math.isfinite(value) or value < self.low or (self.low_open and value == self.low):
            return f"must be {self.words} (got {value!r})"
        if self.high is not None and value > self.high:
            return f"must be {self.words} (got {value!r})"
        return None

    def outside(self) -> list[float]:
        """Values this range refuses (for the tests that check every declared setting)."""
        below = self.low if self.low_open else self.low - 1
        return [below, math.nan, math.inf] + ([self.high + 1] if self.high is not None else [])


NON_NEGATIVE = Range()
POSITIVE = Range(words="a positive number", low_open=True)
SHARE = Range(0.0, 1.0, "a share between 0 and 1")
PERCENT = Range(0.0, 100.0, "a percentage between 0 and 100")


def at_least(low: float) -> Range:
    return Range(low, None, f"at least {low!r}")


def declared(metadata: Any) -> Range:
    """The range a dataclass field's metadata declares (``range``), else non-negative."""
    found = (metadata or {}).get("range")
    return found if isinstance(found, Range) else NON_NEGATIVE
