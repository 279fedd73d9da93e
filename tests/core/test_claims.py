"""``observe.claims``: every batch of a run's hand-out taken by exactly one process.

The processes are real forks reading the one inherited pipe, as ``verify --processes``
runs them; a process killed while it takes leaves the rest to the others.
"""

from __future__ import annotations

import os
import signal
import struct

import pytest

from artifactcheck.observe.claims import MAX_RECORDS, Claims, batches


def _fork_taking(claims: Claims[int], *, stop_after: int | None = None) -> tuple[int, int]:
    """A child that takes batches (all, or ``stop_after`` then SIGKILL to itself) and
    writes each taken item to a pipe; its PID and the pipe's read end."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            os.close(read_end)
            taken = 0
            while (batch := claims.take()) is not None:
                os.write(write_end, b"".join(struct.pack("=I", x) for x in batch))
                taken += 1
                if stop_after is not None and taken == stop_after:
                    os.kill(os.getpid(), signal.SIGKILL)
        finally:
            os._exit(0)
    os.close(write_end)
    return pid, read_end


def _items(fd: int) -> list[int]:
    data = b""
    while chunk := os.read(fd, 65536):
        data += chunk
    os.close(fd)
    return [x for (x,) in struct.iter_unpack("=I", data)]


def test_each_batch_is_taken_by_exactly_one_of_four_processes() -> None:
    claims = Claims([[i] for i in range(MAX_RECORDS)])
    children = [_fork_taking(claims) for _ in range(3)]
    mine = []
    while (batch := claims.take()) is not None:
        mine.extend(batch)
    theirs = []
    for pid, fd in children:
        theirs.append(_items(fd))
        assert os.waitpid(pid, 0)[1] == 0
    claims.close()
    every = mine + [x for got in theirs for x in got]
    assert sorted(every) == list(range(MAX_RECORDS))  # each once, none lost
    assert len(set(every)) == len(every)


def test_a_process_killed_while_taking_leaves_the_rest_to_the_others() -> None:
    claims = Claims([[i, i + 1000] for i in range(40)])
    pid, fd = _fork_taking(claims, stop_after=3)
    _, status = os.waitpid(pid, 0)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
    lost = _items(fd)
    rest = []
    while (batch := claims.take()) is not None:
        rest.extend(batch)
    claims.close()
    assert len(lost) == 6 and sorted(lost + rest) == sorted([*range(40), *range(1000, 1040)])


def test_an_empty_hand_out_ends_at_once_and_a_closed_one_gives_nothing() -> None:
    empty: Claims[int] = Claims([])
    assert empty.take() is None
    empty.close()
    claims = Claims([[1], [2]])
    assert claims.take() == [1]
    claims.close()
    assert claims.take() is None
    claims.close()  # twice: nothing to close


def test_more_batches_than_the_pipe_holds_are_refused() -> None:
    with pytest.raises(ValueError, match="fit the pipe"):
        Claims([[i] for i in range(MAX_RECORDS + 1)])


@pytest.mark.parametrize("groups", [0, 1, 7, MAX_RECORDS, MAX_RECORDS + 1, 5 * MAX_RECORDS + 3])
def test_groups_are_joined_into_batches_that_fit_in_order(groups: int) -> None:
    made = batches([[g, -g] for g in range(groups)])
    assert len(made) <= MAX_RECORDS
    assert [x for b in made for x in b] == [x for g in range(groups) for x in (g, -g)]
    if groups <= MAX_RECORDS:  # one host's group each: as fine a hand-out as can be
        assert all(len(b) == 2 for b in made)
