"""Kernels used by test_jit.py (in a module of their own so CompileError line numbers can be checked against it)."""
import math

import numpy as np

import runtime
from runtime import get_global_id as gid

SCALE = 3  # a module-level constant read at compile time


@runtime.jit
def saxpy(a, x, y, out):
    i = runtime.get_global_id()
    out[i] = a * x[i] + y[i]


@runtime.jit
def int_arith(a, b, q, r, p):
    i = gid(0)
    q[i] = a[i] // b[i]
    r[i] = a[i] % b[i]
    p[i] = (a[i] * SCALE - b[i]) ^ (a[i] & 7) | (b[i] << 1)


@runtime.jit
def float_floordiv_mod(a, b, q, r):
    i = gid()
    q[i] = a[i] // b[i]
    r[i] = a[i] % b[i]


@runtime.jit
def control_flow(x, out, n):
    i = runtime.get_global_id()
    v = x[i]
    if v < -1:
        out[i] = -1
    elif v < 0:
        out[i] = 0
    elif v < 1 and not v < 0.5:
        out[i] = 1
    else:
        out[i] = 2
    # while with break/continue: count the odd numbers below |i % 17| but stop at 11
    k = 0
    c = 0
    while True:
        k += 1
        if k > i % 17:
            break
        if k % 2 == 0:
            continue
        if k == 11:
            break
        c += 1
    out[i] = out[i] * 100 + c
    for j in range(n, 0, -3):
        out[i] += j


@runtime.jit
def math_funcs(x, y, f, ints):
    i = runtime.get_global_id()
    v = x[i]
    y[i] = math.sqrt(abs(v)) + math.exp(-v * v) + math.sin(v) * math.cos(v) + math.log(1.0 + abs(v)) \
        + math.atan2(v, 2.0) + math.pow(abs(v), 1.5) + math.tanh(v) + math.hypot(v, 1.0) + math.pi
    f[i] = math.fabs(v) + math.fmod(v, 0.75) + math.copysign(1.0, v) + math.log(abs(v) + 2.0, 2.0)
    ints[i] = math.floor(v) + math.ceil(v) * 10 + math.trunc(float(v)) * 100 + int(math.isnan(v)) + int(math.isfinite(v))


@runtime.jit
def mixed_types(a, b, s, out_f, out_i):
    i = runtime.get_global_id()
    m = min(a[i], b[i], 5)
    M = max(float(a[i]), b[i])
    out_f[i] = m * s + M / 2 + (1.5 if a[i] > b[i] else -0.5) + abs(a[i] - 7)
    out_i[i] = int(b[i] * 3.7) + (a[i] > 3) + (a[i] != b[i] and a[i] > 0)


@runtime.jit
def accumulate(x, out, n):
    i = runtime.get_global_id()
    acc = 0
    for j in range(n):
        acc += x[(i + j) % n] * 0.5
    out[i] = acc


@runtime.jit
def small_ints(a, b, out):
    i = runtime.get_global_id()
    out[i] = a[i] + b[i] * 3 - a[i] * b[i]


@runtime.jit
def numpy_scalars(x, out, f, k):
    i = runtime.get_global_id()
    out[i] = x[i] * f + k + np.float32(0.25) + np.int16(2) * k


@runtime.jit
def ids(gid_out, lid, grp, ngr, gsz, lsz):
    i = runtime.get_global_id(0)
    gid_out[i] = i
    lid[i] = runtime.get_local_id(0)
    grp[i] = runtime.get_group_id(0)
    ngr[i] = runtime.get_num_groups(0)
    gsz[i] = runtime.get_global_size(0)
    lsz[i] = runtime.get_local_size(0)


@runtime.jit
def stencil2d(src, dst, w, h):
    x = runtime.get_global_id(0)
    y = runtime.get_global_id(1)
    if x > 0 and y > 0 and x < w - 1 and y < h - 1:
        c = y * w + x
        dst[c] = 0.2 * (src[c] + src[c - 1] + src[c + 1] + src[c - w] + src[c + w])
    else:
        dst[y * w + x] = src[y * w + x]


@runtime.jit
def histogram(x, bins, nbins):
    i = runtime.get_global_id()
    b = int(x[i] * nbins)
    if b >= nbins:
        b = nbins - 1
    runtime.atomic_add(bins, b, 1)


@runtime.jit
def atomics_misc(x, mx, mn, ex, cas, old_out):
    i = runtime.get_global_id()
    runtime.atomic_max(mx, 0, x[i])
    runtime.atomic_min(mn, 0, x[i])
    runtime.atomic_exchange(ex, i, x[i] * 2)
    old_out[i] = runtime.atomic_cas(cas, i, 0.0, x[i])


@runtime.jit
def power_bits(a, out_i, out_f):
    i = runtime.get_global_id()
    out_i[i] = a[i] ** 3 + (2 ** (i % 10)) + (~a[i]) + (a[i] >> 1)
    out_f[i] = (a[i] * 0.5) ** 2.0 + 2.0 ** -1


@runtime.jit
def early_return(x, out):
    i = runtime.get_global_id()
    if x[i] < 0:
        return
    out[i] = x[i] + 1


@runtime.jit
def annotated(x: "float64", out: np.int32, k: np.float32):
    i = runtime.get_global_id()
    t: np.float32 = x[i] * k
    out[i] = int(t)


@runtime.jit
def checked(x):
    i = runtime.get_global_id()
    assert x[i] >= 0


@runtime.jit
def fill_ids(out):
    out[runtime.get_global_id()] = runtime.get_global_id() + 1


@runtime.jit
def bool_buffers(x, flags, out):
    i = runtime.get_global_id()
    flags[i] = x[i] > 0.5
    out[i] = flags[i] + 1


@runtime.jit
def inf_nan_max4(x, out):
    # A max over 4 seeded with -inf, then inf turned into nan: the non-finite literals NVRTC has no builtins for.
    i = gid()
    m = -math.inf
    for k in range(4):
        if x[i * 4 + k] > m:
            m = x[i * 4 + k]
    if m == math.inf:
        m = math.nan
    out[i] = m
