"""The ``[carbon]`` config section, checked once and kept in the warehouse (``carbon_settings``).

Like ``[allocation]``, the settings a load computes ``carbon_hourly`` with are stored beside it, so a
load started without the config computes as the last configured run did, and a change of them (or of
the vendored codecarbon version) recomputes the table (derived/carbon.py).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

import duckdb

from gpufinops.derived import carbon_data
from gpufinops.kernel.options import Check, Settings, option

DEFAULT_NODE_FRACTION = 0.3


def _number(value: Any, where: str, low: float, high: float | None = None) -> float:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if not ok or value < low or (high is not None and value > high):
        bound = f"between {low:g} and {high:g}" if high is not None else f"a finite number at least {low:g}"
        raise ValueError(f"carbon.{where}: must be {bound}, not {value!r}")
    return float(value)


def _table(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ValueError(f"carbon.{where}: must be a table (e.g. [carbon.{where}])")
    return value


def _bounded(low: float, high: float | None = None) -> Check:
    return lambda value, key: _number(value, key.removeprefix("carbon."), low, high)


def _per_key(name: str, low: float, high: float, lower: bool = False) -> Check:
    """A table of key = number (``node_watts``, ``pue``), as sorted pairs."""

    def check(value: Any, key: str) -> tuple[tuple[str, float], ...]:
        table = _table(value, name)
        pairs = {(str(k).lower() if lower else str(k)): _number(v, f"{name}.{k}", low, high) for k, v in table.items()}
        return tuple(sorted(pairs.items()))

    return check


def _grid(value: Any, key: str) -> tuple[tuple[str, float | str], ...]:
    grid: dict[str, float | str] = {}
    for region, intensity in _table(value, "grid").items():
        if "/" not in region:
            raise ValueError(f'carbon.grid.{region}: keys are "provider/region" (e.g. "aws/us-east-1")')
        if isinstance(intensity, str):
            if carbon_data.place(intensity) is None:
                raise ValueError(
                    f'carbon.grid."{region}": {intensity!r} is no place codecarbon knows '
                    '(a country ISO code like "DEU", "USA/virginia", or "aws/eu-west-1")'
                )
            grid[region.lower()] = intensity
        else:
            grid[region.lower()] = _number(intensity, f'grid."{region}"', 0, 3000)
    return tuple(sorted(grid.items()))


@dataclass(frozen=True)
class CarbonSettings(Settings):
    """How measured GPU power becomes facility energy and emissions (docs/carbon.md)."""

    node_fraction: float = option(
        DEFAULT_NODE_FRACTION, "the node's non-GPU draw as a share of its GPUs' measured draw", check=_bounded(0, 10)
    )
    node_watts: tuple[tuple[str, float], ...] = option(
        (), "instance type = the node's non-GPU draw, W", check=_per_key("node_watts", 0, 100_000)
    )
    pue: tuple[tuple[str, float], ...] = option(
        (), "provider code = PUE (overrides the published figure)", check=_per_key("pue", 1, 5, lower=True)
    )
    default_pue: float | None = option(
        None, "a provider without a published figure (else the survey average)", check=_bounded(1, 5)
    )
    grid: tuple[tuple[str, float | str], ...] = option(
        (), '"provider/region" = gCO2e/kWh, or a place codecarbon knows', check=_grid
    )
    default_grid_g_co2e_per_kwh: float | None = option(
        None, "a region no table knows (else codecarbon's world average)", check=_bounded(0, 3000)
    )
    embodied_kg_co2e_per_gpu_hour: float | None = option(
        None, "optional, reported apart from kg_co2e", check=_bounded(0, 100)
    )
    data_version: str = field(default=carbon_data.CODECARBON_VERSION, metadata={"internal": True})  # not a key

    @classmethod
    def from_config(cls, section: dict[str, Any] | None) -> CarbonSettings:
        """Validated settings; a ValueError names the key and what it must be."""
        return cls.parse(section, "carbon")

    def to_json(self) -> str:
        return json.dumps(
            {
                "node_fraction": self.node_fraction,
                "node_watts": dict(self.node_watts),
                "pue": dict(self.pue),
                "default_pue": self.default_pue,
                "grid": dict(self.grid),
                "default_grid_g_co2e_per_kwh": self.default_grid_g_co2e_per_kwh,
                "embodied_kg_co2e_per_gpu_hour": self.embodied_kg_co2e_per_gpu_hour,
                "data_version": self.data_version,
            },
            sort_keys=True,
        )

    @classmethod
    def from_json(cls, text: str) -> CarbonSettings:
        raw = json.loads(text)
        version = raw.pop("data_version", "")
        settings = cls.from_config({k: v for k, v in raw.items() if v is not None and v != {}})
        return cls(**{**settings.__dict__, "data_version": version})


def stored(con: duckdb.DuckDBPyConnection) -> CarbonSettings | None:
    rows = con.execute("SELECT value FROM carbon_settings WHERE key = 'settings'").fetchall()
    return CarbonSettings.from_json(rows[0][0]) if rows else None


def store(con: duckdb.DuckDBPyConnection, settings: CarbonSettings) -> None:
    con.execute("DELETE FROM carbon_settings")
    con.execute("INSERT INTO carbon_settings VALUES ('settings', ?)", [settings.to_json()])
