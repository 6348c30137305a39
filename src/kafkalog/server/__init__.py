"""A single-node Kafka-compatible server over a kafkalog data directory (``kafkalog serve``)."""
