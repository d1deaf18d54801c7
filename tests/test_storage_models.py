"""The storage side on a held-out AWS account in moto (tests/storage_account.py): the inventory as the
``aws_storage`` source through the ingest runner and boto3 on loopback, the bill's own rates, and each planted
finding found with its dollars, nothing else. The inventory's clock is set (``aws_source.clock``) so that
three inventories a month apart run in one test; everything else is real."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from gpufinops.ingest.core.registry import default_registry
from gpufinops.ingest.core.runner import run_source
from gpufinops.ingest.storage import aws_inventory, aws_source
from gpufinops.models import registry
from gpufinops.models.run import analyse
from gpufinops.warehouse import db
from tests import storage_account as acct
from tests.aws_loopback import moto_s3, use_dummy_credentials

pytestmark = pytest.mark.slow  # a moto account inventoried three times: ~40 s on 2 cores

STORAGE_KINDS = ("storage_tier", "storage_orphan", "checkpoint_lifecycle")


REGISTRY = default_registry()


def _options(endpoint: str) -> dict:
    return {"endpoint_url": endpoint, "regions": [acct.REGION], "prefixes": acct.options().prefixes}


def _inventory(path, endpoint: str, at: datetime, mp) -> aws_inventory.Inventory:
    """One run of the source at clock ``at``; returns the inventory it loaded (read back from the warehouse)."""
    mp.setattr(aws_source, "clock", lambda: at)
    result = run_source(REGISTRY, path, "storage", "aws_storage", _options(endpoint))
    assert result.status == "succeeded", result.error
    inv = aws_inventory.Inventory()
    with db.reader(path) as con:
        for table, rows in aws_source.tables(inv).items():
            cur = con.execute(f"SELECT * EXCLUDE (ingest_run_id) FROM {table} WHERE source = 'storage'")
            rows.extend(dict(zip([d[0] for d in cur.description], r, strict=True)) for r in cur.fetchall())
    return inv


@pytest.fixture(scope="module")
def account(tmp_path_factory):
    """The account planted, inventoried three times (attached; just detached; 28 days later) and billed."""
    mp = pytest.MonkeyPatch()
    use_dummy_credentials(mp)
    path = tmp_path_factory.mktemp("storage") / "wh.duckdb"
    final = datetime.now(UTC).replace(microsecond=0) + timedelta(days=30)
    with moto_s3() as endpoint:
        ids = acct.plant(endpoint, final)
        _inventory(path, endpoint, final - timedelta(days=29), mp)
        c = acct.clients(endpoint)
        ec2 = c.ec2(acct.REGION)
        ec2.detach_volume(VolumeId=ids["orphan"], InstanceId=ids["p5_gone"])
        ec2.detach_volume(VolumeId=ids["cpu_orphan"], InstanceId=ids["m5"])
        ec2.terminate_instances(InstanceIds=[ids["p5_gone"]])
        _inventory(path, endpoint, final - timedelta(days=28), mp)
        inv = _inventory(path, endpoint, final, mp)
        with db.writer(path) as con:
            acct.bill(con, ids, final)
            run = analyse(con)
        yield path, ids, inv, run, endpoint
    mp.undo()


def test_each_planted_finding_is_found_with_the_bills_dollars_and_nothing_else(account):
    _path, ids, _inv, run, _endpoint = account
    found = {(r.kind, r.resource_id): r for r in run.recommendations if r.kind in STORAGE_KINDS}
    expected = {
        ("storage_tier", ids["tier"]): Decimal("1062.50"),  # 500×0.125 + 16000×0.065 → 500×0.08 at gp3's baseline
        ("storage_orphan", ids["orphan"]): Decimal("30.00"),  # 1000×0.08 less a 1000 GiB snapshot at 0.05
        ("storage_orphan", ids["old_snapshot"]): Decimal("20.00"),  # its own 400 GB-month lines at 0.05
        # 650 GiB at 0.023; the rule leaves 195 GiB there, 260 GiB in Glacier IR at 0.004, 195 GiB expired
        ("checkpoint_lifecycle", "s3://ml-ckpt/llm/"): Decimal("9.425"),
    }
    assert set(found) == set(expected), sorted(found)
    for key, dollars in expected.items():
        assert abs(found[key].monthly_savings_usd - dollars) <= dollars * Decimal("0.01"), (key, found[key])
    tier = found[("storage_tier", ids["tier"])]
    assert (
        tier.proposed["volume_type"] == "gp3"
        and tier.proposed["iops"] == 3000
        and tier.proposed["throughput_mibps"] == 125
    )
    assert tier.team == "vision" and tier.evidence["gpu_resource_id"] == ids["p4d"]
    orphan = found[("storage_orphan", ids["orphan"])]
    assert orphan.team == "llm" and orphan.evidence["gpu_resource_type"] == "p5.48xlarge"
    assert orphan.proposed["keep_snapshot"]["new"] is True
    life = found[("checkpoint_lifecycle", "s3://ml-ckpt/llm/")]
    assert life.team == "llm" and len(life.proposed["expire_prefixes"]) == 14  # each run but its newest 3
    assert all(p.startswith("llm/run-") and p.endswith("/") for p in life.proposed["expire_prefixes"])


def test_what_cannot_be_measured_or_listed_is_withheld_and_named(account):
    _path, ids, _inv, run, _endpoint = account
    withheld = {(w.kind, w.resource_id): w.reason for w in run.withheld if w.kind in STORAGE_KINDS}
    assert withheld == {
        ("storage_tier", ids["unmeasured"]): "no_iops_measurements",
        ("checkpoint_lifecycle", "s3://no-such-bucket/ckpt/"): "no_prefix_access",
    }


def test_the_inventory_lists_only_configured_prefixes_and_follows_the_last_attachment(account):
    path, ids, inv, _run, _endpoint = account
    assert {o["bucket"] for o in inv.objects} == {"ml-ckpt", "ml-data", "no-such-bucket"}
    assert not any(o["prefix"].startswith("datasets/") for o in inv.objects)  # not configured: never listed
    refused = next(o for o in inv.objects if o["bucket"] == "no-such-bucket")
    assert "NoSuchBucket" in refused["access"] and refused["objects"] == 0
    orphan = next(v for v in inv.volumes if v["volume_id"] == ids["orphan"])
    assert orphan["attached_instance_id"] is None and orphan["last_instance_id"] == ids["p5_gone"]
    assert orphan["last_instance_type"] == "p5.48xlarge"
    assert {o["volume_id"] for o in inv.volume_ops} == {ids["tier"], ids["busy"], ids["cpu_io2"]}
    with db.reader(path) as con:
        versions = dict(con.execute("SELECT kind, any_value(model_version) FROM recommendations GROUP BY 1").fetchall())
    assert all(versions[k] == registry.VERSIONS[k] for k in STORAGE_KINDS)
    from gpufinops.models import storage_common

    with db.reader(path) as con:
        scope = storage_common.scope_counts(storage_common.load(con))
    # GPU work: tier, busy, unmeasured, orphan and the p4d's and g5's root volumes; the m5's two and its root
    # volume are listed, not examined
    assert (scope["volumes_in_scope"], scope["volumes_out_of_scope"]) == (6, 3)


def test_a_bad_inventory_value_is_refused_and_the_warehouse_kept(account, tmp_path, monkeypatch):
    """A team tag with CR/LF (EC2 accepts it) fails the run in the domain layer: one sentence naming the
    table, the volume and the column; the warehouse and the ledger's cursor as they were, exit 1."""
    from gpufinops.interfaces import cli

    path, ids, _inv, _run, endpoint = account
    copy = tmp_path / "wh.duckdb"
    copy.write_bytes(path.read_bytes())
    use_dummy_credentials(monkeypatch)
    ec2 = acct.clients(endpoint).ec2(acct.REGION)
    ec2.create_tags(Resources=[ids["tier"]], Tags=[{"Key": "team", "Value": "vision\r\nBcc: x"}])
    try:
        with db.reader(copy) as con:
            before = con.execute("SELECT * FROM storage_volumes ORDER BY volume_id").fetchall()
        config = _config(tmp_path, copy, endpoint)
        assert cli.main(["--config", str(config), "ingest"]) == 1
        with db.reader(copy) as con:
            assert con.execute("SELECT * FROM storage_volumes ORDER BY volume_id").fetchall() == before
            error = con.execute("SELECT error FROM ingest_runs ORDER BY started_at DESC LIMIT 1").fetchone()[0]
        assert "storage_volumes" in error and ids["tier"] in error and "column team value 'vision?" in error
        assert "\n" not in error, error
    finally:
        ec2.create_tags(Resources=[ids["tier"]], Tags=[{"Key": "team", "Value": "vision"}])


def _config(tmp_path, warehouse, endpoint: str, prefix: str = "llm/*/") -> object:
    config = tmp_path / "gpufinops.toml"
    config.write_text(
        f'[warehouse]\npath = "{warehouse}"\n\n[sources.storage]\ntype = "aws_storage"\n'
        f'endpoint_url = "{endpoint}"\nregions = ["us-east-1"]\n'
        f'[[sources.storage.prefixes]]\nbucket = "ml-ckpt"\nprefix = "{prefix}"\nteam = "llm"\nread_filter = "llm"\n'
    )
    return config


def test_the_exports_apply_as_they_are_in_moto(account):
    """The lifecycle configuration goes to S3 as exported and reads back the same; each ModifyVolume request
    changes its volume to what the finding proposed."""
    from gpufinops.jobs.export import storage
    from gpufinops.warehouse import recommendation_read

    path, ids, _inv, _run, endpoint = account
    with db.reader(path) as con:
        document = json.loads(storage.render(recommendation_read.load(con)))
    c = acct.clients(endpoint)
    s3, ec2 = c.s3, c.ec2(acct.REGION)
    assert set(document["s3_lifecycle"]) == {"ml-ckpt"}
    config = document["s3_lifecycle"]["ml-ckpt"]
    s3.put_bucket_lifecycle_configuration(Bucket="ml-ckpt", LifecycleConfiguration=config)
    back = s3.get_bucket_lifecycle_configuration(Bucket="ml-ckpt")["Rules"]
    assert [r["ID"] for r in back] == [r["ID"] for r in config["Rules"]] and len(back) == 15
    cold = next(r for r in back if r["ID"].startswith("gpufinops-cold-"))
    assert cold["Transitions"][0] == {"Days": 30, "StorageClass": "GLACIER_IR"} and cold["Filter"] == {"Prefix": "llm/"}
    assert document["modify_volume"] == [
        {"VolumeId": ids["tier"], "VolumeType": "gp3", "Iops": 3000, "Throughput": 125}
    ]
    for request in document["modify_volume"]:
        ec2.modify_volume(**request)
    volume = ec2.describe_volumes(VolumeIds=[ids["tier"]])["Volumes"][0]
    assert (volume["VolumeType"], volume["Iops"], volume["Throughput"]) == ("gp3", 3000, 125)
    assert sorted(document["commands"]) == sorted(
        [
            # every command names the region it acts in: a shell's default region is not the volume's
            f"aws ec2 delete-snapshot --region {acct.REGION} --snapshot-id {ids['old_snapshot']}",
            f"aws ec2 wait snapshot-completed --region {acct.REGION} --snapshot-ids "
            f'"$(aws ec2 create-snapshot --region {acct.REGION} --volume-id {ids["orphan"]} '
            f'--query SnapshotId --output text)" && aws ec2 delete-volume --region {acct.REGION} --volume-id {ids["orphan"]}',
        ]
    )
    assert document["monthly_savings_usd"] == pytest.approx(1062.50 + 30.00 + 20.00 + 9.43)


def test_gpufinops_ingest_loads_the_configured_source_and_names_a_bad_option(account, tmp_path, capsys, monkeypatch):
    from gpufinops.interfaces import cli

    _path, _ids, _inv, _run, endpoint = account
    use_dummy_credentials(monkeypatch)
    warehouse = tmp_path / "wh.duckdb"
    config = _config(tmp_path, warehouse, endpoint)
    assert cli.main(["--config", str(config), "ingest"]) == 0
    with db.reader(warehouse) as con:
        roots = {r[0] for r in con.execute("SELECT DISTINCT prefix FROM storage_objects").fetchall()}
        ledger = con.execute("SELECT source_type, status, rows, watermark FROM ingest_runs").fetchall()
    assert roots == {"llm/run-a/", "llm/run-b/"}  # the glob's matches
    assert [r[:2] for r in ledger] == [("aws_storage", "succeeded")] and ledger[0][2] > 0
    assert "40 object(s) under 1 prefix(es)" in ledger[0][3], ledger
    from gpufinops.warehouse import freshness

    with db.reader(warehouse) as con:
        fresh = freshness.source_freshness(con).row(0, named=True)
    assert (fresh["source"], fresh["kind"], fresh["stale"]) == ("storage", "inventory", False)
    assert cli.main(["--config", str(config), "ingest"]) == 0  # the same hour, the same account: skipped
    with db.reader(warehouse) as con:
        assert con.execute("SELECT status FROM ingest_runs ORDER BY started_at DESC LIMIT 1").fetchone() == ("skipped",)
    capsys.readouterr()
    config = _config(tmp_path, warehouse, endpoint, prefix="*")
    assert cli.main(["--config", str(config), "ingest"]) == 2
    assert "listing a whole bucket is refused" in capsys.readouterr().err
