#!/usr/bin/env bash
# The main job on the embedded default: set up .venv, write a sample Kafka segment and dump it,
# then the Spark pipeline (examples/spark_pipeline.py): generate 2.1 M keyed events with headers,
# write them with Spark as a Kafka data directory (3 topics x 8 partitions, lz4), verify it,
# decode it with kafka-python, read it back with Spark and print a report.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh demo
segment=out/demo-0/00000000000000000000.log
.venv/bin/python examples/sample_segment.py "$segment"
.venv/bin/kafkalog dump --deep-iteration --print-data-log "$segment"
echo
echo "As JSON lines (first 5):"
.venv/bin/kafkalog dump --json "$segment" | head -n 5
echo
echo "The Spark pipeline (local[2]):"
.venv/bin/python examples/spark_pipeline.py --out out/spark-demo "$@"
