"""@runtime.jit kernels with runtime.barrier() and runtime.local_array(): compiled (the cpu group form, rt_items
blocks; the flat form elsewhere) against the reference mode (items of a group stepped from barrier to barrier) and
numpy, for group sizes 1, 7, 64, 256 and 1024 and 2-D/3-D groups; reductions, scans, transposes and tiled products
through local arrays; divergent barriers refused; whole groups required."""
import functools

import numpy as np
import pytest

import runtime
from conftest import skip_unless_kernels_run

import jit_group_kernels as K

MODES = ["compiled", "reference"]


@functools.lru_cache(maxsize=None)
def _dialect_has_groups():
    """Whether the C++ dialect has work-group barriers (rt_barrier, RT_LOCAL, rt_items): issue 13 item 1."""
    src = ("RT_KERNEL void probe(float* x) { RT_LOCAL float t[4]; rt_items(it) { t[get_local_id(0)] = 1.0f; } "
           "rt_items(it) { x[get_global_id(0)] = t[0]; } }")
    try:
        runtime.Module(src)
    except runtime.Error:
        return False
    return True


def run(mode, kernel, args, **launch):
    """Launch kernel in `mode` on device copies of args; the host copies of its device buffers."""
    if mode == "compiled":
        if not _dialect_has_groups():
            pytest.skip("the kernel dialect has no work-group barriers yet (rt_barrier/rt_items: issue 13 item 1)")
        skip_unless_kernels_run()
    dev = [runtime.to_device(a) if isinstance(a, np.ndarray) else a for a in args]
    s = runtime.Stream()
    k = runtime.jit(kernel.fn, interpret=(mode == "reference"))
    s.launch_kernel(k, *dev, **launch)
    s.synchronize()
    return [d.numpy() for d in dev if isinstance(d, runtime.DeviceMemory)]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("group", [1, 7, 64, 256, 1024])
def test_group_sum_every_group_size(mode, group, rng):
    groups = 3
    x = rng.standard_normal(group * groups).astype(np.float32)
    _, out = run(mode, K.group_sum, [x, np.zeros(groups, np.float32)], local_size=group)
    np.testing.assert_allclose(out, x.reshape(groups, group).sum(axis=1), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("group", [1, 7, 64, 256, 1024])
def test_group_reverse_reads_other_items_writes(mode, group, rng):
    x = rng.integers(-1000, 1000, group * 2).astype(np.int32)
    _, out = run(mode, K.group_reverse, [x, np.zeros_like(x)], local_size=group)
    np.testing.assert_array_equal(out, x.reshape(2, group)[:, ::-1].ravel())


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("group", [7, 64, 256])
def test_group_scan(mode, group, rng):
    x = rng.integers(-50, 50, group * 3).astype(np.int64)
    _, out = run(mode, K.group_scan, [x, np.zeros_like(x)], local_size=group)
    np.testing.assert_array_equal(out, np.cumsum(x.reshape(3, group), axis=1).ravel())


@pytest.mark.parametrize("mode", MODES)
def test_transpose_through_a_2d_local_tile(mode, rng):
    n = 48
    a = rng.standard_normal((n, n)).astype(np.float32)
    _, out = run(mode, K.transpose_tiles, [a.ravel(), np.zeros(n * n, np.float32), n], global_size=(n, n),
                 local_size=(16, 16))
    np.testing.assert_array_equal(out.reshape(n, n), a.T)


@pytest.mark.parametrize("mode", MODES)
def test_tiled_matmul_flat(mode, rng):
    n = 48
    a, b = (rng.standard_normal((n, n)).astype(np.float32) for _ in range(2))
    *_, c = run(mode, K.matmul_tiled_flat, [a.ravel(), b.ravel(), np.zeros(n * n, np.float32), n],
                global_size=(n, n), local_size=(16, 16))
    np.testing.assert_allclose(c.reshape(n, n), a @ b, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("mode", MODES)
def test_tiled_matmul_on_shaped_arrays(mode, rng):
    n = 32
    a, b = (rng.standard_normal((n, n)).astype(np.float32) for _ in range(2))
    *_, c = run(mode, K.matmul_tiled, [a, b, np.zeros((n, n), np.float32)], global_size=(n, n), local_size=(16, 16))
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("local", [(4, 4, 4), (2, 8, 1), (1, 1, 1)])
def test_3d_groups(mode, local):
    glob = (local[0] * 2, local[1] * 2, local[2] * 2)
    out, = run(mode, K.group_ids_3d, [np.zeros(int(np.prod(glob)), np.int32)], global_size=glob, local_size=local)
    total = int(np.prod(local))
    want = np.zeros(glob[::-1], np.int32)
    for z in range(glob[2]):
        for y in range(glob[1]):
            for x in range(glob[0]):
                lx, ly, lz = x % local[0], y % local[1], z % local[2]
                lin = (lz * local[1] + ly) * local[0] + lx
                want[z, y, x] = (lin + 1) % total + 1000 * (x // local[0])
    np.testing.assert_array_equal(out.reshape(glob[::-1]), want)


@pytest.mark.parametrize("mode", MODES)
def test_per_item_values_live_across_barriers(mode, rng):
    x = rng.standard_normal(512).astype(np.float32)
    _, out = run(mode, K.private_across_barriers, [x, np.zeros_like(x)])
    mine = x * 2
    left = np.roll(mine.reshape(2, 256), 1, axis=1).ravel()
    np.testing.assert_allclose(out, mine + left + left, rtol=1e-6)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("rounds", [0, 1, 5])
def test_uniform_loop_with_barrier(mode, rounds):
    x = np.arange(128, dtype=np.int32)
    _, out = run(mode, K.uniform_for_with_barrier, [x, np.zeros_like(x), rounds], local_size=64)
    want = x.reshape(2, 64).copy()
    for r in range(rounds):
        want = np.roll(want, -1, axis=1) + r
    np.testing.assert_array_equal(out, want.ravel())


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("flag", [0, 1])
def test_uniform_if_with_barrier(mode, flag):
    x = np.arange(128, dtype=np.int32)
    _, out = run(mode, K.uniform_if_with_barrier, [x, np.zeros_like(x), flag], local_size=64)
    want = x.reshape(2, 64)[:, ::-1].ravel() if flag else -x
    np.testing.assert_array_equal(out, want)


@pytest.mark.parametrize("mode", MODES)
def test_local_array_without_barrier(mode, rng):
    x = rng.standard_normal(1000).astype(np.float32)  # a partial last group: no barrier, so allowed
    _, out = run(mode, K.local_no_barrier, [x, np.zeros_like(x)])
    np.testing.assert_allclose(out, (x + 1) * 2, rtol=1e-6)


@pytest.mark.parametrize("mode", MODES)
def test_sum_with_atomic_total(mode, rng):
    x = rng.standard_normal(256 * 8)
    _, total = run(mode, K.group_sum_atomic, [x, np.zeros(1)])
    np.testing.assert_allclose(total[0], x.sum(), rtol=1e-9)


@pytest.mark.parametrize("mode", MODES)
def test_local_memory_does_not_leak_between_groups(mode):
    """Each group starts from what its own items write: a group whose items write nothing to slot i reads what
    another group left there only if memory leaked; here every group writes every slot, and sums must be its own."""
    x = np.repeat(np.arange(16, dtype=np.float32), 64)  # group g holds 64 copies of g
    _, out = run(mode, K.group_sum, [x, np.zeros(16, np.float32)], local_size=64)
    np.testing.assert_array_equal(out, np.arange(16, dtype=np.float32) * 64)


@pytest.mark.parametrize("mode", MODES)
def test_barrier_kernels_need_whole_groups(mode):
    if mode == "compiled" and not _dialect_has_groups():
        pytest.skip("the kernel dialect has no work-group barriers yet")
    s = runtime.Stream()
    k = runtime.jit(K.group_sum.fn, interpret=(mode == "reference"))
    with pytest.raises(runtime.InvalidValueError, match="group_sum"):
        s.launch_kernel(k, runtime.to_device(np.ones(100, np.float32)), runtime.empty(2, np.float32),
                        local_size=64)
        s.synchronize()


def test_reference_mode_reports_divergent_barriers():
    @runtime.jit(interpret=True)
    def divergent(x):
        if runtime.get_local_id(0) < 2:
            runtime.barrier()
        x[runtime.get_global_id(0)] = 1

    with pytest.raises(runtime.LaunchError, match="divergent"):
        runtime.Stream().launch_kernel(divergent, runtime.empty(8, np.float32), local_size=4)

    @runtime.jit(interpret=True)
    def different_barriers(x):
        if runtime.get_local_id(0) < 2:
            runtime.barrier()
        else:
            runtime.barrier()

    with pytest.raises(runtime.LaunchError, match="different barriers"):
        runtime.Stream().launch_kernel(different_barriers, runtime.empty(8, np.float32), local_size=4)


def test_generated_sources_cpu_group_form_and_flat_form():
    x, out = runtime.empty(1024, np.float32), runtime.empty(4, np.float32)
    cpu = K.group_sum.source(x, out, target="cpu")
    assert "rt_items(rt_it)" in cpu and "rt_barrier" not in cpu and "RT_LOCAL float buf[1024];" in cpu, cpu
    flat = K.group_sum.source(x, out, target="cuda")
    assert "rt_barrier();" in flat and "rt_items" not in flat and "RT_LOCAL float buf[1024];" in flat, flat
    # A value used across barriers is kept per item; ids are recomputed in each block.
    src = K.private_across_barriers.source(x, x, target="cpu")
    assert "rt_private<float> mine;" in src and "mine[rt_it]" in src, src
    assert "rt_private<int64_t> lid" not in src and "lid = ((int64_t)get_local_id(0));" in src, src
    # Group code: the loop's counter is one value for the group, outside the blocks.
    assert "rt_private<int64_t> s" not in cpu and "int64_t s = 0;" in cpu, cpu


def test_barriers_in_device_functions_are_refused():
    with pytest.raises(runtime.CompileError) as e:
        runtime.Stream().launch_kernel(K.calls_device_with_barrier, runtime.empty(4, np.int64))
    msg = str(e.value)
    line = next(i for i, l in enumerate(open(K.__file__), 1) if "def device_with_barrier" in l) + 1
    assert f"jit_group_kernels.py:{line}:" in msg and "device_with_barrier" in msg and "kernel body" in msg, msg


def test_barrier_outside_a_kernel():
    with pytest.raises(runtime.InvalidValueError, match="kernel body"):
        runtime.barrier()
    with pytest.raises(runtime.InvalidValueError, match="kernel"):
        runtime.local_array(4, np.float32)
