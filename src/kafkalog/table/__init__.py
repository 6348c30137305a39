"""Kafka data directories as Arrow tables, without Spark: the schema of Spark's Kafka source, its
read and write options, planning a scan from the indexes into offset ranges and byte ranges,
reading those ranges into Arrow batches with the columnar decoder, and the producer's key
partitioning for writes. The edges build on it: :mod:`kafkalog.arrow` (pyarrow readers),
:mod:`kafkalog.spark` (the PySpark data source) and the command line."""
