"""The model registry: one spec per recommendation kind, holding every fact the product knows of it.

``MODELS`` is the only list of recommendation kinds: idle_gpu, gpu_count, gpu_type, quantization,
onprem_vs_cloud, spot_mix, commitment, storage_tier, storage_orphan and checkpoint_lifecycle, in run
order. A :class:`ModelSpec` says everything the rest of the product needs to know about one kind:

* ``kind`` (what its recommendations are called) and ``version`` (stored beside each finding);
* how it runs: its typed ``[models]`` ``settings`` class (or None: it reads no key), a ``load`` step
  that reads the warehouse (``load(con, settings) -> inputs``) and a pure ``recommend`` step
  (``recommend(inputs, settings) -> Findings``) that gets no connection; the built-in ones are named
  by :class:`Ref` and imported on first use, so reading a kind's facts costs no model library;
* ``label``: its human name on every surface (the lower layer's copy, ``warehouse.labels.KINDS``, is
  proven equal by tests/test_model_kinds.py; :func:`register` passes a new kind's label down);
* ``family``: its place in a resource's plan (``models.plans``: one of :data:`FAMILIES`);
* ``export``: what the scheduler exports do with it (``jobs.export.placement.ACTIONS`` names each action);
* ``truth``: how ``gpufinops evaluate`` scores it (:class:`Scored`, naming how a planted finding's true
  saving is priced, ``jobs.eval_score.TRUTHS``) or :class:`NotScored` with the reason;
* ``carbon``: whether its change removes GPU-hours (``"gpu_hours"``: ``models.carbon_evidence``
  measures the emissions saved) or only what they cost (``"pricing_only"``).

No fact has a default: a spec missing one does not construct, and a reader asking for a kind the
registry does not hold gets a ValueError naming the kinds there are. ``models.run.analyse`` runs the
specs in this order; ``validate_settings``, the stored model versions, the CLI's ``--kind``, the API's
``kind`` filter and the evaluation derive from ``MODELS``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields
from importlib import import_module
from typing import TYPE_CHECKING, Any, Generic, TypeVar

if TYPE_CHECKING:
    import duckdb

    from gpufinops.models.features import ModelSettings
    from gpufinops.models.recommendation import Findings

S = TypeVar("S")  # the settings class
In = TypeVar("In")  # what the load step hands the recommend step

FAMILIES = ("usage", "rightsize", "purchase", "storage")  # models.plans applies them in this order
CARBON = ("gpu_hours", "pricing_only")


@dataclass(frozen=True)
class Ref:
    """A function or class named ``module:attribute``, imported when first used (a kind's facts are read by
    commands that run no model, and the models' libraries take seconds to import)."""

    path: str

    def resolve(self) -> Any:
        module, _, name = self.path.partition(":")
        return getattr(import_module(module), name)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.resolve()(*args, **kwargs)


@dataclass(frozen=True)
class Scored:
    """Scored by ``gpufinops evaluate`` against the generators' planted findings; ``truth`` names how a
    planted finding's true monthly saving is priced (a key of ``jobs.eval_score.TRUTHS``)."""

    truth: str


@dataclass(frozen=True)
class NotScored:
    """Not scored by ``gpufinops evaluate``: no generator plants its truth; ``reason`` says what checks it."""

    reason: str


@dataclass(frozen=True, kw_only=True)
class ModelSpec(Generic[S, In]):
    kind: str
    version: str  # stored with each finding; bump when the rules change meaning
    settings: type[S] | Ref | None  # the model's `[models]` keys (a frozen dataclass) or None
    load: Callable[[duckdb.DuckDBPyConnection, S], In]  # reads the warehouse
    recommend: Callable[[In, S], Findings]  # pure: no connection
    summary: str
    label: str
    family: str
    export: str
    truth: Scored | NotScored
    carbon: str

    def __post_init__(self) -> None:
        if self.family not in FAMILIES:
            raise ValueError(f"{self.kind}: family {self.family!r} is none of {', '.join(FAMILIES)}")
        if self.carbon not in CARBON:
            raise ValueError(f"{self.kind}: carbon {self.carbon!r} is none of {', '.join(CARBON)}")
        if not isinstance(self.truth, Scored | NotScored):
            raise ValueError(f"{self.kind}: truth must be Scored(...) or NotScored(reason)")
        empty = [f.name for f in fields(self) if isinstance(getattr(self, f.name), str) and not getattr(self, f.name)]
        if empty:
            raise ValueError(f"{self.kind or '?'}: empty {', '.join(empty)}")

    def settings_class(self) -> type[S] | None:
        return self.settings.resolve() if isinstance(self.settings, Ref) else self.settings

    def configure(self, section: ModelSettings | dict[str, Any] | None) -> S:
        """The model's settings from the `[models]` section (ValueError naming a bad key's value)."""
        cls = self.settings_class()
        if cls is None:
            return None  # type: ignore[return-value]  # S is None for a model without settings
        if isinstance(section, dict | None):
            settings: S = cls.from_config(section)  # type: ignore[attr-defined]  # every settings class has it
            return settings
        return section.of(cls)  # a ModelSettings, parsed once at config load

    def keys(self) -> set[str]:
        """The `[models]` keys this model reads."""
        cls = self.settings_class()
        return set() if cls is None else {f.name for f in fields(cls)}  # type: ignore[arg-type]

    def run(self, con: duckdb.DuckDBPyConnection, section: ModelSettings | dict[str, Any] | None) -> Findings:
        settings = self.configure(section)
        return self.recommend(self.load(con, settings), settings)


_M = "gpufinops.models."
RIGHTSIZING = Ref(_M + "features:RightsizingSettings")
STORAGE = Ref(_M + "storage_tier:StorageSettings")
GPU_HOURS, PRICING_ONLY = CARBON
STORAGE_UNSCORED = NotScored(
    "the generators plant GPU waste only; the demo's storage plants (simulator/demo_storage.py) are "
    "checked by tests/test_storage_models.py"
)

BUILTIN: tuple[ModelSpec[Any, Any], ...] = (
    ModelSpec(
        kind="idle_gpu",
        version="idle_gpu/2",
        settings=None,
        load=Ref(_M + "idle:load"),
        recommend=Ref(_M + "idle:findings"),
        summary="GPU-hours billed while every GPU idles; pods holding idle GPUs (allocated_idle)",
        label="Idle GPU",
        family="usage",
        export="release_or_schedule",
        truth=Scored("idle_cost"),
        carbon=GPU_HOURS,
    ),
    ModelSpec(
        kind="gpu_count",
        version="gpu_count/2",
        settings=RIGHTSIZING,
        load=Ref(_M + "gpu_count:load"),
        recommend=Ref(_M + "gpu_count:findings"),
        summary="resources holding more GPUs than they keep busy",
        label="Fewer GPUs",
        family="rightsize",
        export="resize",
        truth=Scored("smaller_type"),
        carbon=GPU_HOURS,
    ),
    ModelSpec(
        kind="gpu_type",
        version="gpu_type/2",
        settings=RIGHTSIZING,
        load=Ref(_M + "gpu_type:load"),
        recommend=Ref(_M + "gpu_type:findings"),
        summary="a cheaper GPU of the same count that carries the work",
        label="Cheaper GPU type",
        family="rightsize",
        export="resize",
        truth=Scored("cheaper_gpu"),
        carbon=GPU_HOURS,
    ),
    ModelSpec(
        kind="quantization",
        version="quantization/2",
        settings=RIGHTSIZING,
        load=Ref(_M + "gpu_type:load"),
        recommend=Ref(_M + "quantization:findings"),
        summary="FP32 inference that fits fewer or cheaper GPUs at a lower precision",
        label="Quantization",
        family="rightsize",
        export="resize",
        truth=Scored("lower_precision"),
        carbon=GPU_HOURS,
    ),
    ModelSpec(
        kind="onprem_vs_cloud",
        version="onprem_vs_cloud/2",
        settings=Ref(_M + "onprem_cost:OnpremSettings"),
        load=Ref(_M + "onprem_vs_cloud:load"),
        recommend=Ref(_M + "onprem_vs_cloud:findings"),
        summary="on-prem node groups against the cloud; steady cloud load to repatriate",
        label="On-prem vs cloud",
        family="purchase",
        export="move_onprem",
        truth=NotScored(
            "no generator plants an on-prem verdict; the comparison is checked against hand-computed "
            "figures by tests/test_onprem_vs_cloud.py"
        ),
        carbon=PRICING_ONLY,
    ),
    ModelSpec(
        kind="spot_mix",
        version="spot_mix/1",
        settings=Ref(_M + "spot_mix:SpotMixSettings"),
        load=Ref(_M + "spot_mix:load"),
        recommend=Ref(_M + "spot_mix:findings"),
        summary="the share of an on-demand workload to run on spot",
        label="Spot mix",
        family="purchase",
        export="spot_share",
        truth=Scored("generator_priced"),
        carbon=PRICING_ONLY,
    ),
    ModelSpec(
        kind="commitment",
        version="commitment/1",
        settings=Ref(_M + "commitment:CommitmentSettings"),
        load=Ref(_M + "commitment:load"),
        recommend=Ref(_M + "commitment:findings"),
        summary="Savings Plans / CUD coverage of the steady baseline",
        label="Commitment",
        family="purchase",
        export="commit",
        truth=Scored("generator_priced"),
        carbon=PRICING_ONLY,
    ),
    ModelSpec(
        kind="storage_tier",
        version="storage_tier/1",
        settings=STORAGE,
        load=Ref(_M + "storage_tier:load"),
        recommend=Ref(_M + "storage_tier:findings"),
        summary="provisioned-IOPS volumes of GPU work whose measured IOPS fit gp3 (PD-SSD: pd-balanced)",
        label="Storage tier",
        family="storage",
        export="storage",
        truth=STORAGE_UNSCORED,
        carbon=PRICING_ONLY,
    ),
    ModelSpec(
        kind="storage_orphan",
        version="storage_orphan/1",
        settings=STORAGE,
        load=Ref(_M + "storage_orphan:load"),
        recommend=Ref(_M + "storage_orphan:findings"),
        summary="volumes GPU work left unattached; snapshots past retention whose volume is gone",
        label="Orphaned storage",
        family="storage",
        export="storage",
        truth=STORAGE_UNSCORED,
        carbon=PRICING_ONLY,
    ),
    ModelSpec(
        kind="checkpoint_lifecycle",
        version="checkpoint_lifecycle/1",
        settings=STORAGE,
        load=Ref(_M + "checkpoint_lifecycle:load"),
        recommend=Ref(_M + "checkpoint_lifecycle:findings"),
        summary="checkpoint prefixes whose old objects are not read: a lifecycle rule",
        label="Checkpoint lifecycle",
        family="storage",
        export="storage",
        truth=STORAGE_UNSCORED,
        carbon=PRICING_ONLY,
    ),
)

MODELS: tuple[ModelSpec[Any, Any], ...] = BUILTIN
KINDS: tuple[str, ...] = tuple(spec.kind for spec in MODELS)
VERSIONS: dict[str, str] = {spec.kind: spec.version for spec in MODELS}


def _publish(models: tuple[ModelSpec[Any, Any], ...]) -> None:
    global MODELS, KINDS
    MODELS, KINDS = models, tuple(s.kind for s in models)
    VERSIONS.clear()
    VERSIONS.update({s.kind: s.version for s in models})


def register(new: ModelSpec[Any, Any]) -> ModelSpec[Any, Any]:
    """Add a kind (run after the others) and pass its label down to ``warehouse.labels`` (which sits below
    the models and cannot read this registry). ValueError for a kind registered twice."""
    from gpufinops.warehouse import labels

    if new.kind in KINDS:
        raise ValueError(f"recommendation kind {new.kind!r} registered twice")
    labels.name_kind(new.kind, new.label)
    _publish((*MODELS, new))
    return new


def unregister(kind: str) -> None:
    """Take a kind :func:`register` added out again (its label with it); a built-in kind stays."""
    from gpufinops.warehouse import labels

    if any(s.kind == kind for s in BUILTIN):
        raise ValueError(f"{kind!r} is a built-in kind")
    spec(kind)  # ValueError for a kind that is not registered
    labels.unname_kind(kind)
    _publish(tuple(s for s in MODELS if s.kind != kind))


def spec(kind: str) -> ModelSpec[Any, Any]:
    """The spec of one kind; ValueError naming the kinds there are."""
    for candidate in MODELS:
        if candidate.kind == kind:
            return candidate
    raise ValueError(f"unknown recommendation kind {kind!r} (available: {', '.join(KINDS)})")


def scored_kinds() -> tuple[str, ...]:
    """The kinds ``gpufinops evaluate`` scores (a :class:`Scored` truth), in run order."""
    return tuple(s.kind for s in MODELS if isinstance(s.truth, Scored))


def setting_keys() -> set[str]:
    """Every `[models]` key some model reads."""
    return set().union(*(spec.keys() for spec in MODELS))
