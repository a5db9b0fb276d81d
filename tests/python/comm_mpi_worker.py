"""Run by test_comm_mpi.py under mpirun: runtime.comm.from_mpi over COMM_WORLD and over a split mpi4py
communicator, exact checks of the collectives on numpy arrays, one rank per process on cpu:0."""
import sys

import ml_dtypes
import numpy as np
from mpi4py import MPI

import runtime
import runtime.comm as comm

world = MPI.COMM_WORLD
rank, size = world.Get_rank(), world.Get_size()
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)


def run(c, members):
    """Collectives over `c` whose ranks are world ranks `members` (in order)."""
    n, r = c.size, c.rank
    check(n == len(members) and members[r] == rank, f"rank {r} of {n}, members {members}")
    for dtype in (np.float32, np.float16, ml_dtypes.bfloat16, np.int32, np.uint8, np.float64):
        for count in (0, 1, 37, 40000):
            x = ((np.arange(count) + r) % 5 + 1).astype(dtype)
            out = np.empty_like(x)
            c.all_reduce(x, out, op="sum")
            c.device.synchronize()
            want = sum(((np.arange(count) + k) % 5 + 1) for k in range(n)).astype(dtype)
            check(np.array_equal(out.astype(np.float64), want.astype(np.float64)), f"all_reduce sum {dtype} {count}")
            y = x.copy()
            c.all_reduce(y, op="max")  # in place
            c.device.synchronize()
            wmax = np.max([((np.arange(count) + k) % 5 + 1) for k in range(n)], axis=0).astype(dtype) if count else y
            check(np.array_equal(y.astype(np.float64), wmax.astype(np.float64)), f"all_reduce max {dtype} {count}")
            g = np.empty(count * n, dtype)
            c.all_gather(x, g)
            c.device.synchronize()
            wg = np.concatenate([((np.arange(count) + k) % 5 + 1).astype(dtype) for k in range(n)])
            check(np.array_equal(g.astype(np.float64), wg.astype(np.float64)), f"all_gather {dtype} {count}")
            b = x.copy() if r == n - 1 else np.zeros_like(x)
            c.broadcast(b, root=n - 1)
            c.device.synchronize()
            wb = ((np.arange(count) + n - 1) % 5 + 1).astype(dtype)
            check(np.array_equal(b.astype(np.float64), wb.astype(np.float64)), f"broadcast {dtype} {count}")
    c.barrier()
    c.device.synchronize()


with comm.from_mpi() as c:
    run(c, list(range(size)))
# A split mpi4py communicator: its own rank numbers, rank 0 of each half makes the half's id.
half = world.Split(color=rank % 2, key=-rank)
with comm.from_mpi(half) as c:
    run(c, sorted(range(rank % 2, size, 2), reverse=True))
half.Free()

bad = world.allreduce(len(failures))
if failures:
    print(f"[rank {rank}] failed: {failures}", file=sys.stderr)
if rank == 0:
    print(f"comm_mpi_worker on {size} processes: {'FAILED' if bad else 'ok'}")
sys.exit(1 if bad else 0)
