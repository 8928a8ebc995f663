"""64 MiB allreduce under torchrun: boostcomm (default group) vs gloo, interleaved, checked on every rank.

Started by torchrun (see docs/PERF_TORCH.md, emulated cluster); REPS samples each (default 5)
after WARMUP calls each (default 12): on several nodes boostcomm's first calls of a size time
the cost model's leading candidates (3 calls each, docs/TUNING.md "Online selection"), as the
first steps of a training job do; the samples are taken after that decision.
"""
import os, statistics, time, torch, torch.distributed as dist
import boostcomm.torch  # noqa: F401
torch.set_num_threads(1)
dist.init_process_group("boostcomm")
gloo = dist.new_group(backend="gloo")
rank, size = dist.get_rank(), dist.get_world_size()
x = torch.ones((64 << 20) // 4)
t = {"boostcomm": [], "gloo": []}
for g in (None, gloo):
    for _ in range(int(os.environ.get("WARMUP", "12"))):
        dist.all_reduce(x, group=g)
for _ in range(int(os.environ.get("REPS", "5"))):
    for name, g in (("boostcomm", None), ("gloo", gloo)):
        x.fill_(rank + 1)
        dist.barrier(group=g)
        t0 = time.perf_counter()
        dist.all_reduce(x, group=g)
        t[name].append(time.perf_counter() - t0)
        assert x[0].item() == size * (size + 1) / 2 and x[-1].item() == size * (size + 1) / 2, (name, x[0].item())
if rank == 0:
    b, q = statistics.median(t["boostcomm"]), statistics.median(t["gloo"])
    print(f"world {size}: 64 MiB allreduce boostcomm {b*1e3:.0f} ms, gloo {q*1e3:.0f} ms, gloo/boostcomm {q/b:.2f}x "
          f"(samples {len(t['gloo'])}, load {os.getloadavg()[0]:.1f})", flush=True)
dist.destroy_process_group()
