"""Validation against the real Kubernetes CRDs (tests/data/k8s-crds, from kubernetes-sigs/kueue and
kubernetes-sigs/karpenter): each manifest's jsonschema against the CRD's served openAPIV3Schema, plus
the CEL rules (which jsonschema does not run) and Kubernetes' name and label-value rules an export could
break."""

from __future__ import annotations

import re
from pathlib import Path

import jsonschema
import yaml

CRDS = Path(__file__).parent / "data" / "k8s-crds"
CRD_FILES = {
    ("kueue.x-k8s.io", "ResourceFlavor"): "kueue.x-k8s.io_resourceflavors.yaml",
    ("kueue.x-k8s.io", "ClusterQueue"): "kueue.x-k8s.io_clusterqueues.yaml",
    ("kueue.x-k8s.io", "LocalQueue"): "kueue.x-k8s.io_localqueues.yaml",
    ("karpenter.sh", "NodePool"): "karpenter.sh_nodepools.yaml",
}
# CRDs a test validates against where the file is here: AKS node auto-provisioning's AKSNodeClass
# (Azure/karpenter-provider-azure @ 352646f, pkg/apis/crds/karpenter.azure.com_aksnodeclasses.yaml, Apache-2.0)
# is not in the project's vendored data yet; AKSNODECLASS_CRD says where it goes
OPTIONAL_CRD_FILES = {("karpenter.azure.com", "AKSNodeClass"): "karpenter.azure.com_aksnodeclasses.yaml"}
AKSNODECLASS_CRD = CRDS / OPTIONAL_CRD_FILES[("karpenter.azure.com", "AKSNodeClass")]
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


def crd_schemas() -> dict[tuple[str, str], dict]:
    """(group/version, kind) → the openAPIV3Schema of every served version of the CRDs."""
    out = {}
    present = {k: n for k, n in OPTIONAL_CRD_FILES.items() if (CRDS / n).is_file()}
    for (group, kind), name in {**CRD_FILES, **present}.items():
        crd = yaml.safe_load((CRDS / name).read_text())
        assert crd["spec"]["names"]["kind"] == kind
        for version in crd["spec"]["versions"]:
            if version["served"]:
                out[(f"{group}/{version['name']}", kind)] = version["schema"]["openAPIV3Schema"]
    return out


def _nodepool_errors(spec: dict) -> list[str]:
    errors = []
    if "replicas" in spec and "weight" in spec:
        errors.append("NodePool: weight with replicas")
    for req in spec["template"]["spec"]["requirements"]:
        if req["operator"] == "In" and not req.get("values"):
            errors.append(f"NodePool requirement {req['key']}: In without values")
        if req["key"] in ("karpenter.sh/nodepool", "kubernetes.io/hostname"):
            errors.append(f"NodePool requirement on restricted key {req['key']}")
        errors += [f"value {v!r}" for v in req.get("values", []) if not LABEL_VALUE.match(v) or len(v) > 63]
    return errors


def _cluster_queue_errors(spec: dict) -> list[str]:
    errors = []
    for group in spec.get("resourceGroups", []):
        for flavor in group["flavors"]:
            if len(flavor["resources"]) != len(group["coveredResources"]):
                errors.append(f"ClusterQueue flavor {flavor['name']}: resources != coveredResources")
            if "cohortName" not in spec and any("borrowingLimit" in r for r in flavor["resources"]):
                errors.append("ClusterQueue: borrowingLimit without a cohort")
    return errors


def cel_rules_we_can_trip(doc: dict) -> list[str]:
    """The CRDs' x-kubernetes-validations (CEL, which jsonschema does not run) that an export could
    break, checked by hand; plus Kubernetes' name and label-value rules the API server enforces."""
    errors = []
    meta = doc.get("metadata", {})
    if not DNS_SUBDOMAIN.match(meta.get("name", "")) or len(meta.get("name", "")) > 253:
        errors.append(f"metadata.name {meta.get('name')!r} is not a DNS subdomain")
    spec = doc.get("spec", {})
    labels = dict(meta.get("labels") or {})
    if doc["kind"] == "ResourceFlavor":
        labels.update(spec.get("nodeLabels") or {})
    if doc["kind"] == "NodePool":
        labels.update(spec["template"].get("metadata", {}).get("labels") or {})
        errors += _nodepool_errors(spec)
    if doc["kind"] == "ClusterQueue":
        errors += _cluster_queue_errors(spec)
    errors += [f"label value {v!r}" for v in labels.values() if not LABEL_VALUE.match(str(v)) or len(str(v)) > 63]
    return errors


def validate(doc: dict, schemas: dict) -> None:
    key = (doc["apiVersion"], doc["kind"])
    assert key in schemas, f"no served CRD version for {key}"
    jsonschema.validate(doc, schemas[key], cls=jsonschema.Draft7Validator)
    assert cel_rules_we_can_trip(doc) == []
