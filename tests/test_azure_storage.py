"""Azure storage: managed disks left by GPU VMs and Premium SSDs that Premium SSD v2 can replace, and checkpoint
containers in Blob Storage, priced from the customer's own FocusCost lines (loaded by ``azure_cost_export`` from a
folder, the real ingest path) and exported by ``gpufinops export storage`` as ``az`` commands and a lifecycle
management policy.

The disks and snapshots are the ``azure_storage`` source's, listed from a loopback Azure Resource Manager speaking
the documented List shapes (tests/azure_arm_loopback.py), twice: the VM's second disk attached, then detached. No
source lists Blob containers or reads Azure Monitor yet, so the container's checkpoint groups, the disk's operations
and the container's reads are written into their storage tables here, as the storage inventory writes them. The
FocusCost rows are generated in the export's exact documented shape (tests/azure_focuscost_data.py). Each expected
dollar figure below is computed by hand from the bill's lines.
"""

from __future__ import annotations

import json
import re
import shlex
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import jsonschema
import pyarrow as pa
import pytest

from gpufinops.ingest.core.registry import default_registry
from gpufinops.ingest.core.runner import run_source
from gpufinops.ingest.storage import aws_source
from gpufinops.jobs.export import storage
from gpufinops.models.run import analyse
from gpufinops.warehouse import db, recommendation_read
from gpufinops.warehouse.storage_schema import STORAGE_TABLES
from tests import azure_arm_loopback as arm
from tests import azure_focuscost_data as az
from tests.conftest import query

REGISTRY = default_registry()
SUB, GROUP, OLD_DISK, DATA_DISK, SNAPSHOT = arm.SUB, arm.GROUP, arm.OLD_DISK, arm.DATA_DISK, arm.SNAPSHOT
V2_DISK = f"{GROUP}/Microsoft.Compute/disks/scratch-v2"
ACCOUNT = f"{GROUP}/Microsoft.Storage/storageAccounts/mlckpt"
H100 = "Standard_ND96isr_H100_v5"
GIB = 2**30
# the bill's rates, as the lines below carry them (eastus list prices)
P30_MONTH = Decimal("135.17")  # one P30 LRS Disk a month
V2_GIB_HOUR = Decimal("0.0001")  # Premium SSD v2 provisioned capacity
SNAPSHOT_GIB_MONTH = Decimal("0.05")
HOT_GIB_MONTH, COOL_GIB_MONTH = Decimal("0.0184"), Decimal("0.01")


def _bill(root) -> None:
    """October 2026: the H100 VM, its two P30 disks, a Premium SSD v2 disk, a snapshot and the checkpoint account."""
    days = az.month_days("2026-10", 30)
    third = Decimal(1) / Decimal(30)  # a tier disk's day: 1/30 of a month
    rows = [az.vm_day("1.0r2", d, az.H100_VM, H100, az.H100_HOURLY) for d in days]
    for d in days:
        for disk in (OLD_DISK, DATA_DISK):
            rows.append(
                az.meter_day("1.0r2", d, disk, "P30 LRS Disk", quantity=third, cost=P30_MONTH * third, unit="1/Month")
            )
        gib_hours = Decimal(512 * 24)
        rows.append(
            az.meter_day(
                "1.0r2",
                d,
                V2_DISK,
                "Premium LRS Provisioned Capacity",
                quantity=gib_hours,
                cost=gib_hours * V2_GIB_HOUR,
                unit="1 GiB/Hour",
            )
        )
        for resource, meter, gib, rate in (
            (SNAPSHOT, "LRS Snapshot", 200, SNAPSHOT_GIB_MONTH),
            (ACCOUNT, "Hot LRS Data Stored", 500, HOT_GIB_MONTH),
            (ACCOUNT, "Cool LRS Data Stored", 10, COOL_GIB_MONTH),
        ):
            gib_months = Decimal(gib) * third
            rows.append(
                az.meter_day(
                    "1.0r2", d, resource, meter, quantity=gib_months, cost=gib_months * rate, unit="1 GB/Month"
                )
            )
    az.write_run(root, "2026-10", rows)


def _volume(volume_id: str, attached: str | None, **extra) -> dict:
    return {
        "source": "azstorage",
        "provider": "azure",
        "region": "eastus",
        "zone": "1",
        "volume_id": volume_id,
        "volume_type": "Premium_LRS",
        "size_gib": 1024.0,
        "iops": 5000.0,
        "throughput_mibps": 200.0,
        "state": "Attached" if attached else "Unattached",
        "attached_instance_id": attached,
        "last_instance_id": az.H100_VM,
        "last_instance_type": H100,
        "last_attached_at": None,
        "detached_at": None,
        "created_at": None,
        "team": "research",
        "tags": "{}",
        "ingest_run_id": "t",
        **extra,
    }


def _disks(warehouse, now: datetime, monkeypatch) -> None:
    """Two inventories of the subscription: 31 days ago both disks on the VM, now the second one detached since
    30 days (ARM's LastOwnershipUpdateTime)."""
    monkeypatch.setenv(arm.TOKEN_ENV, arm.TOKEN)
    server = arm.Arm(arm.initial_state(now))
    options = {"subscription": SUB, "endpoint": server.url, "token_env": arm.TOKEN_ENV}
    try:
        for at in (now - timedelta(days=31), now):
            if at == now:
                old = next(d for d in server.state["disks"] if d["id"] == OLD_DISK)
                old.pop("managedBy")
                old["properties"].update(
                    diskState="Unattached", LastOwnershipUpdateTime=arm._stamp(at - timedelta(days=30))
                )
            monkeypatch.setattr(aws_source, "clock", lambda at=at: at)
            result = run_source(REGISTRY, warehouse, "azstorage", "azure_storage", options)
            assert result.status == "succeeded", result.error
    finally:
        server.stop()


def _inventory(con, now: datetime) -> None:
    """The container's checkpoint groups, the disk's operations and the container's reads (module doc)."""
    ages = {"step-100/": 100, "step-80/": 80, "step-60/": 60, "step-40/": 40, "step-10/": 10}
    objects = [
        {
            "source": "azstorage",
            "provider": "azure",
            "bucket": "mlckpt/checkpoints",
            "prefix": "llm/",
            "purpose": "checkpoint",
            "team": "research",
            "run": "run-1",
            "checkpoint": name,
            "storage_class": "Hot",
            "objects": 1,
            "bytes": 100 * GIB,
            "oldest_at": now - timedelta(days=age),
            "newest_at": now - timedelta(days=age),
            "access": "ok",
            "ingest_run_id": "t",
        }
        for name, age in ages.items()
    ]
    ops = [  # 10 days of the data disk's hours: its busiest hour 1,100 IOPS and 44 MiB/s
        {
            "source": "azstorage",
            "volume_id": DATA_DISK,
            "hour": now - timedelta(hours=h),
            "read_ops": 3_000_000.0 if h == 5 else 300_000.0,
            "write_ops": 960_000.0 if h == 5 else 100_000.0,
            "read_bytes": 44 * 1024 * 1024 * 3600.0 if h == 5 else 1e9,
            "write_bytes": 0.0,
            "ingest_run_id": "t",
        }
        for h in range(240)
    ]
    reads = [  # two GETs in 14 days: the newest checkpoints' reads, fewer than the 3 objects a rule keeps
        {
            "source": "azstorage",
            "bucket": "mlckpt/checkpoints",
            "prefix": "llm/",
            "day": now - timedelta(days=d),
            "get_requests": 1.0 if d < 2 else 0.0,
            "ingest_run_id": "t",
        }
        for d in range(14)
    ]
    for table, rows in (
        ("storage_objects", objects),
        ("storage_volume_ops_hourly", ops),
        ("storage_prefix_reads_daily", reads),
    ):
        schema = STORAGE_TABLES[table]
        data = pa.Table.from_pylist(
            [{**r, "observed_at": now} if "observed_at" in schema.names else r for r in rows], schema=schema
        )
        con.register("rows", data)
        con.execute(f"INSERT INTO {table} BY NAME SELECT * FROM rows")
        con.unregister("rows")


@pytest.fixture(scope="module")
def azure_account(tmp_path_factory):
    root = tmp_path_factory.mktemp("azure-storage")
    _bill(root / "export")
    warehouse = root / "wh.duckdb"
    result = run_source(REGISTRY, warehouse, "azbill", "azure_cost_export", {"path": str(root / "export")})
    assert result.status == "succeeded", result.error
    now = datetime(2026, 10, 31, tzinfo=UTC)
    monkeypatch = pytest.MonkeyPatch()
    try:
        _disks(warehouse, now, monkeypatch)
    finally:
        monkeypatch.undo()
    with db.writer(warehouse) as con:
        _inventory(con, now)
        run = analyse(con, kinds=["storage_tier", "storage_orphan", "checkpoint_lifecycle"])
        document = json.loads(storage.render(recommendation_read.load(con)))
    return run, document


def test_each_azure_storage_finding_is_priced_from_the_bill_s_own_lines(azure_account):
    run, _ = azure_account
    found = {(r.kind, r.resource_id): r for r in run.recommendations}
    assert set(found) == {
        ("storage_orphan", OLD_DISK),
        ("storage_tier", DATA_DISK),
        ("checkpoint_lifecycle", "https://mlckpt.blob.core.windows.net/checkpoints/llm/"),
    }
    # by hand: a P30 a month less a new snapshot of its 1,024 GiB at the bill's 0.05 a GiB-month
    orphan = found[("storage_orphan", OLD_DISK)]
    assert orphan.monthly_savings_usd == (P30_MONTH - 1024 * SNAPSHOT_GIB_MONTH).quantize(Decimal("0.01"))
    assert orphan.proposed["keep_snapshot"]["new"] is True and orphan.team == "research"
    # by hand: the P30 against Premium SSD v2's 1,024 GiB × 730 hours at the bill's 0.0001 a GiB-hour
    tier = found[("storage_tier", DATA_DISK)]
    assert tier.proposed["volume_type"] == "PremiumV2_LRS"
    assert tier.monthly_savings_usd == (P30_MONTH - Decimal("1024") * 730 * V2_GIB_HOUR).quantize(Decimal("0.01"))
    assert tier.evidence["peak_iops"] == pytest.approx(1100.0, abs=0.1)
    # by hand: 500 GiB Hot now; the rule deletes step-100 (not kept, 100 days), moves step-80, -60 and -40 to Cool
    life = found[("checkpoint_lifecycle", "https://mlckpt.blob.core.windows.net/checkpoints/llm/")]
    now_cost = 500 * HOT_GIB_MONTH
    new_cost = 300 * COOL_GIB_MONTH + 100 * HOT_GIB_MONTH
    assert life.monthly_savings_usd == (now_cost - new_cost).quantize(Decimal("0.01"))
    assert life.proposed["storage_class"] == "Cool" and life.evidence["account_resource_id"] == ACCOUNT
    assert life.proposed["expire_prefixes"] == ["llm/run-1/step-100/", "llm/run-1/step-80/"]


# The documented fields of a lifecycle management policy (learn.microsoft.com/azure/storage/blobs/
# lifecycle-management-policy-structure; the ARM template of Microsoft.Storage/storageAccounts/managementPolicies
# 2023-04-01): nothing else is accepted, a name is up to 256 alphanumeric characters, 100 rules a policy, 10 prefixes
# a filter, each starting with a container name.
_DAYS = {
    "type": "object",
    "additionalProperties": False,
    "minProperties": 1,
    "properties": {
        k: {"type": "integer", "minimum": 0}
        for k in (
            "daysAfterModificationGreaterThan",
            "daysAfterLastAccessTimeGreaterThan",
            "daysAfterCreationGreaterThan",
            "daysAfterLastTierChangeGreaterThan",
        )
    },
}
POLICY_SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "required": ["rules"],
    "properties": {
        "rules": {
            "type": "array",
            "minItems": 1,
            "maxItems": 100,
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["name", "type", "definition"],
                "properties": {
                    "name": {"type": "string", "pattern": "^[A-Za-z0-9]{1,256}$"},
                    "enabled": {"type": "boolean"},
                    "type": {"enum": ["Lifecycle"]},
                    "definition": {
                        "type": "object",
                        "additionalProperties": False,
                        "required": ["actions"],
                        "properties": {
                            "filters": {
                                "type": "object",
                                "additionalProperties": False,
                                "properties": {
                                    "blobTypes": {
                                        "type": "array",
                                        "items": {"enum": ["blockBlob", "appendBlob"]},
                                        "minItems": 1,
                                    },
                                    "prefixMatch": {
                                        "type": "array",
                                        "maxItems": 10,
                                        "items": {
                                            "type": "string",
                                            "pattern": "^[a-z0-9](?:[a-z0-9-]{1,61}[a-z0-9])?/",
                                        },
                                    },
                                },
                                "required": ["blobTypes"],
                            },
                            "actions": {
                                "type": "object",
                                "additionalProperties": False,
                                "minProperties": 1,
                                "properties": {
                                    "baseBlob": {
                                        "type": "object",
                                        "additionalProperties": False,
                                        "minProperties": 1,
                                        "properties": {
                                            **{
                                                k: _DAYS
                                                for k in (
                                                    "tierToCool",
                                                    "tierToCold",
                                                    "tierToArchive",
                                                    "tierToHot",
                                                    "delete",
                                                )
                                            },
                                            "enableAutoTierToHotFromCool": {"type": "boolean"},
                                        },
                                    },
                                },
                            },
                        },
                    },
                },
            },
        }
    },
}


def _policy_problems(policy: dict) -> list[str]:
    problems = [e.message for e in jsonschema.Draft202012Validator(POLICY_SCHEMA).iter_errors(policy)]
    names = [r["name"] for r in policy.get("rules", [])]
    return problems + (["a rule name twice"] if len(set(names)) != len(names) else [])


def test_the_schema_check_can_fail():
    assert _policy_problems({"rules": [{"name": "bad-name", "type": "Lifecycle", "definition": {"actions": {}}}]})
    assert _policy_problems({"Rules": []})


def test_export_storage_writes_az_commands_and_a_lifecycle_policy_of_the_documented_schema(azure_account):
    _, document = azure_account
    policy = document["azure_lifecycle"]["mlckpt"]["policy"]
    assert _policy_problems(policy) == []
    cool, expire = policy["rules"]
    assert cool["definition"] == {
        "filters": {"blobTypes": ["blockBlob"], "prefixMatch": ["checkpoints/llm/"]},
        "actions": {"baseBlob": {"tierToCool": {"daysAfterModificationGreaterThan": 30}}},
    }
    assert expire["definition"]["filters"]["prefixMatch"] == [
        "checkpoints/llm/run-1/step-100/",
        "checkpoints/llm/run-1/step-80/",
    ]
    assert expire["definition"]["actions"] == {"baseBlob": {"delete": {"daysAfterModificationGreaterThan": 90}}}
    at = f"--subscription {SUB} --resource-group ml-rg"
    commands = document["commands"]
    assert f"az disk update {at} --name h100-data --sku PremiumV2_LRS" in commands
    assert (
        f"az snapshot create {at} --name h100-old-data-gpufinops --source {OLD_DISK} --incremental true && "
        f"az disk delete {at} --name h100-old-data --yes"
    ) in commands
    policy_command = next(c for c in commands if "management-policy" in c)
    words = shlex.split(policy_command)
    assert words[:5] == ["az", "storage", "account", "management-policy", "create"]
    flags = dict(zip(words[5::2], words[6::2], strict=True))
    assert flags["--subscription"] == SUB and flags["--resource-group"] == "ml-rg"
    assert flags["--account-name"] == "mlckpt" and json.loads(flags["--policy"]) == policy
    # every command names where it acts
    assert all(re.search(r"--subscription \S+ --resource-group \S+", c) for c in commands), commands
    assert document["left_out"] == []


def test_a_policy_past_the_documented_limits_is_split_and_what_does_not_fit_is_left_out():
    """4,001 expiring folders: 10 prefixes a rule, 100 rules a policy (one is the move to Cool)."""
    folders = [f"llm/run-{n}/step-1/" for n in range(4001)]
    obj = {
        "id": "x",
        "kind": "checkpoint_lifecycle",
        "provider": "azure",
        "plan": "primary",
        "status": "open",
        "monthly_savings_usd": 1.0,
        "resource_id": "https://acct.blob.core.windows.net/ckpt/llm/",
        "evidence": {"account_resource_id": ACCOUNT.replace("mlckpt", "acct")},
        "proposed": {
            "bucket": "acct/ckpt",
            "prefix": "llm/",
            "storage_class": "Cool",
            "transition_days": 30,
            "expire_days": 90,
            "expire_prefixes": folders,
        },
    }
    document = storage.document([obj])
    policy = document["azure_lifecycle"]["acct"]["policy"]
    assert _policy_problems(policy) == [] and len(policy["rules"]) == 100
    assert document["left_out"] == ["storage account acct: 302 rule(s) past a policy's 100"]
    unbilled = storage.document([{**obj, "evidence": {}}])
    assert not any("management-policy" in c for c in unbilled["commands"])
    assert "no bill line names its subscription and resource group" in unbilled["left_out"][-1]


@pytest.mark.parametrize(
    ("disk_type", "gib", "billed"),
    [
        ("Premium_LRS", 1000.0, ("P30 LRS Disk", 1.0)),  # a size rounds up to its tier
        ("Premium_LRS", 1025.0, ("P40 LRS Disk", 1.0)),
        ("StandardSSD_LRS", 4.0, ("E1 LRS Disk", 1.0)),
        ("Standard_LRS", 10.0, ("S4 LRS Disk", 1.0)),  # Standard HDD starts at S4
        ("PremiumV2_LRS", 100.0, ("Premium LRS Provisioned Capacity", 73_000.0)),  # GiB-hours a month
        ("UltraSSD_LRS", 10.0, ("Ultra LRS Provisioned Capacity", 7_300.0)),
        ("Premium_LRS", 40_000.0, None),  # past P80: no tier
        ("gp3", 10.0, None),
    ],
)
def test_a_managed_disk_is_billed_at_its_tier_or_its_provisioned_capacity(disk_type, gib, billed):
    from gpufinops.kernel.providers import spec

    facts = spec("azure").storage
    assert facts is not None and facts.disk_meter(disk_type, gib) == billed
    if billed:
        assert facts.meter_key(billed[0]) == billed[0]
    assert facts.meter_key("NC24ads A100 v4") is None


def test_an_unmeasured_premium_disk_and_an_unbilled_tier_are_withheld_naming_what_would_complete_them():
    from gpufinops.models import storage_orphan, storage_tier
    from gpufinops.models.storage_common import StorageInputs

    now = datetime(2026, 10, 31, tzinfo=UTC)
    inputs = StorageInputs(
        now=now,
        rates={("azure", "eastus", "LRS Snapshot"): SNAPSHOT_GIB_MONTH},  # no P40 LRS Disk line on the bill
        gpu_types={H100},
        volumes=[
            _volume(DATA_DISK, az.H100_VM),
            _volume(OLD_DISK, None, size_gib=2048.0, detached_at=now - timedelta(days=30)),
        ],
    )
    settings = storage_tier.StorageSettings()
    tier = storage_tier.findings(inputs, settings).withheld
    assert [(w.resource_id, w.reason) for w in tier] == [(DATA_DISK, "no_iops_measurements")]
    assert "Azure Monitor" in tier[0].source_hint
    orphan = storage_orphan.findings(inputs, settings).withheld
    assert [(w.resource_id, w.reason) for w in orphan] == [(OLD_DISK, "unpriced_storage")]
    assert "P40 LRS Disk" in orphan[0].detail and "azure_cost_export" in orphan[0].source_hint


@pytest.fixture
def arm_server(monkeypatch):
    monkeypatch.setenv(arm.TOKEN_ENV, arm.TOKEN)
    server = arm.Arm(arm.initial_state(datetime(2026, 10, 31, tzinfo=UTC)))
    yield server
    server.stop()


def _list(warehouse, server, **options):
    return run_source(
        REGISTRY,
        warehouse,
        "azstorage",
        "azure_storage",
        {"subscription": SUB, "endpoint": server.url, "token_env": arm.TOKEN_ENV, **options},
    )


def test_the_inventory_pages_every_listing_and_knows_each_disk_s_vm_size(arm_server, tmp_path):
    result = _list(tmp_path / "wh.duckdb", arm_server)
    assert result.status == "succeeded", result.error
    assert sum("skiptoken" in r for r in arm_server.requests) == 1  # the disks' second page, by nextLink
    rows = query(
        tmp_path / "wh.duckdb",
        "SELECT volume_id, volume_type, size_gib, attached_instance_id, last_instance_type, team "
        "FROM storage_volumes ORDER BY 1",
    )
    vm = az.H100_VM  # the bill's id: ARM's managedBy lower-cased
    assert rows == [(d, "Premium_LRS", 1024.0, vm, H100, "research") for d in sorted((DATA_DISK, OLD_DISK))]
    assert query(tmp_path / "wh.duckdb", "SELECT snapshot_id, volume_id, size_gib FROM storage_snapshots") == [
        (SNAPSHOT, DATA_DISK, 1024.0)
    ]


@pytest.mark.parametrize("value", [float("nan"), -1, "1024"])
def test_a_disk_size_that_is_not_one_is_refused_naming_the_disk_and_the_warehouse_kept(arm_server, tmp_path, value):
    warehouse = tmp_path / "wh.duckdb"
    assert _list(warehouse, arm_server).status == "succeeded"
    before = query(warehouse, "SELECT * FROM storage_volumes ORDER BY ALL")
    arm_server.state["disks"][1]["properties"]["diskSizeGB"] = value
    arm_server.state["disks"][1]["properties"]["diskState"] = "Reserved"  # a new listing, not the last one's
    result = _list(warehouse, arm_server)
    assert result.status == "failed"
    assert result.error.startswith("azstorage: ARM disks list: 'h100-old-data' (resource group ml-rg) diskSizeGB is ")
    assert result.error.endswith("not a finite number of 0 or more")
    assert query(warehouse, "SELECT * FROM storage_volumes ORDER BY ALL") == before


def test_a_refused_token_and_a_missing_one_are_one_sentence_each(arm_server, tmp_path, monkeypatch):
    monkeypatch.setenv(arm.TOKEN_ENV, "expired")
    refused = _list(tmp_path / "wh.duckdb", arm_server)
    assert refused.status == "failed" and "virtualMachines answered HTTP 401" in refused.error
    assert "expired" not in refused.error and "AuthenticationFailed" in refused.error
    monkeypatch.delenv(arm.TOKEN_ENV)
    missing = _list(tmp_path / "wh.duckdb", arm_server)
    assert missing.error == f"azstorage: the variable {arm.TOKEN_ENV} (token_env) is not set"


def test_doctor_lists_the_disks_through_the_spec_s_own_check(arm_server, tmp_path):
    from gpufinops.interfaces import doctor_sources
    from gpufinops.jobs.config import parse_source

    check = doctor_sources.check_of("azure_storage", REGISTRY)
    assert check is not None and check.__module__ == "gpufinops.ingest.storage.doctor"
    table = {"type": "azure_storage", "subscription": SUB, "endpoint": arm_server.url, "token_env": arm.TOKEN_ENV}
    status, detail, _ = check(parse_source("azstorage", table, REGISTRY), tmp_path, 5.0)
    assert (status, detail) == ("ok", f"ARM Microsoft.Compute/disks list answers for subscription {SUB}: 2 disk(s)")
