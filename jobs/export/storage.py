"""`gpufinops export storage`: the storage plans as what the clouds take, to apply as is.

One JSON document over the plan objects (primary and step, open or accepted) whose kind's spec exports a
storage action (its ``export``, a key of :data:`WRITERS`):

* ``s3_lifecycle``: bucket -> the ``LifecycleConfiguration`` that ``aws s3api
  put-bucket-lifecycle-configuration --bucket B --lifecycle-configuration file://F`` (or boto3's
  ``put_bucket_lifecycle_configuration``) takes: per checkpoint prefix a transition rule to Glacier Instant
  Retrieval and one expiration rule per checkpoint folder a run no longer keeps (a bucket's rules together,
  at most 1,000: S3 replaces a bucket's whole configuration with this one);
* ``gcs_lifecycle``: bucket -> the lifecycle configuration ``gcloud storage buckets update gs://B
  --lifecycle-file=F`` takes (SetStorageClass COLDLINE, Delete by ``matchesPrefix``);
* ``azure_lifecycle``: storage account -> its subscription, resource group and the lifecycle management policy
  ``az storage account management-policy create`` takes (jobs/export/storage_azure.py, Azure's half);
* ``modify_volume``: the EC2 ``ModifyVolume`` requests (``aws ec2 modify-volume --cli-input-json``);
* ``commands``: the deletions (a snapshot first where one is to be kept), Persistent Disk and managed disk moves
  and the Azure policies' commands, as
  shell commands a person runs: deleting is never done by a configuration.
"""

from __future__ import annotations

import hashlib
import json
import shlex
from typing import Any

from gpufinops.jobs.export import plan as plan_mod
from gpufinops.jobs.export import storage_azure
from gpufinops.models import plans, registry

MAX_S3_RULES = 1000
RULE_ID_CHARS = 255  # S3: "The value cannot be longer than 255 characters"; unique within the configuration
MAX_GCS_RULES = 100  # Cloud Storage: lifecycle rules per bucket
DIGEST_CHARS = 16


def _rule_id(text: str) -> str:
    """``text`` as an S3 rule ID: whole when it fits 255 characters, else cut with a digest of the whole
    text, so two long prefixes that share their first 238 characters still get distinct IDs."""
    if len(text) <= RULE_ID_CHARS:
        return text
    return f"{text[: RULE_ID_CHARS - DIGEST_CHARS - 1]}-{_digest(text)}"


def _unique(rules: list[dict[str, Any]], new: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``new`` without rules the bucket's list already holds; a rule whose ID is taken by a different rule
    gets a digest of its content (S3 refuses a configuration with one ID twice)."""
    taken = {r["ID"]: r for r in rules}
    out: list[dict[str, Any]] = []
    for rule in new:
        if taken.get(rule["ID"]) == rule:
            continue
        if rule["ID"] in taken:
            content = json.dumps({k: v for k, v in rule.items() if k != "ID"}, sort_keys=True)
            rule = {**rule, "ID": f"{rule['ID'][: RULE_ID_CHARS - DIGEST_CHARS - 1]}-{_digest(content)}"}
        taken[rule["ID"]] = rule
        out.append(rule)
    return out


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:DIGEST_CHARS]


def _s3_rules(p: dict[str, Any]) -> list[dict[str, Any]]:
    rules = [
        {
            "ID": _rule_id(f"gpufinops-cold-{p['prefix']}"),
            "Filter": {"Prefix": p["prefix"]},
            "Status": "Enabled",
            "Transitions": [
                {"Days": int(p["transition_days"]), "StorageClass": p.get("storage_class") or "GLACIER_IR"}
            ],
        }
    ]
    for path in p.get("expire_prefixes") or ():
        rules.append(
            {
                "ID": _rule_id(f"gpufinops-expire-{path}"),
                "Filter": {"Prefix": path},
                "Status": "Enabled",
                "Expiration": {"Days": int(p["expire_days"])},
            }
        )
    return rules


def _gcs_rules(p: dict[str, Any]) -> list[dict[str, Any]]:
    rules: list[dict[str, Any]] = [
        {
            "action": {"type": "SetStorageClass", "storageClass": p.get("storage_class") or "COLDLINE"},
            "condition": {"age": int(p["transition_days"]), "matchesPrefix": [p["prefix"]]},
        }
    ]
    if p.get("expire_prefixes"):
        rules.append(
            {
                "action": {"type": "Delete"},
                "condition": {"age": int(p["expire_days"]), "matchesPrefix": list(p["expire_prefixes"])},
            }
        )
    return rules


def _tier(o: dict[str, Any], out: dict[str, Any]) -> None:
    p, volume = o["proposed"], o["resource_id"]
    if o.get("provider") == "azure":
        storage_azure.tier(o, out)
        return
    if o.get("provider") == "gcp":
        zone = (o.get("evidence") or {}).get("zone") or "ZONE"
        q, at = shlex.quote, _where(o)
        out["commands"].append(
            f"gcloud compute snapshots create {q(volume + '-move')}{at} --source-disk={q(volume)}"
            f" --source-disk-zone={q(zone)} && gcloud compute disks create {q(volume + '-balanced')}{at}"
            f" --type=pd-balanced --zone={q(zone)} --source-snapshot={q(volume + '-move')}"
        )
        return
    request: dict[str, Any] = {"VolumeId": volume, "VolumeType": p["volume_type"]}
    if p.get("iops"):
        request["Iops"] = int(p["iops"])
    if p.get("throughput_mibps"):
        request["Throughput"] = int(p["throughput_mibps"])
    out["modify_volume"].append(request)


def _where(o: dict[str, Any]) -> str:
    """The flags naming where a command acts: ``--region`` (AWS) or ``--project`` (Google Cloud) from the finding's
    evidence, so a command run from a shell whose default region or project differs acts on the right one."""
    evidence = o.get("evidence") or {}
    if o.get("provider") == "gcp":
        return f" --project={shlex.quote(evidence['project'])}" if evidence.get("project") else ""
    return f" --region {shlex.quote(evidence['region'])}" if evidence.get("region") else ""


def _orphan(o: dict[str, Any], out: dict[str, Any]) -> None:
    if o.get("provider") == "azure":
        storage_azure.orphan(o, out)
        return
    q, resource, p, at = shlex.quote, o["resource_id"], o["proposed"], _where(o)
    gcp = o.get("provider") == "gcp"
    if (o.get("evidence") or {}).get("pattern") == "orphan_snapshot":
        out["commands"].append(
            f"gcloud compute snapshots delete {q(resource)}{at} --quiet"
            if gcp
            else f"aws ec2 delete-snapshot{at} --snapshot-id {q(resource)}"
        )
        return
    keep = p.get("keep_snapshot") or {}
    if gcp:
        zone = q((o.get("evidence") or {}).get("zone") or "ZONE")
        first = f"gcloud compute disks snapshot {q(resource)}{at} --zone={zone} && " if keep.get("new") else ""
        out["commands"].append(f"{first}gcloud compute disks delete {q(resource)}{at} --zone={zone} --quiet")
        return
    first = (
        f'aws ec2 wait snapshot-completed{at} --snapshot-ids "$(aws ec2 create-snapshot{at} --volume-id {q(resource)} '
        f'--query SnapshotId --output text)" && '
        if keep.get("new")
        else ""
    )
    out["commands"].append(f"{first}aws ec2 delete-volume{at} --volume-id {q(resource)}")


def _lifecycle(o: dict[str, Any], out: dict[str, Any]) -> None:
    p = o["proposed"]
    if o.get("provider") == "azure":
        storage_azure.lifecycle(o, out)
        return
    if o.get("provider") == "gcp":
        kept = out["gcs_lifecycle"].setdefault(p["bucket"], {"rule": []})["rule"]
        new = [r for r in _gcs_rules(p) if r not in kept]
        room = MAX_GCS_RULES - len(kept)
        kept.extend(new[:room])
        if len(new) > room:
            out["left_out"].append(f"gs://{p['bucket']}: {len(new) - room} rule(s) past Cloud Storage's 100")
        return
    rules = out["s3_lifecycle"].setdefault(p["bucket"], {"Rules": []})["Rules"]
    new = _unique(rules, _s3_rules(p))
    room = MAX_S3_RULES - len(rules)
    rules.extend(new[:room])
    if len(new) > room:
        out["left_out"].append(f"s3://{p['bucket']}: {len(new) - room} expiration rule(s) past S3's 1,000")


# What each storage action (a spec's `export`, jobs.export.placement.STORAGE_ACTIONS) writes.
WRITERS = {"retier_volume": _tier, "delete_orphan": _orphan, "lifecycle_rule": _lifecycle}


def document(objects: list[dict[str, Any]]) -> dict[str, Any]:
    """The export document over the stored objects (the read model's); ValueError for a kind the registry
    does not hold."""
    carried = [o for o in plan_mod.plan_objects(objects) if registry.spec(o.get("kind") or "").export in WRITERS]
    out: dict[str, Any] = {
        "s3_lifecycle": {},
        "gcs_lifecycle": {},
        "azure_lifecycle": {},
        "modify_volume": [],
        "commands": [],
        "monthly_savings_usd": float(plans.total(carried)),
        "left_out": [],
    }
    for o in sorted(carried, key=lambda o: o["id"]):
        WRITERS[registry.spec(o["kind"]).export](o, out)
    storage_azure.lifecycle_commands(out)
    return out


def render(objects: list[dict[str, Any]]) -> str:
    return json.dumps(document(objects), indent=2, sort_keys=False) + "\n"
