"""Figures for docs/benchmarks.md from the committed results (no measuring here).

    .venv/bin/python benchmarks/plots.py            # writes docs/img/*.png

- ``spark_vs_kafka_source.png``: each query's wall clock through the kafkalog source and Spark's
  Kafka source (median bars, every run a dot), from
  ``benchmarks/results/spark_vs_kafka_source_index.json``;
- ``serve_vs_kafka_durability.png``: produce throughput of serve and Kafka for each client and
  case, one panel per durability setting, from
  ``benchmarks/results/serve_vs_kafka_durability_{default,page_cache,fsync}.json``.

Needs matplotlib (``pip install 'kafkalog[plot]'``).
"""

from __future__ import annotations

import json
from pathlib import Path

from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.patches import Patch

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
OUT = ROOT / "docs" / "img"
KAFKALOG, KAFKA = "#1f77b4", "#7f7f7f"
QUERY_LABELS = {
    "count": "count()",
    "group_by_key": "groupBy(key)\n.count()",
    "time_range": "time range\n(10%)",
    "read_committed": "read_committed",
    "stream_available_now": "stream\navailableNow",
}
DURABILITY = [
    ("default", "default: serve fsyncs acks=all, Kafka leaves it to the OS"),
    ("page_cache", "page-cache: neither fsyncs (--acks-all-durability page-cache)"),
    ("fsync", "fsync: both fsync every append (log.flush.interval.messages=1)"),
]


def pair(ax: Axes, x: float, ours: float, theirs: float, width: float, ratio: str, size: int):
    """kafkalog's bar and the alternative's side by side at ``x``, ``ratio`` written above."""
    ax.bar(x - width / 2, ours, width, color=KAFKALOG)
    ax.bar(x + width / 2, theirs, width, color=KAFKA)
    ax.annotate(ratio, (x, max(ours, theirs)), xytext=(0, 3), textcoords="offset points",
                ha="center", fontsize=size)  # fmt: skip


def legend(ax: Axes, ours: str, theirs: str, **kwargs) -> None:
    ax.legend(handles=[Patch(color=KAFKALOG, label=ours), Patch(color=KAFKA, label=theirs)],
              **kwargs)  # fmt: skip


def spark_figure() -> Figure:
    doc = json.loads((RESULTS / "spark_vs_kafka_source_index.json").read_text())
    fig = Figure(figsize=(9, 4.2))
    ax = fig.add_subplot()
    width = 0.38
    for i, query in enumerate(QUERY_LABELS):
        q = doc["queries"][query]
        ours, theirs = q["kafkalog"], q["kafka"]
        pair(ax, i, ours["median_s"], theirs["median_s"], width, f"{q['speedup']:.2f}x", 9)
        for x, side in ((i - width / 2, ours), (i + width / 2, theirs)):
            runs = [r["wall_s"] for r in side["runs"]]
            ax.plot([x] * len(runs), runs, "k.", markersize=3)
    ax.set_xticks(range(len(QUERY_LABELS)), list(QUERY_LABELS.values()), fontsize=8)
    ax.set_ylabel("wall clock, s (median; dots: runs)")
    ax.set_title(
        "kafkalog source over the broker's data directory vs Spark's Kafka source\n"
        f"local[2], {doc['written']['bench_records']:,} records, pyspark "
        f"{doc['versions']['pyspark']}, Kafka {doc['versions']['kafka_broker']} "
        "(ratio: Kafka / kafkalog)",
        fontsize=9,
    )
    legend(ax, "kafkalog source", "Spark's Kafka source", fontsize=8)
    fig.tight_layout()
    return fig


def serve_figure() -> Figure:
    fig = Figure(figsize=(9, 10.5))
    axes = fig.subplots(len(DURABILITY), 1, sharey=True)
    for ax, (name, title) in zip(axes, DURABILITY, strict=True):
        doc = json.loads((RESULTS / f"serve_vs_kafka_durability_{name}.json").read_text())
        rows = [
            r
            for r in doc["throughput"]
            if "produce" in r["benchmark"] or r["benchmark"] == "ProducerPerformance"
        ]
        rows = [r for r in rows if "serve acks=1" not in r["benchmark"]]
        labels = []
        for i, r in enumerate(rows):
            tool = "rdkafka" if r["benchmark"].startswith("librdkafka") else "Java"
            size = "1 KB" if r["value_bytes"] == 1024 else f"{r['value_bytes']} B"
            labels.append(f"{tool}\n{size} {r['codec']}\n{r['partitions']} part.\nacks={r['acks']}")
            ours, theirs = r["serve"]["mb_per_s"], r["kafka"]["mb_per_s"]
            pair(ax, i, ours, theirs, 0.4, f"{r['throughput_ratio']:.2f}", 7)
        ax.set_yscale("log")
        ax.set_xticks(range(len(rows)), labels, fontsize=7)
        ax.set_title(title, fontsize=8)
        ax.set_ylabel("MB/s of values", fontsize=8)
    legend(axes[0], "kafkalog serve", "Apache Kafka 4.4", fontsize=7, loc="upper left")
    fig.suptitle(
        "Produce throughput, serve vs Kafka 4.4 (median of 3, log scale; labels: serve / Kafka)",
        fontsize=9,
    )
    fig.tight_layout()
    return fig


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    for name, fig in (
        ("spark_vs_kafka_source.png", spark_figure()),
        ("serve_vs_kafka_durability.png", serve_figure()),
    ):
        FigureCanvasAgg(fig)
        fig.savefig(OUT / name, dpi=110)
        print(OUT / name)


if __name__ == "__main__":
    main()
