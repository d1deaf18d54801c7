"""`python -m gpufinops.jobs.storage_inventory --config storage.toml --warehouse PATH`: take the AWS storage inventory.

The TOML file holds the inventory's options (ingest/storage/options.py: ``regions``, ``team_tag_keys``,
``metrics_days``, ``endpoint_url``, ``[[prefixes]]`` tables with ``bucket``, ``prefix``, ``purpose``,
``team``, ``read_filter``) and optionally ``source`` (the name its rows are kept under, default
``storage``). The inventory replaces that source's rows in one transaction; then `gpufinops recommend`
prices what it found. Exit 0 done, 1 a failed inventory (the warehouse unchanged), 2 a bad file or option.
"""

from __future__ import annotations

import argparse
import sys
import tomllib
from datetime import UTC, datetime
from pathlib import Path

from gpufinops.ingest.core.scrub import scrub


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m gpufinops.jobs.storage_inventory", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--config", required=True, help="the inventory's TOML file")
    parser.add_argument("--warehouse", required=True, help="the warehouse file (gpufinops.toml's [warehouse] path)")
    args = parser.parse_args(argv)
    from gpufinops.ingest.aws import aws_common
    from gpufinops.ingest.core.registry import IngestError
    from gpufinops.ingest.core.spec import OptionError, OptionProblem
    from gpufinops.ingest.storage import aws_inventory
    from gpufinops.ingest.storage.options import StorageOptions

    try:
        table = tomllib.loads(Path(args.config).read_text())
        source = str(table.pop("source", "storage"))
        options = StorageOptions.parse(table, Path(args.config).name, "aws_storage")
        options.validate()
    except (OSError, tomllib.TOMLDecodeError, OptionError, OptionProblem, ValueError) as exc:
        print(scrub(f"gpufinops storage: {args.config}: {exc}"), file=sys.stderr)
        return 2
    from gpufinops.warehouse import db, storage_store

    clients = aws_inventory.Clients(
        ec2=lambda region: aws_common.client("ec2", source, options, region),
        cloudwatch=lambda region: aws_common.client("cloudwatch", source, options, region),
        s3=aws_common.client("s3", source, options, options.regions[0] if options.regions else None),
    )
    try:
        with db.writer(args.warehouse) as con:
            inv = aws_inventory.collect(
                source, clients, options, datetime.now(UTC), storage_store.previous_volumes(con, source)
            )
            storage_store.load(con, source, inv)
            from gpufinops.models import storage_common  # which of it is GPU work: the models' own rule

            scope = storage_common.scope_counts(storage_common.load(con))
    except (IngestError, storage_store.StorageInventoryError) as exc:
        print(scrub(f"gpufinops storage: {exc}"), file=sys.stderr)
        return 1
    except Exception as exc:  # noqa: BLE001  # an SDK error: one sentence, never a traceback with request data
        if not aws_common.is_client_error(exc):
            raise
        print(scrub(str(aws_common.describe_error(source, "the storage inventory", exc))), file=sys.stderr)
        return 1
    refused = sorted({f"s3://{o['bucket']}/{o['prefix']}" for o in inv.objects if o["access"] != "ok"})
    print(
        f"gpufinops storage: {len(inv.volumes)} volume(s), {len(inv.snapshots)} snapshot(s), "
        f"{sum(o['objects'] for o in inv.objects)} object(s) under {len(options.rules)} prefix(es), "
        f"{len({o['volume_id'] for o in inv.volume_ops})} volume(s) measured"
        + (f"; not listed: {', '.join(refused)}" if refused else "")
    )
    print(
        f"GPU work (examined): {scope['volumes_in_scope']} volume(s), {scope['snapshots_in_scope']} snapshot(s), "
        f"{scope['prefixes']} prefix(es); out of scope (listed, not examined): {scope['volumes_out_of_scope']} "
        f"volume(s), {scope['snapshots_out_of_scope']} snapshot(s)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
