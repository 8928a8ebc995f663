"""boostcomm.DistributedOptimizer: the plain loop (backward; step) trains as if
on the averaged gradient of every rank's batch. Checked against a reference
that computes that average in float64 from all ranks' batches on one process,
and for bitwise-equal parameters on every rank."""

import copy

import numpy as np
import pytest
import torch

import boostcomm

STEPS = 4


class Net(torch.nn.Module):
    """Linear layers of odd sizes, one branch used only when `use_extra`."""

    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(13, 31)
        self.b = torch.nn.Linear(31, 7)
        self.extra = torch.nn.Linear(7, 7)

    def forward(self, x, use_extra=False):
        y = self.b(torch.tanh(self.a(x)))
        return self.extra(y) if use_extra else y


def batch(rank, step):
    g = torch.Generator().manual_seed(100 * step + rank)
    return torch.randn(5, 13, generator=g), torch.randn(5, 7, generator=g)


def loss_of(model, rank, step, use_extra=False):
    x, y = batch(rank, step)
    return torch.nn.functional.mse_loss(model(x, use_extra), y)


def reference_train(size, steps, lr, use_extra_on=()):
    """SGD on the rank-averaged gradient, in float64, one process."""
    torch.manual_seed(0)
    model = Net().double()
    for step in range(steps):
        grads = [torch.zeros_like(p) for p in model.parameters()]
        for r in range(size):
            model.zero_grad()
            x, y = batch(r, step)
            out = model(x.double(), (step, r) in use_extra_on)
            torch.nn.functional.mse_loss(out, y.double()).backward()
            for g, p in zip(grads, model.parameters()):
                if p.grad is not None:
                    g += p.grad
        with torch.no_grad():
            for g, p in zip(grads, model.parameters()):
                p -= lr * g / size
    return [p.detach() for p in model.parameters()]


def assert_same_on_every_rank(comm, params):
    flat = torch.cat([p.detach().reshape(-1) for p in params])
    lo, hi = flat.clone(), flat.clone()
    boostcomm.all_reduce(lo, op="min")
    boostcomm.all_reduce(hi, op="max")
    assert torch.equal(lo, flat) and torch.equal(hi, flat), f"rank {comm.rank}: parameters differ across ranks"


def make(lr=0.05, **kwargs):
    torch.manual_seed(0)
    model = Net()
    opt = boostcomm.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=lr), model, **kwargs)
    return model, opt


@pytest.mark.parametrize("bucket_view", [False, True])
def test_trains_on_the_average_gradient(comm, bucket_view):
    model, opt = make(bucket_view=bucket_view)
    assert isinstance(opt, torch.optim.SGD)
    for step in range(STEPS):
        opt.zero_grad()
        loss_of(model, comm.rank, step).backward()
        opt.step()
    expected = reference_train(comm.size, STEPS, 0.05)
    for p, e in zip(model.parameters(), expected):
        np.testing.assert_allclose(p.detach().double().numpy(), e.numpy(), rtol=1e-5, atol=1e-6)
    assert_same_on_every_rank(comm, model.parameters())
    stats = boostcomm.get_overlap_stats()
    assert stats.source == "overlap_engine" and stats.count == STEPS


def test_unused_parameter_on_one_rank_and_replaced_grad(comm):
    # Rank 0 uses `extra` at step 1 only; elsewhere it gets no gradient. A
    # zero_grad(set_to_none=True) by hand on the inner state must not lose
    # the engine's memory either.
    model, opt = make()
    for step in range(STEPS):
        for p in model.parameters():
            p.grad = None  # as torch.optim's set_to_none would
        loss_of(model, comm.rank, step, use_extra=(comm.rank == 0 and step == 1)).backward()
        opt.step()
    expected = reference_train(comm.size, STEPS, 0.05, use_extra_on={(1, 0)})
    for p, e in zip(model.parameters(), expected):
        np.testing.assert_allclose(p.detach().double().numpy(), e.numpy(), rtol=1e-5, atol=1e-6)
    assert_same_on_every_rank(comm, model.parameters())


def test_no_sync_accumulates_then_averages(comm):
    model, opt = make()
    opt.zero_grad()
    with opt.no_sync():
        loss_of(model, comm.rank, 0).backward()
    loss_of(model, comm.rank, 1).backward()
    opt.step()
    # One step on the average over ranks of (grad of batch 0 + grad of batch 1).
    torch.manual_seed(0)
    ref = Net().double()
    grads = [torch.zeros_like(p) for p in ref.parameters()]
    for r in range(comm.size):
        for step in (0, 1):
            ref.zero_grad()
            x, y = batch(r, step)
            torch.nn.functional.mse_loss(ref(x.double()), y.double()).backward()
            for g, p in zip(grads, ref.parameters()):
                if p.grad is not None:
                    g += p.grad
    with torch.no_grad():
        for g, p in zip(grads, ref.parameters()):
            p -= 0.05 * g / comm.size
    for p, e in zip(model.parameters(), ref.parameters()):
        np.testing.assert_allclose(p.detach().double().numpy(), e.detach().numpy(), rtol=1e-5, atol=1e-6)
    assert_same_on_every_rank(comm, model.parameters())


def test_backward_passes_per_step(comm):
    model, opt = make(backward_passes_per_step=2)
    twin = copy.deepcopy(model)
    twin_opt = boostcomm.DistributedOptimizer(torch.optim.SGD(twin.parameters(), lr=0.05), twin)
    opt.zero_grad()
    twin_opt.zero_grad()
    for step in (0, 1):
        loss_of(model, comm.rank, step).backward()
    opt.step()
    with twin_opt.no_sync():
        loss_of(twin, comm.rank, 0).backward()
    loss_of(twin, comm.rank, 1).backward()
    twin_opt.step()
    for p, q in zip(model.parameters(), twin.parameters()):
        assert torch.equal(p, q)


def test_lr_scheduler_and_state_dict(comm):
    model, opt = make(lr=0.1)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    loss_of(model, comm.rank, 0).backward()
    opt.step()
    sched.step()
    assert opt.param_groups[0]["lr"] == pytest.approx(0.05)
    assert opt.state_dict()["param_groups"][0]["lr"] == pytest.approx(0.05)


def test_two_backwards_without_step_is_an_error(comm):
    model, opt = make()
    loss_of(model, comm.rank, 0).backward()
    with pytest.raises(boostcomm.InvalidArgumentError, match=r"produced 2 times since the last step"):
        loss_of(model, comm.rank, 1).backward()
    opt.step()  # the first backward's gradients are still averaged; every rank raised alike


def test_bad_arguments(comm):
    model = Net()
    with pytest.raises(boostcomm.InvalidArgumentError, match=r"must be a torch.optim.Optimizer"):
        boostcomm.DistributedOptimizer(object(), model)
    other = Net()
    with pytest.raises(boostcomm.InvalidArgumentError, match=r"'a.weight' is not in the optimizer"):
        boostcomm.DistributedOptimizer(torch.optim.SGD(other.parameters(), lr=0.1), model)
    with pytest.raises(boostcomm.InvalidArgumentError, match=r"backward_passes_per_step must be an int >= 1"):
        boostcomm.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1), model,
                                       backward_passes_per_step=0)
