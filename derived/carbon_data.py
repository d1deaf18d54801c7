"""Grid carbon intensity and data-centre PUE: where each number of ``carbon_hourly`` comes from.

Grid intensity is codecarbon's own data, vendored unchanged (``warehouse/data/CODECARBON_SOURCES.md``:
version, hashes, and why it is vendored rather than installed). A region resolves, first match wins:

1. the config: ``[carbon.grid]`` ``"provider/region" = <gCO2e/kWh>`` or ``= "<place>"`` (a country's
   ISO alpha-3 code, ``"USA/<state>"``, or ``"provider/region"`` of a known cloud region);
2. codecarbon's cloud table (``cloud/impact.csv``: the provider's own published region figure);
3. the region's location (``cloud_region_locations.csv``): a US state's EPA eGRID rate, else the
   country's figure from codecarbon's energy-mix table;
4. the stated default: ``[carbon] default_grid_g_co2e_per_kwh``, else codecarbon's world average.

Every answer carries the place it came from (``intensity_source``), so a figure can be traced.
"""

from __future__ import annotations

import csv
import json
import math
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from gpufinops.kernel import providers

CODECARBON_VERSION = "3.3.2"
DATA = Path(__file__).parents[1] / "warehouse" / "data"  # the vendored files stay with the store's data
LBS_PER_MWH_TO_G_PER_KWH = 0.45359237  # 1 lb = 453.59237 g; 1 MWh = 1000 kWh

# A cloud's published fleet-wide PUE is its provider spec's `pue` (kernel/providers.py; docs/carbon.md cites
# each); on-prem lines carry their own.
DEFAULT_PUE = (1.56, "Uptime Institute Global Data Center Survey 2024 average PUE")


@dataclass(frozen=True)
class Intensity:
    g_co2e_per_kwh: float
    source: str  # where the figure came from, with codecarbon's version where it is codecarbon's


def _read_json(name: str) -> Any:
    return json.loads((DATA / name).read_text(encoding="utf-8"))


@cache
def cloud_table() -> dict[tuple[str, str], tuple[float, str]]:
    """(provider, region) -> (gCO2e/kWh, the page codecarbon cites)."""
    with (DATA / "codecarbon_impact.csv").open(encoding="utf-8-sig", newline="") as fh:
        return {(row["provider"], row["region"]): (float(row["impact"]), row["source"]) for row in csv.DictReader(fh)}


@cache
def countries() -> dict[str, tuple[float, int]]:
    """ISO alpha-3 -> (gCO2e/kWh, year of the energy mix)."""
    data = _read_json("codecarbon_global_energy_mix.json")
    return {code: (float(row["carbon_intensity"]), int(row["year"])) for code, row in data.items()}


@cache
def us_states() -> dict[str, float]:
    """US state (lower case) -> gCO2e/kWh (eGRID, converted from lbs/MWh)."""
    data = _read_json("codecarbon_usa_emissions.json")
    return {
        name: float(row["emissions"]) * LBS_PER_MWH_TO_G_PER_KWH
        for name, row in data.items()
        if not name.startswith("_")
    }


@cache
def us_states_year() -> int:
    return int(_read_json("codecarbon_usa_emissions.json")["_source"]["year"])


@cache
def world_average() -> float:
    return float(_read_json("codecarbon_carbon_intensity_per_source.json")["world_average"])


@cache
def region_locations() -> dict[tuple[str, str], tuple[str, str]]:
    """(provider, region) -> (country ISO alpha-3, US state or '')."""
    with (DATA / "cloud_region_locations.csv").open(encoding="utf-8", newline="") as fh:
        return {(r["provider"], r["region"]): (r["country_iso"], r["us_state"]) for r in csv.DictReader(fh)}


def _cc(text: str) -> str:
    return f"codecarbon {CODECARBON_VERSION} {text}"


def place(text: str) -> Intensity | None:
    """A place named in the config: ``DEU``, ``USA/virginia``, or ``aws/eu-west-1``; None when unknown."""
    key = text.strip()
    if "/" in key:
        head, tail = key.split("/", 1)
        if head.upper() == "USA" and tail.lower() in us_states():
            return Intensity(us_states()[tail.lower()], _cc(f"eGRID{us_states_year()} {tail.lower()}"))
        return _region(head.lower(), tail)
    code = key.upper()
    if code in countries():
        value, year = countries()[code]
        return Intensity(value, _cc(f"energy mix {code} {year}"))
    return None


def _region(provider: str, region: str) -> Intensity | None:
    found = cloud_table().get((provider, region))
    if found is not None:
        return Intensity(found[0], _cc(f"cloud/impact.csv {provider} {region}"))
    location = region_locations().get((provider, region))
    if location is None:
        return None
    country, state = location
    if state and state in us_states():
        return Intensity(us_states()[state], _cc(f"eGRID{us_states_year()} {state} ({provider} {region})"))
    if country in countries():
        value, year = countries()[country]
        return Intensity(value, _cc(f"energy mix {country} {year} ({provider} {region})"))
    return None


def intensity(
    provider: str | None,
    region: str | None,
    overrides: dict[str, float | str],
    default: float | None = None,
) -> Intensity:
    """The grid intensity of a provider's region (see the module's order); never NaN."""
    provider = (provider or "").lower()
    key = f"{provider}/{region}" if region else None
    if key is not None and key in overrides:
        value = overrides[key]
        if isinstance(value, str):
            found = place(value)
            if found is not None:
                return Intensity(found.g_co2e_per_kwh, f"config [carbon.grid] {key} = {value}: {found.source}")
        else:
            return Intensity(float(value), f"config [carbon.grid] {key}")
    if region:
        found = _region(provider, region)
        if found is not None:
            return found
    why = f"region {provider or '?'}/{region} not in codecarbon's tables" if region else "no region on the bill"
    if default is not None:
        return Intensity(default, f"default: [carbon] default_grid_g_co2e_per_kwh ({why})")
    return Intensity(world_average(), _cc(f"world average, the default ({why})"))


def pue(provider: str | None, overrides: dict[str, float], default: float | None = None) -> tuple[float, str]:
    """The PUE of a cloud: the config's ``[carbon.pue]``, else the provider's published figure, else the default."""
    code = (provider or "").lower()
    if code in overrides:
        return float(overrides[code]), f"config [carbon.pue] {code}"
    spec = providers.spec(code)
    if spec is not None and spec.pue is not None:
        return spec.pue
    if default is not None:
        return default, "config [carbon] default_pue"
    return DEFAULT_PUE


def finite_positive(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value >= 0
