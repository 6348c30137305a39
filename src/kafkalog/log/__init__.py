"""The log layer: Kafka's files on disk (segments, indexes, checkpoints), on ``kafkalog.format``.

Everything here opens read-only unless writing is asked for, so pointing kafkalog at a dead broker's
disk never changes it.
"""
