"""The dashboard's stored page results stay current: the demo stores them after its last load (its storage
listing), and an ingest whose sources had nothing new stores them again where they are stale; otherwise every
page takes the slow path and Data health's advice would be a command that changes nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpufinops.interfaces import cli
from gpufinops.simulator import demo_fleet
from gpufinops.warehouse import db, stored_results
from tests.demo_cache import demo_copy


def _current(warehouse: Path) -> tuple[bool, int]:
    with db.reader(warehouse) as con:
        version, _at, _seconds, count = stored_results.computed(con)
        return version == stored_results.data_version(con), count


def test_an_ingest_with_nothing_new_stores_stale_results(tmp_path, capsys) -> None:
    demo_fleet.generate(tmp_path, days=7, seed=5)
    config = tmp_path / "gpufinops.toml"
    config.write_text(
        '[warehouse]\npath = "wh.duckdb"\n[sources.gcp]\ntype = "gcp_billing_export"\n'
        'path = "exports/gcp/billing/*.json"\n'
    )
    assert cli.main(["--config", str(config), "ingest"]) == 0
    assert _current(tmp_path / "wh.duckdb")[0]
    with db.writer(tmp_path / "wh.duckdb") as con:  # a refresh that failed after the load: nothing stored
        con.execute("DELETE FROM stored_results").fetchall()
    capsys.readouterr()
    assert cli.main(["--config", str(config), "ingest"]) == 0
    assert "skipped" in capsys.readouterr().out  # the export is unchanged: no source loads anything
    current, count = _current(tmp_path / "wh.duckdb")
    assert current and count > 0


@pytest.mark.slow
def test_the_demo_stores_its_page_results_after_its_last_load(tmp_path_factory) -> None:
    home = tmp_path_factory.mktemp("demo")
    demo_copy(tmp_path_factory, home, days=14)
    current, count = _current(home / "data" / "gpufinops.duckdb")
    assert count > 0 and current, "the demo's pages would take the slow path"
