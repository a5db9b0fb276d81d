// work_groups.cl — the OpenCL C twins of work_groups.cpp's kernels (the same algorithms), run by the PoCL peer.
#define SUM_GROUP 256
#define TILE 16

__kernel void sum_groups(__global const float* in, __global float* out, uint n) {
    __local float s[SUM_GROUP];
    const size_t l = get_local_id(0);
    float acc = 0.0f;
    for (size_t i = get_global_id(0); i < n; i += get_global_size(0)) acc += in[i];
    s[l] = acc;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (size_t width = get_local_size(0) / 2; width > 0; width /= 2) {
        if (l < width) s[l] += s[l + width];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (l == 0) out[get_group_id(0)] = s[0];
}

__kernel void matmul_tiled(__global const float* A, __global const float* B, __global float* C, uint n) {
    __local float As[TILE][TILE];
    __local float Bs[TILE][TILE];
    const size_t lx = get_local_id(0), ly = get_local_id(1);
    float acc = 0.0f;
    for (uint t = 0; t < n; t += TILE) {
        As[ly][lx] = A[get_global_id(1) * n + t + lx];
        Bs[ly][lx] = B[(t + ly) * n + get_global_id(0)];
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int k = 0; k < TILE; ++k) acc += As[ly][k] * Bs[k][lx];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    C[get_global_id(1) * n + get_global_id(0)] = acc;
}

__kernel void barriers_flat(__global float* out, uint rounds) {
    float v = (float)get_local_id(0);
    for (uint r = 0; r < rounds; ++r) {
        v = v * 0.5f + 1.0f;
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    out[get_global_id(0)] = v;
}
