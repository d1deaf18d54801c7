"""The ``[carbon]`` config section, checked once and kept in the warehouse (``carbon_settings``).

Like ``[allocation]``, the settings a load computes ``carbon_hourly`` with are stored beside it, so a
load started without the config computes as the last configured run did, and a change of them (or of
the vendored codecarbon version) recomputes the table (warehouse/carbon.py).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

import duckdb

from gpufinops.warehouse import carbon_data

DEFAULT_NODE_FRACTION = 0.3
KEYS = (
    "node_fraction",
    "node_watts",
    "pue",
    "default_pue",
    "grid",
    "default_grid_g_co2e_per_kwh",
    "embodied_kg_co2e_per_gpu_hour",
)


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


@dataclass(frozen=True)
class CarbonSettings:
    """How measured GPU power becomes facility energy and emissions (docs/carbon.md)."""

    node_fraction: float = DEFAULT_NODE_FRACTION  # the node's non-GPU draw as a share of its GPUs' measured draw
    node_watts: tuple[tuple[str, float], ...] = ()  # instance type -> the node's non-GPU draw, W
    pue: tuple[tuple[str, float], ...] = ()  # provider code -> PUE (overrides the published figure)
    default_pue: float | None = None  # a provider without a published figure (else the survey average)
    grid: tuple[tuple[str, float | str], ...] = ()  # "provider/region" -> gCO2e/kWh, or a place codecarbon knows
    default_grid_g_co2e_per_kwh: float | None = None  # a region no table knows (else codecarbon's world average)
    embodied_kg_co2e_per_gpu_hour: float | None = None  # optional, reported apart from kg_co2e
    data_version: str = field(default=carbon_data.CODECARBON_VERSION)

    @classmethod
    def from_config(cls, section: dict[str, Any] | None) -> CarbonSettings:
        """Validated settings; a ValueError names the key and what it must be."""
        section = dict(section or {})
        for key in section:
            if key not in KEYS:
                raise ValueError(f"carbon.{key}: unknown key (allowed: {', '.join(KEYS)})")
        fraction = _number(section.get("node_fraction", DEFAULT_NODE_FRACTION), "node_fraction", 0, 10)
        watts = {
            str(k): _number(v, f"node_watts.{k}", 0, 100_000)
            for k, v in _table(section.get("node_watts", {}), "node_watts").items()
        }
        pue = {str(k).lower(): _number(v, f"pue.{k}", 1, 5) for k, v in _table(section.get("pue", {}), "pue").items()}
        grid: dict[str, float | str] = {}
        for key, value in _table(section.get("grid", {}), "grid").items():
            if "/" not in key:
                raise ValueError(f'carbon.grid.{key}: keys are "provider/region" (e.g. "aws/us-east-1")')
            if isinstance(value, str):
                if carbon_data.place(value) is None:
                    raise ValueError(
                        f'carbon.grid."{key}": {value!r} is no place codecarbon knows '
                        '(a country ISO code like "DEU", "USA/virginia", or "aws/eu-west-1")'
                    )
                grid[key.lower()] = value
            else:
                grid[key.lower()] = _number(value, f'grid."{key}"', 0, 3000)
        default_pue = section.get("default_pue")
        default_grid = section.get("default_grid_g_co2e_per_kwh")
        embodied = section.get("embodied_kg_co2e_per_gpu_hour")
        return cls(
            node_fraction=fraction,
            node_watts=tuple(sorted(watts.items())),
            pue=tuple(sorted(pue.items())),
            default_pue=None if default_pue is None else _number(default_pue, "default_pue", 1, 5),
            grid=tuple(sorted(grid.items())),
            default_grid_g_co2e_per_kwh=None
            if default_grid is None
            else _number(default_grid, "default_grid_g_co2e_per_kwh", 0, 3000),
            embodied_kg_co2e_per_gpu_hour=None
            if embodied is None
            else _number(embodied, "embodied_kg_co2e_per_gpu_hour", 0, 100),
        )

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
