"""Markdown tables (for docs/benchmarks.md) from the raw results of benchmarks/fast.py.

.venv/bin/python benchmarks/report.py benchmarks/results/fast.json
"""

from __future__ import annotations

import json
import sys

TARGET_NONE = {16_384: 8.0, 1_048_576: 10.0}  # M records/s, v2 uncompressed without headers


def decode_table(res: dict) -> list[str]:
    n = res["records"]
    lines = [
        "| dataset | kafkalog M rec/s | CPU ms | with CRC | CRC cost | streamed ms | "
        "decompress alone ms | "
        "x decompress | own decompression ms | x own | aiokafka M rec/s | ratio to aiokafka | "
        "kafka-python M rec/s | target |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in res["decode"]:
        rate = n / r["kafkalog_s"] / 1e6
        aio = n / r["aiokafka_s"] / 1e6
        crc = r["kafkalog_crc_s"] / r["kafkalog_s"] - 1
        floor = r["decompress_only_s"]
        floor_ms = f"{floor * 1e3:.0f}" if floor else ""
        vs_floor = f"{r['kafkalog_s'] / floor:.2f}" if floor else ""
        streamed = r.get("kafkalog_stream_s")
        streamed_ms = f"{streamed * 1e3:.0f}" if streamed else ""
        own = r.get("inflate_only_s")
        own_ms = f"{own * 1e3:.0f}" if own else ""
        vs_own = f"{r['kafkalog_s'] / own:.2f}" if own else ""
        label = f"v{r['magic']} {r['batch_bytes'] // 1024} KB {r['codec']}, {r['headers']} headers"
        if r["magic"] == 2 and r["codec"] == "none" and r["headers"] == 0:
            need = TARGET_NONE[r["batch_bytes"]]
            target = f">= {need:g} M/s: {'met' if rate >= need else 'NOT met'}"
        else:
            target = f">= aiokafka: {'met' if rate >= aio else 'NOT met'}"
        if floor:
            ok = r["kafkalog_s"] <= 1.5 * floor
            target += f"; <= 1.5x decompress: {'met' if ok else 'NOT met'}"
        if r["kafkalog_crc_s"] > 1.15 * r["kafkalog_s"]:
            target += "; CRC <= +15%: NOT met"
        lines.append(
            f"| {label} | {rate:.2f} | {r['kafkalog_s'] * 1e3:.0f} | "
            f"{r['kafkalog_crc_s'] * 1e3:.0f} ms | {crc * 100:+.0f}% | {streamed_ms} | "
            f"{floor_ms} | {vs_floor} | {own_ms} | {vs_own} | {aio:.2f} | "
            f"{rate / aio:.2f} | {n / r['kafka_python_s'] / 1e6:.2f} | {target} |"
        )
    return lines


def encode_table(res: dict) -> list[str]:
    n = res["records"]
    lines = [
        "| dataset | kafkalog M rec/s | CPU ms | aiokafka M rec/s | ratio to aiokafka | "
        "kafka-python M rec/s | target (>= aiokafka) |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in res["encode"]:
        rate, aio = n / r["kafkalog_s"] / 1e6, n / r["aiokafka_s"] / 1e6
        lines.append(
            f"| v2 {r['batch_bytes'] // 1024} KB {r['codec']} ({r['records_per_batch']} per batch) "
            f"| {rate:.2f} | {r['kafkalog_s'] * 1e3:.0f} | {aio:.2f} | {rate / aio:.2f} | "
            f"{n / r['kafka_python_s'] / 1e6:.2f} | {'met' if rate >= aio else 'NOT met'} |"
        )
    return lines


def main() -> None:
    res = json.loads(open(sys.argv[1]).read())
    before, after = res.get("load_average_before"), res.get("load_average_after")
    load = f"; load average {before[0]:.1f} before, {after[0]:.1f} after" if before else ""
    print(f"{res['implementation'].capitalize()} kernels, CRC code: {res.get('crc', '?')}{load}.")
    print()
    print("\n".join(decode_table(res)))
    print()
    print("\n".join(encode_table(res)))
    s = res["segment"]
    print()
    print(
        f"Segment walk: {s['file_bytes'] / 2**30:.2f} GiB, {s['rows']:,} rows in {s['chunks']} "
        f"chunks of max_rows={s['max_rows']}: {s['cpu_s']:.2f} s CPU, peak anonymous RSS "
        f"{s['peak_rss_anon_bytes'] / 2**20:.0f} MiB (VmHWM {s['vm_hwm_bytes'] / 2**20:.0f} MiB "
        f"including the mmap's file pages; {s['vm_hwm_before_bytes'] / 2**20:.0f} MiB before)."
    )


if __name__ == "__main__":
    main()
