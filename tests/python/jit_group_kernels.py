"""@runtime.jit kernels that cooperate within a work-group (runtime.barrier, runtime.local_array), call device
functions, index shaped arrays and print: used by test_jit_groups.py, test_jit_device_functions.py,
test_jit_arrays.py and test_jit_print.py (compiled and in the reference mode)."""
import math

import numpy as np

import runtime

MAX_GROUP = 1024
TILE = 16


@runtime.jit
def group_sum(x, out):
    """out[group] = the sum of the group's elements of x: a tree in local memory (any power-of-two-or-not size)."""
    buf = runtime.local_array(MAX_GROUP, np.float32)
    lid = runtime.get_local_id(0)
    n = runtime.get_local_size(0)
    buf[lid] = x[runtime.get_global_id(0)]
    runtime.barrier()
    s = 1
    while s < n:
        if lid % (2 * s) == 0 and lid + s < n:
            buf[lid] += buf[lid + s]
        runtime.barrier()
        s *= 2
    if lid == 0:
        out[runtime.get_group_id(0)] = buf[0]


@runtime.jit
def group_reverse(x, out):
    """Each group's elements in reverse order (every item reads what another item wrote)."""
    buf = runtime.local_array(MAX_GROUP, np.int32)
    lid = runtime.get_local_id(0)
    n = runtime.get_local_size(0)
    g = runtime.get_global_id(0)
    buf[lid] = x[g]
    runtime.barrier()
    out[g] = buf[n - 1 - lid]


@runtime.jit
def group_scan(x, out):
    """Inclusive prefix sum within each group (Hillis-Steele, double-buffered through two local arrays)."""
    a = runtime.local_array(MAX_GROUP, np.int64)
    b = runtime.local_array(MAX_GROUP, np.int64)
    lid = runtime.get_local_id(0)
    n = runtime.get_local_size(0)
    g = runtime.get_global_id(0)
    a[lid] = x[g]
    runtime.barrier()
    offset = 1
    src = 0
    while offset < n:
        if src == 0:
            v = a[lid]
            if lid >= offset:
                v += a[lid - offset]
            b[lid] = v
        else:
            v = b[lid]
            if lid >= offset:
                v += b[lid - offset]
            a[lid] = v
        runtime.barrier()
        src = 1 - src
        offset *= 2
    if src == 0:
        out[g] = a[lid]
    else:
        out[g] = b[lid]


@runtime.jit
def transpose_tiles(a, out, n):
    """out = a.T for n x n (flat, row-major) through a 16 x 16 local tile; 2-D groups of 16 x 16."""
    tile = runtime.local_array((TILE, TILE + 1), np.float32)
    tx = runtime.get_local_id(0)
    ty = runtime.get_local_id(1)
    bx = runtime.get_group_id(0) * TILE
    by = runtime.get_group_id(1) * TILE
    tile[ty, tx] = a[(by + ty) * n + bx + tx]
    runtime.barrier()
    out[(bx + ty) * n + by + tx] = tile[tx, ty]


@runtime.jit
def matmul_tiled(a, b, c):
    """c = a @ b for square shaped arrays whose size is a multiple of 16 (16 x 16 tiles in local memory)."""
    ta = runtime.local_array((TILE, TILE), np.float32)
    tb = runtime.local_array((TILE, TILE), np.float32)
    tx = runtime.get_local_id(0)
    ty = runtime.get_local_id(1)
    col = runtime.get_global_id(0)
    row = runtime.get_global_id(1)
    n = a.shape[0]
    acc = np.float32(0)
    for t in range(n // TILE):
        ta[ty, tx] = a[row, t * TILE + tx]
        tb[ty, tx] = b[t * TILE + ty, col]
        runtime.barrier()
        for k in range(TILE):
            acc += ta[ty, k] * tb[k, tx]
        runtime.barrier()
    c[row, col] = acc


@runtime.jit
def matmul_tiled_flat(a, b, c, n):
    """The same product on flat buffers (row-major n x n)."""
    ta = runtime.local_array((TILE, TILE), np.float32)
    tb = runtime.local_array((TILE, TILE), np.float32)
    tx = runtime.get_local_id(0)
    ty = runtime.get_local_id(1)
    col = runtime.get_global_id(0)
    row = runtime.get_global_id(1)
    acc = np.float32(0)
    for t in range(n // TILE):
        ta[ty, tx] = a[row * n + t * TILE + tx]
        tb[ty, tx] = b[(t * TILE + ty) * n + col]
        runtime.barrier()
        for k in range(TILE):
            acc += ta[ty, k] * tb[k, tx]
        runtime.barrier()
    c[row * n + col] = acc


@runtime.jit
def sum_partials(x, partial):
    """partial[group] = sum of a 256-item group's elements (a tree halving the active items, unrolled by the
    compiler's view of a uniform while loop): the first pass of the 16M sum benchmark."""
    buf = runtime.local_array(256, np.float32)
    lid = runtime.get_local_id(0)
    buf[lid] = x[runtime.get_global_id(0)]
    runtime.barrier()
    s = 128
    while s > 0:
        if lid < s:
            buf[lid] += buf[lid + s]
        runtime.barrier()
        s //= 2
    if lid == 0:
        partial[runtime.get_group_id(0)] = buf[0]


@runtime.jit
def group_sum_atomic(x, total):
    """One float64 total: each group's tree sum added atomically."""
    buf = runtime.local_array(256, np.float64)
    lid = runtime.get_local_id(0)
    buf[lid] = x[runtime.get_global_id(0)]
    runtime.barrier()
    s = runtime.get_local_size(0) // 2
    while s > 0:
        if lid < s:
            buf[lid] += buf[lid + s]
        runtime.barrier()
        s //= 2
    if lid == 0:
        runtime.atomic_add(total, 0, buf[0])


@runtime.jit
def group_ids_3d(out):
    """A 3-D group writes, through local memory, each item's neighbour's linear local id (a rotation)."""
    buf = runtime.local_array(64, np.int32)
    lx = runtime.get_local_id(0)
    ly = runtime.get_local_id(1)
    lz = runtime.get_local_id(2)
    nx = runtime.get_local_size(0)
    ny = runtime.get_local_size(1)
    nz = runtime.get_local_size(2)
    lin = (lz * ny + ly) * nx + lx
    buf[lin] = lin + 1000 * runtime.get_group_id(0)
    runtime.barrier()
    total = nx * ny * nz
    gx = runtime.get_global_id(0)
    gy = runtime.get_global_id(1)
    gz = runtime.get_global_id(2)
    out[(gz * runtime.get_global_size(1) + gy) * runtime.get_global_size(0) + gx] = buf[(lin + 1) % total]


@runtime.jit
def private_across_barriers(x, out):
    """A per-item value computed before a barrier and used after two more (privatised on cpu)."""
    buf = runtime.local_array(256, np.float32)
    lid = runtime.get_local_id(0)
    g = runtime.get_global_id(0)
    mine = x[g] * 2
    buf[lid] = mine
    runtime.barrier()
    left = buf[(lid + 255) % 256]
    runtime.barrier()
    buf[lid] = left
    runtime.barrier()
    out[g] = mine + buf[lid] + left


@runtime.jit
def uniform_for_with_barrier(x, out, rounds):
    """A loop with a barrier whose bound is a scalar parameter: each round rotates the group's values by one."""
    buf = runtime.local_array(64, np.int32)
    lid = runtime.get_local_id(0)
    n = runtime.get_local_size(0)
    g = runtime.get_global_id(0)
    v = x[g]
    for r in range(rounds):
        buf[lid] = v
        runtime.barrier()
        v = buf[(lid + 1) % n] + r
        runtime.barrier()
    out[g] = v


@runtime.jit
def uniform_if_with_barrier(x, out, flag):
    buf = runtime.local_array(64, np.int32)
    lid = runtime.get_local_id(0)
    g = runtime.get_global_id(0)
    if flag > 0:
        buf[lid] = x[g]
        runtime.barrier()
        out[g] = buf[63 - lid]
    else:
        out[g] = -x[g]


@runtime.jit
def local_no_barrier(x, out):
    """A local array without barriers: each item uses its own slot."""
    buf = runtime.local_array(256, np.float32)
    lid = runtime.get_local_id(0)
    g = runtime.get_global_id(0)
    buf[lid] = x[g] + 1
    out[g] = buf[lid] * 2


# ------------------------------------------------------------------------------------------- device functions

@runtime.jit
def square(v):
    return v * v


@runtime.jit
def hyp(a, b):
    return math.sqrt(square(a) + square(b))


@runtime.jit
def clamp(v, lo, hi):
    if v < lo:
        return lo
    if v > hi:
        return hi
    return v


@runtime.jit
def add_into(buf, i, v):
    runtime.atomic_add(buf, i, v)


@runtime.jit
def uses_device_functions(x, y, out, total):
    i = runtime.get_global_id(0)
    out[i] = clamp(hyp(x[i], y[i]), np.float32(0.5), np.float32(3))
    add_into(total, 0, square(2))


@runtime.jit
def ints_through_device_functions(x, out):
    i = runtime.get_global_id(0)
    out[i] = square(x[i]) + square(i)


@runtime.jit
def rec_a(v):
    return rec_b(v)


@runtime.jit
def rec_b(v):
    return rec_a(v)


@runtime.jit
def self_recursive(v):
    if v <= 1:
        return 1
    return v * self_recursive(v - 1)


@runtime.jit
def calls_recursive(out):
    out[0] = self_recursive(5)


@runtime.jit
def calls_mutual(out):
    out[0] = rec_a(5)


@runtime.jit
def device_with_barrier(v):
    runtime.barrier()
    return v


@runtime.jit
def calls_device_with_barrier(out):
    out[runtime.get_global_id(0)] = device_with_barrier(1)


@runtime.jit
def row_sum(m, r):
    s = m[r, 0] * 0
    for c in range(m.shape[1]):
        s += m[r, c]
    return s


@runtime.jit
def row_sums(m, out):
    r = runtime.get_global_id(0)
    out[r] = row_sum(m, r)


# ---------------------------------------------------------------------------------------------- shaped arrays

@runtime.jit
def add_2d(a, b, out):
    y = runtime.get_global_id(1)
    x = runtime.get_global_id(0)
    out[y, x] = a[y, x] + b[y, x] * 2


@runtime.jit
def shape_and_strides(a, out):
    out[0] = a.shape[0]
    out[1] = a.shape[1]
    out[2] = a.strides[0]
    out[3] = a.strides[1]
    out[4] = a.ndim
    out[5] = a.size


@runtime.jit
def sum_3d(a, out):
    i = runtime.get_global_id(0)
    s = 0.0
    for y in range(a.shape[1]):
        for z in range(a.shape[2]):
            s += a[i, y, z]
    out[i] = s


@runtime.jit
def length_of(a, out):
    out[runtime.get_global_id(0)] = a.shape[0]


# ---------------------------------------------------------------------------------------------------- print

@runtime.jit
def prints(x, n):
    i = runtime.get_global_id(0)
    if i == 1:
        print("item", i, "of", n, "value", x[i], i > 0, sep=" ", end="!\n")


@runtime.jit
def prints_percent(x):
    print("100% of", x[0])


# ------------------------------------------------------------------------------------------------- float16

@runtime.jit
def half_axpy(a, x, y, out):
    i = runtime.get_global_id(0)
    out[i] = a * x[i] + y[i]


@runtime.jit
def half_math(x, out):
    i = runtime.get_global_id(0)
    out[i] = math.sqrt(x[i]) + np.float16(0.5)


@runtime.jit
def half_to_float(x, out):
    i = runtime.get_global_id(0)
    out[i] = x[i] * np.float32(3)


SCALE = 2.0


@runtime.jit
def scaled(v):
    return v * SCALE


@runtime.jit
def calls_scaled(out):
    i = runtime.get_global_id(0)
    out[i] = scaled(i + 1)


# ---- item loops (groups.py): barrier-free loops whose steps every item takes alike run items innermost on cpu

@runtime.jit
def grid_stride_sum(x, out, n):
    """The Numba-CUDA way: each item adds a grid-stride slice of x[0, n), then a tree over the group's items."""
    buf = runtime.local_array(MAX_GROUP, np.float32)
    lid = runtime.get_local_id(0)
    size = runtime.get_local_size(0)
    acc = np.float32(0)
    for i in range(runtime.get_global_id(0), n, runtime.get_global_size(0)):
        acc += x[i]
    buf[lid] = acc
    runtime.barrier()
    s = 1
    while s < size:
        if lid % (2 * s) == 0 and lid + s < size:
            buf[lid] += buf[lid + s]
        runtime.barrier()
        s *= 2
    if lid == 0:
        out[runtime.get_group_id(0)] = buf[0]


@runtime.jit
def item_loop_forms(x, out, n, m):
    """Item loops of other shapes: a uniform range(n) (no offset), an offset through a local and a group variable
    step, and the loop variable read after the loop (its last value per item, or the value before the loop)."""
    buf = runtime.local_array(MAX_GROUP, np.int64)
    lid = runtime.get_local_id(0)
    g = runtime.get_global_id(0)
    stride = runtime.get_global_size(0)
    acc = 0
    for k in range(n):  # every item, n steps
        acc += x[(k * 7 + g) % m]
    i = -1
    for i in range(g, m, stride):
        acc += 3 * x[i]
    buf[lid] = acc
    runtime.barrier()
    out[2 * g] = buf[lid] + buf[runtime.get_local_size(0) - 1 - lid]
    out[2 * g + 1] = i


@runtime.jit
def column_sums_2d(a, out, rows, cols):
    """2-D groups: item (x, y) adds rows y, y + global rows, ... of column x, then the group's y items add up."""
    buf = runtime.local_array((16, 16), np.float64)
    tx = runtime.get_local_id(0)
    ty = runtime.get_local_id(1)
    col = runtime.get_global_id(0)
    acc = 0.0
    for r in range(runtime.get_global_id(1), rows, runtime.get_global_size(1)):
        acc += a[r * cols + col]
    buf[ty, tx] = acc
    runtime.barrier()
    if ty == 0:
        t = 0.0
        for y in range(runtime.get_local_size(1)):
            t += buf[y, tx]
        out[runtime.get_group_id(1) * cols + col] = t


@runtime.jit
def loops_left_to_items(x, out, n):
    """Loops that stay inside the items: one with a break, one with a constant trip count; results as written."""
    buf = runtime.local_array(MAX_GROUP, np.int64)
    lid = runtime.get_local_id(0)
    g = runtime.get_global_id(0)
    first = -1
    for i in range(g, n, runtime.get_global_size(0)):
        if x[i] > 50:
            first = i
            break
    c = 0
    for k in range(4):
        c += x[(g + k) % n]
    buf[lid] = first
    runtime.barrier()
    out[g] = buf[runtime.get_local_size(0) - 1 - lid] * 1000 + c


@runtime.jit
def signed_and_unsigned_order(x, out, v):
    """Comparisons of values >= 0 (ids, // and % results) go unsigned; one with a side that may be negative stays
    signed (d = lid - 3, and a parameter v of any sign)."""
    buf = runtime.local_array(MAX_GROUP, np.int32)
    lid = runtime.get_local_id(0)
    s = runtime.get_local_size(0) // 2
    d = lid - 3
    m = v % 5
    buf[lid] = x[runtime.get_global_id(0)]
    runtime.barrier()
    r = 0
    if lid < s:
        r += 1
    if d < s:
        r += 10
    if m <= lid:
        r += 100
    if v < lid:
        r += 1000
    out[runtime.get_global_id(0)] = r + buf[lid]


# ---- uniformity through parameters and memory (groups.py)

@runtime.jit
def divergent_through_reassigned_parameter(n, out):
    """Refused: the loop around the barrier runs a per-item number of times (n is reassigned a local id)."""
    n = runtime.get_local_id(0)
    c = 0
    for _ in range(n):
        runtime.barrier()
        c += 1
    out[runtime.get_global_id(0)] = c


@runtime.jit
def reassigned_parameter_stays_uniform(n, out):
    """A parameter assigned only uniform values at group level is a group variable: fine around barriers."""
    buf = runtime.local_array(MAX_GROUP, np.int64)
    lid = runtime.get_local_id(0)
    n = n // 2
    c = 0
    for _ in range(n):
        buf[lid] = lid + 1
        runtime.barrier()
        c += buf[runtime.get_local_size(0) - 1 - lid]
        runtime.barrier()
    out[runtime.get_global_id(0)] = c


@runtime.jit
def flag_loop_through_a_group_local(done, out):
    """The memory a loop around barriers tests is read into a group variable between barriers (every item reads
    it after the write and before the next one), not in the loop's condition."""
    grp = runtime.get_group_id(0)
    v = done[grp]
    c = 0
    while v == 0:
        runtime.barrier()
        if runtime.get_local_id(0) == 0:
            done[grp] = 1
        c += 1
        runtime.barrier()
        v = done[grp]
    out[runtime.get_global_id(0)] = c


@runtime.jit
def loop_over_a_shape_with_barriers(x, out):
    """a.shape[d] in a barrier loop's range is a uniform value, not a memory read."""
    buf = runtime.local_array(MAX_GROUP, np.float64)
    lid = runtime.get_local_id(0)
    acc = 0.0
    for r in range(x.shape[0]):
        buf[lid] = x[r, runtime.get_global_id(0)]
        runtime.barrier()
        acc += buf[runtime.get_local_size(0) - 1 - lid]
        runtime.barrier()
    out[runtime.get_global_id(0)] = acc


@runtime.jit
def read_2d(a, out, y, x):
    out[0] = a[y, x]


# ---- local arrays passed to device functions (a pointer to the group's array; shaped where the callee needs it)

@runtime.jit
def store_tile_row(tile, r, v):
    """Writes row r of a 2-D array: tile[r, c] = v + c (shaped: it reads tile.shape[1])."""
    for c in range(tile.shape[1]):
        tile[r, c] = v + c


@runtime.jit
def flat_sum(buf, n):
    """buf[0] + ... + buf[n - 1], indexed flat."""
    s = buf[0] * 0
    for i in range(n):
        s += buf[i]
    return s


@runtime.jit
def local_arrays_through_device_functions(x, out):
    """Each item fills its row of a TILE x TILE local tile through a device function and sums it through another
    (2-D, shaped arrays); after the barrier it sums the group's x from a 1-D local array (flat)."""
    tile = runtime.local_array((TILE, TILE), np.float32)
    buf = runtime.local_array(TILE, np.float32)
    lid = runtime.get_local_id(0)
    buf[lid] = x[runtime.get_global_id(0)]
    store_tile_row(tile, lid, np.float32(lid * 100))
    runtime.barrier()
    out[runtime.get_global_id(0)] = row_sum(tile, lid) + flat_sum(buf, TILE) + runtime.atomic_add(buf, 0, 0)
