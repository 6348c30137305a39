"""The Spark source and batch sink on a data directory in S3 (moto's server on loopback): a
local SparkSession reads an ``s3://`` data directory with the same rows as the local copy, and
a batch write to ``s3://`` reads back equal, Spark's tasks staging objects and the driver
committing the manifest; an available-now stream over the written directory reads the first
write, then only the append's records.

The session runs in a child process whose environment (and ``spark.executorEnv``) points the
AWS SDK at the server before the JVM and its Python workers start: a session this test process
already runs would not give its workers the endpoint."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import textwrap

import pytest
from s3_endpoint import upload

import kafkalog.arrow
from arrow.arrow_data import write_topics  # the Arrow API tests' data

moto_server = pytest.importorskip("moto.server")
boto3 = pytest.importorskip("boto3")
pytest.importorskip("pyspark")

pytestmark = pytest.mark.slow  # a Spark session of its own: about 40 s

BUCKET = "kafkalog-spark"

JOB = textwrap.dedent(
    """
    import json, os, sys
    from pyspark.sql import SparkSession
    import kafkalog.spark

    local, remote, written, checkpoint = sys.argv[1:5]
    builder = (SparkSession.builder.master("local[2]").appName("kafkalog-s3-test")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.session.timeZone", "UTC"))
    for name in ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
                 "AWS_DEFAULT_REGION", "AWS_EC2_METADATA_DISABLED"):
        builder = builder.config(f"spark.executorEnv.{name}", os.environ[name])
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    kafkalog.spark.register(spark)
    cols = ["topic", "partition", "offset", "timestamp", "key", "value", "timestampType"]

    def rows(path, **options):
        df = spark.read.format("kafkalog").options(**options).load(path)
        return sorted(tuple(r) for r in df.select(*cols).collect())

    out = {}
    out["local"] = rows(local)
    out["remote"] = rows(remote)
    clicks = {"assign": '{"clicks":[0]}', "startingOffsets": '{"clicks":{"0":5}}'}
    out["remote_range"] = rows(remote, **clicks)
    out["local_range"] = rows(local, **clicks)
    df = spark.read.format("kafkalog").load(local).select("key", "value")
    streamed = []

    def stream():  # available-now over the written directory, its offsets kept in checkpoint
        (spark.readStream.format("kafkalog").option("startingOffsets", "earliest").load(written)
            .writeStream.trigger(availableNow=True).option("checkpointLocation", checkpoint)
            .foreachBatch(lambda batch, _: streamed.extend(batch.select("key", "value").collect()))
            .start().awaitTermination())
        return len(streamed)

    out["streamed"] = []
    for _ in range(2):  # a write, then an append: each followed by the stream's next run
        (df.repartition(3).write.format("kafkalog").option("topic", "copy")
           .option("numPartitions", 2).mode("append").save(written))
        out["streamed"].append([stream()])
    out["streamed_rows"] = sorted(([r.key, r.value] for r in streamed), key=repr)
    back = spark.read.format("kafkalog").load(written).select("key", "value").collect()
    out["written"] = sorted(([r.key, r.value] for r in back), key=repr)
    out["source"] = sorted(([r.key, r.value] for r in df.collect() * 2), key=repr)
    spark.stop()
    print(json.dumps({k: [[str(c) for c in r] for r in v] for k, v in out.items()}))
    """
)


@pytest.fixture(scope="module")
def s3_env(tmp_path_factory):
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    env = {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "s3cr3t",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ENDPOINT_URL": f"http://{host}:{port}",
        "AWS_EC2_METADATA_DISABLED": "true",
    }
    with pytest.MonkeyPatch.context() as mp:
        for name in ("AWS_PROFILE", "AWS_ENDPOINT_URL_S3", "AWS_REGION", "AWS_SESSION_TOKEN"):
            mp.delenv(name, raising=False)
        for name, value in env.items():
            mp.setenv(name, value)
        client = boto3.client("s3")
        client.create_bucket(Bucket=BUCKET)
        yield client, tmp_path_factory.mktemp("spark-s3")
    server.stop()


def test_spark_reads_and_writes_s3(s3_env):
    client, root = s3_env
    local = root / "written"
    write_topics(local, {"clicks": 3, "views": 1}, 40)
    upload(client, BUCKET, local, "uploaded")
    remote, written = f"s3://{BUCKET}/uploaded", f"s3://{BUCKET}/spark-written"
    env = dict(os.environ)
    env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    env["PYSPARK_PYTHON"] = sys.executable
    done = subprocess.run(
        [sys.executable, "-c", JOB, str(local), remote, written, str(root / "checkpoint")],
        env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-4000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["remote"] == out["local"] and len(out["local"]) == 4 * 40
    assert out["remote_range"] == out["local_range"] and len(out["local_range"]) == 35
    assert out["written"] == out["source"]
    # the stream noticed the append's segments and manifest, and read each record once
    assert out["streamed"] == [[str(len(out["local"]))], [str(2 * len(out["local"]))]]
    assert out["streamed_rows"] == out["source"]
    # the commit: two manifests, no staging left, and the Arrow reader agrees
    keys = [o["Key"] for o in client.list_objects_v2(Bucket=BUCKET, Prefix="spark-written/")
            ["Contents"]]  # fmt: skip
    assert not [k for k in keys if ".kafkalog-staging" in k and not k.endswith("/")]
    assert sum("kafkalog-manifest-" in k for k in keys) == 2
    table = kafkalog.arrow.open_data_dir(written).read_all()
    assert table.num_rows == len(out["source"])
