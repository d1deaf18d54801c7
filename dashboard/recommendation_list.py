"""The recommendations as a list a reader scans (Team and Recommendations pages) and as the CSV they
download, which is the CLI's flat CSV (``models.recommendation.flat_csv``: the same columns, the
same text)."""

from __future__ import annotations

import re

import duckdb
import polars as pl

from gpufinops.models.recommendation import flat_csv, flat_row
from gpufinops.warehouse import queries

GCP_INSTANCE = re.compile(r"^//compute\.googleapis\.com/projects/([^/]+)/zones/([^/]+)/instances/([^/]+)$")


def short_resource(resource_id: str | None) -> str | None:
    """A resource as a person names it: a GCP instance path becomes ``name (project, zone)``;
    other ids (``i-0abc…``, ``dc1/onprem-a100x8``) are short already."""
    if not resource_id:
        return None
    found = GCP_INSTANCE.match(resource_id)
    if found:
        project, zone, name = found.groups()
        return f"{name} ({project}, {zone})"
    return resource_id


def recommendation_list(recs: pl.DataFrame) -> pl.DataFrame:
    """``queries.recommendations`` rows plus what a list shows: the action, the change, the pattern
    and a short resource name (the full ``resource_id`` stays)."""
    flats = [flat_row(row) for row in recs.select("current", "proposed", "evidence").to_dicts()]
    extra = pl.DataFrame(
        {
            "action": [f["action"] for f in flats],
            "change": [f["change"] for f in flats],
            "pattern": [f["pattern"] for f in flats],
        },
        schema={"action": pl.Utf8, "change": pl.Utf8, "pattern": pl.Utf8},
    )
    resource = [short_resource(r) or w for r, w in zip(recs["resource_id"].to_list(), recs["workload"].to_list())]
    return pl.concat([recs, extra], how="horizontal").with_columns(pl.Series("resource", resource, dtype=pl.Utf8))


def listed(con: duckdb.DuckDBPyConnection, *, team: list[str] | None) -> pl.DataFrame:
    """``recommendation_list`` of the recommendations ``team`` sees: what the pages read through
    ``dashboard.common.cached_call``, so each finding's action and change are built once per data version
    (a decision changes it), not on every render."""
    return recommendation_list(queries.recommendations(con, team=team))


DEFAULT_STATUSES = ("open", "accepted")  # the Recommendations page's status filter until a reader changes it


def in_list_order(recs: pl.DataFrame) -> pl.DataFrame:
    """The order the Recommendations page lists (and offers for its detail): most savings first."""
    return recs.sort(["monthly_savings_usd", "id"], descending=[True, False])


def first_shown(recs: pl.DataFrame) -> dict | None:
    """The finding the Recommendations page details by default (the top of its default filters), or None."""
    shown = in_list_order(recs.filter(pl.col("status").is_in(DEFAULT_STATUSES)))
    return None if shown.is_empty() else shown.row(0, named=True)


def csv_bytes(recs: pl.DataFrame) -> bytes:
    """The rows as the CLI's ``recommend --format csv`` writes them (flat columns)."""
    return flat_csv(recs.to_dicts()).encode()
