"""``kafkalog stats --plot``: records and bytes over time, one line per partition.

Each line is cumulative, by batch max timestamp, so a partition's growth, its bursts and its
quiet hours read at a glance; the log's order is kept (timestamps may go back a little when
producers' clocks differ, which draws as a short step back). Drawn off-screen (Agg).
"""

from __future__ import annotations

from itertools import accumulate

_MAX_LINES = 20  # beyond this the legend is useless: the largest partitions are drawn


def plot(results: list, path: str) -> None:
    """Write a PNG of cumulative records (top) and bytes (bottom) over time per partition."""
    import matplotlib

    matplotlib.use("Agg")
    from datetime import datetime, timezone

    import matplotlib.pyplot as plt

    drawn = [s for s in results if s.timeline is not None and len(s.timeline[0])]
    drawn.sort(key=lambda s: s.size, reverse=True)
    figure, (top, bottom) = plt.subplots(2, 1, figsize=(11, 7), sharex=True)
    for stats in drawn[:_MAX_LINES]:
        times, records, sizes = stats.timeline
        when = [datetime.fromtimestamp(t / 1000, tz=timezone.utc) for t in times]
        top.step(when, list(accumulate(records)), where="post", label=stats.path.name)
        bottom.step(when, [b / 2**20 for b in accumulate(sizes)], where="post")
    top.set_ylabel("records (cumulative)")
    bottom.set_ylabel("MiB (cumulative)")
    bottom.set_xlabel("batch max timestamp (UTC)")
    title = f"{len(drawn)} partitions" + (
        f" (the {_MAX_LINES} largest drawn)" if len(drawn) > _MAX_LINES else ""
    )
    top.set_title(f"kafkalog stats: {title}")
    if drawn:
        top.legend(fontsize="small", loc="upper left")
    else:
        top.text(0.5, 0.5, "no timestamped records", ha="center", transform=top.transAxes)
    figure.autofmt_xdate()
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
