"""The one argument packer (_core.LaunchPlan, runtime/launch.py) of @runtime.jit kernels and runtime.Function:
both pack through it, values of every parameter size arrive exactly, and an argument either kind of kernel cannot
take is refused with the same message: the kernel, the argument, what it was passed as and why."""
import numpy as np
import pytest

import runtime
from runtime import _core

import jit_kernels as K

ECHO_SRC = """
RT_KERNEL void echo(int64_t* out, double* fout, int8_t a, int16_t b, int32_t c, int64_t d, uint32_t e, uint64_t f,
                    float g, double h, bool t) {
    if (get_global_id(0) != 0) return;
    out[0] = a; out[1] = b; out[2] = c; out[3] = d; out[4] = (int64_t)e; out[5] = (int64_t)f; out[6] = t;
    fout[0] = g; fout[1] = h;
}
RT_KERNEL void scale(const float* in, float* out, int32_t n, float k) {
    size_t i = get_global_id(0);
    if (i < (size_t)n) out[i] = in[i] * k;
}
"""


@pytest.fixture(scope="module")
def module():
    return runtime.Module(ECHO_SRC)


def _echo(stream, f, *scalars):
    out, fout = runtime.to_device(np.zeros(8, np.int64)), runtime.to_device(np.zeros(2, np.float64))
    stream.launch_kernel(f, out, fout, *scalars, global_size=1)
    stream.synchronize()
    return out.numpy(), fout.numpy()


def test_module_and_jit_kernels_share_the_native_packer(stream, module):
    f = module.get_function("scale")
    assert isinstance(f._plan, _core.LaunchPlan) and not hasattr(f, "_pack")
    d = runtime.to_device(np.arange(8, dtype=np.float32))
    stream.launch_kernel(K.saxpy, 2.0, d, d, runtime.empty(8, np.float32))
    stream.synchronize()
    assert K.saxpy._plans and all(isinstance(p, _core.LaunchPlan) for p in K.saxpy._plans.values())
    assert not hasattr(K.saxpy.compiled(2.0, d, d, d), "pack")  # no Python packer beside the plan


def test_module_scalars_of_every_size_arrive_exactly(stream, module):
    f = module.get_function("echo")
    ints, floats = _echo(stream, f, -128, -32768, -2**31, -2**63, 2**32 - 1, 2**64 - 1, 0.5, 1e300, True)
    assert ints.tolist()[:7] == [-128, -32768, -2**31, -2**63, 2**32 - 1, -1, 1]  # uint64 max reads back as -1
    assert floats.tolist() == [0.5, 1e300]
    ints, floats = _echo(stream, f, np.int8(7), np.int16(-7), np.int32(70), np.int64(-70), np.uint32(9),
                         np.uint64(2**63), np.float32(0.25), np.float64(-2.5), np.bool_(False))
    assert ints.tolist()[:7] == [7, -7, 70, -70, 9, -2**63, 0] and floats.tolist() == [0.25, -2.5]


@pytest.mark.parametrize("index,value,why", [
    (0, 256, r"argument 2: cannot pass 256 as a 1-byte parameter \(does not fit\)"),
    (0, -129, r"argument 2: cannot pass -129 as a 1-byte parameter \(does not fit\)"),
    (4, 2**32, r"argument 6: cannot pass 4294967296 as a 4-byte parameter \(does not fit\)"),
    (3, -2**63 - 1, r"argument 5: cannot pass -9223372036854775809 as a 8-byte parameter \(does not fit\)"),
    (6, 1e300, r"argument 8: cannot pass 1e\+300 as a 4-byte parameter \(does not fit\)"),
    (6, np.float64(1.0), r"argument 8: cannot pass np.float64\(1.0\) as a 4-byte parameter \(it is 8 bytes\)"),
    (7, "1.0", r"argument 9: cannot pass '1.0' as a 8-byte parameter \(type str\)"),
    (1, True, r"argument 3: cannot pass True as a 2-byte parameter \(it is 1 byte\)"),
    (0, "mem", r"argument 2: cannot pass runtime.DeviceMemory\(.*\) as a 1-byte parameter \(it is 8 bytes\)"),
])
def test_module_refuses_arguments_its_parameters_cannot_take(stream, module, index, value, why):
    scalars = [1, 2, 3, 4, 5, 6, 0.5, 1.5, False]
    scalars[index] = runtime.empty(4, np.int8) if value == "mem" else value
    with pytest.raises(runtime.InvalidValueError, match="RT_ERROR_INVALID_VALUE: kernel 'echo' " + why):
        _echo(stream, module.get_function("echo"), *scalars)


@pytest.mark.parametrize("index,value,expect", [
    (8, True, (6, 1)), (7, 1.5, (None, 1.5)), (0, True, (0, 1)), (5, 2**64 - 1, (5, -1)), (0, 128, (0, -128)),
    (4, -1, (4, 2**32 - 1)),  # a negative int of the parameter's size: its two's complement, as int.to_bytes
])
def test_module_accepts_what_fits(stream, module, index, value, expect):
    scalars = [1, 2, 3, 4, 5, 6, 0.5, 1.5, False]
    scalars[index] = value
    ints, floats = _echo(stream, module.get_function("echo"), *scalars)
    slot, want = expect
    assert (floats[1] if slot is None else ints[slot]) == want


def test_jit_refusals_have_the_module_form(stream):
    d = runtime.to_device(np.zeros(4, np.float32))
    with pytest.raises(runtime.InvalidValueError,
                       match=r"kernel 'numpy_scalars' argument 3 \('k'\): cannot pass 1180591620717411303424 as "
                             r"int64 \(does not fit\)"):
        stream.launch_kernel(K.numpy_scalars, d, d, np.float32(1), 2**70)
    x = runtime.to_device(np.zeros(4, np.float64))
    out = runtime.empty(4, np.int32)
    with pytest.raises(runtime.InvalidValueError,
                       match=r"kernel 'annotated' argument 2 \('k'\): cannot pass 1e\+300 as float32 \(does not fit\)"):
        stream.launch_kernel(K.annotated, x, out, 1e300)
    stream.launch_kernel(K.annotated, x, out, 1.5)  # fits


def test_freed_memory_is_refused_by_both_with_the_memorys_own_message(stream, module):
    freed = runtime.alloc(64)
    runtime.free(freed)
    live = runtime.alloc(64)
    with pytest.raises(runtime.InvalidValueError, match="was freed"):
        stream.launch_kernel(module.get_function("scale"), freed, live, 4, 1.0, global_size=4)
    with pytest.raises(runtime.InvalidValueError, match="was freed"):
        stream.launch_kernel(K.fill_ids, freed, global_size=4)
    # An empty launch looks at no argument, as before: nothing to run.
    stream.launch_kernel(module.get_function("scale"), freed, live, 4, 1.0, global_size=0)
    stream.launch_kernel(K.fill_ids, freed, global_size=0)


def test_arity_is_checked_by_both(stream, module):
    d = runtime.alloc(64)
    with pytest.raises(runtime.InvalidValueError, match=r"kernel 'scale' takes 4 argument\(s\), got 3"):
        stream.launch_kernel(module.get_function("scale"), d, d, 4)
    with pytest.raises(runtime.InvalidValueError, match=r"kernel 'saxpy' takes 4 argument\(s\) \(a, x, y, out\)"):
        stream.launch_kernel(K.saxpy, 1.0, d)


def test_a_speculative_launch_declines_without_launching_and_a_strict_one_raises(stream):
    d = runtime.to_device(np.zeros(16, np.int32))
    stream.launch_kernel(K.fill_ids, d)
    stream.synchronize()
    plan = K.fill_ids._last_plan
    assert plan is not None and plan.launch((d,), stream.handle) is True
    fresh = runtime.to_device(np.zeros(16, np.int32))
    assert plan.launch((fresh.view(np.float32),), stream.handle) is None  # another dtype: not this plan's
    assert plan.launch((3,), stream.handle) is None
    runtime.free(fresh)
    assert plan.launch((fresh,), stream.handle) is None
    with pytest.raises(runtime.InvalidValueError, match="was freed"):
        plan.launch_strict((fresh,), stream.handle)
    stream.synchronize()
    assert (d.numpy() == np.arange(1, 17)).all()


def test_module_launch_keeps_the_module_alive_until_it_has_run(stream):
    f = runtime.Module(ECHO_SRC).get_function("scale")  # the only reference to the module is the function's
    x = runtime.to_device(np.arange(1 << 16, dtype=np.float32))
    y = runtime.empty(1 << 16, np.float32)
    stream.launch_kernel(f, x, y, 1 << 16, 3.0)
    del f
    stream.synchronize()
    assert np.array_equal(y.numpy(), np.arange(1 << 16, dtype=np.float32) * 3)
