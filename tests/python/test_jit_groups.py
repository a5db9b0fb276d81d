"""@runtime.jit kernels with runtime.barrier() and runtime.local_array(): compiled (the cpu group form, rt_items
blocks; the flat form elsewhere) against the reference mode (items of a group stepped from barrier to barrier) and
numpy, for group sizes 1, 7, 64, 256 and 1024 and 2-D/3-D groups; reductions, scans, transposes and tiled products
through local arrays; divergent barriers refused; whole groups required."""

import numpy as np
import pytest

import runtime
from conftest import MODES, jit_run, skip_unless_kernels_run

import jit_group_kernels as K


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("group", [1, 7, 64, 256, 1024])
def test_group_sum_every_group_size(mode, group, rng):
    groups = 3
    x = rng.standard_normal(group * groups).astype(np.float32)
    _, out = jit_run(mode, K.group_sum, [x, np.zeros(groups, np.float32)], local_size=group)
    np.testing.assert_allclose(out, x.reshape(groups, group).sum(axis=1), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("group", [1, 7, 64, 256, 1024])
def test_group_reverse_reads_other_items_writes(mode, group, rng):
    x = rng.integers(-1000, 1000, group * 2).astype(np.int32)
    _, out = jit_run(mode, K.group_reverse, [x, np.zeros_like(x)], local_size=group)
    np.testing.assert_array_equal(out, x.reshape(2, group)[:, ::-1].ravel())


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("group", [7, 64, 256])
def test_group_scan(mode, group, rng):
    x = rng.integers(-50, 50, group * 3).astype(np.int64)
    _, out = jit_run(mode, K.group_scan, [x, np.zeros_like(x)], local_size=group)
    np.testing.assert_array_equal(out, np.cumsum(x.reshape(3, group), axis=1).ravel())


@pytest.mark.parametrize("mode", MODES)
def test_transpose_through_a_2d_local_tile(mode, rng):
    n = 48
    a = rng.standard_normal((n, n)).astype(np.float32)
    _, out = jit_run(mode, K.transpose_tiles, [a.ravel(), np.zeros(n * n, np.float32), n], global_size=(n, n),
                     local_size=(16, 16))
    np.testing.assert_array_equal(out.reshape(n, n), a.T)


@pytest.mark.parametrize("mode", MODES)
def test_tiled_matmul_flat(mode, rng):
    n = 48
    a, b = (rng.standard_normal((n, n)).astype(np.float32) for _ in range(2))
    *_, c = jit_run(mode, K.matmul_tiled_flat, [a.ravel(), b.ravel(), np.zeros(n * n, np.float32), n],
                    global_size=(n, n), local_size=(16, 16))
    np.testing.assert_allclose(c.reshape(n, n), a @ b, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("mode", MODES)
def test_tiled_matmul_on_shaped_arrays(mode, rng):
    n = 32
    a, b = (rng.standard_normal((n, n)).astype(np.float32) for _ in range(2))
    *_, c = jit_run(mode, K.matmul_tiled, [a, b, np.zeros((n, n), np.float32)], global_size=(n, n), local_size=(16, 16))
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("local", [(4, 4, 4), (2, 8, 1), (1, 1, 1)])
def test_3d_groups(mode, local):
    glob = (local[0] * 2, local[1] * 2, local[2] * 2)
    out, = jit_run(mode, K.group_ids_3d, [np.zeros(int(np.prod(glob)), np.int32)], global_size=glob, local_size=local)
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
    _, out = jit_run(mode, K.private_across_barriers, [x, np.zeros_like(x)])
    mine = x * 2
    left = np.roll(mine.reshape(2, 256), 1, axis=1).ravel()
    np.testing.assert_allclose(out, mine + left + left, rtol=1e-6)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("rounds", [0, 1, 5])
def test_uniform_loop_with_barrier(mode, rounds):
    x = np.arange(128, dtype=np.int32)
    _, out = jit_run(mode, K.uniform_for_with_barrier, [x, np.zeros_like(x), rounds], local_size=64)
    want = x.reshape(2, 64).copy()
    for r in range(rounds):
        want = np.roll(want, -1, axis=1) + r
    np.testing.assert_array_equal(out, want.ravel())


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("flag", [0, 1])
def test_uniform_if_with_barrier(mode, flag):
    x = np.arange(128, dtype=np.int32)
    _, out = jit_run(mode, K.uniform_if_with_barrier, [x, np.zeros_like(x), flag], local_size=64)
    want = x.reshape(2, 64)[:, ::-1].ravel() if flag else -x
    np.testing.assert_array_equal(out, want)


@pytest.mark.parametrize("mode", MODES)
def test_local_array_without_barrier(mode, rng):
    x = rng.standard_normal(1000).astype(np.float32)  # a partial last group: no barrier, so allowed
    _, out = jit_run(mode, K.local_no_barrier, [x, np.zeros_like(x)])
    np.testing.assert_allclose(out, (x + 1) * 2, rtol=1e-6)


@pytest.mark.parametrize("mode", MODES)
def test_sum_with_atomic_total(mode, rng):
    x = rng.standard_normal(256 * 8)
    _, total = jit_run(mode, K.group_sum_atomic, [x, np.zeros(1)])
    np.testing.assert_allclose(total[0], x.sum(), rtol=1e-9)


@pytest.mark.parametrize("mode", MODES)
def test_local_memory_does_not_leak_between_groups(mode):
    """Each group starts from what its own items write: a group whose items write nothing to slot i reads what
    another group left there only if memory leaked; here every group writes every slot, and sums must be its own."""
    x = np.repeat(np.arange(16, dtype=np.float32), 64)  # group g holds 64 copies of g
    _, out = jit_run(mode, K.group_sum, [x, np.zeros(16, np.float32)], local_size=64)
    np.testing.assert_array_equal(out, np.arange(16, dtype=np.float32) * 64)


@pytest.mark.parametrize("mode", MODES)
def test_barrier_kernels_need_whole_groups(mode):
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


# ---- item loops and the unsigned order (groups.py, translate.py)

@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("group", [1, 7, 64, 256, 1024])
def test_grid_stride_item_loop(mode, group, rng):
    groups = 3
    n = group * groups * 4 + 5  # a partial last step: items past n skip it
    x = rng.standard_normal(n).astype(np.float32)
    _, out = jit_run(mode, K.grid_stride_sum, [x, np.zeros(groups, np.float32), n], global_size=group * groups,
                     local_size=group)
    gs = group * groups
    want = [sum(float(x[i]) for g in range(k * group, (k + 1) * group) for i in range(g, n, gs))
            for k in range(groups)]
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4)


def test_grid_stride_sums_are_the_flat_forms_bit_for_bit(rng):
    """The item loop changes the order between items only: each item's sum is the one its flat twin (cuda's form,
    each item looping alone; here the reference mode) computes, in float32, in the same order."""
    group, groups = 64, 4
    n = group * groups * 9 + 17
    x = rng.standard_normal(n).astype(np.float32)
    outs = [jit_run(mode, K.grid_stride_sum, [x, np.zeros(groups, np.float32), n], global_size=group * groups,
                    local_size=group)[1] for mode in MODES]
    np.testing.assert_array_equal(outs[0], outs[1])


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("group", [1, 7, 64, 256, 1024])
def test_item_loop_forms(mode, group, rng):
    groups, n = 2, 5
    m = group * groups + 3
    x = rng.integers(-100, 100, m).astype(np.int64)
    _, out = jit_run(mode, K.item_loop_forms, [x, np.zeros(2 * group * groups, np.int64), n, m],
                     global_size=group * groups, local_size=group)
    gsz = group * groups
    acc, last = np.zeros(gsz, np.int64), np.full(gsz, -1, np.int64)
    for g in range(gsz):
        acc[g] = sum(int(x[(k * 7 + g) % m]) for k in range(n))
        for i in range(g, m, gsz):
            acc[g] += 3 * int(x[i])
            last[g] = i
    mirrored = acc.reshape(groups, group)[:, ::-1].ravel()
    np.testing.assert_array_equal(out[0::2], acc + mirrored)
    np.testing.assert_array_equal(out[1::2], last)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("local", [(16, 16), (4, 8), (1, 1)])
def test_item_loop_in_2d_groups(mode, local, rng):
    rows, cols = 45, 2 * local[0]
    a = rng.standard_normal(rows * cols)
    gy = 2 * local[1]
    _, out = jit_run(mode, K.column_sums_2d, [a, np.zeros(2 * cols), rows, cols], global_size=(cols, gy),
                     local_size=local)
    a2 = a.reshape(rows, cols)
    want = np.zeros((2, cols))
    for r in range(rows):
        want[(r % gy) // local[1], :] += a2[r]
    np.testing.assert_allclose(out.reshape(2, cols), want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("group", [1, 7, 64])
def test_loops_left_to_the_items(mode, group, rng):
    n = group * 3
    x = rng.integers(0, 100, n).astype(np.int64)
    _, out = jit_run(mode, K.loops_left_to_items, [x, np.zeros(n, np.int64), n], local_size=group)
    first = np.array([next((i for i in range(g, n, n) if x[i] > 50), -1) for g in range(n)])
    c = np.array([sum(int(x[(g + k) % n]) for k in range(4)) for g in range(n)])
    np.testing.assert_array_equal(out, first.reshape(3, group)[:, ::-1].ravel() * 1000 + c)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("v", [-7, 2, 100])
def test_unsigned_order_only_for_values_known_nonnegative(mode, v):
    group = 8
    x = np.arange(group * 2, dtype=np.int32)
    _, out = jit_run(mode, K.signed_and_unsigned_order, [x, np.zeros_like(x), v], local_size=group)
    lid = np.tile(np.arange(group), 2)
    s, m = group // 2, v % 5
    want = (lid < s) * 1 + (lid - 3 < s) * 10 + (m <= lid) * 100 + (v < lid) * 1000 + x
    np.testing.assert_array_equal(out, want)


def test_generated_item_loops_and_unsigned_comparisons():
    x, out = runtime.empty(4096, np.float32), runtime.empty(4, np.float32)
    src = K.grid_stride_sum.source(x, out, 4096, global_size=1024, target="cpu")
    assert "an item loop" in src and "rt_g" in src, src
    loop = src[src.index("an item loop"):]
    assert loop.index("for (int64_t rt_g") < loop.index("rt_items(rt_it)"), src  # the items innermost
    assert "rt_private<float> acc;" in src, src
    flat = K.grid_stride_sum.source(x, out, 4096, global_size=1024, target="cuda")
    assert "item loop" not in flat and "rt_items" not in flat, flat
    # Left to the items: a loop that breaks, and one with a constant trip count.
    a = runtime.empty(64, np.int64)
    left = K.loops_left_to_items.source(a, a, 64, target="cpu")
    assert "item loop" not in left, left
    two_d = K.column_sums_2d.source(runtime.empty(64), runtime.empty(64), 4, 16, global_size=(16, 16), target="cpu")
    assert "an item loop" in two_d and "get_local_id(1)" in two_d, two_d
    order = K.signed_and_unsigned_order.source(runtime.empty(8, np.int32), runtime.empty(8, np.int32), 3,
                                                target="cpu")
    assert "((uint64_t)(lid) < (uint64_t)(s))" in order, order  # both >= 0
    assert "((uint64_t)(m) <= (uint64_t)(lid))" in order, order  # m = v % 5 is >= 0 whatever v
    assert "(d < s)" in order and "(v < lid)" in order, order  # d and v may be negative: signed


# ---- uniformity through parameters and memory

def test_a_reassigned_parameter_is_not_uniform():
    """n = get_local_id(0) makes the parameter per item: the loop around the barrier is divergent, refused when
    compiled (cpu and cuda alike), reported by the reference mode at run time."""
    args = (8, runtime.empty(8, np.int64))
    for target in ("cpu", "cuda"):
        with pytest.raises(runtime.CompileError, match="per-item value 'n'") as e:
            K.divergent_through_reassigned_parameter.source(*args, target=target)
        assert "jit_group_kernels.py:" in str(e.value), e.value
    with pytest.raises(runtime.LaunchError, match="divergent control flow"):
        jit_run("reference", K.divergent_through_reassigned_parameter, [8, np.zeros(8, np.int64)], global_size=8,
                local_size=8)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("group", [1, 7, 64])
def test_a_parameter_assigned_uniformly_stays_a_group_value(mode, group):
    n = 7
    (out,) = jit_run(mode, K.reassigned_parameter_stays_uniform, [n, np.zeros(2 * group, np.int64)],
                     local_size=group)
    lid = np.tile(np.arange(group), 2)
    np.testing.assert_array_equal(out, (n // 2) * (group - lid))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("group", [1, 7, 64])
def test_memory_tested_through_a_group_local(mode, group):
    done, out = jit_run(mode, K.flag_loop_through_a_group_local, [np.zeros(3, np.int32),
                                                                  np.zeros(3 * group, np.int64)],
                        global_size=3 * group, local_size=group)
    np.testing.assert_array_equal(done, [1, 1, 1])
    np.testing.assert_array_equal(out, np.ones(3 * group))


@pytest.mark.parametrize("mode", MODES)
def test_a_shape_in_a_barrier_loop_range_is_uniform(mode, rng):
    x = rng.standard_normal((5, 64))
    _, out = jit_run(mode, K.loop_over_a_shape_with_barriers, [x, np.zeros(64)], global_size=64, local_size=32)
    want = x.reshape(5, 2, 32)[:, :, ::-1].reshape(5, 64).sum(axis=0)
    np.testing.assert_allclose(out, want, rtol=1e-12)


def test_memory_in_a_barrier_loop_condition_is_refused_on_every_target():
    """A condition that reads memory is evaluated by each item at its own time in the flat (cuda) form: refused on
    every target alike, with the way to write it (its file and line: jit_bad_kernels.py, test_jit.py)."""
    import jit_bad_kernels as B
    d = runtime.empty(4, np.int32)
    for target in ("cpu", "cuda"):
        with pytest.raises(runtime.CompileError, match=r"reads memory \('done\[0\]'\).*runtime.barrier\(\); v = "):
            B.barrier_in_while_reading_memory.source(d, target=target)


# ---- indices past a shaped array's dimensions (docs/jit.md "Shaped arrays")

@pytest.mark.parametrize("y,x", [(0, 4), (1, 5), (2, 4), (3, 0), (-4, 0), (0, -5)])
def test_reference_mode_checks_every_axis(y, x):
    """The reference mode indexes as NumPy does: an index past its own axis raises IndexError even where the flat
    offset y * 4 + x would be inside the memory (compiled kernels check that in checked mode only); a negative index
    is an error, not counted from the end as NumPy would (compiled kernels refuse it too)."""
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    if y < 0 or x < 0:
        match = f"IndexError: index {min(y, x)} is negative: kernels index from 0"
    else:
        match = (f"IndexError: index {y if not y < 3 else x} is out of bounds for axis {0 if not y < 3 else 1} "
                 f"with size {3 if not y < 3 else 4}")
    with pytest.raises(runtime.LaunchError, match=match):
        jit_run("reference", K.read_2d, [a, np.zeros(1, np.float32), y, x], global_size=1)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("y,x", [(0, 0), (1, 3), (2, 1)])
def test_indices_inside_the_shape(mode, y, x):
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    _, out = jit_run(mode, K.read_2d, [a, np.zeros(1, np.float32), y, x], global_size=1)
    assert out[0] == a[y, x]
