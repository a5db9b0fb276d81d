"""Kernels for test_jit_staging.py: which @runtime.jit kernels get a staged twin on cpu, and what they compute.

Run as a script it launches the qualifying ones over sizes with partial groups and checks them against numpy,
exiting non-zero on a mismatch (the test runs it with RUNTIME_CPU_STREAM_MIN_BYTES=0, every launch staged)."""
import sys

import numpy as np

import runtime
from runtime import get_global_id as gid

# ---------------------------------------------------------------- kernels that get a twin


@runtime.jit
def scale(out, inp):
    i = runtime.get_global_id()
    out[i] = inp[i] * 2


@runtime.jit
def stencil(out, inp, n):
    x = gid(0) + 1
    y = gid(1) + 1
    i = y * n + x
    out[i] = 0.2 * (inp[i] + inp[i - 1] + inp[i + 1] + inp[i - n] + inp[i + n])


@runtime.jit
def two_outputs(wide, narrow, inp, offset):
    """Two outputs of different widths at an offset, the index built up by augmented assignments."""
    i = gid(0)
    i += offset
    i -= 1
    v = inp[i - offset + 1]
    wide[i] = v * 0.5
    narrow[i] = int(v) & 255


@runtime.jit
def volume(out, nx, ny):
    """3-D: out[(z * ny + y) * nx + x] = a code of the ids; x through the local id and the group."""
    x = runtime.get_local_id(0) + runtime.get_group_id(0) * runtime.get_local_size(0)
    y = gid(1)
    z = gid(2)
    out[(z * ny + y) * nx + x] = z * 1000000 + y * 1000 + x


@runtime.jit
def transpose_rows(out, inp, n):
    """The store walks x (contiguous); the load walks a column: only the output matters."""
    x = gid(0)
    y = gid(1)
    out[y * n + x] = inp[x * n + y]


@runtime.jit
def flags(out, inp, limit):
    i = gid()
    out[i] = inp[i] > limit and inp[i] < 2 * limit


@runtime.jit
def seed_kernel(input_data, output_data, size):
    """The seed's kernel: a final guard that clips the rows at `size`."""
    idx = runtime.get_global_id()
    if idx < size:
        output_data[idx] = input_data[idx] * 2


@runtime.jit
def early_exit(out, inp, start, stop):
    """A guard as an early return (`size <= i`, inclusive the other way), on an index offset by `start`."""
    i = gid() + start
    if stop <= i:
        return
    v = inp[i]
    out[i] = v * v


# ---------------------------------------------------------------- kernels that do not


@runtime.jit
def branchy(out, inp):
    i = gid()
    if inp[i] > 0:
        out[i] = inp[i]
    else:
        out[i] = -inp[i]


@runtime.jit
def read_back(out, inp):
    i = gid()
    out[i] = inp[i]
    out[i] += 1


@runtime.jit
def strided(out, inp):
    i = gid()
    out[2 * i] = inp[i]


@runtime.jit
def reversed_index(out, inp, n):
    i = gid()
    out[n - 1 - i] = inp[i]


@runtime.jit
def narrow_index(out, inp):
    i: np.int32 = gid()
    out[i] = inp[i]


@runtime.jit
def with_atomic(out, inp, total):
    i = gid()
    out[i] = inp[i]
    runtime.atomic_add(total, 0, inp[i])


@runtime.jit
def stored_twice(out, inp):
    i = gid()
    out[i] = inp[i]
    out[i] = inp[i] * 2


@runtime.jit
def gathered_index(out, idx, inp):
    i = gid()
    out[idx[i]] = inp[i]


@runtime.jit
def column_store(out, inp, n):
    x = gid(0)
    y = gid(1)
    out[x * n + y] = inp[y * n + x]


@runtime.jit
def guard_with_else(out, inp, n):
    i = gid()
    if i < n:
        out[i] = inp[i]
    else:
        out[i] = 0


@runtime.jit
def guard_on_y(out, inp, n, h):
    x = gid(0)
    y = gid(1)
    if y < h:
        out[y * n + x] = inp[y * n + x]


@runtime.jit
def trailing_guard(out, inp, n):
    i = gid()
    if i > n:
        out[i] = inp[i]


@runtime.jit
def guard_then_more(out, inp, n):
    i = gid()
    if i < n:
        out[i] = inp[i]
    k = i + 1
    out[k - 1] = inp[i]


@runtime.jit
def guard_reads_output(out, inp):
    i = gid()
    if i < out[0]:
        out[i] = inp[i]


@runtime.jit
def float_guard(out, inp, limit):
    i = gid()
    if i < limit:
        out[i] = inp[i]


@runtime.jit
def looped(out, inp, k):
    i = gid()
    acc = 0.0
    for j in range(k):
        acc += inp[i] * j
    out[i] = acc


@runtime.jit
def staged_and_updated(out, inp, count):
    """A staged output beside a buffer updated in place (not staged): the row function must not update it."""
    i = gid()
    out[i] = inp[i] * 2
    count[i] += 1


# ---------------------------------------------------------------- the check (run as a script)


def check() -> None:
    rng = np.random.default_rng(7)
    s = runtime.Stream()

    for n, local in ((1, 1), (1000, 256), (4099, 1024), (100003, 1000), (77, 7)):
        a = rng.random(n, dtype=np.float32)
        d_in, d_out = runtime.to_device(a), runtime.empty(n + 16, np.float32)
        runtime.memset(d_out, 0xFF)
        s.launch_kernel(scale, d_out, d_in, global_size=n, local_size=local)
        s.synchronize()
        got = d_out.numpy()
        np.testing.assert_array_equal(got[:n], a * 2, err_msg=f"scale n={n}")
        assert np.isnan(got[n:]).all(), f"scale n={n}: written past the end"

    for n, local in ((7, (5, 1)), (130, (64, 2)), (1030, (1024, 1))):
        a = rng.random((n, n), dtype=np.float32)
        d_in, d_out = runtime.to_device(a.ravel()), runtime.empty(n * n, np.float32)
        runtime.memset(d_out, 0)
        s.launch_kernel(stencil, d_out, d_in, n, global_size=(n - 2, n - 2), local_size=local)
        s.synchronize()
        want = np.zeros_like(a)
        want[1:-1, 1:-1] = np.float32(0.2) * (a[1:-1, 1:-1] + a[:-2, 1:-1] + a[2:, 1:-1] + a[1:-1, :-2] + a[1:-1, 2:])
        np.testing.assert_allclose(d_out.numpy().reshape(n, n), want, rtol=1e-6, atol=1e-6, err_msg=f"stencil {n}")

    n, off = 5003, 3
    a = (rng.random(n) * 300).astype(np.float64)
    wide, narrow = runtime.empty(n + off, np.float64), runtime.empty(n + off, np.int8)
    runtime.memset(wide, 0)
    runtime.memset(narrow, 0)
    s.launch_kernel(two_outputs, wide, narrow, runtime.to_device(a), off, global_size=n - 1, local_size=100)
    s.synchronize()
    w, nw = wide.numpy(), narrow.numpy()
    np.testing.assert_array_equal(w[off - 1:off - 1 + n - 1], a[:n - 1] * 0.5)
    np.testing.assert_array_equal(nw[off - 1:off - 1 + n - 1], (a[:n - 1].astype(np.int64) & 255).astype(np.int8))
    assert not w[:off - 1].any() and not w[off - 1 + n - 1:].any(), "two_outputs: stray writes"

    nx, ny, nz = 1027, 5, 3
    out = runtime.empty(nx * ny * nz, np.int64)
    s.launch_kernel(volume, out, nx, ny, global_size=(nx, ny, nz), local_size=(256, 2, 1))
    s.synchronize()
    z, y, x = np.meshgrid(np.arange(nz), np.arange(ny), np.arange(nx), indexing="ij")
    np.testing.assert_array_equal(out.numpy().reshape(nz, ny, nx), z * 1000000 + y * 1000 + x)

    n = 300
    a = rng.random((n, n), dtype=np.float32)
    out = runtime.empty(n * n, np.float32)
    s.launch_kernel(transpose_rows, out, runtime.to_device(a.ravel()), n, global_size=(n, n), local_size=(128, 1))
    s.synchronize()
    np.testing.assert_array_equal(out.numpy().reshape(n, n), a.T)

    a = rng.random(10001, dtype=np.float32)
    out = runtime.empty(a.size, np.bool_)
    s.launch_kernel(flags, out, runtime.to_device(a), 0.25, global_size=a.size, local_size=1000)
    s.synchronize()
    np.testing.assert_array_equal(out.numpy(), (a > 0.25) & (a < 0.5))
    for n, size, local in ((1000, 1000, 256), (5000, 3001, 1024), (70000, 65537, 1000), (300, 0, 64)):
        a = rng.random(n, dtype=np.float32)
        d_in, d_out = runtime.to_device(a), runtime.empty(n, np.float32)
        runtime.memset(d_out, 0xFF)
        s.launch_kernel(seed_kernel, d_in, d_out, size, global_size=n, local_size=local)
        s.synchronize()
        got = d_out.numpy()
        np.testing.assert_array_equal(got[:size], a[:size] * 2, err_msg=f"seed_kernel n={n} size={size}")
        assert np.isnan(got[size:]).all(), f"seed_kernel n={n} size={size}: items past size written"

    for n, start, stop in ((4096, 5, 4000), (4096, 0, 4096), (4096, 100, 50)):
        a = rng.random(n, dtype=np.float32)
        d_out = runtime.empty(n, np.float32)
        runtime.memset(d_out, 0)
        s.launch_kernel(early_exit, d_out, runtime.to_device(a), start, stop, global_size=n - start, local_size=512)
        s.synchronize()
        want = np.zeros_like(a)
        want[start:stop] = a[start:stop] ** 2
        np.testing.assert_array_equal(d_out.numpy(), want, err_msg=f"early_exit {start}..{stop}")
    for n, local in ((4096, 256), (1001, 100)):
        a = rng.random(n, dtype=np.float32)
        d_out, count = runtime.empty(n, np.float32), runtime.to_device(np.zeros(n, np.int32))
        s.launch_kernel(staged_and_updated, d_out, runtime.to_device(a), count, global_size=n, local_size=local)
        s.synchronize()
        np.testing.assert_array_equal(d_out.numpy(), a * 2)
        np.testing.assert_array_equal(count.numpy(), np.ones(n, np.int32), err_msg="updated once per item")
    print("staged kernels: ok")


if __name__ == "__main__":
    check()
    sys.exit(0)
