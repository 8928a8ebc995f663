"""The reference design's snippets, runnable:

    mpirun -np 2 --oversubscribe --bind-to none /usr/bin/python3 examples/python/reference_api.py

Every rank runs the same calls in the same order. Prints on rank 0.
"""

import numpy as np
import torch

import boostcomm as abc


def say(comm, *args):
    if comm.rank == 0:
        print(*args, flush=True)


def main():
    # 1. Initialise: rank / world size as the launcher assigned them.
    import os
    rank = int(os.environ.get("OMPI_COMM_WORLD_RANK", 0))
    world_size = int(os.environ.get("OMPI_COMM_WORLD_SIZE", 1))
    local_rank = int(os.environ.get("OMPI_COMM_WORLD_LOCAL_RANK", 0))
    comm = abc.comm_init(rank, world_size, device_id=local_rank, device="cpu")
    say(comm, comm)

    # 2. Collectives on numpy arrays and torch tensors, in place, no copy.
    grad = torch.full((1 << 20,), float(rank + 1))
    abc.all_reduce(grad, op="avg")
    say(comm, "all_reduce avg:", grad[0].item())
    shards = abc.all_gather(np.arange(4, dtype=np.float32) + 10 * rank)
    say(comm, "all_gather:", shards.tolist())

    # 3. Many gradients, few collectives.
    grads = [torch.randn(n) for n in (1000, 250000, 10, 40000)]
    group = abc.GradientGroup(grads, average=True)
    group.all_reduce()
    say(comm, "GradientGroup:", group.stats())

    # 4. Mixed collectives fused into one plan.
    weights_shard = torch.full((1024,), float(rank))
    weights_full = torch.empty(1024 * world_size)
    loss = torch.tensor([float(rank)])
    config = torch.zeros(16) if rank else torch.arange(16, dtype=torch.float32)
    with abc.collective_fusion() as cf:
        cf.register_allgather(weights_shard, weights_full)
        cf.register_allreduce(grads[0], grads[0])
        cf.register_allreduce(loss, loss)
        cf.register_broadcast(config, config)
        plan = cf.describe_plan()
    say(comm, "collective_fusion plan:\n" + plan)

    # 5. Topology, strategy, autotuning.
    topo = abc.detect_topology()
    say(comm, f"topology: layout {topo.layout}, intra-node {topo.intra_node_bw} GB/s, "
              f"inter-node {topo.inter_node_bw} GB/s, hops {topo.hops}")
    abc.configure_comm_strategy(strategy="topology_aware", intra_algorithm="shm",
                                inter_algorithm="ring", collective_algorithm="auto")
    result = abc.reduce_scatter_autotune(torch.randn(world_size * (1 << 18)), reduce_op="sum", auto_strategy=True)
    say(comm, f"reduce_scatter_autotune: {result.selected_algorithm}, {result.speedup:.2f}x over "
              f"{result.default_algorithm}")

    # 6. Overlap of gradient communication with backward, no DDP: the plain loop,
    # one line to wrap the optimizer (buckets reduced in place on the gradients).
    abc.configure_overlap(enable=True, overlap_stages=2)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(256, 2048), torch.nn.ReLU(), torch.nn.Linear(2048, 2048),
                                torch.nn.ReLU(), torch.nn.Linear(2048, 10))
    optimizer = abc.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.01), model)
    for _ in range(5):
        optimizer.zero_grad()
        model(torch.randn(64, 256)).sum().backward()
        optimizer.step()
    stats = abc.get_overlap_stats()
    say(comm, f"overlap: {stats.efficiency:.1f}% of communication hidden ({stats.hidden_comm_time * 1e3:.2f} ms)")


if __name__ == "__main__":
    main()
