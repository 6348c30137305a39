"""``recover --apply`` reports what its recovery did from the recovery's own walk of the
segments it re-checks (it does not walk them a second time to plan): for any bit flip, cut or
zero-filled tail, its cuts (where, how many bytes and records, why), dropped segments and log
end offset are the dry run's, and the files end where the cuts say, counted from the bytes."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from .operate_support import build, damaged, file_damage, json_lines, kp_batches, run_main


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build(tmp_path_factory.mktemp("report") / "data", {"t": (1, {})}, batches=12)


def _facts(out: str) -> tuple[dict, set]:
    lines = json_lines(out)
    (partition,) = [o for o in lines if o["type"] == "partition"]
    cuts = {
        (o["action"], Path(o["path"]).name, o["position"], o["bytes"], o["offset"], o["records"],
         o.get("recordsExact"), o["reason"])
        for o in lines
        if o["type"] == "action" and o["action"] in ("truncate", "drop-segment")
        and Path(o["path"]).suffix == ".log"
    }  # fmt: skip
    rechecked = {Path(o["path"]).name for o in lines
                 if o["type"] == "action" and o["action"] == "rebuild-indexes"}  # fmt: skip
    return {k: partition[k] for k in ("logEndOffset", "recoveredFrom", "bytesCut")}, cuts | {
        ("rebuild-indexes", name) for name in rechecked
    }


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(segment=st.integers(0, 3), how=file_damage(max_zeros=4096), full=st.booleans())
def test_apply_reports_what_the_dry_run_predicts(
    data_dir: Path, tmp_path: Path, segment, how, full: bool
):
    """With --full on the partition directory; without, on the whole data directory after an
    unclean shutdown (a broker's startup: its recovery points, through LogManager)."""
    root = Path(tempfile.mkdtemp(dir=tmp_path)) / "data"
    shutil.copytree(data_dir, root)
    logs = sorted((root / "t-0").glob("*.log"))
    log = logs[segment % len(logs)]
    log.write_bytes(damaged(log.read_bytes(), how))
    if full:
        args, target = ["--full"], root / "t-0"
    else:
        (root / ".kafka_cleanshutdown").unlink()
        args, target = [], root

    dry, _ = run_main("recover", *args, "--json", "--quiet", target, status=ANY)
    status = 1 if json_lines(dry)[-1]["bytesCut"] else 0
    applied, _ = run_main("recover", *args, "--apply", "--json", target, status=status)
    assert _facts(applied) == _facts(dry)
    for o in json_lines(applied):
        if o["type"] == "action" and o["action"] == "truncate":
            assert Path(o["path"]).stat().st_size == o["position"]
    if not full:
        return  # damage below a recovery point stays, as Kafka trusts it: no reader gets past it
    batches = [b for p in sorted((root / "t-0").glob("*.log")) for b in kp_batches(p)]
    (partition,) = [o for o in json_lines(applied) if o["type"] == "partition"]
    if batches:
        assert (
            partition["logEndOffset"] == batches[-1].base_offset + batches[-1].last_offset_delta + 1
        )


class _Any:
    def __eq__(self, other: object) -> bool:
        return True


ANY = _Any()  # a dry run's status: 1 when it would cut records
