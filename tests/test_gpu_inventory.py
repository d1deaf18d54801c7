"""The shipped GPU instance inventory (warehouse/data/gpu_instance_types.csv) and its loader.

Checked against real public data: AWS DescribeInstanceTypes answers (amazon-ec2-instance-selector
fixtures), Google Cloud machine data built from the Cloud Billing Catalog (Cyclenerd pricing.yml) and
accelerator availability, and Karpenter's us-east-1 price list. The copies in tests/data run everywhere;
the same checks against fuller copies in a data folder beside the checkout skip where it is absent.
"""

from __future__ import annotations

import csv
import functools
import json
import re
import shutil
from pathlib import Path

import pytest
import yaml

from gpufinops.ingest.aws.cur_values import GPU_FAMILIES
from gpufinops.warehouse import db, reference, reference_schema
from gpufinops.warehouse.gpu_models import CANONICAL_GPU_MODELS, load_gpu_specs, normalize_gpu_model

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "warehouse" / "data"
CSV_PATH = DATA / "gpu_instance_types.csv"
SOURCES_MD = DATA / "GPU_INSTANCE_TYPES_SOURCES.md"
TESTS_DATA = Path(__file__).resolve().parent / "data"
SHARED = ROOT.parent / "shared" / "data"

AWS_FIXTURE_DIRS = {
    "tests-data": TESTS_DATA / "aws" / "ec2-instance-selector",
    "shared": SHARED / "aws-ec2-instance-selector-fixtures",
}
GCP_MACHINE_FILES = {
    "tests-data": TESTS_DATA / "gcp-pricing-cyclenerd" / "gpu_machine_types.yml",
    "shared": SHARED / "gcp-pricing-cyclenerd" / "pricing.yml",
}
GCP_ACCELERATOR_FILES = {
    "tests-data": TESTS_DATA / "gcp-pricing-cyclenerd" / "acceleratortyperegion.csv",
    "shared": SHARED / "gcp-pricing-cyclenerd" / "acceleratortyperegion.csv",
}
KARPENTER_PRICE_LISTS = {
    "shipped": DATA / "aws_ondemand_karpenter.csv",
    "shared": SHARED / "aws-ondemand-karpenter" / "aws_ondemand_linux_prices_us-east-1_karpenter.csv",
}

# pricing.yml instance keys that are not a GPU; every other key names the GPU and its count.
GCP_NON_GPU_KEYS = {"cost", "cpu", "ram", "local-ssd", "type"}
GCP_GPU_KEYS = {
    "a100": "A100-40GB",
    "a100-80gb": "A100-80GB",
    "h100-80gb": "H100-SXM",
    "h100-80gb-mega": "H100-SXM",
    "l4": "L4",
    "rtx6000": "RTX-PRO-6000",
}
# AWS family (the part before the first dot) -> the GPU it carries: the CUR mapping's own family table
# (which the inventory's rows, from the public sources, check) and the families it does not name.
AWS_FAMILY_MODEL = {
    **GPU_FAMILIES,
    "g4ad": "Radeon-Pro-V520",
    "g5g": "T4",
    "g6f": "L4",
    "gr6f": "L4",
    "g7": "RTX-PRO-4500",
    "g7e": "RTX-PRO-6000",
    "p6-b200": "B200",
    "p6-b300": "B300",
}
AWS_CHIP_FAMILIES = {
    "inf1": "Inferentia",
    "inf2": "Inferentia2",
    "trn1": "Trainium",
    "trn1n": "Trainium",
    "trn2": "Trainium2",
}
# GCP machine series (the name without its size) -> the GPU it carries.
GCP_SERIES_MODEL = {
    "a2-highgpu": "A100-40GB",
    "a2-megagpu": "A100-40GB",
    "a2-ultragpu": "A100-80GB",
    "a3-highgpu": "H100-SXM",
    "a3-megagpu": "H100-SXM",
    "a3-edgegpu": "H100-SXM",
    "a3-ultragpu": "H200",
    "a4-highgpu": "B200",
    "a4x-highgpu": "GB200",
    "a4x-maxgpu": "GB300",
    "g2-standard": "L4",
    "g4-standard": "RTX-PRO-6000",
}
# Karpenter-priced GPU/accelerator families: g*, gr*, p*, inf*, trn* (dl1 Gaudi, f1/f2 FPGA and vt1
# media accelerators are out of scope: no GPU, Trainium or Inferentia).
ACCELERATED_FAMILY = re.compile(r"^(?:g\d|gr\d|p\d|inf\d|trn\d)")
OUT_OF_SCOPE_FAMILIES = ("dl1", "f1", "f2", "vt1")
# Listed as missing in GPU_INSTANCE_TYPES_SOURCES.md: no public source we could read gives their facts.
MISSING_AWS = {"g2.8xlarge"}


@pytest.fixture(scope="module")
def inventory() -> dict[tuple[str, str], dict]:
    # this file's rows (AWS and Google Cloud); Azure's are tests/test_azure_inventory.py's
    return {(r["provider"], r["instance_type"]): r for r in reference.load_gpu_instance_types(CSV_PATH).to_pylist()}


def _available(path: Path) -> Path:
    if not path.exists():
        pytest.skip(f"shared public data not found at {path} (CI clones the repository alone)")
    return path


def _copy(files: dict[str, Path], where: str) -> Path:
    """The copy of a public file the test reads (``where`` "shared": skipped where it is absent)."""
    return _available(files[where]) if where == "shared" else files[where]


def _csv_rows(files: dict[str, Path], where: str, delimiter: str = ",") -> list[dict[str, str]]:
    with _copy(files, where).open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle, delimiter=delimiter))


def _family(instance_type: str) -> str:
    return instance_type.split(".")[0]


def test_csv_parses_with_the_schema() -> None:
    table = reference.load_gpu_instance_types()
    assert table.schema == reference_schema.GPU_INSTANCE_REFERENCE
    paths = reference.inventory_paths()  # every provider's file: this one, Azure's
    assert CSV_PATH in paths and len(paths) >= 2
    for path in paths:
        header = path.read_text(encoding="utf-8").splitlines()[0]
        assert header.split(",") == reference_schema.GPU_INSTANCE_REFERENCE.names
    assert table.num_rows == sum(len(p.read_text(encoding="utf-8").splitlines()) - 1 for p in paths)


def test_provider_and_instance_type_are_unique() -> None:
    with CSV_PATH.open(newline="", encoding="utf-8") as handle:
        keys = [(r["provider"], r["instance_type"]) for r in csv.DictReader(handle)]
    assert len(keys) == len(set(keys))


def test_gpu_models_are_canonical_rows_of_gpu_specs(inventory: dict) -> None:
    specs = {r["gpu_model"]: r for r in load_gpu_specs().to_pylist()}
    for key, row in inventory.items():
        if row["accelerator"] == "gpu":
            assert row["gpu_model"] in CANONICAL_GPU_MODELS, key
            assert row["gpu_model"] in specs, key
            # the per-GPU memory a cloud exposes never exceeds the datasheet's (usable is a few GB less)
            assert row["gpu_memory_gib"] <= specs[row["gpu_model"]]["memory_gib"] * 1.0001, key


def test_every_source_is_https_and_described(inventory: dict) -> None:
    described = SOURCES_MD.read_text(encoding="utf-8")
    for url in {row["source_url"] for row in inventory.values()}:
        assert url.startswith("https://"), url
        assert url in described, url


@pytest.mark.parametrize("where", sorted(AWS_FIXTURE_DIRS))
def test_aws_describe_instance_types_gpu_info(inventory: dict, where: str) -> None:
    folder = AWS_FIXTURE_DIRS[where]
    if where == "shared":
        _available(folder)
    described: list[dict] = []
    for path in sorted(folder.glob("*/*.json")):
        document = json.loads(path.read_text(encoding="utf-8"))
        items = document if isinstance(document, list) else document.get("InstanceTypes", [])
        described += [item for item in items if "InstanceType" in item and "VCpuInfo" in item]
    gpu_types = [item for item in described if item.get("GpuInfo")]
    assert {"g2.2xlarge", "p3.16xlarge", "g3.16xlarge"} <= {item["InstanceType"] for item in gpu_types}
    for item in described:
        row = inventory.get(("aws", item["InstanceType"]))
        if not item.get("GpuInfo"):
            assert row is None, item["InstanceType"]  # t3.micro: no GPU, not in the inventory
            continue
        assert row is not None, item["InstanceType"]
        (gpu,) = item["GpuInfo"]["Gpus"]
        memory_mib = gpu["MemoryInfo"]["SizeInMiB"]
        assert row["gpu_count"] == gpu["Count"], item["InstanceType"]
        assert row["gpu_memory_gib"] == pytest.approx(memory_mib / 1024), item["InstanceType"]
        assert row["gpu_model"] == normalize_gpu_model(gpu["Name"], memory_mib=memory_mib), item["InstanceType"]
        assert row["vcpus"] == item["VCpuInfo"]["DefaultVCpus"], item["InstanceType"]
        assert row["memory_gib"] == pytest.approx(item["MemoryInfo"]["SizeInMiB"] / 1024), item["InstanceType"]


@functools.cache
def _gcp_gpu_machines(path: Path) -> dict[str, dict]:
    """GPU machine types of a pricing.yml (the full file is 139k lines: parsed once, with libyaml if present)."""
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    instances = yaml.load(path.read_text(encoding="utf-8"), Loader=loader)["compute"]["instance"]
    return {name: attrs for name, attrs in instances.items() if set(attrs) - GCP_NON_GPU_KEYS}


@pytest.mark.parametrize("where", sorted(GCP_MACHINE_FILES))
def test_gcp_machine_types_match_pricing_yml(inventory: dict, where: str) -> None:
    machines = _gcp_gpu_machines(_copy(GCP_MACHINE_FILES, where))
    assert {"a2-megagpu-16g", "a3-megagpu-8g", "g2-standard-96", "g4-standard-6"} <= set(machines)
    for name, attrs in machines.items():
        (gpu_key,) = set(attrs) - GCP_NON_GPU_KEYS
        assert gpu_key in GCP_GPU_KEYS, f"pricing.yml names a GPU the test does not map: {gpu_key}"
        row = inventory.get(("gcp", name))
        assert row is not None, f"{name} is in pricing.yml but not in the inventory"
        assert row["gpu_model"] == GCP_GPU_KEYS[gpu_key], name
        assert row["gpu_count"] * row["gpu_fraction"] == pytest.approx(attrs[gpu_key]), name
        assert row["vcpus"] == attrs["cpu"], name
        assert row["memory_gib"] == pytest.approx(attrs["ram"]), name


def test_gcp_subset_is_a_mechanical_extraction_of_pricing_yml() -> None:
    full = _gcp_gpu_machines(_available(GCP_MACHINE_FILES["shared"]))
    subset = _gcp_gpu_machines(GCP_MACHINE_FILES["tests-data"])
    assert subset == {name: {k: v for k, v in attrs.items() if k != "cost"} for name, attrs in full.items()}


@pytest.mark.parametrize("where", sorted(GCP_ACCELERATOR_FILES))
def test_n1_rows_cover_every_attachable_gpu(inventory: dict, where: str) -> None:
    names = {row["NAME"] for row in _csv_rows(GCP_ACCELERATOR_FILES, where, delimiter=";")}
    # N1 takes the nvidia-tesla-* GPUs; the -vws variants are the same GPU with a workstation licence.
    attachable = {n for n in names if n.startswith("nvidia-tesla-") and not n.endswith("-vws")} - {"nvidia-tesla-a100"}
    n1 = {key[1]: row for key, row in inventory.items() if key[1].startswith(reference.N1_PREFIX)}
    row_types = {name[len(reference.N1_PREFIX) :].rsplit("x", 1)[0] for name in n1}
    assert row_types == attachable
    for name, row in n1.items():
        accelerator, count = name[len(reference.N1_PREFIX) :].rsplit("x", 1)
        assert row["gpu_count"] == int(count), name
        assert row["gpu_model"] == normalize_gpu_model(accelerator), name
        assert row["vcpus"] is None and row["memory_gib"] is None, name


@pytest.mark.parametrize("where", sorted(KARPENTER_PRICE_LISTS))
def test_every_karpenter_priced_accelerated_type_is_present(inventory: dict, where: str) -> None:
    types = {row["instance_type"] for row in _csv_rows(KARPENTER_PRICE_LISTS, where)}
    accelerated = {t for t in types if ACCELERATED_FAMILY.match(t)}
    assert len(accelerated) == 92
    absent = {t for t in accelerated if ("aws", t) not in inventory}
    assert absent == MISSING_AWS
    out_of_scope = {t for t in types if _family(t) in OUT_OF_SCOPE_FAMILIES}
    assert out_of_scope and not {t for t in out_of_scope if ("aws", t) in inventory}


def test_missing_and_out_of_scope_types_are_listed_in_the_sources() -> None:
    described = SOURCES_MD.read_text(encoding="utf-8")
    for name in sorted(MISSING_AWS) + list(OUT_OF_SCOPE_FAMILIES):
        assert f"`{name}" in described, name


def test_family_agrees_with_the_gpu_model(inventory: dict) -> None:
    for (provider, instance_type), row in inventory.items():
        if provider == "aws":
            family = _family(instance_type)
            if family in AWS_CHIP_FAMILIES:
                assert row["accelerator_model"] == AWS_CHIP_FAMILIES[family], instance_type
                assert row["accelerator"] == ("trainium" if family.startswith("trn") else "inferentia")
                continue
            assert row["gpu_model"] == AWS_FAMILY_MODEL[family], instance_type  # for the CUR mapping's too
        elif not instance_type.startswith(reference.N1_PREFIX):
            series = instance_type.rsplit("-", 1)[0].removesuffix("-8g").removesuffix("-4g")
            assert row["gpu_model"] == GCP_SERIES_MODEL[series], instance_type


def test_gcp_a_series_gpu_count_is_the_name_suffix(inventory: dict) -> None:
    for (provider, name), row in inventory.items():
        match = re.match(r"^a\d\w*-\w+-(\d+)g(?:-|$)", name)
        if provider == "gcp" and match:
            assert row["gpu_count"] == int(match.group(1)), name


def test_fractional_gpus_are_never_a_whole_gpu(inventory: dict) -> None:
    whole = {
        "L4": inventory[("aws", "g6.xlarge")]["gpu_memory_gib"],
        "RTX-PRO-6000": inventory[("gcp", "g4-standard-48")]["gpu_memory_gib"],
    }
    fractional = {
        key: row for key, row in inventory.items() if row["gpu_fraction"] is not None and row["gpu_fraction"] < 1
    }
    assert {key[1] for key in fractional} == {
        "g6f.large",
        "g6f.xlarge",
        "g6f.2xlarge",
        "g6f.4xlarge",
        "gr6f.4xlarge",
        "g4-standard-6",
        "g4-standard-12",
        "g4-standard-24",
    }
    for key, row in fractional.items():
        assert row["gpu_count"] == 1 and row["gpu_fraction"] in (0.125, 0.25, 0.5), key
        assert row["gpu_memory_gib"] == pytest.approx(whole[row["gpu_model"]] * row["gpu_fraction"], rel=1e-3), key


def test_trainium_and_inferentia_are_not_gpus(inventory: dict) -> None:
    chips = {key: row for key, row in inventory.items() if row["accelerator"] != "gpu"}
    assert {_family(key[1]) for key in chips} == set(AWS_CHIP_FAMILIES)
    for key, row in chips.items():
        assert row["gpu_count"] == 0 and row["gpu_model"] is None and row["accelerator_count"] >= 1, key
    assert inventory[("aws", "trn2.48xlarge")]["accelerator_memory_gib"] == 96


def _write_variant(tmp_path: Path, replace: tuple[str, str] | None = None, append: str | None = None) -> Path:
    text = CSV_PATH.read_text(encoding="utf-8")
    if replace is not None:
        assert replace[0] in text
        text = text.replace(replace[0], replace[1], 1)
    if append is not None:
        text += append + "\n"
    path = tmp_path / "gpu_instance_types.csv"
    path.write_text(text, encoding="utf-8")
    return path


K14 = "https://github.com/aws/karpenter-provider-aws/blob/c88abbbad455186e69e30296c595e474123e9bc1"
BAD_ROWS = {
    "duplicate": (
        None,
        "aws,p5.48xlarge,gpu,H100-SXM,8,1,80,,,,192,2048,https://x.example/a",
        r"row \d+ \(aws p5\.48xlarge\), column instance_type: .*duplicate",
    ),
    "unknown model": (
        None,
        "aws,zz.large,gpu,H100 80GB,1,1,80,,,,8,32,https://x.example/a",
        r"column gpu_model: value 'H100 80GB' is not a canonical",
    ),
    "fraction on two GPUs": (
        None,
        "aws,zz.large,gpu,L4,2,0.5,12,,,,8,32,https://x.example/a",
        r"column gpu_count: value 2 is not 1 on a fractional",
    ),
    "trainium counted as GPUs": (
        None,
        "aws,zz.large,trainium,,16,,,Trainium,16,32,8,32,https://x.example/a",
        r"column gpu_count: value 16 is not 0",
    ),
    "n1 with vcpus": (
        None,
        "gcp,n1+nvidia-tesla-t4x8,gpu,T4,8,1,16,,,,8,,https://x.example/a",
        r"column vcpus: value 8 is set on an n1\+GPU row",
    ),
    "not a number": (None, "aws,zz.large,gpu,L4,two,1,22,,,,8,32,https://x.example/a", r"int32|two"),
    "http source": (
        None,
        "aws,zz.large,gpu,L4,1,1,22,,,,8,32,http://x.example/a",
        r"column source_url: .*not an https URL",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_ROWS))
def test_bad_rows_name_file_row_column_and_value(tmp_path: Path, case: str) -> None:
    _, row, message = BAD_ROWS[case]
    path = _write_variant(tmp_path, append=row)
    with pytest.raises(ValueError, match=message) as raised:
        reference.load_gpu_instance_types(path)
    assert str(path) in str(raised.value)


def test_wrong_header_is_refused(tmp_path: Path) -> None:
    path = _write_variant(tmp_path, replace=("gpu_fraction", "gpu_share"))
    with pytest.raises(ValueError, match="expected columns"):
        reference.load_gpu_instance_types(path)


def _reference_rows(con) -> list[tuple]:
    return con.execute("SELECT * FROM gpu_instance_reference ORDER BY provider, instance_type").fetchall()


def test_refresh_replaces_rows_when_the_digest_changes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    csv_copy = tmp_path / "inventory.csv"
    shutil.copyfile(CSV_PATH, csv_copy)
    monkeypatch.setattr(reference, "GPU_INSTANCE_TYPES_PATH", csv_copy)
    with db.writer(tmp_path / "wh.duckdb") as con:
        # every writer connection loads it (migration 6 made the table): the first open did
        assert reference.refresh_gpu_instance_types(con) is False
        loaded = _reference_rows(con)
        inventories = reference.inventory_paths()  # every registered provider's file, this copy among them
        assert csv_copy in inventories
        assert len(loaded) == sum(len(p.read_text(encoding="utf-8").splitlines()) - 1 for p in inventories)
        g6f = con.execute(
            "SELECT gpu_count, gpu_fraction FROM gpu_instance_reference WHERE instance_type = 'g6f.large'"
        ).fetchone()
        assert g6f == (1, 0.125)
        assert reference.refresh_gpu_instance_types(con) is False  # same digest: nothing rewritten

        csv_copy.write_text(csv_copy.read_text().replace(",g6f.large,gpu,L4,1,0.125,", ",g6f.large,gpu,L4,3,0.125,"))
        with pytest.raises(ValueError, match=r"g6f\.large\), column gpu_count"):
            reference.refresh_gpu_instance_types(con)
        assert _reference_rows(con) == loaded  # a bad file changes nothing; the next run retries

        csv_copy.write_text(
            CSV_PATH.read_text().replace(
                "aws,p5.4xlarge,gpu,H100-SXM,1,1,80,,,,16,256,", "aws,p5.4xlarge,gpu,H100-SXM,1,1,80,,,,16,255,"
            )
        )
        assert reference.refresh_gpu_instance_types(con) is True
        assert con.execute(
            "SELECT memory_gib FROM gpu_instance_reference WHERE instance_type = 'p5.4xlarge'"
        ).fetchone() == (255.0,)
        assert con.execute("SELECT count(*) FROM gpu_instance_reference").fetchone() == (len(loaded),)


def test_gcp_export_machine_shapes_agree_with_the_inventory(inventory: dict) -> None:
    """ingest/gcp/gcp_machines.py prices a2/a3/g2 shapes from the same facts: the two must not drift apart."""
    from gpufinops.ingest.gcp.gcp_machines import GPU_MACHINE_TYPES, SHAPES

    for name, shape in SHAPES.items():
        row = inventory[("gcp", name)]
        assert (row["gpu_model"], row["gpu_count"], row["vcpus"], row["memory_gib"], row["gpu_memory_gib"]) == (
            shape.gpu_model,
            shape.gpu_count,
            shape.vcpus,
            shape.memory_gib,
            shape.gpu_memory_gib,
        ), name
    for name, (model, count) in GPU_MACHINE_TYPES.items():
        assert (inventory[("gcp", name)]["gpu_model"], inventory[("gcp", name)]["gpu_count"]) == (model, count), name
