"""Hourly metric slices are matched by the hour as a number: the same rows as the formatted hour."""

import duckdb

from gpufinops.derived import attribution
from gpufinops.ingest.metrics import metrics_store


def test_hour_slices_match_the_same_rows_as_the_formatted_hour() -> None:
    con = duckdb.connect()
    con.execute("SET TimeZone = 'America/New_York'")  # the slice is a UTC hour whatever the session's zone
    con.execute(
        "CREATE TABLE t AS SELECT TIMESTAMPTZ '2026-10-01 00:00:00+00' + to_minutes(m) AS hour, "
        "CASE WHEN m % 7 = 0 THEN 'other' ELSE 'dcgm' END AS source FROM range(0, 72 * 60, 13) r(m)"
    )
    slices = ["2026-10-01T05", "2026-10-02T23", "2026-10-01T00", "2026-10-03T12", "not an hour"]
    for values in (slices[:4], slices[1:2], slices):
        expected = (
            "SELECT * FROM t WHERE source = ? AND ("
            + metrics_store.HOUR_SLICE_SQL
            + ") IN ("
            + ", ".join("?" for _ in values)
            + ") ORDER BY ALL"
        )
        where, params = attribution.slice_where(metrics_store.HOUR_SLICE_SQL, "dcgm", values)
        got = con.execute(f"SELECT * FROM t WHERE {where} ORDER BY ALL", params).fetchall()
        assert got == con.execute(expected, ["dcgm", *values]).fetchall()
        assert got  # (the slices hold rows: the comparison means something)
    assert attribution.slice_where(metrics_store.HOUR_SLICE_SQL, "dcgm", slices[:2])[1] == ["dcgm"]
