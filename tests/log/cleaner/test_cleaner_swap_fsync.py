"""The directory fsyncs of a cleaner's swap (replace_segments) run between its exclusive steps,
never inside one, and each one finds the directory in the state the loader needs made durable
before the next step's renames: ``.swap`` files beside the old segments, then the old segments
gone with the ``.swap`` files alone, then the final names. A failed first fsync removes the
``.swap`` files and leaves the log as it was."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kafkalog.log.cleaner import cleaner as cleaner_module
from kafkalog.log.cleaner.cleaner import clean
from kafkalog.log.clock import MockClock

from .test_cleaner import KEYS, T0, append, open_log, value


def compacted_log(directory: Path):
    log = open_log(directory, MockClock(now_ms=T0))
    for i in range(24):
        append(log, [(KEYS[i % 4], value(i))])
    log.roll()
    assert len(log.segments) >= 3
    return log


def names(directory: Path) -> set[str]:
    return {p.name for p in directory.iterdir() if p.name.endswith((".log", ".swap", ".cleaned"))}


def test_swap_fsyncs_run_between_exclusive_steps_in_the_loaders_order(
    tmp_path: Path, monkeypatch
) -> None:
    log = compacted_log(tmp_path / "t-0")
    events: list[tuple[str, set[str]]] = []
    inside = {"step": False}

    def exclusive(fn, *, finishing=False):
        inside["step"] = True
        try:
            return fn()
        finally:
            inside["step"] = False
            events.append(("step" + ("+finishing" if finishing else ""), set()))

    real = cleaner_module._fsync_dir

    def fsync_dir(directory: Path) -> None:
        assert not inside["step"], "a directory fsync inside an exclusive step"
        events.append(("fsync", names(directory)))
        real(directory)

    monkeypatch.setattr(cleaner_module, "_fsync_dir", fsync_dir)
    old_logs = {p.name for p in log.dir.glob("*.log")} - {log.active_segment.path.name}
    result = clean(log, now_ms=T0, force=True, exclusive=exclusive)
    assert result.cleaned and result.segments_after
    fsyncs = [i for i, (what, _) in enumerate(events) if what == "fsync"]
    assert len(fsyncs) == 3 * len(result.segments_after)
    for n in range(len(result.segments_after)):
        first, second, third = (events[i] for i in fsyncs[3 * n : 3 * n + 3])
        # 1: .swap beside every old segment, no .cleaned of this group left.
        assert any(name.endswith(".swap") for name in first[1])
        # 2: the .swap files alone: the loader finishes the swap from here.
        assert any(name.endswith(".swap") for name in second[1])
        # 3: final names.
        assert not any(name.endswith(".swap") for name in third[1])
        # Steps 2 and 3 finish a swap: a stopping server still runs them.
        kinds = [what for what, _ in events[fsyncs[3 * n] : fsyncs[3 * n + 2]]]
        assert kinds.count("step+finishing") == 2
    assert not any(name.endswith((".swap", ".cleaned")) for name in names(log.dir))
    assert old_logs <= events[fsyncs[0]][1]  # the first fsync: every old segment still there
    log.close()


def test_a_failed_first_fsync_removes_the_swap_files(tmp_path: Path, monkeypatch) -> None:
    log = compacted_log(tmp_path / "t-0")
    before = sorted(p.name for p in log.dir.iterdir())
    segments = list(log.segments)

    def failing(directory: Path) -> None:
        raise OSError(5, "Input/output error (injected)")

    monkeypatch.setattr(cleaner_module, "_fsync_dir", failing)
    with pytest.raises(OSError):
        clean(log, now_ms=T0, force=True)
    assert log.segments == segments
    after = sorted(p.name for p in log.dir.iterdir())
    assert after == before, set(after) ^ set(before)
    log.close()


def test_the_cleaner_checkpoint_is_written_after_the_last_swap_fsync(
    tmp_path: Path, monkeypatch
) -> None:
    log = compacted_log(tmp_path / "t-0")
    order: list[str] = []
    real_fsync_dir = cleaner_module._fsync_dir
    real_write = cleaner_module.write_cleaner_checkpoint

    def fsync_dir(directory: Path) -> None:
        order.append("fsync")
        real_fsync_dir(directory)

    def write(target, offset: int) -> bool:
        order.append("checkpoint")
        return real_write(target, offset)

    monkeypatch.setattr(cleaner_module, "_fsync_dir", fsync_dir)
    monkeypatch.setattr(cleaner_module, "write_cleaner_checkpoint", write)
    assert clean(log, now_ms=T0, force=True).cleaned
    assert order[-1] == "checkpoint" and order[-2] == "fsync"
    assert os.path.exists(log.dir.parent / "cleaner-offset-checkpoint")
    log.close()
