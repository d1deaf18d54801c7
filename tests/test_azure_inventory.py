"""Azure's GPU inventory (warehouse/data/azure_gpu_sizes.csv) checked against Microsoft's size pages.

``tests/data/azure/compute-docs-gpu-sizes/azure_gpu_vm_sizes.csv`` is the pages' tables, extracted with no value
changed (CC BY 4.0, its SOURCE.txt). Every fact of the inventory must agree with them: the GPU count as listed
(whole, or a fraction such as NVadsA10 v5's "1/6"), the GPU memory (the page lists the VM's total on most pages,
per GPU on others), the GPU model from the spec's text, the vCPUs and memory, the page and commit cited.
"""

from __future__ import annotations

import csv
import re
from fractions import Fraction
from pathlib import Path

import pytest

from gpufinops.kernel import providers
from gpufinops.warehouse import reference

PAGES = Path(__file__).parent / "data" / "azure" / "compute-docs-gpu-sizes" / "azure_gpu_vm_sizes.csv"
INVENTORY = Path(reference.__file__).parent / "data" / "azure_gpu_sizes.csv"
# the spec's GPU text -> (canonical model, per-GPU GB the text names); read from the page, never from vCPUs
SPEC_TEXT = re.compile(r"\((\d+) ?GB|\((\d+) GiB")


@pytest.fixture(scope="module")
def pages() -> dict[str, dict[str, str]]:
    with PAGES.open(newline="", encoding="utf-8") as handle:
        return {row["arm_sku_name"]: row for row in csv.DictReader(handle)}


@pytest.fixture(scope="module")
def inventory() -> dict[str, dict]:
    return {r["instance_type"]: r for r in reference.load_gpu_instance_types(INVENTORY).to_pylist()}


def test_the_azure_spec_ships_this_inventory():
    spec = providers.spec("azure")
    assert spec is not None and spec.inventory == INVENTORY
    assert INVENTORY in reference.inventory_paths()


def test_every_size_with_a_listed_gpu_model_is_in_the_inventory(pages, inventory):
    listed = {name for name, row in pages.items() if row["gpu_model_as_listed_in_spec"] and row["gpu_count_as_listed"]}
    assert set(inventory) == listed
    # NDv2: the page leaves the count blank and the spec include the model: left out, not guessed
    assert "Standard_ND40rs_v2" in pages and "Standard_ND40rs_v2" not in inventory
    assert len(inventory) == 34
    for series in ("NCasT4_v3", "NC_A100_v4", "NCads_H100_v5", "NDasrA100_v4", "NDm_A100_v4", "ND-H100-v5"):
        assert any(pages[name]["series"] == series for name in inventory), series
    for series in ("ND-H200-v5", "ND-MI300X-v5", "NVadsA10_v5"):
        assert any(pages[name]["series"] == series for name in inventory), series


def test_counts_fractions_and_memory_agree_with_the_pages(pages, inventory):
    for name, row in inventory.items():
        page = pages[name]
        listed = Fraction(page["gpu_count_as_listed"])
        assert row["gpu_count"] * Fraction(row["gpu_fraction"]).limit_denominator(12) == listed, name
        per_gpu = int(next(g for g in SPEC_TEXT.search(page["gpu_model_as_listed_in_spec"]).groups() if g))
        total = Fraction(page["accelerator_memory_gb_as_listed"])
        if listed < 1:  # a slice: the page lists the slice's memory, a fraction of the GPU's
            assert row["gpu_memory_gib"] == total == listed * per_gpu, name
        else:  # the page lists the VM's total (8 x 80 = 640), or per GPU (ND96amsr 80), or 1535 for 8 x 192
            assert row["gpu_memory_gib"] == per_gpu, name
            assert total in (per_gpu, listed * per_gpu) or abs(total - listed * per_gpu) <= 1, name
        assert (row["vcpus"], row["memory_gib"]) == (float(page["vcpus"]), float(page["memory"])), name
        assert row["source_url"].endswith(f"{page['size_page_commit']}/{page['size_page_path']}"), name


def test_models_come_from_the_spec_text_not_the_vcpus(inventory):
    expected = {
        "Standard_NC16as_T4_v3": ("T4", 1),  # 16 vCPUs, one GPU
        "Standard_NC64as_T4_v3": ("T4", 4),
        "Standard_NC24ads_A100_v4": ("A100-80GB", 1),
        "Standard_NC40ads_H100_v5": ("H100-PCIe", 1),  # H100 NVL 94 GB: the PCIe row (gpu_specs.csv folds NVL in)
        "Standard_ND96asr_v4": ("A100-40GB", 8),
        "Standard_ND96amsr_A100_v4": ("A100-80GB", 8),
        "Standard_ND96isr_H100_v5": ("H100-SXM", 8),
        "Standard_ND96isr_H200_v5": ("H200", 8),
        "Standard_ND96isr_MI300X_v5": ("MI300X", 8),
        "Standard_ND128isr_NDR_GB200_v6": ("GB200", 4),
    }
    for name, (model, count) in expected.items():
        assert (inventory[name]["gpu_model"], inventory[name]["gpu_count"]) == (model, count), name


def test_fractional_a10_sizes_are_never_a_whole_gpu(inventory):
    slices = {n: (r["gpu_count"], round(r["gpu_fraction"], 4)) for n, r in inventory.items() if r["gpu_fraction"] < 1}
    assert slices == {
        "Standard_NV6ads_A10_v5": (1, 0.1667),
        "Standard_NV12ads_A10_v5": (1, 0.3333),
        "Standard_NV18ads_A10_v5": (1, 0.5),
    }


def test_an_azure_row_outside_the_registered_providers_is_refused(tmp_path: Path):
    bad = tmp_path / "sizes.csv"
    lines = INVENTORY.read_text(encoding="utf-8").splitlines()
    bad.write_text("\n".join([lines[0], lines[1].replace("azure,", "azrue,", 1)]) + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"row 2 \(azrue Standard_NC4as_T4_v3\), column provider"):
        reference.load_gpu_instance_types(bad)
