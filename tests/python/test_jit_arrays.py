"""@runtime.jit on shaped arrays: a[y, x] on n-d device memory (its shape and strides are hidden parameters),
a.shape[d], a.strides[d] (bytes), a.ndim, a.size; buffers indexed a[i] stay flat (whatever their shape) and keep
the 1-D path; a view with other strides is indexed by its strides; mistakes are refused clearly."""
import numpy as np
import pytest

import runtime
from conftest import MODES, jit_run, skip_unless_kernels_run

import jit_group_kernels as K


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("shape", [(1, 1), (7, 13), (64, 33)])
def test_2d_indexing(mode, shape, rng):
    a, b = (rng.standard_normal(shape).astype(np.float32) for _ in range(2))
    *_, out = jit_run(mode, K.add_2d, [a, b, np.zeros(shape, np.float32)], global_size=shape[::-1])
    np.testing.assert_allclose(out, a + 2 * b, rtol=1e-6)


@pytest.mark.parametrize("mode", MODES)
def test_shape_strides_ndim_size(mode):
    a = np.zeros((5, 7), np.float64)
    _, out = jit_run(mode, K.shape_and_strides, [a, np.zeros(6, np.int64)], global_size=1)
    np.testing.assert_array_equal(out, [5, 7, 56, 8, 2, 35])


@pytest.mark.parametrize("mode", MODES)
def test_3d_indexing(mode, rng):
    a = rng.standard_normal((4, 3, 5))
    _, out = jit_run(mode, K.sum_3d, [a, np.zeros(4)], global_size=4)
    np.testing.assert_allclose(out, a.sum(axis=(1, 2)), rtol=1e-12)


@pytest.mark.parametrize("mode", MODES)
def test_1d_shape(mode):
    _, out = jit_run(mode, K.length_of, [np.zeros(9, np.float32), np.zeros(3, np.int64)], global_size=3)
    np.testing.assert_array_equal(out, [9, 9, 9])


@pytest.mark.parametrize("mode", MODES)
def test_a_view_with_another_shape_is_indexed_by_it(mode, rng):
    skip_unless_kernels_run() if mode == "compiled" else None
    a = rng.standard_normal(24).astype(np.float32)
    mem = runtime.to_device(a).view(shape=(4, 6))
    out = runtime.to_device(np.zeros((4, 6), np.float32))
    k = runtime.jit(K.add_2d.fn, interpret=(mode == "reference"))
    s = runtime.Stream()
    s.launch_kernel(k, mem, mem, out, global_size=(6, 4))
    s.synchronize()
    np.testing.assert_allclose(out.numpy(), 3 * a.reshape(4, 6), rtol=1e-6)


def test_flat_buffers_keep_the_1d_path():
    """A kernel that indexes its buffers a[i] has no hidden parameters, whatever the memory's shape."""
    a = runtime.empty((4, 4), np.float32)
    from jit_kernels import saxpy
    src = saxpy.source(2.0, a, a, a, target="cpu")
    head = next(line for line in src.splitlines() if line.startswith("RT_KERNEL void saxpy("))
    assert "shape" not in head and "stride" not in head, head
    src2 = K.add_2d.source(a, a, a, global_size=(4, 4), target="cpu")
    assert "int64_t rt_a_shape0" in src2 and "a[" in src2 and "rt_a_stride0" in src2, src2
    assert "rt_a_stride1" not in src2  # contiguous: the last stride is 1


def test_signatures_follow_rank(rng):
    skip_unless_kernels_run()
    k = runtime.jit(K.length_of.fn)
    s = runtime.Stream()
    o = runtime.empty(1, np.int64)
    s.launch_kernel(k, runtime.empty(5, np.float32), o, global_size=1)
    s.launch_kernel(k, runtime.empty(8, np.float32), o, global_size=1)
    s.synchronize()
    assert o.numpy()[0] == 8 and len(k.signatures) == 1  # one 1-D signature: the length is a parameter
    with pytest.raises(runtime.CompileError, match="constant dimension"):
        k2 = runtime.jit(K.shape_and_strides.fn)
        s.launch_kernel(k2, runtime.empty(5, np.float32), runtime.empty(6, np.int64), global_size=1)


def test_wrong_rank_is_refused():
    with pytest.raises(runtime.CompileError, match=r"'a' is a 3-D array, indexed with 2"):
        runtime.Stream().launch_kernel(K.add_2d, runtime.empty((2, 2, 2), np.float32),
                                       runtime.empty((2, 2), np.float32), runtime.empty((2, 2), np.float32),
                                       global_size=(2, 2))


def test_strided_memory_indexed_flat_is_refused_on_cached_paths():
    """Strided memory where the kernel indexes a buffer flat is refused on a launch that finds the kernel compiled
    and its launch plan cached for that dtype (the fast key looks at dtypes), not only on a first launch."""
    skip_unless_kernels_run()
    from jit_kernels import saxpy
    k = runtime.jit(saxpy.fn)
    strided = runtime.from_dlpack(np.arange(16, dtype=np.float32).reshape(4, 4)[:, ::2])
    assert not strided.is_contiguous
    out, a = runtime.empty(8, np.float32), runtime.to_device(np.ones(8, np.float32))
    s = runtime.Stream()
    for _ in range(2):  # compiled, and its plan cached, for float32 memory
        s.launch_kernel(k, 2.0, a, a, out, global_size=8)
    s.synchronize()
    for _ in range(2):
        with pytest.raises(runtime.InvalidValueError, match="strided device memory, which the kernel indexes flat"):
            s.launch_kernel(k, 2.0, strided, a, out, global_size=8)
    s.launch_kernel(k, 2.0, a, a, out, global_size=8)  # contiguous memory still takes the cached plan
    s.synchronize()
    np.testing.assert_array_equal(out.numpy(), np.full(8, 3, np.float32))


def test_strided_memory_refused_after_a_default_shaped_contiguous_launch():
    """The fastest path (Stream.launch_kernel with no sizes: the C++ LaunchPlan of the previous default-shaped
    launch) declines strided memory of the plan's dtype, so the full path refuses it; contiguous memory keeps it."""
    skip_unless_kernels_run()
    from jit_kernels import saxpy
    k = runtime.jit(saxpy.fn)
    strided = runtime.from_dlpack(np.arange(16, dtype=np.float32).reshape(4, 4)[:, ::2])
    assert not strided.is_contiguous and strided.dtype == np.float32
    out, a = runtime.empty(8, np.float32), runtime.to_device(np.ones(8, np.float32))
    s = runtime.Stream()
    for _ in range(2):  # the second launch takes the plan the first one left
        s.launch_kernel(k, 2.0, a, a, out)
    s.synchronize()
    assert k._last_plan is not None
    for _ in range(2):
        with pytest.raises(runtime.InvalidValueError, match="strided device memory, which the kernel indexes flat"):
            s.launch_kernel(k, 2.0, strided, a, out)
        with pytest.raises(runtime.InvalidValueError, match="strided device memory, which the kernel indexes flat"):
            s.launch_kernel(k, 2.0, a, a, strided)
    s.launch_copy(out, np.zeros(8, np.float32))
    s.launch_kernel(k, 2.0, a, a, out)  # contiguous memory still takes the plan
    s.synchronize()
    np.testing.assert_array_equal(out.numpy(), np.full(8, 3, np.float32))


@runtime.jit
def _copy_ro(src, dst):
    i = runtime.get_global_id(0)
    dst[i] = src[i] * 2.0


@runtime.jit
def _write_through_atomic(src, dst):
    runtime.atomic_add(src, 0, 1.0)
    dst[runtime.get_global_id(0)] = 0.0


@pytest.mark.parametrize("mode", MODES)
def test_read_only_memory_passes_where_the_kernel_only_reads(mode):
    """Read-only memory (imported read-only) is taken where the kernel only reads and refused, naming the
    parameter, where it stores or hands the buffer to a call (an atomic, a device function)."""
    if mode == "compiled":
        skip_unless_kernels_run()
    host = np.arange(64, dtype=np.float32)
    host.flags.writeable = False
    src = runtime.from_dlpack(host)
    assert src.readonly
    dst = runtime.zeros(64, np.float32)
    s = runtime.Stream()
    copy_ro = runtime.jit(_copy_ro.fn, interpret=mode == "reference")
    atomic = runtime.jit(_write_through_atomic.fn, interpret=mode == "reference")
    s.launch_kernel(copy_ro, src, dst)
    s.synchronize()
    np.testing.assert_array_equal(dst.numpy(), host * 2)
    with pytest.raises(runtime.InvalidValueError, match=r"argument 1 \('dst'\).*read-only"):
        s.launch_kernel(copy_ro, dst, src)
    with pytest.raises(runtime.InvalidValueError, match=r"argument 0 \('src'\).*read-only"):
        s.launch_kernel(atomic, src, dst)
    s.synchronize()
    np.testing.assert_array_equal(host, np.arange(64, dtype=np.float32))


def _alias_store(src, dst):
    i = runtime.get_global_id(0)
    b = src
    b[i] = 7.0
    dst[i] = 1.0


def test_reference_mode_never_stores_into_read_only_memory():
    """The reference mode's host views of read-only memory are read-only: a store through an alias the launch's
    check cannot see raises instead of writing the producer's array."""
    host = np.arange(8, dtype=np.float32)
    host.flags.writeable = False
    src = runtime.from_dlpack(host)
    s = runtime.Stream()
    with pytest.raises(runtime.Error, match="read-only"):
        s.launch_kernel(runtime.jit(_alias_store, interpret=True), src, runtime.zeros(8, np.float32))
        s.synchronize()
    np.testing.assert_array_equal(host, np.arange(8, dtype=np.float32))

