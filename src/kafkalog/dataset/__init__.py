"""Kafka data directories as Arrow tables, without Spark: the schema of Spark's Kafka source, its
read and write options, planning a scan from the indexes into offset ranges and byte ranges,
reading those ranges into Arrow batches with the columnar decoder, the producer's key
partitioning, and writing Arrow rows as Kafka logs (staged, then committed under the data
directory's lock: :mod:`.writer`; in object storage by a manifest: :mod:`.remote_writer`). The
edges build on it: :mod:`kafkalog.arrow` (pyarrow readers), :mod:`kafkalog.spark` (the PySpark
data source) and the command line."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

if TYPE_CHECKING:
    from ..errors import ConcurrentCommitError
    from ..log.datadir import Manifest, newest_manifest
    from .options import (
        EARLIEST,
        LATEST,
        OffsetSpec,
        OptionError,
        ReadOptions,
        WriteOptions,
        parse_read_options,
        parse_write_options,
    )
    from .partitioning import StickyPartitioner, partitions_for_keys
    from .planner import data_loss, discover, read_data_loss
    from .reader import (
        OffsetRange,
        check_all_given,
        iter_chunks,
        open_selected,
        plan_input_partitions,
        read_partition,
        resolve_ranges,
        resolve_spec,
    )
    from .schema import arrow_schema, spark_schema_ddl
    from .writer import (
        STAGING_DIR,
        PartitionOutOfRangeError,
        PartitionWrite,
        StagedFiles,
        TaskWriter,
        WriteResult,
        WriteSchemaError,
        check_arrow_sink_schema,
        check_partition_count,
        check_sink_types,
        commit_staged,
        existing_partitions,
        prepare_staging,
        remove_staging,
        write_batches,
    )

# What the code outside imports from here, and the module that defines it (loaded on first use).
_EXPORTS = {
    "EARLIEST": "options",
    "LATEST": "options",
    "ConcurrentCommitError": ".errors",  # (kafkalog.errors)
    "Manifest": ".log.datadir",  # (kafkalog.log.datadir: the commit is a data-directory file)
    "OffsetRange": "reader",
    "OffsetSpec": "options",
    "OptionError": "options",
    "PartitionOutOfRangeError": "writer",
    "PartitionWrite": "writer",
    "ReadOptions": "options",
    "STAGING_DIR": "writer",
    "StagedFiles": "writer",
    "StickyPartitioner": "partitioning",
    "TaskWriter": "writer",
    "WriteOptions": "options",
    "WriteResult": "writer",
    "WriteSchemaError": "writer",
    "arrow_schema": "schema",
    "check_all_given": "reader",
    "check_arrow_sink_schema": "writer",
    "check_partition_count": "writer",
    "check_sink_types": "writer",
    "commit_staged": "writer",
    "data_loss": "planner",
    "discover": "planner",
    "existing_partitions": "writer",
    "iter_chunks": "reader",
    "newest_manifest": ".log.datadir",
    "open_selected": "reader",
    "parse_read_options": "options",
    "parse_write_options": "options",
    "partitions_for_keys": "partitioning",
    "plan_input_partitions": "reader",
    "prepare_staging": "writer",
    "read_data_loss": "planner",
    "read_partition": "reader",
    "remove_staging": "writer",
    "resolve_ranges": "reader",
    "resolve_spec": "reader",
    "spark_schema_ddl": "schema",
    "write_batches": "writer",
}
__all__ = [
    "EARLIEST",
    "LATEST",
    "STAGING_DIR",
    "ConcurrentCommitError",
    "Manifest",
    "OffsetRange",
    "OffsetSpec",
    "OptionError",
    "PartitionOutOfRangeError",
    "PartitionWrite",
    "ReadOptions",
    "StagedFiles",
    "StickyPartitioner",
    "TaskWriter",
    "WriteOptions",
    "WriteResult",
    "WriteSchemaError",
    "arrow_schema",
    "check_all_given",
    "check_arrow_sink_schema",
    "check_partition_count",
    "check_sink_types",
    "commit_staged",
    "data_loss",
    "discover",
    "existing_partitions",
    "iter_chunks",
    "newest_manifest",
    "open_selected",
    "parse_read_options",
    "parse_write_options",
    "partitions_for_keys",
    "plan_input_partitions",
    "prepare_staging",
    "read_data_loss",
    "read_partition",
    "remove_staging",
    "resolve_ranges",
    "resolve_spec",
    "spark_schema_ddl",
    "write_batches",
]

__getattr__ = lazy_exports(__name__, _EXPORTS)
