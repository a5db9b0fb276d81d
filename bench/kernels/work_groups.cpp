// work_groups.cpp — the work-group kernels of runtime-bench-core (and bench/bench_python.py): a dialect source
// (include/runtime/kernel.h), loaded at run time with rtModuleLoadSource. work_groups.cl is the same algorithm in
// OpenCL C, which the PoCL peer runs. Each kernel a CUDA or OpenCL programmer would write:
//   sum_groups / sum_groups_flat (in, out, n): each work-item adds a grid-stride slice of in[0, n), then its group
//     adds its items' sums as a tree in local memory (256 items per group) and writes out[group]. Two passes sum
//     16M floats: 1024 groups -> 1024 partial sums, then one group -> the total.
//   matmul_tiled (A, B, C, n): C = A B for n x n row-major matrices (n a multiple of 16), work-groups of 16 x 16
//     items, one item per element of C; each step stages a 16 x 16 tile of A and one of B in local memory.
// The *_flat kernel is the same as its OpenCL twin line by line (rt_barrier); the others use rt_items blocks, the
// dialect's fast form on cpu: the same algorithm, each item computing what its OpenCL twin's item computes, in the
// same order, with the loops that step every item alike (sum_groups' grid-stride loop) written as group code
// around the items' blocks.
#include "runtime/kernel.h"

#define RT_BENCH_SUM_GROUP 256
#define RT_BENCH_TILE 16

RT_KERNEL void sum_groups(const float* in, float* out, uint32_t n) {
    RT_LOCAL float s[RT_BENCH_SUM_GROUP];
    rt_private<float> acc;
    rt_items(it) { acc[it] = 0.0f; }
    // The grid-stride loop of sum_groups_flat with the items inside it: item l of group g still adds
    // in[g * 256 + l], in[g * 256 + l + global size], ... in that order (the same sums, bit for bit), and on cpu
    // each step is one vectorised pass over the group's items.
    for (size_t i0 = get_group_id(0) * get_local_size(0); i0 < n; i0 += get_global_size(0)) {
        rt_items(it) {
            const size_t i = i0 + get_local_id(0);
            if (i < n) acc[it] += in[i];
        }
    }
    rt_items(it) { s[get_local_id(0)] = acc[it]; }
    for (size_t width = get_local_size(0) / 2; width > 0; width /= 2) {
        rt_items(it) {
            const size_t l = get_local_id(0);
            if (l < width) s[l] += s[l + width];
        }
    }
    rt_items(it) {
        if (get_local_id(0) == 0) out[get_group_id(0)] = s[0];
    }
}

RT_KERNEL void sum_groups_flat(const float* in, float* out, uint32_t n) {
    RT_LOCAL float s[RT_BENCH_SUM_GROUP];
    const size_t l = get_local_id(0);
    float acc = 0.0f;
    for (size_t i = get_global_id(0); i < n; i += get_global_size(0)) acc += in[i];
    s[l] = acc;
    rt_barrier();
    for (size_t width = get_local_size(0) / 2; width > 0; width /= 2) {
        if (l < width) s[l] += s[l + width];
        rt_barrier();
    }
    if (l == 0) out[get_group_id(0)] = s[0];
}

RT_KERNEL void matmul_tiled(const float* A, const float* B, float* C, uint32_t n) {
    RT_LOCAL float As[RT_BENCH_TILE][RT_BENCH_TILE];
    RT_LOCAL float Bs[RT_BENCH_TILE][RT_BENCH_TILE];
    rt_private<float> acc;
    rt_items(it) { acc[it] = 0.0f; }
    for (uint32_t t = 0; t < n; t += RT_BENCH_TILE) {
        rt_items(it) {
            const size_t lx = get_local_id(0), ly = get_local_id(1);
            As[ly][lx] = A[get_global_id(1) * n + t + lx];
            Bs[ly][lx] = B[(t + ly) * n + get_global_id(0)];
        }
        rt_items(it) {
            const size_t lx = get_local_id(0), ly = get_local_id(1);
            float a = acc[it];
            for (int k = 0; k < RT_BENCH_TILE; ++k) a += As[ly][k] * Bs[k][lx];
            acc[it] = a;
        }
    }
    rt_items(it) { C[get_global_id(1) * n + get_global_id(0)] = acc[it]; }
}

// The flat form's cost: `rounds` barriers per item and almost nothing else (runtime-bench-core's
// group_barrier_cost: time / (items x rounds)).
RT_KERNEL void barriers_flat(float* out, uint32_t rounds) {
    float v = (float)get_local_id(0);
    for (uint32_t r = 0; r < rounds; ++r) {
        v = v * 0.5f + 1.0f;
        rt_barrier();
    }
    out[get_global_id(0)] = v;
}
