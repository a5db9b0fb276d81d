"""Tests of runtime.Module / runtime.Function (kernel-dialect C++ sources) and of the _core binding's error mapping."""
import numpy as np
import pytest

import runtime
from runtime import _core

SRC = """
RT_DEVICE float twice(float x) { return x * 2.0f; }
RT_KERNEL void scale(const float* in, float* out, int32_t n, float k) {
    size_t i = get_global_id(0);
    if (i < (size_t)n) out[i] = twice(in[i]) * k;
}
RT_KERNEL void must_be_positive(const double* x, int64_t n) {
    size_t i = get_global_id(0);
    if (i < (size_t)n) rt_assert(x[i] > 0);
}
"""


def test_module_launch(stream):
    m = runtime.Module(SRC)
    f = m.get_function("scale")
    assert f.param_sizes == [8, 8, 4, 4]
    x = np.arange(100, dtype=np.float32)
    a, b = runtime.to_device(x), runtime.alloc(x.nbytes)
    stream.launch_kernel(f, a, b, 100, 0.5)
    stream.synchronize()
    assert np.array_equal(b.numpy(), x)


COUNT_SRC = """
RT_KERNEL void count_items(int32_t* hits, uint64_t gx, uint64_t gy) {
    atomic_add(&hits[get_global_id(1) * gx + get_global_id(0)], 1);
}
"""


@pytest.mark.parametrize("glob,local", [((1000,), (256,)), ((37, 23), (16, 16)), ((5, 3), (4, 2)), ((1,), (64,))])
def test_module_launch_runs_exactly_the_global_size(stream, glob, local):
    """global_size need not be a multiple of local_size: every item runs once, none past the size (the kernel
    has no bounds test: no backend runs the items past a launch's global size)."""
    f = runtime.Module(COUNT_SRC).get_function("count_items")
    gx, gy = (glob + (1,))[:2]
    n = gx * gy
    hits = runtime.to_device(np.zeros(n + 4096, np.int32))  # room past the end for runs that must not happen
    stream.launch_kernel(f, hits, gx, gy, global_size=glob, local_size=local)
    stream.synchronize()
    h = hits.numpy()
    assert np.array_equal(h[:n], np.ones(n, np.int32)) and not h[n:].any()


def test_module_launch_with_too_many_groups_is_invalid(stream):
    f = runtime.Module(COUNT_SRC).get_function("count_items")
    hits = runtime.alloc(64, dtype=np.int32)
    with pytest.raises(runtime.InvalidValueError, match="groups per dimension"):
        stream.launch_kernel(f, hits, 1, 1, global_size=(2**40,), local_size=(1,))
    stream.synchronize()


def test_module_errors(stream):
    with pytest.raises(runtime.CompileError) as e:
        runtime.Module("RT_KERNEL void broken(float* x) { x[0] = undefined_thing; }")
    assert "RT_ERROR_COMPILE_FAILED" in str(e.value) and "undefined_thing" in str(e.value)
    m = runtime.Module(SRC)
    with pytest.raises(runtime.NotFoundError) as e:
        m.get_function("nope")
    assert "scale" in str(e.value)  # the message lists the module's kernels
    f = m.get_function("scale")
    d = runtime.alloc(16)
    with pytest.raises(runtime.InvalidValueError, match="takes 4"):
        stream.launch_kernel(f, d, d, 4)
    with pytest.raises(runtime.InvalidValueError, match="cannot pass"):
        stream.launch_kernel(f, d, d, 2**40, 1.0)
    with pytest.raises(runtime.InvalidValueError, match="cannot pass"):
        stream.launch_kernel(f, d, d, "4", 1.0)
    with pytest.raises(runtime.InvalidValueError):
        runtime.Module(b"bytes")


def test_module_assert_is_launch_error(stream):
    f = runtime.Module(SRC).get_function("must_be_positive")
    x = runtime.to_device(np.array([1.0, -1.0]))
    stream.launch_kernel(f, x, 2)
    with pytest.raises(runtime.LaunchError, match="x\\[i\\] > 0"):
        stream.synchronize()
    stream.synchronize()


def test_unloaded_module_refuses_lookup():
    m = runtime.Module(SRC)
    m.unload()
    with pytest.raises(runtime.InvalidValueError, match="unloaded"):
        m.get_function("scale")


def test_core_error_mapping_carries_name_message_and_code():
    with pytest.raises(runtime.InvalidHandleError) as e:
        _core.stream_synchronize(0xDEAD0)
    assert str(e.value).startswith("RT_ERROR_INVALID_HANDLE: ")
    assert e.value.code == 3
    with pytest.raises(runtime.InvalidValueError) as e:
        _core.memcpy(0, 0, 16, 99)
    assert len(str(e.value)) > len("RT_ERROR_INVALID_VALUE: ")
    assert _core.get_error_name(1) == "RT_ERROR_INVALID_VALUE"
    assert _core.ERROR_CODES["RT_ERROR_LAUNCH_FAILED"] == 7
