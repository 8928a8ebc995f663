"""The founding document's API forms (issue 38), under mpirun -np 2:
- configure_overlap(enable=True, overlap_stages=["backward", "allreduce"],
  buffer_strategy="pingpong") makes a plain loop (a model, a torch optimizer,
  no wrapper) average its gradients during backward: its parameters equal
  DDP's bitwise (2 ranks), with every zero_grad form, buffer strategy and
  with gradient accumulation; off unless asked for; parameters that differ
  between ranks raise on every rank;
- get_overlap_stats() says nothing was measured instead of 100%;
- configure_comm_strategy's *_node_protocol, comm_init's device, and the
  ascend_boost_comm alias.
Every rank checks its own results; a bad argument raises on every rank."""

import copy
import math
import warnings

import pytest
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

import boostcomm
import boostcomm.torch as bct

STEPS = 4
DOC_FORM = dict(enable=True, overlap_stages=["backward", "allreduce"], buffer_strategy="pingpong")


@pytest.fixture(scope="module")
def comm():
    torch.set_num_threads(1)
    if not dist.is_initialized():
        bct.init_process_group("gloo")  # DDP's group, the reference
    c = boostcomm.comm_init()
    yield c
    boostcomm.configure_overlap(enable=True, overlap_stages=2, sync_gradients=False)
    dist.destroy_process_group()


@pytest.fixture(autouse=True)
def sync_off_afterwards():
    yield
    boostcomm.configure_overlap(enable=True, overlap_stages=2, buffer_strategy="segment_list",
                                sync_gradients=False)


def make_model(seed=0):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(13, 300), torch.nn.Tanh(), torch.nn.Linear(300, 200),
                               torch.nn.Tanh(), torch.nn.Linear(200, 7))


def batch(rank, step, k=0):
    g = torch.Generator().manual_seed(1000 * step + 10 * k + rank)
    return torch.randn(8, 13, generator=g), torch.randn(8, 7, generator=g)


def train(model, optimizer, rank, steps=STEPS, passes=1, set_to_none=True):
    for step in range(steps):
        for k in range(passes):
            x, y = batch(rank, step, k)
            torch.nn.functional.mse_loss(model(x), y).backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=set_to_none)
    return [p.detach().clone() for p in model.parameters()]


def ddp_reference(rank, passes=1):
    model = make_model()
    ddp = DDP(copy.deepcopy(model))
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
    return train(ddp, opt, rank, passes=passes)


def assert_same_on_every_rank(params):
    flat = torch.cat([p.reshape(-1) for p in params])
    lo, hi = flat.clone(), flat.clone()
    boostcomm.all_reduce(lo, op="min")
    boostcomm.all_reduce(hi, op="max")
    assert torch.equal(lo, flat) and torch.equal(hi, flat), f"rank {dist.get_rank()}: parameters differ"


@pytest.mark.parametrize("buffer_strategy", ["pingpong", "segment_list", "single"])
@pytest.mark.parametrize("set_to_none", [True, False])
def test_plain_loop_equals_ddp(comm, buffer_strategy, set_to_none):
    rank = comm.rank
    expected = ddp_reference(rank)
    boostcomm.configure_overlap(**dict(DOC_FORM, buffer_strategy=buffer_strategy))
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    got = train(model, opt, rank, set_to_none=set_to_none)
    for g, e in zip(got, expected):
        assert torch.equal(g, e), f"rank {rank}: max diff {(g - e).abs().max().item()}"
    assert_same_on_every_rank(got)
    stats = boostcomm.get_overlap_stats(reset=True)
    assert stats.measured and stats.source == "overlap_engine" and stats.count == STEPS, stats
    assert 0.0 <= stats.efficiency <= 100.0 and 0.0 <= stats.hidden_comm_time <= stats.comm_time


def test_gradient_accumulation_equals_ddp(comm):
    # Two backward passes per step: each is averaged at its end, as DDP does
    # without no_sync. Except the first step's: the sync starts at the first
    # step(), after both passes ran, so it averages their sum once where DDP
    # averaged each (the same value, rounded differently): equal within
    # float32 rounding, and identical on every rank.
    expected = ddp_reference(comm.rank, passes=2)
    boostcomm.configure_overlap(**DOC_FORM)
    model = make_model()
    got = train(model, torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9), comm.rank, passes=2)
    for g, e in zip(got, expected):
        assert torch.allclose(g, e, rtol=1e-5, atol=1e-6), f"rank {comm.rank}: max diff {(g - e).abs().max()}"
    assert_same_on_every_rank(got)


def test_off_unless_asked(comm):
    # The count form (and the default) leaves a plain loop alone: each rank keeps its own gradient.
    boostcomm.configure_overlap(enable=True, overlap_stages=2, buffer_strategy="pingpong")
    model = make_model()
    x, y = batch(comm.rank, 0)
    torch.nn.functional.mse_loss(model(x), y).backward()
    torch.optim.SGD(model.parameters(), lr=0.1).step()
    local = make_model()
    torch.nn.functional.mse_loss(local(x), y).backward()
    for p, q in zip(model.parameters(), local.parameters()):
        assert torch.equal(p.grad, q.grad), f"rank {comm.rank}: the gradient changed without being asked to"
    # sync_gradients=True asks for it with the count form too; False turns it off again.
    boostcomm.configure_overlap(enable=True, overlap_stages=2, sync_gradients=True)
    model = make_model()
    got = train(model, torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9), comm.rank)
    for g, e in zip(got, ddp_reference(comm.rank)):
        assert torch.equal(g, e)
    boostcomm.configure_overlap(enable=True, overlap_stages=2, sync_gradients=False)
    model = make_model()
    torch.nn.functional.mse_loss(model(x), y).backward()
    torch.optim.SGD(model.parameters(), lr=0.1).step()
    for p, q in zip(model.parameters(), local.parameters()):
        assert torch.equal(p.grad, q.grad), f"rank {comm.rank}: still synchronised after sync_gradients=False"


def test_different_parameters_raise_on_every_rank(comm):
    boostcomm.configure_overlap(**DOC_FORM)
    model = make_model(seed=comm.rank)  # a different initialisation on every rank
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = batch(comm.rank, 0)
    torch.nn.functional.mse_loss(model(x), y).backward()
    with pytest.raises(boostcomm.MismatchError, match=r"parameter 'Sequential\.0\.weight' .*differs between "
                                                       r"rank 0 and rank\(s\) \[1\].*broadcast_parameters"):
        opt.step()
    boostcomm.broadcast_parameters(model)  # rank 0's parameters everywhere: the loop works
    opt.step()
    assert_same_on_every_rank([p.detach() for p in model.parameters()])


def test_ddp_model_left_to_ddp(comm):
    boostcomm.configure_overlap(**DOC_FORM)
    ddp = DDP(make_model())
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
    with pytest.warns(UserWarning, match="DistributedDataParallel model"):
        got = train(ddp, opt, comm.rank)
    for g, e in zip(got, ddp_reference(comm.rank)):
        assert torch.equal(g, e)


def test_optimizer_changed_after_first_step(comm):
    boostcomm.configure_overlap(**DOC_FORM)
    model, extra = make_model(), torch.nn.Linear(3, 3)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    train(model, opt, comm.rank, steps=1)
    opt.add_param_group({"params": extra.parameters()})
    with pytest.raises(boostcomm.InvalidArgumentError, match=r"rank \d\].*parameters changed after its first step"):
        train(model, opt, comm.rank, steps=1)


def test_nothing_measured_says_so(comm):
    boostcomm.get_overlap_stats(reset=True)
    with pytest.warns(RuntimeWarning, match="nothing measured"):
        stats = boostcomm.get_overlap_stats()
    assert not stats.measured and math.isnan(stats.efficiency) and stats.hidden_comm_time == 0.0
    assert stats.source == "none" and "no gradient communication ran" in stats.note
    assert f"{stats.efficiency:.1f}%" == "nan%" and "nothing measured" in repr(stats)


def test_configure_overlap_forms_and_errors(comm):
    boostcomm.configure_overlap(enable=True, overlap_stages=3, buffer_strategy="ping_pong")
    boostcomm.configure_overlap(enable=True, overlap_stages=("allreduce", "backward"), buffer_strategy="double",
                                sync_gradients=False)
    assert boostcomm._state.overlap["stages"] == 3  # the names keep the count in flight
    rank = comm.rank
    for kwargs, text in [
        (dict(overlap_stages=["backward", "optimizer"]), r"overlap_stages names unknown stage\(s\) \['optimizer'\]"),
        (dict(overlap_stages=["allreduce"]), r"overlap_stages=\['allreduce'\] names one stage; overlap needs two"),
        (dict(overlap_stages=0), r"overlap_stages must be an int >= 1"),
        (dict(overlap_stages=True), r"overlap_stages must be an int >= 1"),
        (dict(buffer_strategy="triple"), r"buffer_strategy 'triple' unknown; valid: .*pingpong"),
        (dict(sync_gradients="yes"), r"sync_gradients must be None, True or False"),
    ]:
        with pytest.raises(boostcomm.InvalidArgumentError, match=rf"\[boostcomm rank {rank}\] configure_overlap: {text}"):
            boostcomm.configure_overlap(**kwargs)
    # Bad on rank 0 only: rank 0 gets its error, the others a MismatchError naming rank 0.
    stages = ["backward", "bogus"] if rank == 0 else ["backward", "allreduce"]
    error = boostcomm.InvalidArgumentError if rank == 0 else boostcomm.MismatchError
    with pytest.raises(error, match=r"bogus" if rank == 0 else r"rank\(s\) \[0\] passed invalid"):
        boostcomm.configure_overlap(overlap_stages=stages)


def test_comm_strategy_protocols(comm):
    rank = comm.rank
    with pytest.warns(boostcomm.FallbackWarning) as caught:
        applied = boostcomm.configure_comm_strategy(strategy="topology_aware", intra_node_protocol="nvlink",
                                                    inter_node_protocol="rccl", collective_algorithm="auto")
    texts = [str(w.message) for w in caught]
    assert any("intra_node_protocol='nvlink'" in t and "available: auto, shm, mpi" in t for t in texts), texts
    assert any("inter_node_protocol='rccl'" in t and "available: auto, mpi" in t for t in texts), texts
    assert all("\n" not in t for t in texts)
    assert applied["intra_node_protocol"] == "auto" and applied["inter_node_protocol"] == "auto"
    applied = boostcomm.configure_comm_strategy(strategy="topology_aware", intra_node_protocol="mpi",
                                                inter_node_protocol="mpi")
    assert applied["intra_algorithm"] == "ring"
    applied = boostcomm.configure_comm_strategy(strategy="topology_aware", intra_node_protocol="shm")
    assert applied["intra_algorithm"] == "shm"
    # The former keywords, positionally and by name.
    boostcomm.configure_comm_strategy("topology_aware", "shm", "rhd", "auto")
    boostcomm.configure_comm_strategy(strategy="flat", intra_algorithm="ring", inter_algorithm="ring")
    with pytest.raises(boostcomm.InvalidArgumentError,
                       match=rf"rank {rank}\] configure_comm_strategy: intra_node_protocol 'nvlnk' is unknown; "
                             r"available in this build: auto, shm, mpi"):
        boostcomm.configure_comm_strategy(intra_node_protocol="nvlnk")
    with pytest.raises(boostcomm.InvalidArgumentError, match=r"intra_node_protocol='shm' means intra_algorithm "
                                                             r"'shm', but intra_algorithm='ring'"):
        boostcomm.configure_comm_strategy(intra_node_protocol="shm", intra_algorithm="ring")
    boostcomm.configure_comm_strategy()  # back to the defaults


def test_comm_init_device_names_what_is_available(comm):
    for device in ("npu", "cuda"):
        with pytest.raises(boostcomm.InvalidArgumentError,
                           match=rf"rank {comm.rank}\] comm_init: device '{device}' \(.*\) is not available in this "
                                 r"build.*available: cpu.*device='cpu'"):
            boostcomm.comm_init(device=device)


def test_ascend_boost_comm_is_boostcomm(comm):
    import ascend_boost_comm as abc
    import ascend_boost_comm.torch as abct
    from ascend_boost_comm import GradientGroup
    assert abc is boostcomm and abct is bct and GradientGroup is boostcomm.GradientGroup
    assert bct.__spec__.name == "boostcomm.torch"
    t = torch.full((5,), float(comm.rank + 1))
    abc.GradientGroup([t]).all_reduce()
    assert torch.equal(t, torch.full((5,), float(sum(range(1, comm.size + 1)))))
