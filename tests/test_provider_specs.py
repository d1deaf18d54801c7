"""The provider spec (kernel/providers.py): every built-in provider declares every fact, a dummy provider
declared in one module reaches every reader, and the architecture page's recipe names the files it touches."""

from __future__ import annotations

import re
from dataclasses import fields, replace
from pathlib import Path

import duckdb
import pytest

from gpufinops.derived import carbon_data
from gpufinops.jobs.export import clusters, inventory, karpenter, labels, settings, skypilot
from gpufinops.jobs.export.placement import Placement
from gpufinops.kernel import labels as warehouse_labels
from gpufinops.kernel import providers
from gpufinops.kernel.provider_spec import ProviderSpec
from gpufinops.models.recommendation import Withheld
from gpufinops.warehouse import db, reference
from tests.dummy_provider import ZETA

ROOT = Path(__file__).resolve().parents[1]


def test_the_four_providers_declare_every_fact():
    codes = [spec.code for spec in providers.registered()]
    assert {"aws", "gcp", "azure", "onprem"} <= set(codes)
    assert set(providers.PROVIDERS) == set(codes)
    for spec in providers.registered():
        assert spec.label and spec.needles and spec.cluster_kind, spec.code
        if spec.inventory is not None:
            assert spec.inventory.is_file(), spec.code
        if spec.cloud and spec.code != "oci":  # no source prices OCI yet
            assert spec.pue is not None and spec.skypilot is not None, spec.code
    with pytest.raises(TypeError):  # no fact has a default
        ProviderSpec(**{"code": "x"})


def test_a_spec_that_breaks_a_rule_is_refused():
    with pytest.raises(ValueError, match="'aws': already registered"):
        providers.register(replace(ZETA, code="aws"))
    with pytest.raises(ValueError, match="PUE 0.5 is not in"):
        providers.register(replace(ZETA, pue=(0.5, "x")))
    with pytest.raises(ValueError, match="is not a file"):
        providers.register(replace(ZETA, inventory=Path("/nonexistent.csv")))
    assert providers.spec("zeta") is None


def _placement(provider: str, gpus: int, instance_type: str, spot: float = 0.0) -> Placement:
    cluster = clusters.Cluster(provider=provider, name="z-east", region="zeta-east-1", label="z-east")
    return Placement("r1", "vision", cluster, "H100-SXM", gpus, spot_share=spot, instance_type=instance_type)


def test_a_dummy_provider_reaches_every_reader_from_its_spec_alone(tmp_path: Path):
    assert providers.provider_code("Zeta Cloud Inc.") == "zeta cloud inc."  # unknown before it registers
    with providers.registered_for_test(ZETA):
        # the ProviderName mapping, in Python and in SQL
        assert providers.provider_code("Zeta Cloud Inc.") == "zeta"
        sql = providers.provider_sql("lower(name)")
        assert duckdb.connect().execute(f"SELECT {sql} FROM (SELECT 'Zeta Cloud Inc.' AS name)").fetchone() == ("zeta",)
        assert "zeta" in providers.cloud_codes()
        # prices: a finding withheld for a price or a GPU count names its sources and its inventory
        unpriced = Withheld.of("idle_gpu", {"provider": "Zeta Cloud"}, "unpriced", "no price")
        assert unpriced.provider == "zeta" and unpriced.source_hint == ZETA.price_sources
        uncounted = Withheld.of("idle_gpu", {"provider": "Zeta Cloud"}, "unknown_gpu_count", "no count")
        assert uncounted.source_hint.endswith("its GPU inventory (inventory.csv)")
        # inventory: its file is read and loaded into the warehouse beside the built-in ones
        rows = [r for r in reference.load_gpu_instance_types().to_pylist() if r["provider"] == "zeta"]
        assert {(r["instance_type"], r["gpu_count"]) for r in rows} == {("z1.h100x8", 8), ("z1.h100x2", 2)}
        with db.writer(tmp_path / "wh.duckdb") as con:
            stored = con.execute(
                "SELECT instance_type, gpu_count FROM gpu_instance_reference WHERE provider = 'zeta' ORDER BY 1"
            ).fetchall()
            assert stored == [("z1.h100x2", 2), ("z1.h100x8", 8)]
            fleet = inventory.load(con)
        # exports: SkyPilot's cloud and shapes, the Kueue flavor's node labels, the cluster's kind and tags
        assert fleet.skypilot_shapes("zeta") == {"H100": {8}, "H100-Z": {2}}
        shape, itype, notes = skypilot.accelerators(_placement("zeta", 6, "z1.h100x8"), fleet)
        assert (shape, itype) == ("H100:8", "z1.h100x8") and "smallest that holds it" in notes[0]
        assert skypilot.accelerators(_placement("zeta", 2, "z1.h100x2"), fleet)[:2] == ("H100-Z:2", "z1.h100x2")
        assert labels.flavor_labels("zeta", "H100-SXM", spot=True) == {
            "zeta.example/capacity": "spot",
            "zeta.example/gpu": "h100-sxm",
        }
        assert labels.flavor_labels("zeta", "H100-SXM", spot=False)["zeta.example/capacity"] == "standard"
        assert _placement("zeta", 8, "z1.h100x8").cluster.kind == "ZKS"
        # Karpenter: its NodePools' instance-type requirement and the NodeClass written beside them
        zks = _placement("zeta", 8, "z1.h100x8").cluster
        assert karpenter.provisioner("zeta") == ZETA.karpenter
        node_class = karpenter.node_class_document(zks, ZETA.karpenter, "gpu")
        assert node_class is not None and (node_class["apiVersion"], node_class["kind"]) == (
            "zeta.example/v1",
            "ZetaNodeClass",
        )
        assert "zeta:cluster" in settings.default_cluster_tag_keys()
        # carbon: its published PUE
        assert carbon_data.pue("zeta", {}) == ZETA.pue
        assert carbon_data.pue("zeta", {"zeta": 1.4}) == (1.4, "config [carbon.pue] zeta")
        # labels: its display label on every surface
        assert warehouse_labels.label("zeta", "provider") == "Zeta"
        assert warehouse_labels.words("zeta_gpu_hours") == "Zeta GPU hours"
    # gone after the block: nothing leaks into the next test
    assert providers.spec("zeta") is None and "zeta" not in providers.PROVIDERS
    assert all(r["provider"] != "zeta" for r in reference.load_gpu_instance_types().to_pylist())
    assert carbon_data.pue("zeta", {}) == carbon_data.DEFAULT_PUE
    assert skypilot.accelerators(_placement("zeta", 8, "z1.h100x8"), inventory.Inventory())[0] is None
    assert karpenter.provisioner("zeta") is None


def _recipe() -> str:
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    return text.split("## Add a provider", 1)[1].split("\n## ", 1)[0]


def test_the_recipe_lists_every_fact_and_at_most_four_files_beside_the_ingest_folder():
    recipe = _recipe()
    named = set(re.findall(r"^\| `(\w+)` \|", recipe, re.M))
    assert named == {f.name for f in fields(ProviderSpec)}  # the table is the spec's facts, no more, no fewer
    files = re.findall(r"^\d+\. \*\*[^*]+\*\* \(`([^`]+)`", recipe, re.M)
    assert 1 <= len(files) <= 4, files
    for path in files:  # each step's file exists for the built-in providers (a glob: one of them)
        assert list(ROOT.glob(path.replace("<provider>", "*"))), path
    # the recipe names the readers the dummy test above drives
    for module in (
        "warehouse/reference.py",
        "jobs/export/labels.py",
        "jobs/export/skypilot.py",
        "derived/carbon_data.py",
    ):
        assert f"`{module}`" in recipe, module
