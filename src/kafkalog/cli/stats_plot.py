"""``kafkalog stats --plot``: records and bytes over time, one line per partition.

Each line is cumulative, by batch max timestamp, so a partition's growth, its bursts and its
quiet hours read at a glance; the log's order is kept (timestamps may go back a little when
producers' clocks differ, which draws as a short step back). Drawn off-screen (Agg).
"""

from __future__ import annotations

import os
from itertools import accumulate
from pathlib import Path

from .failures import UsageError

_MAX_LINES = 20  # beyond this the legend is useless: the largest partitions are drawn


def check_plot_path(path: str) -> None:
    """Fail before the long read, not after it: matplotlib must be there, know the file's
    format by its extension (``pgf`` needs LaTeX: refused too), and its folder must exist."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
    except ImportError:
        raise UsageError("--plot needs matplotlib: pip install 'kafkalog[plot]'") from None
    formats = sorted(set(FigureCanvasAgg.get_supported_filetypes()) - {"pgf"})
    extension = Path(path).suffix.lower().lstrip(".")
    if extension not in formats:
        said = f"extension .{extension}" if extension else "no extension"
        raise UsageError(
            f"--plot {path}: {said}; name a file ending in one of: "
            + ", ".join(f".{f}" for f in formats)
        )
    folder = Path(path).parent
    if not folder.is_dir():
        raise FileNotFoundError(2, "No such directory for --plot", str(folder))
    if not os.access(folder, os.W_OK):
        raise PermissionError(13, "Permission denied (cannot write the --plot file there)",
                              str(folder))  # fmt: skip


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
