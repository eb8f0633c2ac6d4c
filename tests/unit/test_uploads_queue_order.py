"""The verify pass's order (pure): the largest member on disk first, else the next to arrive."""

from __future__ import annotations

import zipfile

from jobs.uploads.arrival import Gate
from jobs.uploads.validation import Plan
from jobs.uploads.verify import VerifyQueue


def _plan(sizes: list[int]) -> Plan:
    members = []
    for index, size in enumerate(sizes):
        info = zipfile.ZipInfo(f"m{index}.pdb/000000000000000000000000000000000/m{index}.sym")
        info.file_size = size
        members.append(info)
    return Plan(members)


def test_while_downloading_the_largest_ready_member_goes_first_else_the_next_to_arrive():
    plan = _plan([10, 50, 20, 40, 30])  # in archive order, each ending 100 bytes further
    gate = Gate({info.filename: 100 * (i + 1) for i, info in enumerate(plan.members)})
    queue = VerifyQueue(plan, gate)
    assert queue.take() == 0  # nothing on disk: the next to arrive (not the far, large m1)
    gate.written(300)  # m1 and m2 are on disk
    assert [queue.take(), queue.take()] == [1, 2]
    assert queue.take() == 3  # none ready: the next to arrive
    gate.close()  # the download is over: the rest, largest first
    assert [queue.take(), queue.take()] == [4, None]


def test_without_a_download_the_largest_first_and_close_returns_what_was_not_taken():
    plan = _plan([10, 50, 20, 40])
    queue = VerifyQueue(plan, None)
    assert [queue.take(), queue.take()] == [1, 3]
    assert sorted(queue.close()) == [0, 2]
    assert queue.take() is None
