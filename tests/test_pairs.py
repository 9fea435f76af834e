"""The training loop's pair budget: when a render may skip reading its pair count back."""
import pytest
import torch

from gsexp.train.pairs import MARGIN, MAX_AHEAD, PairBudget


def test_disabled_or_unknown_or_after_densification_the_count_is_read_back():
    assert PairBudget(False).capacity(exact=False) is None
    budget = PairBudget(True)
    assert budget.capacity(exact=False) is None  # no count known yet
    budget.record(1000, None)
    budget.record(4000, None)
    assert budget.capacity(exact=False) == int(4000 * MARGIN) + 1024  # the largest recent count
    assert budget.capacity(exact=True) is None  # N changed: read it back


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_counts_come_back_without_a_sync_and_overflows_are_counted():
    budget = PairBudget(True)
    budget.record(100, None)
    capacity = budget.capacity(exact=False)
    budget.record(torch.tensor([capacity + 5], device="cuda"), capacity)
    torch.cuda.synchronize()
    with pytest.warns(UserWarning, match="dropped 5"):
        budget.capacity(exact=False)
    assert budget.overflows == 1 and max(budget.counts) == capacity + 5
    assert budget.padding() == capacity / (capacity + 5)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_settled_overflows_waits_for_counts_still_on_their_way():
    budget = PairBudget(True)
    budget.record(100, None)
    capacity = budget.capacity(exact=False)
    torch.cuda._sleep(10_000_000)  # the count's copy is still queued behind this when asked
    budget.record(torch.tensor([capacity + 5], device="cuda"), capacity)
    with pytest.warns(UserWarning, match="dropped 5"):
        assert budget.settled_overflows() == 1


class Stream:
    """A stand-in for the GPU's stream on the CPU: its renders finish in order."""
    def __init__(self):
        self.issued, self.finished = 0, -1


class Event:
    def __init__(self, stream, index):
        self.stream, self.index = stream, index

    def query(self):
        return self.index <= self.stream.finished

    def synchronize(self):  # the CPU waits: the GPU has finished up to this render
        self.stream.finished = max(self.stream.finished, self.index)


def queue(budget, stream, counts, capacity):
    """Renders issued (not finished) with `capacity`, as record() leaves them."""
    for count in counts:
        budget.pending.append((torch.tensor([count]), Event(stream, stream.issued), capacity, budget.margin))
        stream.issued += 1


def test_a_run_of_overflows_from_one_stale_capacity_grows_the_margin_once():
    """A sweep with 3 jobs on one GPU once overflowed up to seven renders in a row on one stale
    capacity: each overflow multiplied the margin by 1.5 (a job's 14 took it from 1.25 to 365), the
    buffers and the render time with it."""
    budget, stream = PairBudget(True), Stream()
    budget.record(1000, None)
    capacity = budget.capacity(exact=False)
    queue(budget, stream, [capacity + 10] * 3, capacity)
    stream.finished = 2
    with pytest.warns(UserWarning, match="dropped 10"):
        assert budget.capacity(exact=False) == int((capacity + 10) * MARGIN * 1.5) + 1024
    assert budget.overflows == 3 and budget.margin == MARGIN * 1.5
    queue(budget, stream, [10 * capacity], budget.capacity(exact=False))  # a capacity set after the growth
    stream.finished = stream.issued - 1
    with pytest.warns(UserWarning):
        budget.capacity(exact=False)
    assert budget.margin == MARGIN * 1.5 ** 2


def test_the_cpu_runs_at_most_max_ahead_renders_ahead_of_the_counts():
    budget, stream = PairBudget(True), Stream()
    budget.record(1000, None)
    queue(budget, stream, [900] * (MAX_AHEAD - 1), budget.capacity(exact=False))
    budget.capacity(exact=False)
    assert stream.finished == -1 and len(budget.pending) == MAX_AHEAD - 1  # within the bound: no wait
    queue(budget, stream, [900] * 3, budget.capacity(exact=False))
    budget.capacity(exact=False)
    # it waited for the 3 oldest renders only: MAX_AHEAD - 1 stay on their way (the next makes MAX_AHEAD)
    assert stream.finished == 2 and len(budget.counts) == 1 + 3 and len(budget.pending) == MAX_AHEAD - 1
    assert budget.padding() == (int(1000 * MARGIN) + 1024) / 900  # the exact first count is left out


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_on_a_busy_gpu_the_counts_stay_at_most_max_ahead_renders_old():
    budget = PairBudget(True)
    budget.record(100, None)
    for _ in range(3 * MAX_AHEAD):
        torch.cuda._sleep(2_000_000)  # a GPU slower than the CPU (or shared with other jobs)
        capacity = budget.capacity(exact=False)
        assert len(budget.pending) < MAX_AHEAD
        budget.record(torch.tensor([50], device="cuda"), capacity)
    assert len(budget.counts) >= 1 + 2 * MAX_AHEAD and budget.settled_overflows() == 0


def test_the_host_time_of_a_step_leaves_out_its_waits_for_the_gpu():
    """PhaseTimer's host_ms: the host's time to issue a timed step, less what it spent waiting
    (the pair budget's waits), so that a step bound by the host's launches shows as such."""
    import time

    from gsexp.train.phases import PhaseTimer

    timer = PhaseTimer(torch.device("cpu"))
    timer.begin(False)
    timer.end()
    assert timer.host == []  # only timed steps count
    timer.begin(True)
    time.sleep(0.06)
    timer.end(waited_s=0.05)
    assert 10 <= timer.host[0] < 50 and timer.host_ms()["median"] == timer.host[0]


def test_timed_steps_miss_the_strategies_refine_steps():
    """The phase and host times sample the step before each log step: with lego_fast's log_every
    = 100 none of them is a refine (every 100 steps) or the step after one (an exact pair count)."""
    from gsexp.train.recipe import is_timed

    timed = [s for s in range(30_000) if is_timed(s, 100, 30_000)]
    assert len(timed) == 301 and timed[:3] == [0, 99, 199] and timed[-1] == 29_999
    assert not any(s % 100 in (0, 1) for s in timed[1:])
    assert all(is_timed(s, 1, 5) for s in range(5)) and [s for s in range(5) if is_timed(s, 10, 5)] == [0, 4]
