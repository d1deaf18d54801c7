"""What one recommendation kind is: its spec, ``ModelSpec``, holding every fact the product knows of it.

A kind's spec module (``models/kinds/<kind>.py``, docs/architecture.md, *Add a model kind*) declares
``MODEL_KINDS = (ModelSpec(...),)`` at its top level and ``models.registry`` finds it there. The spec
classes live here, apart from the registry, so that a spec module imports nothing that imports it back.
No fact has a default: a spec missing one does not construct.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields
from importlib import import_module
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from gpufinops.warehouse.inputs import INPUTS

if TYPE_CHECKING:
    import duckdb

    from gpufinops.models.features import ModelSettings
    from gpufinops.models.recommendation import Findings

S = TypeVar("S")  # the settings class
In = TypeVar("In")  # what the load step hands the recommend step

FAMILIES = ("usage", "rightsize", "purchase", "storage")  # models.plans applies them in this order
# What GPU-hours a kind's change frees, so models.carbon_evidence knows which measured energy it removes:
# the resource's idle hours (it releases the resource or schedules its GPUs off when idle), the GPUs it gives
# up or swaps (a count, a type; or a pod's own share on a shared node), or none (it changes a price or storage).
CARBON = ("idle_hours", "gpu_hours", "pricing_only")
IDLE_HOURS, GPU_HOURS, PRICING_ONLY = CARBON
SELECTED = "selected"  # a `predictor`: the kind picks its throughput predictor per fleet itself


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
    order: int  # its place in the run order and in the lists of kinds people read (--kind); unique
    settings: type[S] | Ref | None  # the model's `[models]` keys (a frozen dataclass) or None
    load: Callable[[duckdb.DuckDBPyConnection, S], In]  # reads the warehouse
    recommend: Callable[[In, S], Findings]  # pure: no connection
    summary: str
    label: str  # its human name on every surface (models.registry hands it to kernel.labels)
    family: str  # one of FAMILIES: its place in a resource's plan (models.plans)
    ends_plan: tuple[str, ...]  # evidence patterns whose action releases the resource: nothing follows it
    # Providers on which its resource is shared by teams (an on-prem node group): each team's (workload's)
    # finding on it is a plan of its own. Empty: a resource's findings make one plan.
    plan_per_team_on: tuple[str, ...]
    export: str  # a key of jobs.export.placement.ACTIONS
    truth: Scored | NotScored
    predictor: str | None  # SELECTED, a `[models]` key choosing its throughput predictor, or None: it uses none
    carbon: str  # one of CARBON
    # The inputs its findings need (keys of warehouse.inputs.INPUTS): where one is missing, every surface says
    # the kind's findings are unknown for the scope it could not see (warehouse/coverage.py), never "none".
    needs: tuple[str, ...]

    def __post_init__(self) -> None:
        if self.family not in FAMILIES:
            raise ValueError(f"{self.kind}: family {self.family!r} is none of {', '.join(FAMILIES)}")
        if self.carbon not in CARBON:
            raise ValueError(f"{self.kind}: carbon {self.carbon!r} is none of {', '.join(CARBON)}")
        if not isinstance(self.truth, Scored | NotScored):
            raise ValueError(f"{self.kind}: truth must be Scored(...) or NotScored(reason)")
        if not isinstance(self.order, int) or isinstance(self.order, bool) or self.order < 1:
            raise ValueError(f"{self.kind}: order {self.order!r} is not a whole number of at least 1")
        unknown_needs = [n for n in self.needs if n not in INPUTS] if isinstance(self.needs, tuple) else [self.needs]
        if not self.needs or unknown_needs:
            raise ValueError(f"{self.kind}: needs {self.needs!r} is not a tuple of inputs ({', '.join(INPUTS)})")
        for fact in ("ends_plan", "plan_per_team_on"):
            value = getattr(self, fact)
            if not isinstance(value, tuple) or not all(isinstance(v, str) and v for v in value):
                raise ValueError(f"{self.kind}: {fact} {value!r} is not a tuple of codes")
        if self.predictor is not None and not (isinstance(self.predictor, str) and self.predictor):
            raise ValueError(f"{self.kind}: predictor {self.predictor!r} is neither None nor a name")
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

    def shipped_predictor(self) -> str | None:
        """The throughput predictor it ships with: SELECTED, its `predictor` setting's default, or None."""
        if self.predictor in (None, SELECTED):
            return self.predictor
        value: str = getattr(self.settings_class(), self.predictor)
        return value

    def run(self, con: duckdb.DuckDBPyConnection, section: ModelSettings | dict[str, Any] | None) -> Findings:
        settings = self.configure(section)
        return self.recommend(self.load(con, settings), settings)
