"""print(...) in @runtime.jit kernels (rt_printf, the format from the values' types; the reference mode prints the
same text) and 16-bit floats: float16 buffers (rt_half storage, computed in float32) and bfloat16 where ml_dtypes
is installed."""
import numpy as np
import pytest

import runtime
from conftest import MODES, jit_run, skip_unless_kernels_run

import jit_group_kernels as K


@pytest.mark.parametrize("mode", MODES)
def test_print(mode, capfd):
    jit_run(mode, K.prints, [np.array([0.5, 2.25, 3, 4], np.float32), 4])
    jit_run(mode, K.prints_percent, [np.array([7], np.int32)], global_size=1)
    out = capfd.readouterr().out
    assert out == "item 1 of 4 value 2.25 True!\n100% of 7\n", repr(out)


def test_print_source():
    src = K.prints.source(runtime.empty(4, np.float32), 4, target="cuda")
    assert 'rt_printf("item %lld of %lld value %g %s!\\n"' in src, src


@pytest.mark.parametrize("mode", MODES)
def test_float16_buffers(mode, rng):
    x = rng.uniform(0, 4, 300).astype(np.float16)
    y = rng.uniform(-1, 1, 300).astype(np.float16)
    *_, out = jit_run(mode, K.half_axpy, [np.float16(1.5), x, y, np.zeros(300, np.float16)])
    assert out.dtype == np.float16
    np.testing.assert_allclose(out.astype(np.float32), 1.5 * x.astype(np.float32) + y, rtol=2e-3, atol=2e-3)
    _, out2 = jit_run(mode, K.half_math, [x, np.zeros(300, np.float16)])
    np.testing.assert_allclose(out2.astype(np.float32), np.sqrt(x.astype(np.float32)) + 0.5, rtol=2e-3)
    _, out3 = jit_run(mode, K.half_to_float, [x, np.zeros(300, np.float32)])
    np.testing.assert_allclose(out3, x.astype(np.float32) * 3, rtol=1e-6)


def test_float16_source_stores_rt_half():
    h = runtime.empty(8, np.float16)
    src = K.half_axpy.source(np.float16(2), h, h, h, target="cuda")
    assert "rt_half* x" in src and "(float)x[" in src and "rt_half(" in src, src


@pytest.mark.parametrize("mode", MODES)
def test_bfloat16_buffers(mode, rng):
    ml_dtypes = pytest.importorskip("ml_dtypes")
    bf = np.dtype(ml_dtypes.bfloat16)
    x = rng.uniform(0, 4, 100).astype(bf)
    _, out = jit_run(mode, K.half_to_float, [x, np.zeros(100, np.float32)])
    np.testing.assert_allclose(out, x.astype(np.float32) * 3, rtol=1e-6)
    *_, out2 = jit_run(mode, K.half_axpy, [np.float32(2), x, x, np.zeros(100, bf)])
    assert out2.dtype == bf
    np.testing.assert_allclose(out2.astype(np.float32), 3 * x.astype(np.float32), rtol=1e-2)
