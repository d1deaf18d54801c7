"""`export storage`: lifecycle configurations S3 and Cloud Storage accept whatever the checkpoint runs are named.

S3 takes a rule ID of at most 255 characters, unique within the configuration (the issue's 240-character
run names gave 24 rules one ID, cut to a common prefix); an object key, so a rule's prefix, is at most
1,024 bytes. The S3 configuration is put to a moto server on 127.0.0.1 through boto3 and read back;
moto does not check IDs itself, so their length and uniqueness are asserted here as S3 documents them.
"""

from __future__ import annotations

import boto3
import pytest

from gpufinops.jobs.export import storage
from tests.aws_loopback import moto_s3, use_dummy_credentials

KEY_LIMIT = 1024  # bytes of an S3 object key or a Cloud Storage object name


def plan(provider: str, runs: list[str], steps: int = 3, oid: str = "x", prefix: str = "ckpt/") -> dict:
    return {
        "id": oid,
        "kind": "checkpoint_lifecycle",
        "provider": provider,
        "plan": "primary",
        "status": "open",
        "monthly_savings_usd": 1.0,
        "resource_id": f"s3://ckpt-bucket/{prefix}",
        "evidence": {},
        "proposed": {
            "bucket": "ckpt-bucket",
            "prefix": prefix,
            "transition_days": 30,
            "expire_days": 90,
            "expire_prefixes": [f"{prefix}{run}/step-{n}/" for run in runs for n in range(steps)],
        },
    }


def long_runs(length: int, count: int = 8) -> list[str]:
    """Run names of ``length`` characters that differ only at their end."""
    return [("r" * length)[: length - 3] + f"{n:03d}" for n in range(count)]


@pytest.mark.parametrize("length", [240, KEY_LIMIT - len("ckpt/") - len("/step-0/")])
def test_s3_rule_ids_are_unique_and_within_255_characters(monkeypatch, length):
    objects = [plan("aws", long_runs(length))]
    rules = storage.document(objects)["s3_lifecycle"]["ckpt-bucket"]["Rules"]
    assert len(rules) == 1 + 8 * 3
    ids = [r["ID"] for r in rules]
    assert len(set(ids)) == len(ids), "duplicate rule IDs"
    assert max(len(i) for i in ids) <= 255
    assert all(len(r["Filter"]["Prefix"].encode()) <= KEY_LIMIT for r in rules)
    assert storage.document(objects)["s3_lifecycle"]["ckpt-bucket"]["Rules"] == rules  # the same IDs on every export
    use_dummy_credentials(monkeypatch)
    with moto_s3() as endpoint:
        s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
        s3.create_bucket(Bucket="ckpt-bucket")
        s3.put_bucket_lifecycle_configuration(Bucket="ckpt-bucket", LifecycleConfiguration={"Rules": rules})
        stored = s3.get_bucket_lifecycle_configuration(Bucket="ckpt-bucket")["Rules"]
    assert sorted(r["ID"] for r in stored) == sorted(ids)


def test_one_prefix_in_two_plans_is_one_rule_and_a_clashing_id_is_made_unique():
    first = plan("aws", ["run-a"], oid="a")
    again = plan("aws", ["run-a"], oid="b")  # the same folders from a second plan object
    rules = storage.document([first, again])["s3_lifecycle"]["ckpt-bucket"]["Rules"]
    assert len(rules) == 1 + 3
    other_days = plan("aws", ["run-a"], oid="c")
    other_days["proposed"]["expire_days"] = 120  # the same prefix, another rule: its ID must differ
    rules = storage.document([first, other_days])["s3_lifecycle"]["ckpt-bucket"]["Rules"]
    ids = [r["ID"] for r in rules]
    assert len(rules) == 1 + 2 * 3 and len(
        set(ids)
    )  # the one transition rule is the same in both == len(ids) and max(map(len, ids)) <= 255


def test_gcs_rules_stay_within_cloud_storages_limits_with_the_rest_left_out():
    objects = [plan("gcp", long_runs(KEY_LIMIT - 30, 1), oid=f"g{n:02d}", prefix=f"ckpt-{n:02d}/") for n in range(60)]
    document = storage.document(objects)
    rules = document["gcs_lifecycle"]["ckpt-bucket"]["rule"]
    assert len(rules) == 100
    assert all(len(p.encode()) <= KEY_LIMIT for r in rules for p in r["condition"]["matchesPrefix"])
    left = [line.split(": ")[1] for line in document["left_out"] if line.startswith("gs://ckpt-bucket: ")]
    assert sum(int(line.split()[0]) for line in left) == 60 * 2 - 100  # each plan past the limit says so
