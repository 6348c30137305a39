"""LeaderEpochFileCache.end_offset_for against the cases of Kafka's LeaderEpochFileCacheTest."""

from __future__ import annotations

import pytest

from kafkalog.log.partition.leader_epoch import LeaderEpochFileCache

UNDEFINED = (-1, -1)


def cache_of(tmp_path, *assigned: tuple[int, int]) -> LeaderEpochFileCache:
    cache = LeaderEpochFileCache(tmp_path, writable=True)
    for epoch, start in assigned:
        cache.assign(epoch, start)
    return cache


@pytest.mark.parametrize(
    ("requested", "log_end_offset", "expected"),
    [
        (4, 0, (4, 11)),  # below the first: the requested epoch, ending where the first starts
        (5, 0, (5, 12)),
        (6, 0, (6, 13)),
        (7, 20, (7, 20)),  # the latest: still being written, ends at the log end offset
        (8, 20, UNDEFINED),  # above the latest
        (-1, 20, UNDEFINED),  # the undefined epoch
    ],
)
def test_end_offset_for_consecutive_epochs(tmp_path, requested, log_end_offset, expected):
    cache = cache_of(tmp_path, (5, 11), (6, 12), (7, 13))
    assert cache.end_offset_for(requested, log_end_offset) == expected


@pytest.mark.parametrize(
    ("requested", "expected"), [(1, (0, 13)), (2, (2, 17)), (3, (2, 17)), (4, (4, 30))]
)
def test_end_offset_for_an_epoch_between_known_ones_is_the_floors(tmp_path, requested, expected):
    cache = cache_of(tmp_path, (0, 10), (2, 13), (4, 17))
    assert cache.end_offset_for(requested, 30) == expected


def test_end_offset_for_on_an_empty_cache_is_undefined(tmp_path):
    cache = cache_of(tmp_path)
    assert cache.end_offset_for(0, 0) == UNDEFINED
    assert cache.end_offset_for(-1, 73) == UNDEFINED


def test_end_offset_for_epochs_starting_at_the_same_offset(tmp_path):
    cache = cache_of(tmp_path, (0, 0), (1, 0))  # the second replaces the first
    assert cache.end_offset_for(1, 0) == (1, 0)
    assert cache.end_offset_for(0, 0) == (0, 0)
