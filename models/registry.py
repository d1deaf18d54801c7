"""The model registry: one spec per model, the only list of recommendation kinds.

A :class:`ModelSpec` says everything the rest of the product needs to know about a model: its kind
(what its recommendations are called), the version stored beside each of its findings, its typed
``[models]`` settings class (or None: it reads no key), a **load** step that reads the warehouse
(``load(con, settings) -> inputs``) and a pure **recommend** step (``recommend(inputs, settings) ->
Findings``: recommendations, withheld and, for onprem_vs_cloud, the comparison) that gets no
connection. ``models.run.analyse`` runs them in this order; ``validate_settings``, the stored model
versions, the CLI's ``--kind``, the API's ``kind`` filter and the evaluation derive from ``MODELS``.

To add a model: write its module (settings dataclass with ``from_config(section)``, ``load``,
the recommend step), add one ``ModelSpec`` below, and document its kind in models/README.md.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any, Generic, TypeVar

import duckdb

from gpufinops.models import (
    checkpoint_lifecycle,
    commitment,
    gpu_count,
    gpu_type,
    idle,
    onprem_vs_cloud,
    quantization,
    spot_mix,
    storage_orphan,
    storage_tier,
)
from gpufinops.models.features import ModelSettings, RightsizingSettings
from gpufinops.models.onprem_cost import OnpremSettings
from gpufinops.models.recommendation import Findings

S = TypeVar("S")  # the settings class
In = TypeVar("In")  # what the load step hands the recommend step


@dataclass(frozen=True)
class ModelSpec(Generic[S, In]):
    kind: str
    version: str  # stored with each finding; bump when the rules change meaning
    settings: type[S] | None  # the model's `[models]` keys (a frozen dataclass) or None
    load: Callable[[duckdb.DuckDBPyConnection, S], In]  # reads the warehouse
    recommend: Callable[[In, S], Findings]  # pure: no connection
    summary: str = ""

    def configure(self, section: ModelSettings | dict[str, Any] | None) -> S:
        """The model's settings from the `[models]` section (ValueError naming a bad key's value)."""
        if self.settings is None:
            return None  # type: ignore[return-value]  # S is None for a model without settings
        if isinstance(section, ModelSettings):  # parsed once at config load
            return section.of(self.settings)
        settings: S = self.settings.from_config(section)  # type: ignore[attr-defined]  # every settings class has it
        return settings

    def keys(self) -> set[str]:
        """The `[models]` keys this model reads."""
        return set() if self.settings is None else {f.name for f in fields(self.settings)}  # type: ignore[arg-type]

    def run(self, con: duckdb.DuckDBPyConnection, section: ModelSettings | dict[str, Any] | None) -> Findings:
        settings = self.configure(section)
        return self.recommend(self.load(con, settings), settings)


MODELS: tuple[ModelSpec[Any, Any], ...] = (
    ModelSpec(
        "idle_gpu",
        "idle_gpu/2",
        None,
        idle.load,
        idle.findings,
        "GPU-hours billed while every GPU idles; pods holding idle GPUs (allocated_idle)",
    ),
    ModelSpec(
        "gpu_count",
        "gpu_count/2",
        RightsizingSettings,
        gpu_count.load,
        gpu_count.findings,
        "resources holding more GPUs than they keep busy",
    ),
    ModelSpec(
        "gpu_type",
        "gpu_type/2",
        RightsizingSettings,
        gpu_type.load,
        gpu_type.findings,
        "a cheaper GPU of the same count that carries the work",
    ),
    ModelSpec(
        "quantization",
        "quantization/2",
        RightsizingSettings,
        gpu_type.load,
        quantization.findings,
        "FP32 inference that fits fewer or cheaper GPUs at a lower precision",
    ),
    ModelSpec(
        "onprem_vs_cloud",
        "onprem_vs_cloud/2",
        OnpremSettings,
        onprem_vs_cloud.load,
        onprem_vs_cloud.findings,
        "on-prem node groups against the cloud; steady cloud load to repatriate",
    ),
    ModelSpec(
        "spot_mix",
        "spot_mix/1",
        spot_mix.SpotMixSettings,
        spot_mix.load,
        spot_mix.findings,
        "the share of an on-demand workload to run on spot",
    ),
    ModelSpec(
        "commitment",
        "commitment/1",
        commitment.CommitmentSettings,
        commitment.load,
        commitment.findings,
        "Savings Plans / CUD coverage of the steady baseline",
    ),
    ModelSpec(
        "storage_tier",
        "storage_tier/1",
        storage_tier.StorageSettings,
        storage_tier.load,
        storage_tier.findings,
        "provisioned-IOPS volumes of GPU work whose measured IOPS fit gp3 (PD-SSD: pd-balanced)",
    ),
    ModelSpec(
        "storage_orphan",
        "storage_orphan/1",
        storage_tier.StorageSettings,
        storage_orphan.load,
        storage_orphan.findings,
        "volumes GPU work left unattached; snapshots past retention whose volume is gone",
    ),
    ModelSpec(
        "checkpoint_lifecycle",
        "checkpoint_lifecycle/1",
        storage_tier.StorageSettings,
        checkpoint_lifecycle.load,
        checkpoint_lifecycle.findings,
        "checkpoint prefixes whose old objects are not read: a lifecycle rule",
    ),
)

KINDS: tuple[str, ...] = tuple(spec.kind for spec in MODELS)
VERSIONS: dict[str, str] = {spec.kind: spec.version for spec in MODELS}


def spec(kind: str) -> ModelSpec[Any, Any]:
    """The spec of one kind; ValueError naming the kinds there are."""
    for candidate in MODELS:
        if candidate.kind == kind:
            return candidate
    raise ValueError(f"unknown recommendation kind {kind!r} (available: {', '.join(KINDS)})")


def setting_keys() -> set[str]:
    """Every `[models]` key some model reads."""
    return set().union(*(spec.keys() for spec in MODELS))
