"""The model registry: every recommendation kind's spec, found where it is declared.

A kind's spec (:class:`ModelSpec`, ``models/kind_spec.py``) holds every fact the product knows of it. The
registry finds every module under ``models/`` that declares ``MODEL_KINDS`` at its top level
(``kernel.declared``, the discovery the ingest registry uses for ``INGESTORS``; the built-in kinds'
spec modules are ``models/kinds/<kind>.py``), imports it and orders the specs by their ``order`` fact:
``MODELS`` is that tuple, idle_gpu, gpu_count, gpu_type, quantization, onprem_vs_cloud, spot_mix,
commitment, storage_tier, storage_orphan and checkpoint_lifecycle today. There is no list to add a kind to.

* ``kind`` and ``version`` (stored beside each finding), ``order`` (the run order, and the order of the
  lists of kinds people read: the CLI's ``--kind``, the API's and MCP's ``kind`` errors);
* how it runs: its typed ``[models]`` ``settings`` class (or None), a ``load`` step that reads the
  warehouse and a pure ``recommend`` step; the built-in ones are :class:`Ref` (imported on first use, so
  reading a kind's facts costs no model library: a spec module imports none at its top);
* ``label``: its human name on every surface: the registry hands the labels to ``kernel.labels``,
  which sits below the models and holds none of its own;
* ``family`` and ``ends_plan``: its place in a resource's plan (``models.plans``);
* ``export``: what the scheduler exports do with it (``jobs.export.placement.ACTIONS``; the storage export
  writes the storage actions, ``jobs.export.storage.WRITERS``);
* ``truth``: how ``gpufinops evaluate`` scores it (:class:`Scored`) or :class:`NotScored` with the reason;
  ``predictor``: the throughput predictor the evaluation chooses for it (``jobs.eval_choice``), or None;
* ``carbon``: whether its change removes GPU-hours (``models.carbon_evidence``).

No fact has a default, and a reader asking for a kind the registry does not hold gets a ValueError
naming the kinds there are. ``models.run.analyse`` runs the specs in order; ``validate_settings``, the
stored model versions, the CLI's ``--kind``, the API's ``kind`` filter and the evaluation derive from
``MODELS``.
"""

from __future__ import annotations

from importlib import import_module
from pathlib import Path
from typing import Any

from gpufinops.kernel import labels
from gpufinops.kernel.declared import modules_declaring
from gpufinops.models.kind_spec import (
    CARBON,
    FAMILIES,
    GPU_HOURS,
    IDLE_HOURS,
    PRICING_ONLY,
    SELECTED,
    ModelSpec,
    NotScored,
    Ref,
    Scored,
)

__all__ = [
    "CARBON",
    "FAMILIES",
    "GPU_HOURS",
    "IDLE_HOURS",
    "PRICING_ONLY",
    "SELECTED",
    "ModelSpec",
    "NotScored",
    "Ref",
    "Scored",
]

MODELS_ROOT = Path(__file__).resolve().parent  # the models package's folder


def spec_modules(root: Path = MODELS_ROOT, package: str = "gpufinops.models") -> tuple[str, ...]:
    """The modules under ``root`` that declare ``MODEL_KINDS`` (read as text: ``kernel.declared``)."""
    return modules_declaring("MODEL_KINDS", root, package)


def in_order(specs: tuple[ModelSpec[Any, Any], ...] | list[ModelSpec[Any, Any]]) -> tuple[ModelSpec[Any, Any], ...]:
    """``specs`` by their ``order``; ValueError for a kind declared twice or two kinds of one order."""
    kinds: dict[str, ModelSpec[Any, Any]] = {}
    orders: dict[int, str] = {}
    for s in specs:
        if s.kind in kinds:
            raise ValueError(f"recommendation kind {s.kind!r} registered twice")
        if s.order in orders:
            raise ValueError(f"{s.kind}: order {s.order} is {orders[s.order]}'s already")
        kinds[s.kind], orders[s.order] = s, s.kind
    return tuple(sorted(kinds.values(), key=lambda s: s.order))


def discover(root: Path = MODELS_ROOT, package: str = "gpufinops.models") -> tuple[ModelSpec[Any, Any], ...]:
    """Every spec the modules under ``root`` declare, in order (each spec module imported)."""
    return in_order([s for name in spec_modules(root, package) for s in import_module(name).MODEL_KINDS])


BUILTIN: tuple[ModelSpec[Any, Any], ...] = discover()  # the kinds shipped with the product

MODELS: tuple[ModelSpec[Any, Any], ...] = ()
KINDS: tuple[str, ...] = ()
VERSIONS: dict[str, str] = {}


def _publish(models: tuple[ModelSpec[Any, Any], ...]) -> None:
    """Make ``models`` the registered kinds, and their labels the label table's kinds."""
    global MODELS, KINDS
    MODELS, KINDS = models, tuple(s.kind for s in models)
    VERSIONS.clear()
    VERSIONS.update({s.kind: s.version for s in models})
    labels.name_kinds({s.kind: s.label for s in models})


_publish(BUILTIN)


def register(*new: ModelSpec[Any, Any]) -> tuple[ModelSpec[Any, Any], ...]:
    """Add kinds declared outside ``models/`` (a plug-in's loader, a test's fixture: what
    :func:`discover` found under its folder), each in its ``order``. ValueError for a kind registered
    twice or an order taken."""
    _publish(in_order([*MODELS, *new]))
    return new


def unregister(kind: str) -> None:
    """Take a kind :func:`register` added out again (its label with it); a built-in kind stays."""
    if any(s.kind == kind for s in BUILTIN):
        raise ValueError(f"{kind!r} is a built-in kind")
    spec(kind)  # ValueError for a kind that is not registered
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


def predictor_kinds() -> tuple[str, ...]:
    """The kinds whose throughput predictor ``gpufinops evaluate`` chooses (a ``predictor`` fact), in order."""
    return tuple(s.kind for s in MODELS if s.predictor is not None)
