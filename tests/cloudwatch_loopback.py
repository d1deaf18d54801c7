"""CloudWatch on loopback: moto's server, behind a front that serves what moto lacks.

boto3 speaks CloudWatch's JSON 1.0 protocol here (``X-Amz-Target: GraniteServiceVersion20100801.<Op>``,
``application/x-amz-json-1.0``; botocore prefers it over the service's CBOR and query protocols). moto 5
handles ``PutMetricData``, ``ListMetrics`` and ``GetMetricData`` for the standard statistics (Sum, Average,
Minimum, Maximum, SampleCount), but not extended statistics: a ``p95`` query in ``GetMetricData`` makes its
server answer HTTP 500 (its statistics code returns no value for it). It also does not paginate
``GetMetricData``, lists a metric once per datapoint in ``ListMetrics``, and matches a query's dimensions
only in the order they were put (CloudWatch ignores the order; the ingestor queries them as listed).

``CloudWatchFront`` is a loopback server speaking the same JSON protocol. It forwards every request to moto
unchanged, recording the datapoints of ``PutMetricData`` on the way, except ``GetMetricData``: there the
standard-statistic queries go to moto and the percentile queries (``pNN``) are computed by the front from
the recorded points (nearest rank: the smallest value with at least NN % of the period's values at or below
it, as CloudWatch defines a percentile on raw values), and the merged results are paged by ``NextToken``
(``page_size`` results a page) as CloudWatch pages a large answer. It can throttle the first calls of an
operation (``ThrottlingException``, HTTP 400) and records every request for the tests to inspect.
"""

from __future__ import annotations

import gzip
import json
import math
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime

from tests.aws_loopback import moto_s3
from tests.http_loopback import LoopbackHttp, QuietHandler

JSON = "application/x-amz-json-1.0"
LOOP_TOKEN = "the-same-token-again"


def percentile(values: list[float], p: float) -> float:
    """Nearest-rank percentile of raw values."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)]


class CloudWatchFront(LoopbackHttp):
    def __init__(self, moto_url: str, page_size: int = 1000) -> None:
        self.moto_url = moto_url
        self.page_size = page_size
        self.points: list[dict] = []  # every PutMetricData datum: namespace, name, dims, ts, value
        self.requests: list[dict] = []
        self.throttle: dict[str, int] = {}  # operation -> how many of its next calls are throttled
        # hostile answers: ``tamper(results)`` edits GetMetricData's merged results before they are paged;
        # ``loop_token``: every GetMetricData page answers the same NextToken again, forever
        self.tamper: Callable[[list[dict]], None] | None = None
        self.loop_token = False
        self._pages: dict[str, list[dict]] = {}

    def __enter__(self) -> CloudWatchFront:
        front = self

        class Handler(QuietHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                operation = (self.headers.get("X-Amz-Target") or "").rsplit(".", 1)[-1]
                status, answer = front.handle(operation, dict(self.headers), body)
                self.send_response(status)
                self.send_header("Content-Type", JSON)
                self.send_header("Content-Length", str(len(answer)))
                self.send_header("x-amzn-RequestId", str(uuid.uuid4()))
                self.end_headers()
                self.wfile.write(answer)

        self.serve(Handler)
        return self

    # ---- protocol --------------------------------------------------------------------------------

    def handle(self, operation: str, headers: dict, body: bytes) -> tuple[int, bytes]:
        encoding = next((v for k, v in headers.items() if k.lower() == "content-encoding"), "")
        request = json.loads(
            (gzip.decompress(body) if "gzip" in encoding else body) or b"{}"
        )  # PutMetricData is gzipped
        self.requests.append(
            {"operation": operation, "body": request, "authorization": headers.get("Authorization", "")}
        )
        if self.throttle.get(operation, 0) > 0:
            self.throttle[operation] -= 1
            return 400, json.dumps(
                {"__type": "com.amazonaws.cloudwatch#ThrottlingException", "message": "Rate exceeded"}
            ).encode()
        if operation == "PutMetricData":
            self._record(request)
        if operation != "GetMetricData":
            return self._forward(headers, body)
        if self.loop_token and request.get("NextToken") == LOOP_TOKEN:
            return 200, json.dumps({"MetricDataResults": [], "Messages": [], "NextToken": LOOP_TOKEN}).encode()
        if request.get("NextToken"):
            return 200, self._page(request["NextToken"])
        queries = request.get("MetricDataQueries", [])
        standard = [q for q in queries if not q.get("MetricStat", {}).get("Stat", "").startswith("p")]
        results: dict[str, dict] = {}
        if standard:
            plain = {k: v for k, v in headers.items() if k.lower() != "content-encoding"}
            status, answer = self._forward(plain, json.dumps({**request, "MetricDataQueries": standard}).encode())
            if status != 200:
                return status, answer
            results |= {r["Id"]: r for r in json.loads(answer).get("MetricDataResults", [])}
        for q in queries:
            if q not in standard:
                results[q["Id"]] = self._percentile_result(q, request)
        ordered = [results[q["Id"]] for q in queries if q.get("ReturnData", True)]
        if self.tamper:
            self.tamper(ordered)
        token = str(uuid.uuid4())
        self._pages[token] = ordered
        return 200, self._page(token)

    def _forward(self, headers: dict, body: bytes) -> tuple[int, bytes]:
        wanted = {
            k: v
            for k, v in headers.items()
            if k.lower()
            in (
                "x-amz-target",
                "content-type",
                "authorization",
                "x-amz-date",
                "x-amz-security-token",
                "content-encoding",
            )
        }
        request = urllib.request.Request(self.moto_url + "/", data=body, headers=wanted, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return response.status, response.read()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read()

    def _page(self, token: str) -> bytes:
        results = self._pages.pop(token)
        page, rest = results[: self.page_size], results[self.page_size :]
        answer: dict = {"MetricDataResults": page, "Messages": []}
        if self.loop_token:
            answer["NextToken"] = LOOP_TOKEN
        elif rest:
            following = str(uuid.uuid4())
            self._pages[following] = rest
            answer["NextToken"] = following
        return json.dumps(answer).encode()

    # ---- percentiles -----------------------------------------------------------------------------

    def _record(self, request: dict) -> None:
        for datum in request.get("MetricData", []):
            dims = sorted((d["Name"], d["Value"]) for d in datum.get("Dimensions", []))
            self.points.append(
                {
                    "namespace": request["Namespace"],
                    "name": datum["MetricName"],
                    "dims": dims,
                    "ts": float(datum["Timestamp"]),
                    "value": float(datum["Value"]),
                }
            )

    def _percentile_result(self, query: dict, request: dict) -> dict:
        stat = query["MetricStat"]
        metric, period = stat["Metric"], int(stat["Period"])
        dims = sorted((d["Name"], d["Value"]) for d in metric.get("Dimensions", []))
        start, end = float(request["StartTime"]), float(request["EndTime"])
        buckets: dict[float, list[float]] = {}
        for p in self.points:
            if (p["namespace"], p["name"], p["dims"]) == (
                metric["Namespace"],
                metric["MetricName"],
                dims,
            ) and start <= p["ts"] < end:
                buckets.setdefault(start + (p["ts"] - start) // period * period, []).append(p["value"])
        level = float(stat["Stat"][1:])
        stamps = sorted(buckets)
        return {
            "Id": query["Id"],
            "Label": query.get("Label", metric["MetricName"]),
            "StatusCode": "Complete",
            "Timestamps": stamps,
            "Values": [percentile(buckets[t], level) for t in stamps],
        }


@contextmanager
def cloudwatch(page_size: int = 1000) -> Iterator[tuple[CloudWatchFront, str]]:
    """(the front, moto's own URL): moto's server on loopback with the front before it."""
    with moto_s3() as moto_url, CloudWatchFront(moto_url, page_size) as front:
        yield front, moto_url


def epoch(value: datetime) -> float:
    return value.astimezone(UTC).timestamp()
