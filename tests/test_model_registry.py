"""The model registry (models/registry.py): the only list of kinds, and each model's recommend step pure.

The fleet is the demo's (14 days, seed 3: idle GPUs, a 2-of-8-busy machine, cheaper GPUs, FP32 serving,
spot and commitment candidates, an on-prem cluster), generated and ingested once for the module.
"""

from __future__ import annotations

import contextlib
import io
import pickle
from pathlib import Path

import duckdb
import pytest
from fastapi.testclient import TestClient

from gpufinops.interfaces import cli
from gpufinops.jobs import config as config_mod
from gpufinops.models import registry
from gpufinops.models.recommendation import Findings
from gpufinops.models.run import analyse, validate_settings
from gpufinops.warehouse import db
from tests.demo_cache import demo_copy


@pytest.fixture(scope="module")
def demo_home(tmp_path_factory) -> Path:
    home = tmp_path_factory.mktemp("registry-demo")
    demo_copy(tmp_path_factory, home, days=14, seed=3)
    return home


def _warehouse(home: Path) -> Path:
    return home / "data" / "gpufinops.duckdb"


def _kind_action():
    parser = cli._parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    recommend = sub.choices["recommend"]
    return next(a for a in recommend._actions if a.dest == "kind")


def test_every_kind_is_registered_once_with_a_version_of_its_own():
    kinds = [spec.kind for spec in registry.MODELS]
    assert len(kinds) == len(set(kinds)) == len(registry.spec_modules())  # one kind per spec module found
    assert registry.KINDS == tuple(kinds)
    assert set(registry.VERSIONS) == set(kinds)
    assert all(version.startswith(f"{kind}/") for kind, version in registry.VERSIONS.items())
    with pytest.raises(ValueError, match="available: idle_gpu"):
        registry.spec("idle")


def test_the_cli_choices_are_the_registrys_kinds():
    assert list(_kind_action().choices) == list(registry.KINDS)
    err = io.StringIO()
    with contextlib.redirect_stderr(err), pytest.raises(SystemExit) as exit_:
        cli.main(["recommend", "--kind", "gpu_size"])
    assert exit_.value.code == 2
    assert "invalid choice: 'gpu_size'" in err.getvalue()
    assert all(kind in err.getvalue() for kind in registry.KINDS)


def test_validate_settings_knows_exactly_the_registered_settings_keys():
    validate_settings(
        {
            key: value
            for key, value in {
                "lookback_days": 14,
                "spot_min_days": 3.0,
                "commit_min_days": 10.0,
                "onprem_target_utilisation": 0.8,
            }.items()
        }
    )
    with pytest.raises(ValueError, match="lookbak_days: unknown key"):
        validate_settings({"lookbak_days": 14})
    with pytest.raises(ValueError, match="onprem_target_utilisation"):
        validate_settings({"onprem_target_utilisation": 1.5})  # a registered model's own check runs
    keys = registry.setting_keys()
    assert {"lookback_days", "spot_lookback_days", "commit_lookback_days", "onprem_target_utilisation"} <= keys
    assert registry.spec("idle_gpu").keys() == set()  # idle_gpu reads no [models] key


def test_the_stored_versions_and_the_apis_kinds_are_the_registrys(demo_home, tmp_path):
    from gpufinops.interfaces.api import create_app

    with db.reader(_warehouse(demo_home)) as con:
        stored = dict(con.execute("SELECT kind, any_value(model_version) FROM recommendations GROUP BY 1").fetchall())
        stored |= dict(
            con.execute("SELECT kind, any_value(model_version) FROM withheld_findings GROUP BY 1").fetchall()
        )
    assert stored and all(registry.VERSIONS[kind] == version for kind, version in stored.items())
    config = tmp_path / "gpufinops.toml"
    config.write_text(f'[warehouse]\npath = "{_warehouse(demo_home)}"\n')
    client = TestClient(create_app(config_mod.load(str(config), environ={}), insecure_demo=True))
    refused = client.get("/v1/recommendations", params={"kind": "gpu_size"})
    assert refused.status_code == 400
    assert refused.json()["detail"].endswith(f"(known: {', '.join(registry.KINDS)})")
    for kind in registry.KINDS:
        answer = client.get("/v1/recommendations", params={"kind": kind})
        assert answer.status_code == 200, answer.text
        assert {r["kind"] for r in answer.json()} <= {kind}


def test_each_recommend_step_runs_without_a_connection(demo_home, monkeypatch):
    """Each model's inputs, loaded from the warehouse, survive a pickle round trip (so they hold no
    connection), and its recommend step over the restored inputs, with the connection closed and
    ``duckdb.connect`` refusing, finds exactly what load + recommend found over the warehouse."""
    loaded: dict[str, tuple[bytes, Findings]] = {}
    with db.reader(_warehouse(demo_home)) as con:
        for spec in registry.MODELS:
            settings = spec.configure(None)
            inputs = spec.load(con, settings)
            loaded[spec.kind] = (pickle.dumps(inputs), spec.recommend(inputs, settings))

    def refuse(*_args, **_kwargs):
        raise AssertionError("a recommend step opened a warehouse connection")

    monkeypatch.setattr(duckdb, "connect", refuse)
    monkeypatch.setattr(db, "reader", refuse)
    monkeypatch.setattr(db, "writer", refuse)
    found_kinds = set()
    for spec in registry.MODELS:
        blob, expected = loaded[spec.kind]
        found = spec.recommend(pickle.loads(blob), spec.configure(None))
        assert isinstance(found, Findings)
        assert [r.to_dict() | {"created_at": None} for r in found.recommendations] == [
            r.to_dict() | {"created_at": None} for r in expected.recommendations
        ], spec.kind
        assert found.withheld == expected.withheld and len(found.comparison) == len(expected.comparison)
        assert all(r.kind == spec.kind for r in found.recommendations + found.comparison)
        assert all(w.kind == spec.kind for w in found.withheld)
        if found.recommendations or found.withheld or found.comparison:
            found_kinds.add(spec.kind)
    # the demo gives most models something to say: the check above is not over empty results
    assert {"idle_gpu", "gpu_count", "spot_mix", "onprem_vs_cloud"} <= found_kinds, found_kinds


def test_analyse_stores_every_registered_model_and_one_kind_filters(demo_home, tmp_path):
    copy = tmp_path / "wh.duckdb"
    copy.write_bytes(_warehouse(demo_home).read_bytes())
    seen: list[tuple[str, bool]] = []
    with db.writer(copy, create=False) as con:
        everything = analyse(con, on_model=lambda kind, done: seen.append((kind, done)))
        only = analyse(con, ["gpu_count"])
    assert seen == [(kind, done) for kind in registry.KINDS for done in (False, True)]
    assert only.recommendations and {r.kind for r in only.recommendations} == {"gpu_count"}
    assert {r.id for r in only.recommendations} == {r.id for r in everything.recommendations if r.kind == "gpu_count"}
    with pytest.raises(ValueError, match="unknown recommendation kind"):
        with db.writer(copy, create=False) as con:
            analyse(con, ["gpu_size"])
