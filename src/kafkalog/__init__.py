"""kafkalog: Apache Kafka's log storage layer in Python, byte-compatible with real Kafka.

Layers, each importing only those below it: ``kafkalog.format`` (pure functions over bytes),
then ``kafkalog.log`` (files), then the edges (``kafkalog.cli``, ``kafkalog.spark``).
"""

__version__ = "0.1.0"
