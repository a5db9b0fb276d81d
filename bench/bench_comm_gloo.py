"""all_reduce across processes: runtime.comm against torch.distributed's gloo backend, side by side in one run.

Run under mpirun, one rank per process (mpi4py gives both the ranks; gloo rendezvous over TCP on this host):

    mpirun -np 2 python3 bench/bench_comm_gloo.py [--max-bytes N] [--quick]

float32 sum, in place, from 8 B up. Ours: `Communicator.all_reduce` on a non-blocking stream of cpu:0, then that
stream's synchronize (device memory, as torch's CPU tensor is the process's own memory). gloo: `dist.all_reduce` on a
CPU tensor (synchronous). Time per call: the mean over the iterations, the slowest rank's. Before timing, each side's
result is checked element by element (inputs are small integers: every summation order is exact). Rank 0 prints
nccl-tests-style rows; ratio = gloo's time / ours (> 1: ours faster). Exit status 2 if a result is wrong, 3 if torch
or mpi4py cannot be imported.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np


def _timed(fn, iters: int) -> float:
    fn()  # warm-up (first use of a size: allocations, connections)
    t = time.perf_counter()
    for _ in range(iters):
        fn()
    return (time.perf_counter() - t) / iters


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--max-bytes", type=int, default=64 << 20, help="largest message (default 64 MiB)")
    ap.add_argument("--quick", action="store_true", help="fewer sizes and iterations")
    args = ap.parse_args(argv)
    try:
        from mpi4py import MPI
        import torch
        import torch.distributed as dist
    except ImportError as e:
        print(f"bench_comm_gloo: needs mpi4py and torch ({e})", file=sys.stderr)
        return 3
    import runtime
    import runtime.comm as comm

    world = MPI.COMM_WORLD
    rank, size = world.Get_rank(), world.Get_size()
    port = world.bcast(29500 + os.getpid() % 1000 if rank == 0 else None, root=0)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=size)
    torch.set_num_threads(1)
    ours = comm.from_mpi(world)
    stream = runtime.Stream(non_blocking=True)

    sizes, n = [], 8
    step = 16 if args.quick else 4
    while n <= args.max_bytes:
        sizes.append(n)
        n *= step
    wrong = 0
    rows = []
    for nbytes in sizes:
        count = nbytes // 4
        iters = max(2, min(200, (64 << 20) // max(nbytes, 1) // (8 if args.quick else 1)))
        host = ((np.arange(count) + rank) % 7).astype(np.float32)
        want = sum(((np.arange(count) + r) % 7) for r in range(size)).astype(np.float32)

        dev = runtime.to_device(host)
        ours.all_reduce(dev, stream=stream)
        stream.synchronize()
        got = dev.numpy()
        bad_ours = int(np.count_nonzero(got != want))
        t_ours = None
        if not bad_ours:
            def run_ours():
                ours.all_reduce(dev, stream=stream)
                stream.synchronize()
            t_ours = _timed(run_ours, iters)

        tensor = torch.from_numpy(host.copy())
        dist.all_reduce(tensor)
        bad_gloo = int(np.count_nonzero(tensor.numpy() != want))
        t_gloo = _timed(lambda: dist.all_reduce(tensor), iters) if not bad_gloo else None

        bad = world.allreduce(bad_ours + bad_gloo, op=MPI.SUM)
        wrong += bad
        t_ours = world.allreduce(t_ours if t_ours is not None else float("nan"), op=MPI.MAX)
        t_gloo = world.allreduce(t_gloo if t_gloo is not None else float("nan"), op=MPI.MAX)
        rows.append((nbytes, t_ours, t_gloo, bad))

    if rank == 0:
        print(f"all_reduce float32 sum, {size} processes (mpirun), one rank each on cpu:0; runtime {runtime.__version__}, "
              f"torch {torch.__version__} gloo; time per call, the slowest rank's mean")
        print(f"{'size':>10} {'ours us':>10} {'gloo us':>10} {'ratio':>7} {'busbw GB/s':>11} {'#wrong':>7}")
        for nbytes, t_o, t_g, bad in rows:
            busbw = nbytes * 2 * (size - 1) / size / t_o / 1e9 if t_o == t_o and t_o > 0 else float("nan")
            print(f"{nbytes:>10} {t_o * 1e6:>10.2f} {t_g * 1e6:>10.2f} {t_g / t_o:>6.2f}x {busbw:>11.2f} {bad:>7}")
    ours.destroy()
    dist.destroy_process_group()
    return 2 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
