"""The simulated GPU fleets: the source side of the flow, upstream of every ingestor.

Each generator writes what a real account would deliver, in the providers' own formats (CUR 2.0
Parquet + manifest, BigQuery billing-export rows, nvidia-smi logs, DCGM exporter expositions, price
reference files), plus the ground truth of what it planted. ``gpufinops demo`` (:mod:`jobs.demo`)
and ``gpufinops evaluate`` (:mod:`jobs.evaluate`) run them; the warehouse sees only the files.

* :mod:`simulator.demo_fleet`: the demo's two-cloud + on-prem fleet with planted waste
  (:mod:`~simulator.demo_workloads`: machines; :mod:`~simulator.demo_profiles`: schedules and utilisation
  profiles; :mod:`~simulator.demo_smi`: their nvidia-smi logs).
* :mod:`simulator.eval_fleet`: a second fleet with laws of its own (published throughput, moving
  prices, a restated month), that the models were never tuned on.
* :mod:`simulator.cur2_export`, :mod:`simulator.gcp_export`, :mod:`simulator.azure_export`: the bills in the
  providers' formats (the Azure subscription itself, an AKS pool and two VMs: :mod:`simulator.demo_azure`).

Imports go one way: this package may use the ingest-side file formats (``ingest.aws.aws_cur2_format``,
the ``onprem`` cost function) and the warehouse's schema and reference data; it never imports
``models``, ``dashboard`` or ``jobs``.
"""
