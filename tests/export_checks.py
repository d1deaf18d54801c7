"""Semantic checks of `gpufinops export kueue|karpenter|skypilot`: what the receiving system needs beyond
its CRD schema. Reusable on any warehouse::

    from tests.export_checks import check_warehouse
    problems = check_warehouse(Path("demo/data/gpufinops.duckdb"))   # {format: [problem, ...]}
    assert problems == {"kueue": [], "karpenter": [], "skypilot": []}

Each ``check_*`` function returns a list of problems (one sentence each; empty: the export passes). The
facts they check against are read here, independently of the export code: GPU counts per instance type
and SkyPilot shapes straight from the shipped CSV (with SkyPilot's own naming, restated below), on-prem
capacity and GPUs per node straight from the on-prem cost lines, a cloud cluster's capacity as the sum
of its resources' GPUs once the plan's objects are applied, namespaces from ``attribution_rules`` and
the config.

* names: unique per cluster, kind and namespace (SkyPilot: per file);
* Karpenter: NodePools only in AWS clusters; every instance type exists with GPUs of the NodePool's
  model; the ``nvidia.com/gpu`` limit is at least the smallest type's GPUs and a sum of the types' GPU
  counts (Karpenter only launches a node that fits in what is left of the limit);
* Kueue: every object belongs to one cluster; a ClusterQueue's flavors are that cluster's
  ResourceFlavors, labelled for that cluster's provider only, in a cohort of that cluster only; the
  quotas of all of a cluster's queues together never exceed its capacity (on-prem: node groups; AWS:
  the NodePools' limits when given; any cloud: the GPUs the plan leaves there); LocalQueues only in
  namespaces the data or the config names;
* SkyPilot: ``infra`` is ``aws/<region>``, ``gcp/<region>`` or ``k8s``; never ``cloud: kubernetes``;
  every ``accelerators`` shape exists in the cloud's catalogue (on Kubernetes: fits one node of a node
  group of that GPU); an ``instance_type`` carries exactly that shape.
"""

from __future__ import annotations

import csv
import json
import re
import tomllib
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

INVENTORY_CSV = Path(__file__).parent.parent / "warehouse" / "data" / "gpu_instance_types.csv"
CLUSTER = "gpufinops.io/cluster"
CLUSTER_NAME = "gpufinops.io/cluster-name"
PROVIDER = "gpufinops.io/provider"
GPU_MODEL = "gpufinops.io/gpu-model"
GPU = "nvidia.com/gpu"
# SkyPilot's accelerator names (its catalogue fetchers: AWS GpuInfo.Name, GCP accelerator types)
SKY_NAMES = {"V100-16GB": "V100", "A100-40GB": "A100", "H100-SXM": "H100", "H100-PCIe": "H100"}
SKY_FAMILIES = {"g5g": "T4g", "a3-megagpu": "H100-MEGA", "g4-standard": "RTXPRO6000"}
PROVIDER_LABEL_PREFIXES = {
    "aws": ("karpenter.sh/", "karpenter.k8s.aws/"),
    "gcp": ("cloud.google.com/",),
    "azure": ("kubernetes.azure.com/",),
}
# GPU Feature Discovery's labels (nvidia.com/gpu.product): what selects the GPU where the platform labels none
GFD_PREFIX, GFD_PROVIDERS = "nvidia.com/gpu.", {"azure", "onprem"}
BILL_PROVIDERS = {"AWS": "aws", "Google Cloud": "gcp", "Microsoft": "azure"}  # the bills' ProviderName


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:63].strip("-")


def documents(text: str) -> list[dict]:
    return [d for d in yaml.safe_load_all(text) if d is not None]


# --- facts, read independently of the export code ---------------------------------------------


def every_inventory() -> dict[tuple[str, str], tuple[str, int, str]]:
    """``inventory`` of every registered provider's GPU inventory file (its spec's ``inventory``)."""
    from gpufinops.kernel import providers

    files = {spec.inventory for spec in providers.registered() if spec.inventory is not None}
    return {key: fact for path in sorted(files) for key, fact in inventory(path).items()}


def inventory(path: Path = INVENTORY_CSV) -> dict[tuple[str, str], tuple[str, int, str]]:
    """(provider, instance type) -> (GPU model, GPUs, SkyPilot accelerator name): whole NVIDIA GPUs only."""
    out = {}
    with path.open(newline="") as f:
        for row in csv.DictReader(f):
            if row["accelerator"] != "gpu" or not row["gpu_count"] or int(row["gpu_count"]) < 1:
                continue
            if float(row["gpu_fraction"] or 1) < 1 or row["gpu_model"].startswith("Radeon"):
                continue
            family = (
                row["instance_type"].split(".")[0]
                if row["provider"] == "aws"
                else row["instance_type"].rsplit("-", 1)[0]
            )
            name = SKY_FAMILIES.get(family, SKY_NAMES.get(row["gpu_model"], row["gpu_model"]))
            out[(row["provider"], row["instance_type"])] = (row["gpu_model"], int(row["gpu_count"]), name)
    return out


def skypilot_shapes(types: dict[tuple[str, str], tuple[str, int, str]]) -> dict[str, set[tuple[str, int]]]:
    shapes: dict[str, set[tuple[str, int]]] = defaultdict(set)
    for (provider, _), (_model, gpus, name) in types.items():
        shapes[provider].add((name, gpus))
    return dict(shapes)


def onprem_facts(con) -> tuple[dict[tuple[str, str], int], dict[str, int]]:
    """({(cluster, GPU model slug): GPUs}, {SkyPilot name: most GPUs on one node}) from the on-prem lines."""
    rows = con.execute("""
        SELECT "SubAccountId", "x_GpuModel", "ResourceId", count(DISTINCT "ResourceName")
        FROM cost_line_items WHERE "ProviderName" = 'onprem' AND "x_GpuCount" > 0 AND "ChargeCategory" = 'Usage'
          AND "ChargePeriodStart" >= (SELECT max("ChargePeriodStart") FROM cost_line_items
                                      WHERE "ProviderName" = 'onprem') - INTERVAL 14 DAY
        GROUP BY ALL""").fetchall()
    capacity: dict[tuple[str, str], int] = defaultdict(int)
    per_node: dict[str, int] = defaultdict(int)
    for cluster, model, _node, gpus in rows:
        capacity[(cluster, slug(model))] += gpus
        name = SKY_NAMES.get(model, model)
        per_node[name] = max(per_node[name], gpus)
    return dict(capacity), dict(per_node)


def cloud_capacity(con, objects: list[dict], tag_keys: list[str]) -> dict[tuple[str, str], int]:
    """{(cluster name, GPU model slug): GPUs} the plan leaves on each cloud cluster: every resource's
    GPUs (its largest billed count in the last 14 days) with the plan's primary and step objects applied."""
    rows = con.execute("""
        SELECT "ResourceId", any_value("ProviderName"), arg_max("RegionId", "ChargePeriodStart"),
               arg_max("SubAccountId", "ChargePeriodStart"), arg_max("x_GpuModel", "ChargePeriodStart"),
               max(ceil("x_GpuCount")), arg_max(CAST("Tags" AS VARCHAR), "ChargePeriodStart")
        FROM cost_line_items WHERE "ProviderName" <> 'onprem' AND "x_GpuCount" > 0 AND "ChargeCategory" = 'Usage'
          AND "ResourceId" IS NOT NULL
          AND "ChargePeriodStart" >= (SELECT max("ChargePeriodStart") FROM cost_line_items) - INTERVAL 14 DAY
        GROUP BY 1""").fetchall()
    state: dict[str, list] = {}
    places: dict[str, set[str]] = defaultdict(set)
    for rid, provider, region, account, model, gpus, tags in rows:
        code = BILL_PROVIDERS.get(provider, provider.lower())
        tag_map = json.loads(tags) if tags else {}
        named = next((tag_map[k] for k in tag_keys if tag_map.get(k)), None)
        where = f"{code}/{region}/{account}"
        places[named or where].add(where)
        state[rid] = [named or where, model, int(gpus), where]
    for entry in state.values():  # a tag's cluster name used in two places is two clusters
        if len(places[entry[0]]) > 1:
            entry[0] = f"{entry[0]} ({entry[3]})"
    for obj in sorted(objects, key=lambda o: o.get("plan") != "primary"):
        if obj.get("plan") not in ("primary", "step") or obj.get("status") not in ("open", "accepted"):
            continue
        if (obj.get("evidence") or {}).get("conditional") or obj.get("resource_id") not in state:
            continue
        _apply(obj, state[obj["resource_id"]])
    out: dict[tuple[str, str], int] = defaultdict(int)
    for name, model, gpus, _where in state.values():
        out[(name, slug(model))] += gpus
    return dict(out)


def _apply(obj: dict, entry: list) -> None:
    """One plan object's change to a resource's [cluster, model, GPUs, place]."""
    new = obj.get("proposed") or {}
    pod_gpus = _pod_whole_gpus(obj)
    if pod_gpus is not None:  # a pod-level plan changes only the pod's GPUs; the node keeps the others
        if new.get("gpu_count") is not None:
            entry[2] = max(0, entry[2] - pod_gpus + int(new["gpu_count"]))
    elif obj["kind"] == "idle_gpu" and new.get("gpu_count") == 0:
        entry[2] = 0
    elif obj["kind"] in ("gpu_count", "gpu_type", "quantization") and new.get("gpu_count") is not None:
        entry[1], entry[2] = new.get("gpu_model") or entry[1], int(new["gpu_count"])
    elif obj["kind"] == "onprem_vs_cloud" and new.get("provider") == "onprem":
        entry[2] = 0


def _pod_whole_gpus(obj: dict) -> int | None:
    """The whole GPUs a pod-level finding names (``evidence.gpu_units``: GPU UUIDs ``GPU-…``; a MIG slice
    ``GPU-…:<slice>`` or a time-sliced share ``…@…`` frees no whole GPU); None for a node-level finding."""
    units = (obj.get("evidence") or {}).get("gpu_units")
    if not isinstance(units, list) or not units:
        return None
    return sum(1 for u in set(map(str, units)) if u.startswith("GPU-") and ":" not in u and "@" not in u)


def allowed_namespaces(con, config_namespaces: dict[str, Any] | None = None) -> dict[str, set[str]]:
    """team -> the namespaces the data (namespace_teams rules) or the config names for it."""
    out: dict[str, set[str]] = defaultdict(set)
    for namespace, team in con.execute(
        "SELECT key, value FROM attribution_rules WHERE kind = 'namespace_teams'"
    ).fetchall():
        out[team].add(namespace)
    for team, names in (config_namespaces or {}).items():
        out[team].update([names] if isinstance(names, str) else names)
    return dict(out)


# --- the checks -----------------------------------------------------------------------------------


def _cluster(doc: dict) -> tuple[str | None, str | None, str | None]:
    meta = doc.get("metadata") or {}
    labels = meta.get("labels") or {}
    return labels.get(CLUSTER), (meta.get("annotations") or {}).get(CLUSTER_NAME), labels.get(PROVIDER)


def check_names(docs: list[dict]) -> list[str]:
    seen: dict[tuple, int] = defaultdict(int)
    problems = []
    for doc in docs:
        cluster, _, _ = _cluster(doc)
        if cluster is None:
            problems.append(f"{doc.get('kind')} {doc.get('metadata', {}).get('name')}: no {CLUSTER} label")
        key = (cluster, doc.get("kind"), doc["metadata"].get("namespace"), doc["metadata"].get("name"))
        seen[key] += 1
    problems += [
        f"{kind} {name!r} appears {n} times in cluster {cluster} (namespace {ns})"
        for (cluster, kind, ns, name), n in seen.items()
        if n > 1
    ]
    return problems


# the label each Karpenter provider's NodePools name instance types by (Karpenter's AWS docs; AKS node
# auto-provisioning's docs: karpenter.azure.com/sku-name)
KARPENTER_TYPE_KEYS = {"aws": "node.kubernetes.io/instance-type", "azure": "karpenter.azure.com/sku-name"}


def _reachable(limit: int, sizes: set[int]) -> bool:
    """Whether ``limit`` GPUs is a sum of whole nodes of the given GPU counts."""
    can = [True] + [False] * limit
    for total in range(1, limit + 1):
        can[total] = any(size <= total and can[total - size] for size in sizes)
    return can[limit]


def check_nodepools(docs: list[dict], types: dict[tuple[str, str], tuple[str, int, str]]) -> list[str]:
    problems = []
    for doc in (d for d in docs if d.get("kind") == "NodePool"):
        name, (_, _, provider) = doc["metadata"]["name"], _cluster(doc)
        if provider not in KARPENTER_TYPE_KEYS:
            problems.append(f"NodePool {name}: in a {provider} cluster (Karpenter provisions AWS and Azure only)")
        spec = doc["spec"]
        reqs = {r["key"]: r for r in spec["template"]["spec"]["requirements"]}
        model = spec["template"]["metadata"]["labels"].get(GPU_MODEL)
        listed = reqs.get(KARPENTER_TYPE_KEYS.get(provider or "", ""), {}).get("values") or []
        if not listed:
            problems.append(f"NodePool {name}: no instance types to check the limit against")
        sizes = set()
        for itype in listed:
            fact = types.get((provider or "", itype))
            if fact is None:
                problems.append(f"NodePool {name}: instance type {itype} has no whole NVIDIA GPU in the inventory")
            elif slug(fact[0]) != model:
                problems.append(f"NodePool {name}: {itype} carries {fact[0]}, the NodePool is for {model}")
            else:
                sizes.add(fact[1])
        limit = (spec.get("limits") or {}).get(GPU)
        if not isinstance(limit, int) or limit <= 0:
            problems.append(f"NodePool {name}: nvidia.com/gpu limit {limit!r} is not a positive number")
        elif sizes and (limit < min(sizes) or not _reachable(limit, sizes)):
            problems.append(
                f"NodePool {name}: limit {limit} GPUs is not a sum of whole nodes of its instance types "
                f"({', '.join(listed)}: {sorted(sizes)} GPUs each)"
            )
    return problems


def _flavor_provider(labels: dict[str, str]) -> set[str]:
    return {p for key in labels for p, prefixes in PROVIDER_LABEL_PREFIXES.items() if key.startswith(prefixes)}


def _kueue_flavors(docs: list[dict], problems: list[str]) -> dict[tuple[str | None, str], dict]:
    """The ResourceFlavors by (cluster label, name); a flavor labelled for another provider is a problem."""
    flavors = {}
    for doc in (d for d in docs if d.get("kind") == "ResourceFlavor"):
        label, name, provider = _cluster(doc)
        flavors[(label, doc["metadata"]["name"])] = doc
        labels = doc["spec"].get("nodeLabels") or {}
        found = _flavor_provider(labels)
        gfd = provider in GFD_PROVIDERS and any(key.startswith(GFD_PREFIX) for key in labels)
        if found - {provider} or not (found or gfd):
            problems.append(
                f"ResourceFlavor {doc['metadata']['name']} on {name}: node labels of {sorted(found)} "
                f"in a {provider} cluster"
            )
    return flavors


@dataclass
class _Quotas:
    """What the ClusterQueues hold: GPU quota by (cluster, model) and by (cluster, model, capacity type,
    provider), the clusters of each cohort, and the queues by (cluster label, name)."""

    by_model: dict[tuple[str, str], int] = field(default_factory=lambda: defaultdict(int))
    by_capacity: dict[tuple[str, str, str, str | None], int] = field(default_factory=lambda: defaultdict(int))
    cohorts: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    queues: dict[tuple[str | None, str], dict] = field(default_factory=dict)  # a LocalQueue's label may be missing


def _kueue_quotas(docs: list[dict], flavors: dict, problems: list[str]) -> _Quotas:
    quotas = _Quotas()
    for doc in (d for d in docs if d.get("kind") == "ClusterQueue"):
        label, name, provider = _cluster(doc)
        if label is None or name is None:
            problems.append(f"ClusterQueue {doc['metadata']['name']}: no {CLUSTER} label or {CLUSTER_NAME} annotation")
            continue
        quotas.queues[(label, doc["metadata"]["name"])] = doc
        quotas.cohorts[doc["spec"].get("cohortName") or ""].add(label)
        for entry in (entry for group in doc["spec"]["resourceGroups"] for entry in group["flavors"]):
            flavor = flavors.get((label, entry["name"]))
            if flavor is None:
                problems.append(
                    f"ClusterQueue {doc['metadata']['name']} on {name}: flavor {entry['name']} is not "
                    "one of that cluster's ResourceFlavors"
                )
                continue
            model = flavor["metadata"]["labels"].get(GPU_MODEL)
            kind = (flavor["spec"].get("nodeLabels") or {}).get("karpenter.sh/capacity-type", "on-demand")
            for resource in (r for r in entry["resources"] if r["name"] == GPU):
                quotas.by_model[(name, model)] += int(resource["nominalQuota"])
                quotas.by_capacity[(name, model, kind, provider)] += int(resource["nominalQuota"])
    return quotas


def _kueue_quota_problems(
    quotas: _Quotas,
    capacity: dict[tuple[str, str], int],
    nodepool_limits: dict[tuple[str | None, str, str], int] | None,
) -> list[str]:
    problems = [
        f"cohort {c!r} spans clusters {sorted(labels)}" for c, labels in quotas.cohorts.items() if len(labels) > 1
    ]
    for (cluster, model), gpus in sorted(quotas.by_model.items()):
        have = capacity.get((cluster, model), 0)
        if gpus > have:
            problems.append(f"{cluster}: {gpus} {model} GPUs of quota, the cluster has {have}")
    for (cluster, model, kind, provider), gpus in sorted(quotas.by_capacity.items()):
        if nodepool_limits is not None and provider == "aws" and gpus > nodepool_limits.get((cluster, model, kind), 0):
            problems.append(
                f"{cluster}: {gpus} {kind} {model} GPUs of quota, its NodePools launch at most "
                f"{nodepool_limits.get((cluster, model, kind), 0)}"
            )
    return problems


def _kueue_local_queue_problems(
    docs: list[dict], queues: dict[tuple[str | None, str], dict], namespaces: dict[str, set[str]] | None
) -> list[str]:
    problems = []
    for doc in (d for d in docs if d.get("kind") == "LocalQueue"):
        label, name, _ = _cluster(doc)
        ns, target = doc["metadata"].get("namespace"), doc["spec"]["clusterQueue"]
        queue = queues.get((label, target))
        if queue is None:
            problems.append(f"LocalQueue {ns}/{doc['metadata']['name']} on {name}: ClusterQueue {target} is not there")
            continue
        team = queue["metadata"]["labels"].get("gpufinops.io/team")
        selected = [
            v
            for e in (queue["spec"].get("namespaceSelector") or {}).get("matchExpressions", [])
            for v in e.get("values", [])
        ]
        if ns not in selected:
            problems.append(f"LocalQueue {ns}/{doc['metadata']['name']}: {target} does not admit namespace {ns}")
        if namespaces is not None and ns not in {
            n for t, names in namespaces.items() if slug(t) == team for n in names
        }:
            problems.append(f"LocalQueue in namespace {ns!r}: no data or config names it for team {team}")
    return problems


def check_kueue(
    docs: list[dict],
    capacity: dict[tuple[str, str], int],
    nodepool_limits: dict[tuple[str | None, str, str], int] | None = None,
    namespaces: dict[str, set[str]] | None = None,
) -> list[str]:
    """``capacity``: {(cluster name, GPU model slug): GPUs}; ``nodepool_limits``: {(cluster name, model slug,
    capacity type): GPUs} of the Karpenter export; ``namespaces``: team -> the namespaces it may use."""
    problems: list[str] = []
    flavors = _kueue_flavors(docs, problems)
    quotas = _kueue_quotas(docs, flavors, problems)
    problems += _kueue_quota_problems(quotas, capacity, nodepool_limits)
    problems += _kueue_local_queue_problems(docs, quotas.queues, namespaces)
    return problems


def check_skypilot(
    docs: list[dict], types: dict[tuple[str, str], tuple[str, int, str]], k8s_per_node: dict[str, int]
) -> list[str]:
    problems = []
    shapes = skypilot_shapes(types)
    names = [d.get("name") for d in docs]
    problems += [
        f"task name {n!r} appears {names.count(n)} times" for n in sorted(set(names), key=str) if names.count(n) > 1
    ]
    for doc in docs:
        res, task = doc.get("resources") or {}, doc.get("name")
        if "cloud" in res or "region" in res:
            problems.append(f"task {task}: cloud/region given instead of infra")
        infra = str(res.get("infra", ""))
        cloud = infra.split("/")[0]
        match = re.fullmatch(r"([A-Za-z0-9-]+):(\d+)", str(res.get("accelerators", "")))
        if match is None:
            problems.append(f"task {task}: accelerators {res.get('accelerators')!r} is not NAME:COUNT")
            continue
        acc, count = match.group(1), int(match.group(2))
        if cloud == "k8s":
            if "instance_type" in res:
                problems.append(f"task {task}: instance_type {res['instance_type']} on Kubernetes")
            if count < 1 or count > k8s_per_node.get(acc, 0):
                problems.append(
                    f"task {task}: {acc}:{count} does not fit on one on-prem node (at most {k8s_per_node.get(acc, 0)})"
                )
        elif cloud in ("aws", "gcp") and len(infra.split("/")) == 2:
            if (acc, count) not in shapes.get(cloud, set()):
                problems.append(f"task {task}: {acc}:{count} is not in {cloud}'s catalogue")
            if "instance_type" in res:
                fact = types.get((cloud, res["instance_type"]))
                if fact is None or (fact[2], fact[1]) != (acc, count):
                    problems.append(f"task {task}: instance_type {res['instance_type']} does not carry {acc}:{count}")
        else:
            problems.append(f"task {task}: infra {infra!r} is not aws/<region>, gcp/<region> or k8s")
    return problems


def nodepool_limits(docs: list[dict]) -> dict[tuple[str | None, str, str], int]:
    out: dict[tuple[str | None, str, str], int] = defaultdict(int)
    for doc in (d for d in docs if d.get("kind") == "NodePool"):
        _, name, _ = _cluster(doc)
        spec = doc["spec"]
        kind = next(
            r["values"][0] for r in spec["template"]["spec"]["requirements"] if r["key"] == "karpenter.sh/capacity-type"
        )
        out[(name, spec["template"]["metadata"]["labels"][GPU_MODEL], kind)] += spec["limits"][GPU]
    return dict(out)


def check_warehouse(db_path: Path, config_path: Path | None = None) -> dict[str, list[str]]:
    """Render the three scheduler exports of a warehouse and run every check on them."""
    import gpufinops.jobs.export as export
    from gpufinops.jobs.export.settings import parse
    from gpufinops.warehouse import db, recommendation_read

    table = tomllib.loads(config_path.read_text()).get("export", {}) if config_path else {}
    settings = parse(table)
    types = every_inventory()
    with db.reader(db_path) as con:
        texts = {fmt: export.render(con, fmt, settings=settings) for fmt in ("kueue", "karpenter", "skypilot")}
        onprem, per_node = onprem_facts(con)
        cloud = cloud_capacity(con, recommendation_read.load(con), list(settings.cluster_tag_keys))
        allowed = allowed_namespaces(con, table.get("namespaces"))
    kueue, karpenter, sky = (documents(texts[f]) for f in ("kueue", "karpenter", "skypilot"))
    return {
        "kueue": check_names(kueue) + check_kueue(kueue, {**cloud, **onprem}, nodepool_limits(karpenter), allowed),
        "karpenter": check_names(karpenter) + check_nodepools(karpenter, types),
        "skypilot": check_skypilot(sky, types, per_node),
    }
