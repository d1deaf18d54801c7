"""`gpufinops export storage`, Azure's half: managed disks and Blob Storage checkpoint containers.

* ``azure_lifecycle``: storage account -> where it is (``subscription``, ``resource_group``) and the lifecycle
  management ``policy`` that ``az storage account management-policy create`` takes (the documented schema,
  learn.microsoft.com/azure/storage/blobs/lifecycle-management-policy-structure): per checkpoint prefix a rule
  moving block blobs to the Cool tier ``daysAfterModificationGreaterThan`` the transition days, and rules deleting
  the checkpoint folders a run no longer keeps (at most 10 prefixes a rule, 100 rules a policy: the command replaces
  the account's whole policy);
* ``commands``: that command per account, the disk deletions (a snapshot first where one is to be kept), the
  snapshot deletions and the moves to Premium SSD v2, each with ``--subscription`` and ``--resource-group`` read
  from the resource's own id (a shell whose default subscription differs acts on the right one).
"""

from __future__ import annotations

import hashlib
import json
import re
import shlex
from typing import Any

MAX_RULES = 100  # a policy's rules
MAX_PREFIXES = 10  # a rule filter's prefixMatch
RULE_NAME_CHARS = 256  # "up to 256 alphanumeric characters", unique within the policy
_ARM = re.compile(r"^/subscriptions/([^/]+)/resourceGroups/([^/]+)/providers/[^/]+/[^/]+/([^/]+)$", re.IGNORECASE)


def arm_parts(resource_id: str) -> tuple[str, str, str] | None:
    """(subscription, resource group, name) of an Azure resource id, or None for another shape."""
    found = _ARM.match(resource_id or "")
    return (found.group(1), found.group(2), found.group(3)) if found else None


def _at(subscription: str, group: str) -> str:
    return f" --subscription {shlex.quote(subscription)} --resource-group {shlex.quote(group)}"


def _rule_name(kind: str, text: str) -> str:
    """An alphanumeric rule name, unique for ``text`` (a prefix or a list of them)."""
    return f"gpufinops{kind}{hashlib.sha256(text.encode()).hexdigest()[:16]}"


def _rule(kind: str, prefixes: list[str], action: str, days: int) -> dict[str, Any]:
    return {
        "enabled": True,
        "name": _rule_name(kind, "\n".join(prefixes)),
        "type": "Lifecycle",
        "definition": {
            "filters": {"blobTypes": ["blockBlob"], "prefixMatch": prefixes},
            "actions": {"baseBlob": {action: {"daysAfterModificationGreaterThan": days}}},
        },
    }


def policy_rules(p: dict[str, Any]) -> list[dict[str, Any]]:
    """A checkpoint_lifecycle finding's rules: its prefix to Cool, its expiring folders deleted (10 a rule)."""
    container = p["bucket"].partition("/")[2]
    cold = "tierTo" + (p.get("storage_class") or "Cool")
    rules = [_rule("cool", [f"{container}/{p['prefix']}"], cold, int(p["transition_days"]))]
    expiring = [f"{container}/{path}" for path in p.get("expire_prefixes") or ()]
    for start in range(0, len(expiring), MAX_PREFIXES):
        rules.append(_rule("expire", expiring[start : start + MAX_PREFIXES], "delete", int(p["expire_days"])))
    return rules


def lifecycle(o: dict[str, Any], out: dict[str, Any]) -> None:
    p = o["proposed"]
    account = p["bucket"].partition("/")[0]
    where = arm_parts((o.get("evidence") or {}).get("account_resource_id") or "")
    entry = out["azure_lifecycle"].setdefault(
        account,
        {
            "subscription": where[0] if where else None,
            "resource_group": where[1] if where else None,
            "policy": {"rules": []},
        },
    )
    rules = entry["policy"]["rules"]
    new = [r for r in policy_rules(p) if r not in rules]
    room = MAX_RULES - len(rules)
    rules.extend(new[:room])
    if len(new) > room:
        out["left_out"].append(f"storage account {account}: {len(new) - room} rule(s) past a policy's 100")


def lifecycle_commands(out: dict[str, Any]) -> None:
    """One ``az storage account management-policy create`` per account, its policy inline."""
    for account, entry in sorted(out["azure_lifecycle"].items()):
        if not entry["subscription"]:
            out["left_out"].append(
                f"storage account {account}: no bill line names its subscription and resource group; its policy is "
                "written, its command is not"
            )
            continue
        policy = json.dumps(entry["policy"], separators=(",", ":"))
        out["commands"].append(
            f"az storage account management-policy create{_at(entry['subscription'], entry['resource_group'])}"
            f" --account-name {shlex.quote(account)} --policy {shlex.quote(policy)}"
        )


def _where(o: dict[str, Any], out: dict[str, Any]) -> tuple[str, str] | None:
    parts = arm_parts(o["resource_id"])
    if parts is None:
        out["left_out"].append(f"{o['resource_id']}: not an Azure resource id; no command written")
        return None
    return _at(parts[0], parts[1]), parts[2]


def orphan(o: dict[str, Any], out: dict[str, Any]) -> None:
    where = _where(o, out)
    if where is None:
        return
    at, name = where
    q = shlex.quote
    if (o.get("evidence") or {}).get("pattern") == "orphan_snapshot":
        out["commands"].append(f"az snapshot delete{at} --name {q(name)}")
        return
    keep = (o.get("proposed") or {}).get("keep_snapshot") or {}
    first = (
        f"az snapshot create{at} --name {q(name + '-gpufinops')} --source {q(o['resource_id'])} --incremental true && "
        if keep.get("new")
        else ""
    )
    out["commands"].append(f"{first}az disk delete{at} --name {q(name)} --yes")


def tier(o: dict[str, Any], out: dict[str, Any]) -> None:
    where = _where(o, out)
    if where is not None:
        at, name = where
        sku = shlex.quote(o["proposed"]["volume_type"])
        out["commands"].append(f"az disk update{at} --name {shlex.quote(name)} --sku {sku}")
