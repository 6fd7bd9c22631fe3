"""Unequal local batches + loss scale b_i·W/B give exactly the full-batch mean gradient."""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
mp = pytest.importorskip("torch.multiprocessing")

from engine.launch import free_port  # noqa: E402
from tests.balancer import ddp_workers  # noqa: E402


@pytest.mark.slow
def test_scaled_ddp_gradient_equals_single_process_full_batch(tmp_path: Path) -> None:
    plan = ddp_workers.plan()
    assert plan.batch_sizes == (3, 7) and plan.last_sizes == (1, 2)  # really unequal
    mp.spawn(
        ddp_workers.gradient_worker,
        args=(2, free_port(), str(tmp_path)),
        nprocs=2,
        join=True,
    )
    ranks = [torch.load(tmp_path / f"rank{r}.pt") for r in range(2)]
    reference = ddp_workers.reference_steps()
    for result in ranks:
        # every step of an SGD run, including the short last step
        torch.testing.assert_close(result["scaled"], reference, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(ranks[0]["plain"], ranks[1]["plain"])
    # plain DDP averaging of unequal batches weights rank 0's 3 samples like rank 1's 7
    error = (ranks[0]["plain"][0] - reference[0]).abs().max().item()
    assert error > 1e-3 * reference[0].abs().max().item()
    assert not torch.allclose(ranks[0]["plain"], reference, rtol=1e-5, atol=1e-6)
