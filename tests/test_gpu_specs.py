"""Tests for the GPU reference table and GPU model-name normalisation."""

from __future__ import annotations

import csv
import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from gpufinops.warehouse.gpu_models import (
    CANONICAL_GPU_MODELS,
    GPU_SPECS_SCHEMA,
    load_gpu_specs,
    normalize_gpu_model,
)

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
NVIDIA_SMI_CSV_DIR = SHARED_DATA / "nvidia-smi-captures" / "query_gpu_csv"
GCP_DIR = SHARED_DATA / "gcp-pricing-cyclenerd"
AWS_FIXTURES_DIR = SHARED_DATA / "aws-ec2-instance-selector-fixtures"

# GPUs that have no tensor cores (the AMD V520 has no NVIDIA-style tensor unit either).
NO_TENSOR_CORES = {"K80", "P100", "P4", "M60", "K520", "Radeon-Pro-V520"}
# Rows whose public sources give only some figures (GPU_SPECS_SOURCES.md): the memory is known, the
# other figures stay empty rather than guessed.
PARTIAL_SPECS = {"K520", "Radeon-Pro-V520", "RTX-PRO-4500"}
# No public list price: cloud-only or not sold as a part; list_price_usd stays empty.
NO_PUBLIC_PRICE = {
    "B200",
    "B300",
    "GB200",
    "GB300",
    "RTX-PRO-6000",
    "RTX-PRO-4500",
    "P4",
    "M60",
    "K520",
    "Radeon-Pro-V520",
    "MI300X",
}
# Blackwell Ultra cut dense INT8 far below its FP16 rate (about 0.2 vs 2.25 POPS).
LOW_INT8 = {"B300", "GB300"}


@pytest.fixture(scope="module")
def specs() -> dict[str, dict[str, Any]]:
    """Rows of the GPU spec table, keyed by gpu_model."""
    table = load_gpu_specs()
    rows = table.to_pylist()
    return {row["gpu_model"]: row for row in rows}


def test_schema_is_explicit() -> None:
    table = load_gpu_specs()
    assert table.schema == GPU_SPECS_SCHEMA
    assert table.schema.field("list_price_usd").type == pa.decimal128(12, 2)
    assert table.schema.field("memory_gib").type == pa.float64()


def test_header_is_exact() -> None:
    path = Path(__file__).resolve().parents[1] / "warehouse" / "data" / "gpu_specs.csv"
    header = path.read_text(encoding="utf-8").splitlines()[0]
    assert header == (
        "gpu_model,memory_gib,memory_bandwidth_gbps,fp32_tflops,fp16_tflops,"
        "bf16_tflops,int8_tops,tdp_w,list_price_usd,source_url"
    )


def test_canonical_models_match_rows_one_to_one() -> None:
    models = load_gpu_specs().column("gpu_model").to_pylist()
    assert len(models) == len(set(models)), "duplicate gpu_model rows"
    assert set(models) == set(CANONICAL_GPU_MODELS)
    assert len(CANONICAL_GPU_MODELS) == len(set(CANONICAL_GPU_MODELS))


@pytest.mark.parametrize(
    "model",
    ["T4", "L4", "A10G", "L40S", "V100-16GB", "V100-32GB", "A100-40GB", "A100-80GB", "H100-SXM", "H100-PCIe", "H200"],
)
def test_required_gpus_present(specs: dict[str, dict[str, Any]], model: str) -> None:
    assert model in specs


@pytest.mark.parametrize(
    ("model", "memory_gib", "tdp_w", "price"),
    [
        ("T4", 16.0, 70.0, Decimal("2500.00")),
        ("A100-40GB", 40.0, 400.0, Decimal("12000.00")),
        ("H100-SXM", 80.0, 700.0, Decimal("32000.00")),
    ],
)
def test_build_guide_figures(
    specs: dict[str, dict[str, Any]], model: str, memory_gib: float, tdp_w: float, price: Decimal
) -> None:
    row = specs[model]
    assert row["memory_gib"] == memory_gib
    assert row["tdp_w"] == tdp_w
    assert row["list_price_usd"] == price


def test_every_row_cites_an_https_source(specs: dict[str, dict[str, Any]]) -> None:
    for model, row in specs.items():
        url = row["source_url"]
        assert isinstance(url, str) and url.startswith("https://"), model
        assert " " not in url, model


def test_core_figures_present_and_positive(specs: dict[str, dict[str, Any]]) -> None:
    for model, row in specs.items():
        assert row["memory_gib"] is not None and row["memory_gib"] > 0, model
        for column in ("memory_bandwidth_gbps", "fp32_tflops", "tdp_w"):
            value = row[column]
            if model in PARTIAL_SPECS and value is None:
                continue
            assert value is not None and value > 0, (model, column)
        price = row["list_price_usd"]
        if model in NO_PUBLIC_PRICE:
            assert price is None, model
        else:
            assert price is not None and price > 0, model


def test_partial_rows_are_the_documented_ones(specs: dict[str, dict[str, Any]]) -> None:
    partial = {m for m, r in specs.items() if None in (r["memory_bandwidth_gbps"], r["fp32_tflops"], r["tdp_w"])}
    assert partial == PARTIAL_SPECS
    sources = (Path(__file__).resolve().parents[1] / "warehouse" / "data" / "GPU_SPECS_SOURCES.md").read_text()
    for model in PARTIAL_SPECS | NO_PUBLIC_PRICE:
        assert f"`{model}`" in sources, model


def test_tensor_core_gpus_beat_fp32(specs: dict[str, dict[str, Any]]) -> None:
    for model, row in specs.items():
        if model in NO_TENSOR_CORES or model in PARTIAL_SPECS:
            continue
        assert row["fp16_tflops"] is not None, model
        assert row["fp16_tflops"] >= row["fp32_tflops"], model
        if row["int8_tops"] is not None and model not in LOW_INT8:
            assert row["int8_tops"] >= row["fp16_tflops"], model


def test_missing_capabilities_are_null_not_invented(specs: dict[str, dict[str, Any]]) -> None:
    for model in ("T4", "V100-16GB", "V100-32GB", "P100", "K80"):
        assert specs[model]["bf16_tflops"] is None, model
    for model in ("P100", "K80"):
        assert specs[model]["int8_tops"] is None, model


def test_dense_throughput_sanity(specs: dict[str, dict[str, Any]]) -> None:
    assert specs["H100-SXM"]["fp16_tflops"] == pytest.approx(989, rel=0.05)
    assert specs["H100-SXM"]["bf16_tflops"] == pytest.approx(989, rel=0.05)
    assert specs["A100-40GB"]["fp16_tflops"] == 312.0
    assert specs["A100-80GB"]["fp16_tflops"] == 312.0
    assert specs["H200"]["memory_bandwidth_gbps"] == 4800.0
    assert specs["H200"]["memory_gib"] == 141.0
    assert specs["A100-80GB"]["memory_gib"] == 80.0


def test_memory_sizes(specs: dict[str, dict[str, Any]]) -> None:
    assert specs["L4"]["memory_gib"] == 24.0
    assert specs["A10G"]["memory_gib"] == 24.0
    assert specs["T4"]["memory_gib"] == 16.0
    assert specs["V100-32GB"]["memory_gib"] == 32.0


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        # nvidia-smi
        ("Tesla T4", "T4"),
        ("NVIDIA L4", "L4"),
        ("NVIDIA A10G", "A10G"),
        ("NVIDIA A10", "A10"),
        ("NVIDIA L40S", "L40S"),
        ("NVIDIA A40", "A40"),
        ("Tesla V100-SXM2-16GB", "V100-16GB"),
        ("Tesla V100-SXM2-32GB", "V100-32GB"),
        ("Tesla V100-PCIE-16GB", "V100-16GB"),
        ("Tesla P100-PCIE-16GB", "P100"),
        ("Tesla K80", "K80"),
        ("NVIDIA A100-SXM4-40GB", "A100-40GB"),
        ("NVIDIA A100-SXM4-80GB", "A100-80GB"),
        ("NVIDIA A100-PCIE-40GB", "A100-40GB"),
        ("NVIDIA A100 80GB PCIe", "A100-80GB"),
        ("NVIDIA H100 80GB HBM3", "H100-SXM"),
        ("NVIDIA H100 PCIe", "H100-PCIe"),
        ("NVIDIA H100 NVL", "H100-PCIe"),
        ("NVIDIA H200", "H200"),
        ("NVIDIA H200 NVL", "H200"),
        # GCP accelerator types
        ("nvidia-tesla-t4", "T4"),
        ("nvidia-tesla-t4-vws", "T4"),
        ("nvidia-l4", "L4"),
        ("nvidia-tesla-v100", "V100-16GB"),
        ("nvidia-tesla-p100", "P100"),
        ("nvidia-tesla-k80", "K80"),
        ("nvidia-tesla-a100", "A100-40GB"),
        ("nvidia-a100-80gb", "A100-80GB"),
        ("nvidia-h100-80gb", "H100-SXM"),
        ("nvidia-h100-mega-80gb", "H100-SXM"),
        ("nvidia-h200-141gb", "H200"),
        # GCP billing SKU descriptions
        ("Nvidia Tesla A100 GPU running in Americas", "A100-40GB"),
        ("Nvidia Tesla T4 GPU attached to Spot Preemptible VMs running in Belgium", "T4"),
        ("Nvidia L4 GPU running in Iowa", "L4"),
        ("Nvidia A100 80GB GPU running in Americas", "A100-80GB"),
        ("Nvidia Tesla A100 80GB GPU running in Netherlands", "A100-80GB"),
        ("Nvidia H100 80GB GPU running in Americas", "H100-SXM"),
        ("Nvidia H100 80GB Mega GPU running in Americas", "H100-SXM"),
        ("Nvidia Tesla V100 GPU running in Americas", "V100-16GB"),
        ("Commitment v1: Nvidia Tesla A100 80GB GPU in Americas for 1 Year", "A100-80GB"),
        # AWS GpuInfo names
        ("T4", "T4"),
        ("A10G", "A10G"),
        ("L4", "L4"),
        ("L40S", "L40S"),
        ("V100", "V100-16GB"),
        ("A100", "A100-40GB"),
        ("H100", "H100-SXM"),
        ("H200", "H200"),
        ("K80", "K80"),
        ("T4g", "T4"),
        ("M60", "M60"),
        ("K520", "K520"),
        ("RTX PRO Server 6000", "RTX-PRO-6000"),
        ("rtx-pro-server-6000", "RTX-PRO-6000"),
        ("rtx-pro-4500", "RTX-PRO-4500"),
        ("B200", "B200"),
        ("B300", "B300"),
        ("radeon-pro-v520", "Radeon-Pro-V520"),
        # Blackwell and the RTX PRO parts, as nvidia-smi, GCP and its billing SKUs name them
        ("NVIDIA B200", "B200"),
        ("nvidia-b200", "B200"),
        ("nvidia-gb200", "GB200"),
        ("NVIDIA GB200", "GB200"),
        ("NVIDIA B300 SXM6 AC", "B300"),
        ("NVIDIA RTX PRO 6000 Blackwell Server Edition", "RTX-PRO-6000"),
        ("nvidia-rtx-pro-6000", "RTX-PRO-6000"),
        ("nvidia-rtx-pro-6000-vws", "RTX-PRO-6000"),
        ("RTX 6000 96GB running in Americas", "RTX-PRO-6000"),
        ("Commitment v1: RTX 6000 96GB in Americas for 1 Year", "RTX-PRO-6000"),
        ("nvidia-tesla-p4", "P4"),
        ("nvidia-tesla-p4-vws", "P4"),
        ("Nvidia Tesla P4 GPU running in Americas", "P4"),
        ("Tesla M60", "M60"),
        ("GRID K520", "K520"),
        ("AMD Radeon Pro V520", "Radeon-Pro-V520"),
        # case and whitespace
        ("  nvidia a10g  ", "A10G"),
        ("TESLA T4", "T4"),
    ],
)
def test_normalize_known_names(name: str, expected: str) -> None:
    assert normalize_gpu_model(name) == expected


@pytest.mark.parametrize(
    ("name", "memory_mib", "expected"),
    [
        ("A100", 81920, "A100-80GB"),
        ("A100", 40960, "A100-40GB"),
        ("nvidia-tesla-a100", 81559, "A100-80GB"),
        ("V100", 32768, "V100-32GB"),
        ("V100", 16384, "V100-16GB"),
        ("Tesla V100-SXM2-16GB", 32768, "V100-16GB"),  # an explicit size in the name wins
        ("NVIDIA A100-SXM4-40GB", 81920, "A100-40GB"),
    ],
)
def test_normalize_uses_memory_for_ambiguous_names(name: str, memory_mib: float, expected: str) -> None:
    assert normalize_gpu_model(name, memory_mib=memory_mib) == expected


@pytest.mark.parametrize("name", [None, "", "   "])
def test_normalize_blank_is_none(name: str | None) -> None:
    assert normalize_gpu_model(name) is None


@pytest.mark.parametrize(
    "name",
    [
        "  P40 ",
        "NVIDIA GH200 480GB",
        "NVIDIA L40",
        # RTX 6000 without "PRO" or 96 GB is the Turing or Ada part, not in the table
        "Quadro RTX 6000",
        "NVIDIA RTX 6000 Ada Generation",
    ],
)
def test_normalize_unknown_returns_stripped_input(name: str) -> None:
    assert normalize_gpu_model(name) == name.strip()


def test_normalized_names_are_canonical_rows(specs: dict[str, dict[str, Any]]) -> None:
    for name in ("Tesla T4", "nvidia-h200-141gb", "A10G", "NVIDIA H100 NVL"):
        assert normalize_gpu_model(name) in specs


def _read_nvidia_smi_csv(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle, skipinitialspace=True))


def _mib(value: str | None) -> float | None:
    if not value:
        return None
    number = value.split()[0]
    try:
        return float(number)
    except ValueError:
        return None


def test_real_nvidia_smi_names_normalize() -> None:
    if not NVIDIA_SMI_CSV_DIR.is_dir():
        pytest.skip(f"shared nvidia-smi captures not found at {NVIDIA_SMI_CSV_DIR}")
    seen: dict[str, str] = {}
    for path in sorted(NVIDIA_SMI_CSV_DIR.glob("*.csv")):
        for row in _read_nvidia_smi_csv(path):
            # query-gpu files have "name"; query-compute-apps files have "gpu_name".
            name = row.get("name") or row.get("gpu_name")
            if not name:
                continue
            model = normalize_gpu_model(name, memory_mib=_mib(row.get("memory.total [MiB]")))
            assert model in CANONICAL_GPU_MODELS, (path.name, name, model)
            seen[name] = model
    if not seen:
        pytest.skip("no GPU names in the nvidia-smi captures")
    # The captures cover H100 SXM (plain and MIG), H200 (plain and MIG) and L40S.
    assert seen.get("NVIDIA H100 80GB HBM3", "H100-SXM") == "H100-SXM"
    assert seen.get("NVIDIA H200", "H200") == "H200"
    assert seen.get("NVIDIA L40S", "L40S") == "L40S"


# GCP names for GPUs that gpu_specs.csv deliberately does not cover (none left: B200, GB200, the
# RTX PRO 6000 and P4 have rows since the instance inventory needed them).
_GCP_NOT_COVERED: tuple[str, ...] = ()


def _gcp_covered(name: str) -> bool:
    words = name.lower().replace("-", " ").split()
    return not any(token in words for token in _GCP_NOT_COVERED)


def test_real_gcp_accelerator_types_normalize() -> None:
    path = GCP_DIR / "acceleratortyperegion.csv"
    if not path.is_file():
        pytest.skip(f"GCP accelerator list not found at {path}")
    with path.open(newline="", encoding="utf-8") as handle:
        names = {row["NAME"] for row in csv.DictReader(handle, delimiter=";")}
    gpu_names = sorted(n for n in names if n.startswith("nvidia-") and _gcp_covered(n))
    assert "nvidia-tesla-t4" in gpu_names
    for name in gpu_names:
        assert normalize_gpu_model(name) in CANONICAL_GPU_MODELS, name


def test_real_gcp_sku_descriptions_normalize() -> None:
    path = GCP_DIR / "sku_mapping.csv"
    if not path.is_file():
        pytest.skip(f"GCP SKU mapping not found at {path}")
    with path.open(newline="", encoding="utf-8") as handle:
        rows = [row for row in csv.DictReader(handle) if row["GROUP"] == "GPU"]
    checked = 0
    for row in rows:
        description = row["SKU_DESCRIPTION"].replace("%", " ").strip()
        if not _gcp_covered(description):
            continue
        model = normalize_gpu_model(description)
        assert model in CANONICAL_GPU_MODELS, (row["MAPPING"], description, model)
        mapping = row["MAPPING"]
        if ".80gb" in mapping and ".a100" in mapping:
            assert model == "A100-80GB", description
        elif ".a100" in mapping:
            assert model == "A100-40GB", description
        elif ".h100" in mapping:
            assert model == "H100-SXM", description
        checked += 1
    assert checked > 0


def test_real_aws_gpu_info_names_normalize() -> None:
    folder = AWS_FIXTURES_DIR / "DescribeInstanceTypes"
    if not folder.is_dir():
        pytest.skip(f"AWS fixtures not found at {folder}")
    gpus: list[dict[str, Any]] = []
    for path in sorted(folder.glob("*.json")):
        document = json.loads(path.read_text(encoding="utf-8"))
        for instance in document.get("InstanceTypes", []):
            gpus.extend((instance.get("GpuInfo") or {}).get("Gpus") or [])
    if not gpus:
        pytest.skip("no GpuInfo in the AWS fixtures")
    for gpu in gpus:
        name = str(gpu["Name"])
        memory = (gpu.get("MemoryInfo") or {}).get("SizeInMiB")
        model = normalize_gpu_model(name, memory_mib=memory)
        if name == "V100":
            assert model == ("V100-32GB" if memory and memory >= 24000 else "V100-16GB")
        else:
            assert model in CANONICAL_GPU_MODELS, name
