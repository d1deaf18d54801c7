"""The AWS storage inventory through boto3 against a moto server on loopback, beside the listing calls alone.

    python -m bench.bench_storage --volumes 10000 --snapshots 50000 --objects 5000000

A child process fills moto's backends directly (creating millions of objects through the API would take
hours on a shared 2-core machine) and serves them on a loopback port; this process then takes the inventory
(``ingest.storage.aws_inventory.collect``: paging, grouping, CloudWatch) and, separately, makes only the same
listing calls (DescribeVolumes, DescribeSnapshots, ListObjectsV2 pages, nothing kept). Peak RSS is this
process's (the inventory's), not moto's. Targets: ≤ 120 s and < 1 GiB at 10,000 volumes, 50,000 snapshots
and 5M objects; the sizes measured are printed with every figure.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import time
from datetime import UTC, datetime

ACCOUNT, REGION, BUCKET = "123456789012", "us-east-1", "bench-ckpt"


def serve(port: int, volumes: int, snapshots: int, objects: int) -> None:
    import logging

    from moto.ec2.models import ec2_backends
    from moto.s3.models import s3_backends
    from moto.server import ThreadedMotoServer

    ec2 = ec2_backends[ACCOUNT][REGION]
    ids = [
        ec2.create_volume(
            size=100,
            zone_name=f"{REGION}a",
            volume_type="io2" if n % 10 == 0 else "gp3",
            iops=6000 if n % 10 == 0 else 3000,
        ).id
        for n in range(volumes)
    ]
    for n in range(snapshots):
        ec2.create_snapshot(ids[n % len(ids)], f"bench {n}") if ids else None
    s3 = s3_backends[ACCOUNT]["aws"]
    s3.create_bucket(BUCKET, REGION)
    for n in range(objects):  # 10 runs × checkpoints of 8 files
        run, ckpt, part = n % 10, n // 80, (n // 10) % 8
        s3.put_object(BUCKET, f"ckpt/run-{run}/step-{ckpt:07d}/part-{part}", b"")
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # no line per request
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    print("ready", flush=True)
    sys.stdin.read()  # until the parent closes it
    server.stop()


def _clients(endpoint: str):
    import boto3
    from botocore.config import Config

    from gpufinops.ingest.storage.aws_inventory import Clients

    # moto answers a whole listing in one response when it does not page an action (DescribeVolumes): minutes
    slow = Config(read_timeout=900, retries={"max_attempts": 1})

    return Clients(
        ec2=lambda r: boto3.client("ec2", region_name=r, endpoint_url=endpoint, config=slow),
        cloudwatch=lambda r: boto3.client("cloudwatch", region_name=r, endpoint_url=endpoint, config=slow),
        s3=boto3.client("s3", region_name=REGION, endpoint_url=endpoint, config=slow),
    )


def listing_alone(endpoint: str) -> int:
    c = _clients(endpoint)
    ec2, pages = c.ec2(REGION), 0
    for _page in ec2.get_paginator("describe_volumes").paginate(PaginationConfig={"PageSize": 500}):
        pages += 1
    for _page in ec2.get_paginator("describe_snapshots").paginate(
        OwnerIds=["self"], PaginationConfig={"PageSize": 1000}
    ):
        pages += 1
    for _page in c.s3.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix="ckpt/"):
        pages += 1
    return pages


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--volumes", type=int, default=10_000)
    parser.add_argument("--snapshots", type=int, default=50_000)
    parser.add_argument("--objects", type=int, default=5_000_000)
    parser.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve, args.volumes, args.snapshots, args.objects)
        return 0
    for name, value in (
        ("AWS_ACCESS_KEY_ID", "bench"),
        ("AWS_SECRET_ACCESS_KEY", "bench"),
        ("AWS_EC2_METADATA_DISABLED", "true"),
    ):
        os.environ.setdefault(name, value)
    import socket

    from gpufinops.ingest.storage import aws_inventory
    from gpufinops.ingest.storage.options import StorageOptions

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    started = time.monotonic()
    child = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "bench.bench_storage",
            "--serve",
            str(port),
            "--volumes",
            str(args.volumes),
            "--snapshots",
            str(args.snapshots),
            "--objects",
            str(args.objects),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
        print(
            f"moto filled in {time.monotonic() - started:.1f} s: {args.volumes} volumes, {args.snapshots} snapshots, "
            f"{args.objects} objects"
        )
        endpoint = f"http://127.0.0.1:{port}"
        t0 = time.monotonic()
        pages = listing_alone(endpoint)
        alone = time.monotonic() - t0
        options = StorageOptions.of(
            regions=[REGION], metrics_days=1, prefixes=[{"bucket": BUCKET, "prefix": "ckpt/", "purpose": "checkpoint"}]
        )
        t0 = time.monotonic()
        inv = aws_inventory.collect("bench", _clients(endpoint), options, datetime.now(UTC))
        took = time.monotonic() - t0
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        listed = sum(o["objects"] for o in inv.objects)
        print(f"listing calls alone: {alone:.1f} s ({pages} pages)")
        print(
            f"inventory: {took:.1f} s, {len(inv.volumes)} volumes, {len(inv.snapshots)} snapshots, {listed} objects "
            f"in {len(inv.objects)} groups, {sum(v['volume_type'] == 'io2' for v in inv.volumes)} io2 volumes' AWS/EBS metrics queried; "
            f"peak RSS {rss:.0f} MiB; {took / alone:.2f}× the listing alone"
        )
        ok = took <= 120 and rss < 1024
        print(f"target (≤ 120 s, < 1 GiB at 10,000 / 50,000 / 5M): {'met' if ok else 'missed'} at the sizes above")
    finally:
        if child.stdin:
            child.stdin.close()
        child.wait(timeout=60)
    return 0


if __name__ == "__main__":
    sys.exit(main())
