"""vLLM pods whose TTFT histogram Prometheus stores as a native histogram.

Prometheus ingests native histograms only from the protobuf exposition format (and only with
``--enable-feature=native-histograms`` on 2.40 to 2.x). The message types of
``io.prometheus.client`` (client_model's ``metrics.proto``: the fields this needs) are built at
run time with the protobuf library, and each pod serves them length-delimited, as client
libraries do. Observations go to one exponential bucket of schema 0, ``(2^(i-1), 2^i]``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from aiohttp import web
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

CONTENT_TYPE = (
    "application/vnd.google.protobuf; proto=io.prometheus.client.MetricFamily; encoding=delimited"
)


def _metric_family_class() -> Any:
    f = descriptor_pb2.FieldDescriptorProto
    opt, rep = f.LABEL_OPTIONAL, f.LABEL_REPEATED
    pkg = ".io.prometheus.client."
    fd = descriptor_pb2.FileDescriptorProto(
        name="metrics.proto", package="io.prometheus.client", syntax="proto2"
    )

    def message(name: str, *fields: tuple[str, int, int, int, str | None]) -> None:
        m = fd.message_type.add(name=name)
        for fname, number, kind, label, type_name in fields:
            field = m.field.add(name=fname, number=number, type=kind, label=label)
            if type_name:
                field.type_name = pkg + type_name

    message(
        "LabelPair", ("name", 1, f.TYPE_STRING, opt, None), ("value", 2, f.TYPE_STRING, opt, None)
    )
    message("Gauge", ("value", 1, f.TYPE_DOUBLE, opt, None))
    message(
        "BucketSpan",
        ("offset", 1, f.TYPE_SINT32, opt, None),
        ("length", 2, f.TYPE_UINT32, opt, None),
    )
    message(
        "Histogram",
        ("sample_count", 1, f.TYPE_UINT64, opt, None),
        ("sample_sum", 2, f.TYPE_DOUBLE, opt, None),
        ("schema", 5, f.TYPE_SINT32, opt, None),
        ("zero_threshold", 6, f.TYPE_DOUBLE, opt, None),
        ("zero_count", 7, f.TYPE_UINT64, opt, None),
        ("positive_span", 12, f.TYPE_MESSAGE, rep, "BucketSpan"),
        ("positive_delta", 13, f.TYPE_SINT64, rep, None),
    )
    message(
        "Metric",
        ("label", 1, f.TYPE_MESSAGE, rep, "LabelPair"),
        ("gauge", 2, f.TYPE_MESSAGE, opt, "Gauge"),
        ("histogram", 7, f.TYPE_MESSAGE, opt, "Histogram"),
    )
    kinds = fd.enum_type.add(name="MetricType")
    for name, number in (("COUNTER", 0), ("GAUGE", 1), ("SUMMARY", 2), ("UNTYPED", 3)):
        kinds.value.add(name=name, number=number)
    kinds.value.add(name="HISTOGRAM", number=4)
    message(
        "MetricFamily",
        ("name", 1, f.TYPE_STRING, opt, None),
        ("help", 2, f.TYPE_STRING, opt, None),
        ("metric", 4, f.TYPE_MESSAGE, rep, "Metric"),
    )
    mf = fd.message_type[-1]
    mf.field.add(name="type", number=3, type=f.TYPE_ENUM, label=opt, type_name=pkg + "MetricType")
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fd)
    return message_factory.GetMessageClass(
        pool.FindMessageTypeByName("io.prometheus.client.MetricFamily")
    )


MetricFamily = _metric_family_class()


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        low, n = n & 0x7F, n >> 7
        out.append(low | (0x80 if n else 0))
        if not n:
            return bytes(out)


@dataclass
class NativeVllmPod:
    """One pod: the running gauge, and a native TTFT histogram that gains ``per_scrape``
    observations in bucket ``index`` (``(2^(index-1), 2^index]`` seconds) at each scrape."""

    name: str
    index: int = 3
    per_scrape: int = 0
    count: int = 10
    port: int = 0

    def exposition(self) -> bytes:
        self.count += self.per_scrape
        labels = (("engine", "0"), ("model_name", "m"))
        running = MetricFamily(name="vllm:num_requests_running", help="running", type=1)
        m = running.metric.add()
        for k, v in labels:
            m.label.add(name=k, value=v)
        m.gauge.value = 1.0
        ttft = MetricFamily(
            name="vllm:time_to_first_token_seconds", help="TTFT in seconds.", type=4
        )
        m = ttft.metric.add()
        for k, v in labels:
            m.label.add(name=k, value=v)
        h = m.histogram
        h.sample_count = self.count
        h.sample_sum = self.count * 2.0 ** (self.index - 1) * 1.5
        h.schema = 0
        h.zero_threshold = 2.0**-128  # a native histogram, as client_golang marks it
        span = h.positive_span.add()
        span.offset, span.length = self.index, 1
        h.positive_delta.append(self.count)
        return b"".join(
            _varint(len(b)) + b for b in (f.SerializeToString() for f in (running, ttft))
        )

    async def handle(self, request: web.Request) -> web.Response:
        return web.Response(body=self.exposition(), headers={"Content-Type": CONTENT_TYPE})
