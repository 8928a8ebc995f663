"""The founding document's six Python snippets, in order, as one script
(the document: ../../../shared/seed/, snippets.py there; docs/PYTHON.md,
"The founding document's snippets"). Every rank runs it:

    mpirun -np 2 --oversubscribe --bind-to none .venv/bin/python examples/python/seed_walkthrough.py
    .venv/bin/torchrun --standalone --nproc_per_node 2 examples/python/seed_walkthrough.py
    ... seed_walkthrough.py --module ascend_boost_comm     # the document's own module name

with PYTHONPATH=build/python from a source tree. Each snippet is as the
document writes it, inside the lines marked "# --- document"; what the
document leaves out (the process group of "the traditional way", the
gradients, the model, the data) comes before it, and after it a check
against a float64 reference computed on every rank from every rank's
inputs (no communication): gradients and fusion outputs exactly (2 ranks:
one rounding, the same in float32 as in float64 rounded), trained
parameters within float32 rounding, and identical on every rank. The
document's tensors live on an NPU (.npu(), device="npu"); here they stay on
the CPU (device="cpu", .cpu()). A failed check exits 1 naming the rank.
"""

import argparse
import importlib
import os
import sys

import numpy as np
import torch
import torch.distributed as dist

STEPS, BATCH, FEATURES, CLASSES = 6, 16, 64, 10
GRAD_SIZES = (1000, 37, 250_000, 4096, 1, 65_537, 300, 12_000)  # grad1 .. grad8


def rank_tensor(rank, n, salt, dtype=torch.float32):
    """Rank-dependent float32 inputs, reproducible on every rank for the
    reference (dtype=torch.float64: the same values, in float64)."""
    g = torch.Generator().manual_seed(1000 * salt + rank)
    return torch.randn(n, generator=g, dtype=torch.float32).to(dtype)


class Checker:
    def __init__(self, rank, size):
        self.rank, self.size, self.failed = rank, size, False

    def equal(self, what, got, expected, exact=None):
        """got (float32) against the float64 reference: exactly at 2 ranks (one
        rounding either way), within float32 rounding of a longer sum beyond."""
        exact = self.size <= 2 if exact is None else exact
        target = expected.to(got.dtype).double() if exact else expected
        diff = (got.double() - target).abs().max().item() if got.numel() else 0.0
        ok = torch.equal(got, expected.to(got.dtype)) if exact else torch.allclose(
            got.double(), expected, rtol=1e-5, atol=1e-6)
        print(f"rank {self.rank}: {what}: {'ok' if ok else 'FAILED'} ({'exact' if exact else 'close'}, "
              f"max |diff| {diff:.3g})", flush=True)
        self.failed |= not ok


def same_on_every_rank(abc, tensors):
    """Whether every rank holds bitwise rank 0's tensors (one allgather of digests)."""
    import hashlib
    mine = np.array([int.from_bytes(hashlib.blake2b(t.detach().contiguous().numpy().tobytes(),
                                                    digest_size=7).digest(), "little") for t in tensors], np.int64)
    everyone = abc.all_gather(mine)
    return bool((everyone == everyone[0]).all())


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--module", default="boostcomm", choices=["boostcomm", "ascend_boost_comm"],
                        help="import ... as abc (ascend_boost_comm: the document's name)")
    args = parser.parse_args()
    abc = importlib.import_module(args.module)
    import boostcomm.torch as bct

    # "The traditional way" of snippet 1 needs torch.distributed's default group.
    if bct._launched_by_mpi():
        bct.init_process_group("boostcomm")   # RANK, WORLD_SIZE, LOCAL_RANK, MASTER_* from mpirun
        launcher = "mpirun"
    else:
        dist.init_process_group("boostcomm")  # torchrun's env://
        launcher = "torchrun"
    rank, size = dist.get_rank(), dist.get_world_size()
    check = Checker(rank, size)
    print(f"rank {rank}: {size} ranks via {launcher}, import {args.module} as abc", flush=True)
    grad1, grad2, grad3, grad4, grad5, grad6, grad7, grad8 = (
        rank_tensor(rank, n, salt) for salt, n in enumerate(GRAD_SIZES))

    # --- document, snippet 1: M x N operator reuse
    comm = abc.comm_init(
        rank=int(os.getenv("RANK")),
        world_size=int(os.getenv("WORLD_SIZE")),
        device_id=int(os.getenv("LOCAL_RANK")),
        device="cpu",                      # the document's "npu"
    )
    grads_to_sync = [grad1, grad2, grad3, grad4, grad5, grad6, grad7, grad8]
    for grad in grads_to_sync:             # the traditional way: 8 allreduce calls
        dist.all_reduce(grad)
    gradient_group = abc.GradientGroup(grads_to_sync)
    gradient_group.all_reduce()            # one call, all 8 gradients synchronised
    # --- end of snippet 1
    for k, (grad, n) in enumerate(zip(grads_to_sync, GRAD_SIZES)):
        # dist.all_reduce sums the ranks' gradients; the group sums those sums.
        expected = size * sum(rank_tensor(r, n, k, torch.float64) for r in range(size))
        check.equal(f"snippet 1: grad{k + 1} ({n} elements) = {size} x the sum over ranks", grad, expected)

    activations = rank_tensor(rank, 3000, 20)
    activations_buffer = torch.empty(size * 3000)
    gradients = rank_tensor(rank, 20_000, 21)
    grads_buffer = torch.empty(20_000)
    params = rank_tensor(rank, 513, 22)
    params_buffer = torch.empty(513)
    # --- document, snippet 2: collective fusion
    with abc.collective_fusion() as cf:
        cf.register_allgather(activations, activations_buffer)
        cf.register_allreduce(gradients, grads_buffer)
        cf.register_broadcast(params, params_buffer)
    # --- end of snippet 2
    check.equal("snippet 2: allgather = every rank's activations in rank order", activations_buffer,
                torch.cat([rank_tensor(r, 3000, 20, torch.float64) for r in range(size)]), exact=True)
    check.equal("snippet 2: allreduce = the sum over ranks", grads_buffer,
                sum(rank_tensor(r, 20_000, 21, torch.float64) for r in range(size)))
    check.equal("snippet 2: broadcast = rank 0's params", params_buffer, rank_tensor(0, 513, 22, torch.float64),
                exact=True)

    grad_buffer = rank_tensor(rank, size * (1 << 16), 23)
    # --- document, snippet 3: topology-aware scheduling
    topology = abc.detect_topology()
    print(f"intra-node bandwidth: {topology.intra_node_bw} GB/s")
    print(f"inter-node bandwidth: {topology.inter_node_bw} GB/s")
    print(f"inter-node hops: {topology.hops} hops")
    abc.configure_comm_strategy(
        strategy="topology_aware",
        intra_node_protocol="nvlink",
        inter_node_protocol="rccl",
        collective_algorithm="auto",
    )
    result = abc.reduce_scatter_autotune(
        input_tensor=grad_buffer,
        reduce_op="sum",
        auto_strategy=True,
    )
    print(f"selected algorithm: {result.selected_algorithm}")
    print(f"theoretical speedup: {result.speedup:.1f}x")
    # --- end of snippet 3
    block = 1 << 16
    total = sum(rank_tensor(r, size * block, 23, torch.float64) for r in range(size))
    check.equal(f"snippet 3: reduce_scatter_autotune ({result.selected_algorithm}) = block {rank} of the sum",
                result.output, total[rank * block:(rank + 1) * block])

    # The document's model, criterion, optimizer and loader. Identical initial
    # parameters on every rank (the same seed), each rank its own batches.
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(FEATURES, 512), torch.nn.ReLU(), torch.nn.Linear(512, 512),
                                torch.nn.ReLU(), torch.nn.Linear(512, CLASSES))
    reference = [p.detach().double().clone() for p in model.parameters()]
    criterion = torch.nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)

    def batches_of(r, dtype=torch.float32):
        x = rank_tensor(r, STEPS * BATCH * FEATURES, 30, dtype).reshape(STEPS * BATCH, FEATURES)
        y = (rank_tensor(r, STEPS * BATCH, 31).abs() * 7).long() % CLASSES
        return x, y
    x, y = batches_of(rank)
    train_loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=BATCH)
    # --- document, snippet 4: communication / computation overlap
    abc.configure_overlap(
        enable=True,
        overlap_stages=["backward", "allreduce"],
        buffer_strategy="pingpong",
    )
    model.train()
    optimizer.zero_grad()
    for i, batch in enumerate(train_loader):
        inputs = batch[0].cpu()            # the document's .npu()
        targets = batch[1].cpu()
        output = model(inputs)
        loss = criterion(output, targets)
        loss.backward()                    # gradient synchronisation starts in the background
        optimizer.step()
        optimizer.zero_grad()
    overlap_stats = abc.get_overlap_stats()
    print(f"overlap efficiency: {overlap_stats.efficiency:.1f}%")
    print(f"hidden communication time: {overlap_stats.hidden_comm_time:.2f}s/epoch")
    # --- end of snippet 4
    # Off again before the reference trains: while it is on, every optimizer's
    # step() averages its gradients across ranks (the reference's too).
    abc.configure_overlap(enable=True, overlap_stages=2, sync_gradients=False)
    # The reference: one float64 model on every rank's batches, the loss the
    # mean of the ranks' losses (so its gradient is their average).
    ref_model = torch.nn.Sequential(torch.nn.Linear(FEATURES, 512), torch.nn.ReLU(), torch.nn.Linear(512, 512),
                                    torch.nn.ReLU(), torch.nn.Linear(512, CLASSES)).double()
    with torch.no_grad():
        for p, r in zip(ref_model.parameters(), reference):
            p.copy_(r)
    ref_opt = torch.optim.SGD(ref_model.parameters(), lr=0.05, momentum=0.9)
    data = [batches_of(r, torch.float64) for r in range(size)]
    for step in range(STEPS):
        ref_opt.zero_grad()
        rows = slice(step * BATCH, (step + 1) * BATCH)
        loss = sum(criterion(ref_model(xr[rows]), yr[rows]) for xr, yr in data) / size
        loss.backward()
        ref_opt.step()
    for (name, p), r in zip(model.named_parameters(), ref_model.parameters()):
        check.equal(f"snippet 4: {name} after {STEPS} steps = the float64 reference", p.detach(), r.detach(),
                    exact=False)
    same = same_on_every_rank(abc, [p.detach() for p in model.parameters()])
    print(f"rank {rank}: snippet 4: parameters bitwise equal to rank 0's: {'ok' if same else 'FAILED'}", flush=True)
    measured = overlap_stats.measured and overlap_stats.source == "overlap_engine" and overlap_stats.count == STEPS
    print(f"rank {rank}: snippet 4: overlap measured over {overlap_stats.count} steps "
          f"({overlap_stats.source}): {'ok' if measured else 'FAILED'}", flush=True)
    check.failed |= not (same and measured)

    dist.destroy_process_group()
    print(f"rank {rank}: walkthrough {'FAILED' if check.failed else 'ok'}", flush=True)
    return 1 if check.failed else 0


if __name__ == "__main__":
    sys.exit(main())
