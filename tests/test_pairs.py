"""The training loop's pair budget: when a render may skip reading its pair count back."""
import pytest
import torch

from gsexp.train.pairs import MARGIN, PairBudget


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


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_settled_overflows_waits_for_counts_still_on_their_way():
    budget = PairBudget(True)
    budget.record(100, None)
    capacity = budget.capacity(exact=False)
    torch.cuda._sleep(10_000_000)  # the count's copy is still queued behind this when asked
    budget.record(torch.tensor([capacity + 5], device="cuda"), capacity)
    with pytest.warns(UserWarning, match="dropped 5"):
        assert budget.settled_overflows() == 1
