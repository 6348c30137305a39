"""kafkalog: Apache Kafka's log storage layer in Python, byte-compatible with real Kafka.

Layers, each importing only those below it: ``kafkalog.format`` (pure functions over bytes),
then ``kafkalog.log`` (files), then ``kafkalog.dataset`` (data directories as Arrow), then the
edges (``kafkalog.arrow``, ``kafkalog.spark``, ``kafkalog.cli``; ``kafkalog.protocol`` and
``kafkalog.server``).
"""

import logging

__version__ = "0.1.0"

# A library logs to "kafkalog" and leaves output to the application (the command line shows
# warnings its own way; the Spark source adds a handler in its worker processes).
logging.getLogger("kafkalog").addHandler(logging.NullHandler())


def __getattr__(name: str):
    # ``kafkalog.open_data_dir`` and ``kafkalog.write_data_dir``: the Arrow reader and writer
    # (docs/arrow.md), imported on first use so that ``import kafkalog`` stays light (no pyarrow).
    if name in ("open_data_dir", "write_data_dir"):
        from . import arrow

        return getattr(arrow, name)
    raise AttributeError(f"module 'kafkalog' has no attribute {name!r}")
