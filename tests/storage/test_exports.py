"""Exports (sinks): prepare_export holds back compaction of the source until
the export exists (or the token is cancelled); an export writes the snapshot
at its as_of, then every later change, so its files consolidated at any time
>= as_of equal the source at that time; it resumes after a restart (even one
in the middle of a step) from its durable write frontier without writing
anything twice; dropping it releases its hold."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from coordinator_lib.repr import Frontier, LagWriteFrontier, NoPolicy, Update
from coordinator_lib.repr.update import consolidate_rows
from coordinator_lib.storage import (
    AppendCommand,
    ExportDescription,
    IdentifierExists,
    IdentifierMissing,
    StorageController,
    StorageError,
)
from coordinator_lib.storage.controller import EXPORT_PREFIX
from coordinator_lib.storage.export import read_export
from tests.storage.support import Env, canonical, create_table, rows, uid

SRC = uid(10)
SINK = uid(20)


def exported_at(path: Path, t: int) -> list[tuple[Any, int]]:
    """The export's files consolidated at time t."""
    return consolidate_rows((row, diff) for row, time, diff in read_export(str(path)) if time <= t)


def check_export_matches_source(
    controller: StorageController, path: Path, as_of: int, upper: int
) -> None:
    """At every time in [as_of, upper) where anything changes (and just
    before), the export consolidates to the source's snapshot."""
    exported = read_export(str(path))
    assert all(time >= as_of for _, time, _ in exported)
    times = {as_of, upper - 1} | {t for _, t, _ in exported} | {t - 1 for _, t, _ in exported}
    for t in sorted(x for x in times if as_of <= x < upper):
        assert exported_at(path, t) == canonical(controller.snapshot(SRC, t)), t


def write_source(controller: StorageController, start: int, end: int, salt: int) -> None:
    """Inserts, an update in place and a retraction in [start, end)."""
    step = (end - start) // 4
    batch = [
        *rows((salt, "new"), (salt + 1, "x"), time=start),
        Update((salt + 1, "x"), start + step, -1),
        Update((salt + 1, "y"), start + step, 1),
        Update((0, "base"), start + 2 * step, 1),
        Update((0, "base"), start + 3 * step, -1),
    ]
    controller.append([AppendCommand(SRC, batch, end)])


def start_export(controller: StorageController, path: Path) -> int:
    """Export SRC to `path`; returns the as_of."""
    token = controller.prepare_export(SINK, SRC)
    controller.create_exports([(token, ExportDescription(SRC, str(path)))])
    return controller.export(SINK).as_of


# ------------------------------------------------------------------ tokens


def test_a_token_holds_back_compaction_until_cancelled(controller: StorageController) -> None:
    create_table(controller, SRC)
    controller.set_read_policy([(SRC, LagWriteFrontier(0))])
    write_source(controller, 0, 1000, 1)
    token = controller.prepare_export(SINK, SRC)
    assert token.id == SINK and token.from_id == SRC
    assert token.hold.time == 1000 == controller.collection_frontiers(SRC)[0].time
    write_source(controller, 1000, 9000, 10)
    controller.maintain()
    assert controller.collection_frontiers(SRC) == (Frontier.at(1000), Frontier.at(9000))
    assert controller.snapshot(SRC, 1000) is not None
    controller.cancel_prepare_export(token)
    assert controller.collection_frontiers(SRC)[0] == Frontier.at(9000)
    with pytest.raises(StorageError, match="u20"):
        controller.create_exports([(token, ExportDescription(SRC, "/nonexistent"))])
    with pytest.raises(IdentifierMissing):
        controller.export(SINK)


def test_prepare_export_refuses_existing_ids(controller: StorageController, tmp_path: Path) -> None:
    create_table(controller, SRC)
    controller.append([AppendCommand(SRC, [], 10)])
    with pytest.raises(IdentifierExists, match="u10"):
        controller.prepare_export(SRC, SRC)
    start_export(controller, tmp_path / "sink")
    with pytest.raises(IdentifierExists, match="u20"):
        controller.prepare_export(SINK, SRC)
    assert controller.collection(SRC).read_holds.total() == 1  # the export's own


def test_create_exports_checks_the_token(controller: StorageController, tmp_path: Path) -> None:
    create_table(controller, SRC)
    create_table(controller, uid(11))
    token = controller.prepare_export(SINK, SRC)
    with pytest.raises(StorageError, match="u20"):
        controller.create_exports([(token, ExportDescription(uid(11), str(tmp_path)))])
    assert list(controller.exports()) == []
    controller.cancel_prepare_export(token)
    assert not controller.collection(SRC).read_holds


# ---------------------------------------------------------------- contents


def test_export_writes_the_snapshot_then_every_change(
    controller: StorageController, tmp_path: Path
) -> None:
    create_table(controller, SRC)  # default policy: since lags the upper by 1000
    write_source(controller, 0, 1500, 1)
    write_source(controller, 1500, 3000, 5)
    path = tmp_path / "sink"
    as_of = start_export(controller, path)
    assert as_of == 2000 == controller.collection_frontiers(SRC)[0].time
    controller.set_read_policy([(SRC, NoPolicy(Frontier.at(0)))])  # keep history to compare
    controller.process()
    export = controller.export(SINK)
    assert export.write_frontier == Frontier.at(3000)
    assert "snapshot.parquet" in export.files
    snapshot_rows = [r for r in read_export(str(path)) if r[1] == as_of]
    assert consolidate_rows((r, d) for r, _, d in snapshot_rows) == canonical(
        controller.snapshot(SRC, as_of)
    )
    check_export_matches_source(controller, path, as_of, 3000)
    write_source(controller, 3000, 4000, 20)
    write_source(controller, 4000, 6000, 30)
    controller.process()
    assert controller.export(SINK).write_frontier == Frontier.at(6000)
    check_export_matches_source(controller, path, as_of, 6000)
    files = sorted(p.name for p in path.glob("*.parquet"))
    controller.process()  # nothing new: nothing written
    assert sorted(p.name for p in path.glob("*.parquet")) == files


def test_export_of_an_empty_collection_waits_for_its_upper(
    controller: StorageController, tmp_path: Path
) -> None:
    create_table(controller, SRC)
    path = tmp_path / "sink"
    as_of = start_export(controller, path)
    assert as_of == 0
    controller.process()
    assert controller.export(SINK).write_frontier == Frontier.at(0)
    write_source(controller, 0, 400, 1)
    controller.process()
    check_export_matches_source(controller, path, 0, 400)


def test_the_export_holds_the_source_at_its_write_frontier(
    controller: StorageController, tmp_path: Path
) -> None:
    create_table(controller, SRC)
    controller.set_read_policy([(SRC, LagWriteFrontier(0))])
    write_source(controller, 0, 1000, 1)
    start_export(controller, tmp_path / "sink")
    write_source(controller, 1000, 2000, 2)
    assert controller.collection_frontiers(SRC)[0] == Frontier.at(1000)
    controller.process()
    assert controller.collection_frontiers(SRC)[0] == Frontier.at(1999)
    write_source(controller, 2000, 3000, 3)
    assert controller.collection_frontiers(SRC)[0] == Frontier.at(1999)
    controller.drop_sinks([SINK])
    assert controller.collection_frontiers(SRC)[0] == Frontier.at(3000)
    with pytest.raises(IdentifierMissing, match="u20"):
        controller.export(SINK)
    assert controller.persist.consensus.list_keys(EXPORT_PREFIX) == []
    with pytest.raises(IdentifierMissing, match="u20"):
        controller.drop_sinks([SINK])
    controller.drop_sinks_unvalidated([SINK, uid(21)])  # unknown ids are fine here


# ----------------------------------------------------------------- restarts


def exported_changes(path: Path, as_of: int) -> Counter[tuple[Any, int, int]]:
    """Every exported update after the snapshot, counted (duplicates show)."""
    return Counter((tuple(r), t, d) for r, t, d in read_export(str(path)) if t > as_of)


def source_changes(controller: StorageController, as_of: int) -> Counter[tuple[Any, int, int]]:
    upper = controller.collection_frontiers(SRC)[1]
    return Counter(
        (tuple(u.row), u.time, u.diff)
        for u in controller.shard(SRC).updates_between(as_of + 1, upper)
    )


def resume(env: Env) -> StorageController:
    """A new controller that re-creates SRC and the export (what the adapter
    does on boot)."""
    controller = env.open()
    create_table(controller, SRC)
    token = controller.prepare_export(SINK, SRC)
    description = ExportDescription(SRC, str(env.blob_root.parent / "sink"))
    controller.create_exports([(token, description)])
    return controller


def test_a_reopened_controller_resumes_the_export(env: Env) -> None:
    path = env.blob_root.parent / "sink"
    first = env.open()
    create_table(first, SRC)
    first.set_read_policy([(SRC, NoPolicy(Frontier.at(0)))])
    write_source(first, 0, 1000, 1)
    as_of = start_export(first, path)
    write_source(first, 1000, 2000, 2)
    first.process()
    first.close()
    second = resume(env)
    export = second.export(SINK)
    assert (export.as_of, export.write_frontier) == (as_of, Frontier.at(2000))
    write_source(second, 2000, 3000, 3)
    second.process()
    assert second.export(SINK).write_frontier == Frontier.at(3000)
    assert exported_changes(path, as_of) == source_changes(second, as_of)
    check_export_matches_source(second, path, as_of, 3000)


def test_a_step_interrupted_before_it_was_recorded_is_not_duplicated(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A crash after a step wrote its file but before the write frontier was
    recorded: the resumed export must not export those changes twice."""
    path = env.blob_root.parent / "sink"
    first = env.open()
    create_table(first, SRC)
    first.set_read_policy([(SRC, NoPolicy(Frontier.at(0)))])
    write_source(first, 0, 1000, 1)
    as_of = start_export(first, path)
    first.process()
    write_source(first, 1000, 2000, 2)
    record = first._update_record

    def crash(key: str, change: dict[str, Any]) -> None:
        if key.startswith(EXPORT_PREFIX):
            raise RuntimeError("crash before the step is recorded")
        record(key, change)

    monkeypatch.setattr(first, "_update_record", crash)
    with pytest.raises(RuntimeError, match="crash"):
        first.process()
    first.close()
    second = resume(env)
    assert second.export(SINK).write_frontier == Frontier.at(1000)
    write_source(second, 2000, 3000, 3)  # the upper moved on meanwhile
    second.process()
    assert exported_changes(path, as_of) == source_changes(second, as_of)
    check_export_matches_source(second, path, as_of, 3000)


def test_dropping_the_source_of_a_live_export(
    controller: StorageController, tmp_path: Path
) -> None:
    create_table(controller, SRC)
    write_source(controller, 0, 1000, 1)
    start_export(controller, tmp_path / "sink")
    controller.process()
    controller.drop_sources([SRC])
    controller.process()  # the orphaned export does not break processing
    controller.drop_sinks([SINK])
    assert list(controller.exports()) == []
    assert controller.persist.consensus.list_keys(EXPORT_PREFIX) == []
