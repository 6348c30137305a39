#!/usr/bin/env bash
# The main job on the embedded default: set up .venv, write a sample Kafka segment, dump it.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
segment=out/demo-0/00000000000000000000.log
.venv/bin/python examples/sample_segment.py "$segment"
.venv/bin/kafkalog dump --deep-iteration --print-data-log "$segment"
echo
echo "As JSON lines (first 5):"
.venv/bin/kafkalog dump --json "$segment" | head -n 5
