"""Freshness of each source's *data*, not of its last run.

A source can run every hour and succeed while the data it holds stops at last month (a CUR export that
was switched off, a demo built on a fixed calendar, a Prometheus that lost its targets). So freshness
is the newest charge period / metric hour a source holds, against now, beside how late that kind of
data normally is (each source spec's ``freshness``, recorded on each of its runs in ``ingest_runs``: this
layer cannot import ingest): CUR and the GCP export arrive about a day late, DCGM within minutes. Older than that is *stale*, and the dashboard's Data health and Overview, the weekly report,
``gpufinops ingest list`` and the stale-data alert all read this one function.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import duckdb
import polars as pl

KINDS = ("cost", "metrics", "prices", "inventory", "other")  # cost, metrics: its newest rows; others: its last good run

# Each source type's spec declares its Freshness (the ``freshness`` fact); the ingest runner records it
# on every run (ingest_runs.freshness_kind, expected_lag_hours), and this layer reads the newest run's.


@dataclass(frozen=True, kw_only=True)
class Freshness:
    """The kind of data a source type holds and how many hours behind now its newest data normally is.

    Cost exports: AWS refreshes CUR 2.0 / FOCUS exports up to three times a day and the newest hours
    fill in over the next day; the GCP BigQuery export is "typically" a day behind (Google's docs);
    FOCUS files are daily. GPU metrics: a scrape every minute, an hourly rollup: the newest complete
    hour. Price catalogues change rarely: a week old is fine. A storage inventory is a daily listing.
    """

    kind: str  # one of KINDS
    lag_hours: float  # older than this is stale


# A source whose newest run recorded no freshness (a run row written by other code than the runner).
UNREGISTERED = Freshness(kind="other", lag_hours=24.0)


_NEWEST_SQL = """
WITH runs AS (
    SELECT source, any_value(source_type ORDER BY started_at DESC) AS source_type,
           max(started_at) AS last_run_at, any_value(status ORDER BY started_at DESC) AS last_status,
           max(finished_at) FILTER (WHERE status IN ('succeeded', 'skipped')) AS last_ok_at,
           first(freshness_kind ORDER BY started_at DESC, run_id DESC) AS freshness_kind,
           first(expected_lag_hours ORDER BY started_at DESC, run_id DESC) AS expected_lag_hours
    FROM ingest_runs GROUP BY source),
cost AS (SELECT "x_Source" AS source, max("ChargePeriodEnd") AS newest FROM cost_line_items GROUP BY 1),
metrics AS (SELECT source, max(hour) + INTERVAL 1 HOUR AS newest FROM gpu_metrics_hourly GROUP BY 1)
SELECT r.source, r.source_type, r.last_run_at, r.last_status, r.last_ok_at,
       r.freshness_kind, r.expected_lag_hours, c.newest AS cost_newest, m.newest AS metrics_newest
FROM runs r LEFT JOIN cost c USING (source) LEFT JOIN metrics m USING (source)
ORDER BY r.source"""

SCHEMA = pl.Schema(
    {
        "source": pl.Utf8(),
        "source_type": pl.Utf8(),
        "kind": pl.Utf8(),
        "newest_data_at": pl.Datetime("us", "UTC"),
        "expected_lag_hours": pl.Float64(),
        "age_hours": pl.Float64(),
        "stale": pl.Boolean(),
        "last_run_at": pl.Datetime("us", "UTC"),
        "last_status": pl.Utf8(),
        "message": pl.Utf8(),
    }
)


def _utc(value: datetime | None) -> datetime | None:
    return None if value is None else value.astimezone(UTC)


def _age_text(hours: float) -> str:
    if hours < 1:
        return f"{max(hours * 60, 0):.0f} min"
    if hours < 48:
        return f"{hours:.0f} h"
    return f"{hours / 24:.0f} days"


def newest_by_source(con: duckdb.DuckDBPyConnection) -> list[tuple]:
    """Each source's runs and the newest cost and metric data it holds (one scan of the line items and the
    hourly metrics: 85 ms on a 10,000-GPU warehouse): what :func:`source_freshness` judges against now. It
    changes only with a load, so a caller may keep it while the ingest ledger is unchanged (the dashboard:
    ``dashboard.common.cached_call``)."""
    return con.execute(_NEWEST_SQL).fetchall()


def source_freshness(
    con: duckdb.DuckDBPyConnection,
    now: datetime | None = None,
    lags: Mapping[str, Freshness] | None = None,
    *,
    newest_rows: list[tuple] | None = None,
) -> pl.DataFrame:
    """One row per source that ever ran: the newest data it holds, its age, and whether that is stale.

    ``newest_data_at`` is the end of the newest charge period (cost sources) or metric hour (GPU
    metrics); for price and reference sources, which hold no time series of their own, the last run
    that succeeded. A source that holds no data at all is stale, with a message saying so.
    Each source's kind and lag are those its newest run recorded (its spec's, when it ran; a run row
    without them: ``UNREGISTERED``); ``lags``: a source type's Freshness that overrides the recorded one;
    ``newest_rows``: :func:`newest_by_source` read already (else it is read here).
    """
    lags = {} if lags is None else lags
    now = (now or datetime.now(UTC)).astimezone(UTC)
    rows = []
    for (
        source,
        source_type,
        last_run,
        last_status,
        last_ok,
        recorded_kind,
        recorded_lag,
        cost_newest,
        metrics_newest,
    ) in newest_by_source(con) if newest_rows is None else newest_rows:
        recorded = (
            UNREGISTERED
            if recorded_kind is None or recorded_lag is None
            else Freshness(kind=recorded_kind, lag_hours=float(recorded_lag))
        )
        declared = lags.get(source_type, recorded)
        kind, lag = declared.kind, declared.lag_hours
        newest = {"cost": cost_newest, "metrics": metrics_newest}.get(kind, last_ok) or cost_newest or metrics_newest
        newest = _utc(newest)
        if newest is None:
            age, stale = None, True
            message = f"{source} holds no {kind} data yet" + (f" (last run {last_status})" if last_status else "")
        else:
            age = (now - newest) / timedelta(hours=1)
            stale = age > lag
            what = {"cost": "cost data ends", "metrics": "GPU metrics end"}.get(kind, "last refreshed")
            message = f"{what} {newest:%Y-%m-%d %H:%M} UTC, {_age_text(age)} ago" + (
                f" (expected within {_age_text(lag)}): stale" if stale else ""
            )
        rows.append(
            {
                "source": source,
                "source_type": source_type,
                "kind": kind,
                "newest_data_at": newest,
                "expected_lag_hours": lag,
                "age_hours": None if age is None else round(age, 2),
                "stale": stale,
                "last_run_at": _utc(last_run),
                "last_status": last_status,
                "message": message,
            }
        )
    return pl.DataFrame(rows, schema=SCHEMA)


def stale_sources(
    con: duckdb.DuckDBPyConnection,
    now: datetime | None = None,
    lags: Mapping[str, Freshness] | None = None,
    *,
    newest_rows: list[tuple] | None = None,
) -> pl.DataFrame:
    """The sources whose data is older than expected (see :func:`source_freshness`)."""
    return source_freshness(con, now, lags, newest_rows=newest_rows).filter(pl.col("stale"))


def data_ends(con: duckdb.DuckDBPyConnection) -> datetime | None:
    """The end of the newest cost data in the warehouse (what "this month" means on a replayed or
    delayed export, as opposed to the clock)."""
    rows = con.execute('SELECT max("ChargePeriodEnd") FROM cost_line_items').fetchall()
    return _utc(rows[0][0]) if rows else None
