/* kernel.h — the prelude of the kernel dialect: RT_KERNEL/RT_DEVICE, work-item built-ins, math, atomics, rt_assert,
 * 16-bit and vector types, rt_printf, module globals, kernel templates (cpu and CUDA). */
/*
 * A kernel source is C++17 that compiles both for the cpu backend (host C++) and as CUDA C++:
 *
 *     RT_DEVICE float twice(float x) { return x * 2.0f; }
 *     RT_KERNEL void scale(const float* in, float* out, int n) {
 *         int i = get_global_id(0);
 *         if (i < n) out[i] = twice(in[i]);
 *     }
 *
 * Built-ins (d = 0, 1, 2; return size_t): get_global_id, get_local_id, get_group_id, get_global_size,
 * get_local_size, get_num_groups. Types: int8_t … uint64_t (no header needed). Math (float and double
 * overloads): sqrt rsqrt cbrt exp exp2 expm1 log log2 log10 log1p sin cos tan asin acos atan atan2
 * sinh cosh tanh asinh acosh atanh pow fabs floor ceil round trunc fmod fmin fmax fma hypot erf erfc
 * copysign isnan isinf isfinite, and abs/min/max for int, int64 and float types. min and max take two
 * operands of one type: min(get_global_id(0), n) with an int n is refused on cpu as CUDA refuses it (its
 * overloads make the call ambiguous); convert one operand, e.g. min(get_global_id(0), (size_t)n).
 * Constants: RT_INF and RT_NAN (double), RT_INFF and RT_NANF (float) — a quiet NaN. A kernel may include
 * <climits>/<limits.h> (INT_MAX, ...), <cfloat>/<float.h> (FLT_MAX, DBL_EPSILON, ...), <cmath> (the math
 * above, also as std::sqrt, ...) and <cstdint>; on CUDA they are the runtime's own minimal versions, and the
 * CUDA toolkit's headers (cuda_fp16.h, ...) are on the include path when the toolkit is found.
 * get_global_linear_id(), get_local_linear_id(), get_group_linear_id(): the ids flattened, x fastest
 * ((id(2) * size(1) + id(1)) * size(0) + id(0)).
 *
 * Types (both backends, one layout; trivially copyable: kernel parameters, pointers, elements of device memory):
 *   - rt_half (IEEE binary16) and rt_bfloat16: 16-bit storage types. `rt_half h = x;` / `rt_half(x)` rounds a
 *     float to nearest, ties to even (subnormals and infinities exact, NaN stays NaN); `(float)h` is exact; `h.bits`
 *     is the encoding, rt_half::from_bits(b) makes one. Arithmetic and comparisons convert to float, on cpu and
 *     cuda alike (an expression is computed in float and rounded once, where it is stored), so results agree across
 *     backends; `h += x` etc. store the rounded result. cuda converts with the GPU's cvt instructions.
 *   - rt_float2/3/4, rt_double2/3/4, rt_int2/3/4, rt_uint2/3/4: members x, y, z, w, CUDA's sizes and alignments
 *     (2 and 4 components aligned to their size up to 16 bytes, rt_float3 12 bytes aligned to 4); component-wise
 *     + - * / with a vector or an element-type scalar on either side, unary -, += -= *= /=, == and != (every
 *     component), rt_make_float4(x, y, z, w) and the like, or braces: rt_int2 v = {1, 2}.
 * Kernel parameters of any trivially copyable type arrive whole whatever their alignment (an alignas(32) struct).
 *
 * Atomics on global memory, returning the old value: atomic_add, atomic_sub, atomic_min, atomic_max,
 * atomic_exchange, atomic_cas(p, expected, desired) — for int32_t, uint32_t, int64_t, uint64_t, float and double;
 * atomic_and, atomic_or, atomic_xor, and atomic_inc(p)/atomic_dec(p) (OpenCL's: add or subtract 1) — for the
 * integer types. Each takes an optional last argument, the memory order: rt_memory_order_relaxed, _acquire,
 * _release, _acq_rel, _seq_cst. The default is what each backend's atomics were before orders existed: seq_cst on
 * cpu, relaxed on cuda (CUDA's atomic*); portable code that needs ordering says so. On cuda a stronger order adds
 * __threadfence() before (release, acq_rel, seq_cst) and after (acquire, acq_rel, seq_cst) the relaxed atomic.
 * rt_fence(order): a fence (cpu __atomic_thread_fence; cuda __threadfence() for every order but relaxed).
 *
 * rt_printf(format, ...): printf from a kernel. cpu: the process's C stdout, each call's text written whole (stdio
 * locks the stream for the call), a work-item's calls in its program order; the calls of different items (and
 * groups) interleave in any order; stdio's buffering applies (flush stdout to see text sent to a pipe or file at
 * once). cuda: CUDA's device printf: the device's buffer reaches stdout at the driver's synchronize points (a
 * stream or device synchronize, an event wait, a blocking copy), a call's text whole, no order between threads;
 * the buffer is finite (text past it is lost). Portable conversions: %d %i %u %x %ld %lld %llu %f %e %g %s %c %p
 * (pass size_t as unsigned long long with %llu).
 *
 * Module globals: `RT_GLOBAL float scale = 2.0f;` or `RT_GLOBAL int32_t table[256];` at file scope declares a
 * variable of the module that every kernel of it reads and writes, and the host through rtModuleGetGlobal (device
 * memory for copies). One variable per RT_GLOBAL, not const (the host writes it), names not starting with rt_.
 *
 * Kernel templates: `template <class T> RT_KERNEL void axpy(T a, const T* x, T* y) { ... }` is a kernel only through
 * its instantiations, each named at file scope: `RT_KERNEL_INSTANTIATE(axpy_f32, axpy<float>);` gives the kernel
 * axpy_f32 (rtModuleGetFunction(..., "axpy_f32")); the template itself cannot be looked up. Instantiating what is
 * not a kernel template of the source, or taking a name twice, is refused (RT_ERROR_INVALID_VALUE).
 * rt_assert(cond): on failure the launch fails with the expression, file and line, and the failing
 * work-item stops there: nothing after the assert runs for it (CUDA: the thread records the failure for the
 * runtime and exits, the launch's other threads run on, and the device stays usable; cpu: the work-item's piece
 * of the launch ends at once, other items already running finish their pieces, and no further work-group starts).
 *
 * Faults on cpu. A fault raised by the CPU inside kernel code — SIGSEGV, SIGBUS, SIGFPE (integer division
 * by zero), SIGILL — a stack overflow (deep recursion, a huge local array; reported as such), and a failed
 * rt_assert end the launch, which the next synchronize of its stream reports as RT_ERROR_LAUNCH_FAILED; the
 * stream and the process stay usable. The runtime's handlers run on an alternate signal stack of every
 * thread that runs kernels; they pass on to the handler installed before them every fault outside kernel
 * code and every signal sent with kill/tgkill/sigqueue, even to a thread inside a kernel. A handler
 * installed later (a crash reporter, faulthandler) is found at the first start of an idle stream 1 ms or
 * more after the runtime last looked (looking is a syscall, as costly as a fifth of a launch): the runtime
 * takes the fault signals back and passes on to it what is not a kernel trap. A fault inside a
 * library that kernel code called (libc's memcpy, or malloc with its lock held) is reported like any other,
 * but that library's state may then be inconsistent (a lock left held, a half-updated structure): the
 * runtime cannot guarantee that the process is sound after it.
 *
 * Rules of the dialect, which follow from how the cpu target compiles a source. The source is placed,
 * verbatim, inside `struct rt_module_ : rt_kernel_base_ { ... };` — kernels and RT_DEVICE functions
 * become member functions, so built-ins read the work-item's ids from the object without thread-locals,
 * and a work-group is one loop the compiler can vectorise. Hence, in kernel sources on cpu:
 *   - no namespaces, `using namespace`, `extern "C"`, global variables other than RT_GLOBAL ones, or explicit
 *     template specialisations; file-scope constants must be `static constexpr` (or macros);
 *   - `static` functions and member functions of your own structs cannot call the work-item built-ins or
 *     rt_assert (they are members of the kernel object); RT_DEVICE functions can;
 *   - kernel names are unique (no overloaded kernels); kernel parameters are scalars, pointers or
 *     trivially copyable structs, passed by value;
 *   - `#include` lines are moved before the struct (an include of this header is dropped: the prelude
 *     is always present); diagnostics carry the source's own line numbers;
 *   - work-group barriers and local memory: see "Work-groups" below.
 *
 * Work-groups (docs/kernels.md has examples and measured costs). The items of a work-group cooperate in one of two
 * forms; a kernel uses one (both in one kernel is refused when the source is read).
 *   - Flat form, as in CUDA and OpenCL: rt_barrier() waits until every item of the group has reached it; memory
 *     written before it (local or global) is visible to the group's items after it. `RT_LOCAL float t[16][16];` in
 *     the kernel body declares an array shared by the group (CUDA's __shared__); rt_local_memory() returns the
 *     launch's dynamic local memory (its shared_bytes; a void*, 16-byte aligned on CUDA). A barrier in divergent
 *     control flow is undefined, as in CUDA and OpenCL; on cpu a group whose items do not all reach the same
 *     barriers fails the launch, naming the group ("n work-item(s) ended while m waited"), where CUDA may hang.
 *     Cost on cpu: every item of a group runs as a fiber of one worker thread (a 256 KiB stack each, with a guard
 *     page; reused across groups and launches); a barrier switches to the group's next item — about 30 ns of one
 *     core per item and barrier, not vectorised. Correct everywhere; the fast form below is for speed.
 *   - Fast form ("group kernels"): `rt_items(it) { ... }` is a statement of the kernel body whose block runs once for
 *     every item of the group (inside it get_local_id etc. give that item's ids; `it` is the item's linear index in
 *     the group, x fastest), and a barrier follows the block. The code outside the blocks is group code: on cpu it
 *     runs once per group (each block is a loop over the group's items, x innermost, which the compiler
 *     vectorises), on CUDA in every thread; so it must be uniform (it may use get_group_id, get_local_size,
 *     get_num_groups and the kernel's arguments, not get_local_id) and must not write memory (it may declare
 *     RT_LOCAL arrays and compute values in local variables). `rt_private<T> v;` in group code holds one T per item,
 *     read and written as v[it] inside the blocks, keeping its value from one block to the next (CUDA: a register
 *     of the thread; cpu: an array over the group's items). In a block, `continue` ends the item's turn; `return`,
 *     RT_LOCAL, nested blocks and a `break` outside a loop or switch of the block are refused when the source is read,
 *     and so are the item ids (get_local_id, get_global_id, get_local_linear_id, get_global_linear_id) in group
 *     code. `it` converts to size_t; rt_private takes no other index (v[it ^ 1] does not compile: on CUDA each
 *     item holds only its own value).
 *   Rules of both forms: rt_barrier, rt_items and RT_LOCAL belong to a kernel's own body (not RT_DEVICE functions:
 *   refused, naming the line), and are written out: a #define or -D option using them is refused; RT_LOCAL arrays
 *   take no initializer, and their element types and bounds must be known at the top of the source (built-in types,
 *   structs of the source, macros and static constexpr constants there, template parameters: the cpu target sizes
 *   them there; a name declared in the kernel body is refused); on cpu they are of trivial types. A flat kernel's
 *   RT_LOCAL arrays are static storage of the module on cpu, and the runtime runs one group of a module's flat
 *   kernels at a time in the process (the flat form is the slow, correct fallback; contents persist from one group to
 *   the next, which, as CUDA's uninitialised shared memory, no kernel may rely on). A kernel with barriers (either
 *   form) runs
 *   whole work-groups only: a launch whose global size is not a multiple of the block in each dimension is refused
 *   with RT_ERROR_INVALID_VALUE naming the kernel. A group's local memory — its RT_LOCAL arrays plus shared_bytes —
 *   is at most rtDeviceProp.local_memory_per_group (cpu: 48 KiB; CUDA: the device's shared memory per block), or
 *   the launch is refused naming the kernel, the bytes and the limit. Groups have at most max_threads_per_block
 *   items (cpu: 1024).
 *
 * Launch size. A launch runs exactly its global size of work-items in each dimension, on every backend:
 * rtLaunchConfig.global when given, else grid x block. Items of a partial last work-group past the global size
 * never run, so a kernel launched over exactly n items needs no `if (i < n)` test; a CUDA-style kernel that
 * keeps one works unchanged (launched over whole groups with rtLaunchKernel). Names starting with rt_ are the
 * runtime's in kernel sources. Kernels are written out: one produced by a macro is not found.
 */
#ifndef RUNTIME_KERNEL_H
#define RUNTIME_KERNEL_H

/* ------------------------------------------------------------------ fixed-width integer types */
#if defined(__CUDACC__) && !defined(__CUDACC_RTC__)
#  include <stdint.h>
#elif defined(__INT32_TYPE__) && defined(__INT64_TYPE__)
/* The compiler's own definitions: identical to <stdint.h>'s, so both may be present. */
typedef __INT8_TYPE__ int8_t;
typedef __INT16_TYPE__ int16_t;
typedef __INT32_TYPE__ int32_t;
typedef __INT64_TYPE__ int64_t;
typedef __UINT8_TYPE__ uint8_t;
typedef __UINT16_TYPE__ uint16_t;
typedef __UINT32_TYPE__ uint32_t;
typedef __UINT64_TYPE__ uint64_t;
#else
typedef signed char int8_t;
typedef short int16_t;
typedef int int32_t;
typedef long long int64_t;
typedef unsigned char uint8_t;
typedef unsigned short uint16_t;
typedef unsigned int uint32_t;
typedef unsigned long long uint64_t;
#endif

/* Small traits without <type_traits> (which costs compile time on every cpu kernel). */
template <class T> struct rt_is_fp_ { static constexpr bool value = false; };
template <> struct rt_is_fp_<float> { static constexpr bool value = true; };
template <> struct rt_is_fp_<double> { static constexpr bool value = true; };
template <class T> struct rt_same_ { typedef T type; };

/* Memory orders of the atomics and rt_fence; the values are GCC's __ATOMIC_* (the cpu target passes them on). */
enum rt_memory_order {
    rt_memory_order_relaxed = 0,
    rt_memory_order_acquire = 2,
    rt_memory_order_release = 3,
    rt_memory_order_acq_rel = 4,
    rt_memory_order_seq_cst = 5
};

/* ---- index checks (the @runtime.jit front end emits them; usable in dialect code too).
 * rt_index_(i, n, what): i when 0 <= i < n, else the launch fails as a failed rt_assert does, with the text
 * "<what> in bounds (index I, B elements)" at the caller's file and line (n = INT64_MAX: only i < 0 fails).
 * `what` is a constant string naming the access (the JIT passes its Python text, "b[i - 1]"). On cpu the text of the first failure of a launch is kept in one
 * buffer of the module: two launches of one module failing at the same moment may show the other's index. */
#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define RT_INDEX_TEXT_FN_ static __device__ __noinline__
#else
#define RT_INDEX_TEXT_FN_ static inline
#endif
RT_INDEX_TEXT_FN_ unsigned rt_index_put_(char* dst, unsigned at, unsigned n, const char* s) {
    while (*s && at + 1 < n) dst[at++] = *s++;
    dst[at] = '\0';
    return at;
}
RT_INDEX_TEXT_FN_ unsigned rt_index_put_int_(char* dst, unsigned at, unsigned n, long long v) {
    char digits[24];
    unsigned k = 0;
    unsigned long long u = v < 0 ? 0ull - (unsigned long long)v : (unsigned long long)v;
    do { digits[k++] = (char)('0' + u % 10); u /= 10; } while (u);
    if (v < 0) digits[k++] = '-';
    while (k && at + 1 < n) dst[at++] = digits[--k];
    dst[at] = '\0';
    return at;
}
/* "b[i - 1] in bounds (index -1, 1000 elements)" into dst[n]. */
RT_INDEX_TEXT_FN_ void rt_index_text_(char* dst, unsigned n, const char* what, long long index, long long bound) {
    unsigned at = rt_index_put_(dst, 0, n, what);
    at = rt_index_put_(dst, at, n, " in bounds (index ");
    at = rt_index_put_int_(dst, at, n, index);
    if (bound != 0x7fffffffffffffffll) {
        at = rt_index_put_(dst, at, n, ", ");
        at = rt_index_put_int_(dst, at, n, bound);
        rt_index_put_(dst, at, n, " elements)");
    } else {
        rt_index_put_(dst, at, n, ": indices start at 0)");
    }
}
#undef RT_INDEX_TEXT_FN_

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
/* ================================================================== CUDA / NVRTC */

#define RT_KERNEL extern "C" __global__
#define RT_DEVICE __device__ inline
#define RT_BUILTIN_ static __device__ __forceinline__

RT_BUILTIN_ size_t rt_dim_(const uint3& v, unsigned d) { return d == 0 ? v.x : d == 1 ? v.y : v.z; }
RT_BUILTIN_ size_t rt_dim_(const dim3& v, unsigned d) { return d == 0 ? v.x : d == 1 ? v.y : v.z; }
RT_BUILTIN_ size_t get_local_id(unsigned d) { return rt_dim_(threadIdx, d); }
RT_BUILTIN_ size_t get_group_id(unsigned d) { return rt_dim_(blockIdx, d); }
RT_BUILTIN_ size_t get_local_size(unsigned d) { return rt_dim_(blockDim, d); }
RT_BUILTIN_ size_t get_num_groups(unsigned d) { return rt_dim_(gridDim, d); }
RT_BUILTIN_ size_t get_global_id(unsigned d) { return get_group_id(d) * get_local_size(d) + get_local_id(d); }
RT_BUILTIN_ size_t get_global_size(unsigned d) { return get_num_groups(d) * get_local_size(d); }

/* The launch's exact global size, which the cuda target passes every kernel ahead of its own parameters; the
 * test first in the kernel's body returns at once for the items past it (the target inserts both). */
struct rt_extent_ { unsigned long long global[3]; };
RT_BUILTIN_ bool rt_outside_(const rt_extent_& e) {
    return get_global_id(0) >= e.global[0] || get_global_id(1) >= e.global[1] || get_global_id(2) >= e.global[2];
}

/* Math: CUDA's device library already overloads sqrt, exp, …, abs, min, max for float and double. */

/* Infinity and NaN by their bits: NVRTC has no __builtin_inf/__builtin_nan. */
#define RT_INF __longlong_as_double(0x7ff0000000000000LL)
#define RT_NAN __longlong_as_double(0x7ff8000000000000LL)
#define RT_INFF __int_as_float(0x7f800000)
#define RT_NANF __int_as_float(0x7fc00000)

/* GCC's byte-copy builtins, which portable kernels use for type punning: NVRTC has memcpy/memset built in. */
#if defined(__CUDACC_RTC__) && !defined(__builtin_memcpy)
#define __builtin_memcpy memcpy
#define __builtin_memset memset
#endif

/* Atomics: dispatch on the operand type to CUDA's atomic* (64-bit integers through unsigned long long), which are
 * relaxed at device scope: that is the default order here (as before the orders existed); a stronger order adds
 * __threadfence() before (release, acq_rel, seq_cst) and after (acquire, acq_rel, seq_cst) the atomic. */
typedef unsigned long long rt_ull_;
#define RT_ORDER_DEFAULT_ rt_memory_order_relaxed
RT_BUILTIN_ void rt_fence(rt_memory_order order) {
    if (order != rt_memory_order_relaxed) __threadfence();
}
RT_BUILTIN_ void rt_order_before_(rt_memory_order o) {
    if (o == rt_memory_order_release || o == rt_memory_order_acq_rel || o == rt_memory_order_seq_cst) __threadfence();
}
RT_BUILTIN_ void rt_order_after_(rt_memory_order o) {
    if (o == rt_memory_order_acquire || o == rt_memory_order_acq_rel || o == rt_memory_order_seq_cst) __threadfence();
}
/* The statement (an atomic) between the fences of `order`. */
#define RT_ORDERED_(order, ...) do { rt_order_before_(order); __VA_ARGS__; rt_order_after_(order); } while (0)
template <class T> RT_BUILTIN_ T rt_cu_add_(T* p, T v) {
    if constexpr (rt_is_fp_<T>::value) return atomicAdd(p, v);
    else if constexpr (sizeof(T) == 4) return (T)atomicAdd((unsigned*)p, (unsigned)v);
    else return (T)atomicAdd((rt_ull_*)p, (rt_ull_)v);
}
template <class T> RT_BUILTIN_ T rt_cu_cas_(T* p, T expected, T desired) {
    if constexpr (sizeof(T) == 4 && rt_is_fp_<T>::value)
        return __int_as_float(atomicCAS((int*)p, __float_as_int(expected), __float_as_int(desired)));
    else if constexpr (rt_is_fp_<T>::value)
        return __longlong_as_double((long long)atomicCAS((rt_ull_*)p, (rt_ull_)__double_as_longlong(expected),
                                                         (rt_ull_)__double_as_longlong(desired)));
    else if constexpr (sizeof(T) == 4) return (T)atomicCAS((unsigned*)p, (unsigned)expected, (unsigned)desired);
    else return (T)atomicCAS((rt_ull_*)p, (rt_ull_)expected, (rt_ull_)desired);
}
template <class T> RT_BUILTIN_ T rt_cu_exchange_(T* p, T v) {
    if constexpr (sizeof(T) == 4 && rt_is_fp_<T>::value) return atomicExch(p, v);
    else if constexpr (rt_is_fp_<T>::value)
        return __longlong_as_double((long long)atomicExch((rt_ull_*)p, (rt_ull_)__double_as_longlong(v)));
    else if constexpr (sizeof(T) == 4) return (T)atomicExch((unsigned*)p, (unsigned)v);
    else return (T)atomicExch((rt_ull_*)p, (rt_ull_)v);
}
RT_BUILTIN_ long long rt_bits_(float x) { return __float_as_int(x); }
RT_BUILTIN_ long long rt_bits_(double x) { return __double_as_longlong(x); }
/* Floating-point min/max: a compare-and-swap loop that stops as soon as no change is needed. */
template <class T, bool Max> RT_BUILTIN_ T rt_atomic_fp_minmax_(T* p, T v) {
    T old = *(volatile T*)p;
    while (Max ? old < v : v < old) {
        T seen = rt_cu_cas_(p, old, v);
        if (rt_bits_(seen) == rt_bits_(old)) break;  // bitwise: a NaN in memory must not loop forever
        old = seen;
    }
    return old;
}
template <class T> RT_BUILTIN_ T rt_cu_min_(T* p, T v) {
    if constexpr (rt_is_fp_<T>::value) return rt_atomic_fp_minmax_<T, false>(p, v);
    else if constexpr (sizeof(T) == 4 && (T)-1 < (T)0) return (T)atomicMin((int*)p, (int)v);
    else if constexpr (sizeof(T) == 4) return (T)atomicMin((unsigned*)p, (unsigned)v);
    else if constexpr ((T)-1 < (T)0) return (T)atomicMin((long long*)p, (long long)v);
    else return (T)atomicMin((rt_ull_*)p, (rt_ull_)v);
}
template <class T> RT_BUILTIN_ T rt_cu_max_(T* p, T v) {
    if constexpr (rt_is_fp_<T>::value) return rt_atomic_fp_minmax_<T, true>(p, v);
    else if constexpr (sizeof(T) == 4 && (T)-1 < (T)0) return (T)atomicMax((int*)p, (int)v);
    else if constexpr (sizeof(T) == 4) return (T)atomicMax((unsigned*)p, (unsigned)v);
    else if constexpr ((T)-1 < (T)0) return (T)atomicMax((long long*)p, (long long)v);
    else return (T)atomicMax((rt_ull_*)p, (rt_ull_)v);
}
/* Bitwise operations: integers only (32 or 64 bits). */
template <class T> RT_BUILTIN_ T rt_cu_and_(T* p, T v) {
    static_assert(!rt_is_fp_<T>::value, "atomic_and takes an integer type");
    if constexpr (sizeof(T) == 4) return (T)atomicAnd((unsigned*)p, (unsigned)v);
    else return (T)atomicAnd((rt_ull_*)p, (rt_ull_)v);
}
template <class T> RT_BUILTIN_ T rt_cu_or_(T* p, T v) {
    static_assert(!rt_is_fp_<T>::value, "atomic_or takes an integer type");
    if constexpr (sizeof(T) == 4) return (T)atomicOr((unsigned*)p, (unsigned)v);
    else return (T)atomicOr((rt_ull_*)p, (rt_ull_)v);
}
template <class T> RT_BUILTIN_ T rt_cu_xor_(T* p, T v) {
    static_assert(!rt_is_fp_<T>::value, "atomic_xor takes an integer type");
    if constexpr (sizeof(T) == 4) return (T)atomicXor((unsigned*)p, (unsigned)v);
    else return (T)atomicXor((rt_ull_*)p, (rt_ull_)v);
}
#define RT_ATOMIC1_(name, impl)                                                                                       \
    template <class T> RT_BUILTIN_ T name(T* p, typename rt_same_<T>::type v, rt_memory_order order = RT_ORDER_DEFAULT_) { \
        T old;                                                                                                       \
        RT_ORDERED_(order, old = impl(p, (T)v));                                                                     \
        return old;                                                                                                  \
    }
RT_ATOMIC1_(atomic_add, rt_cu_add_)
RT_ATOMIC1_(atomic_exchange, rt_cu_exchange_)
RT_ATOMIC1_(atomic_min, rt_cu_min_)
RT_ATOMIC1_(atomic_max, rt_cu_max_)
RT_ATOMIC1_(atomic_and, rt_cu_and_)
RT_ATOMIC1_(atomic_or, rt_cu_or_)
RT_ATOMIC1_(atomic_xor, rt_cu_xor_)
#undef RT_ATOMIC1_
template <class T> RT_BUILTIN_ T atomic_sub(T* p, typename rt_same_<T>::type v, rt_memory_order order = RT_ORDER_DEFAULT_) {
    T old;
    if constexpr (rt_is_fp_<T>::value) RT_ORDERED_(order, old = rt_cu_add_(p, (T)-v));
    else RT_ORDERED_(order, old = rt_cu_add_(p, (T)((T)0 - (T)v)));  // two's complement: adding -v subtracts v
    return old;
}
/* OpenCL's atomic_inc/atomic_dec: add or subtract 1, return the old value (not CUDA's wrapping atomicInc). */
template <class T> RT_BUILTIN_ T atomic_inc(T* p, rt_memory_order order = RT_ORDER_DEFAULT_) {
    static_assert(!rt_is_fp_<T>::value, "atomic_inc takes an integer type");
    T old;
    RT_ORDERED_(order, old = rt_cu_add_(p, (T)1));
    return old;
}
template <class T> RT_BUILTIN_ T atomic_dec(T* p, rt_memory_order order = RT_ORDER_DEFAULT_) {
    static_assert(!rt_is_fp_<T>::value, "atomic_dec takes an integer type");
    T old;
    RT_ORDERED_(order, old = rt_cu_add_(p, (T)((T)0 - (T)1)));
    return old;
}
template <class T>
RT_BUILTIN_ T atomic_cas(T* p, typename rt_same_<T>::type expected, typename rt_same_<T>::type desired,
                         rt_memory_order order = RT_ORDER_DEFAULT_) {
    T old;
    RT_ORDERED_(order, old = rt_cu_cas_(p, (T)expected, (T)desired));
    return old;
}
#undef RT_ORDERED_

/* ---- (cuda) linear ids, 16-bit and vector types' helpers, rt_printf, RT_GLOBAL, RT_KERNEL_INSTANTIATE */
RT_BUILTIN_ size_t get_global_linear_id() {
    return (get_global_id(2) * get_global_size(1) + get_global_id(1)) * get_global_size(0) + get_global_id(0);
}
RT_BUILTIN_ size_t get_local_linear_id() {
    return (get_local_id(2) * get_local_size(1) + get_local_id(1)) * get_local_size(0) + get_local_id(0);
}
RT_BUILTIN_ size_t get_group_linear_id() {
    return (get_group_id(2) * get_num_groups(1) + get_group_id(1)) * get_num_groups(0) + get_group_id(0);
}
#define RT_TFN_ static __device__ __forceinline__
#define RT_MFN_ __device__ __forceinline__
RT_TFN_ uint32_t rt_f2u_(float f) { return __float_as_uint(f); }
RT_TFN_ float rt_u2f_(uint32_t u) { return __uint_as_float(u); }
/* CUDA's device printf: its buffer is written to the host's stdout at the driver's synchronize points. */
#define rt_printf printf
/* A module-scope variable: a __device__ variable of the global namespace, whose name is not mangled (the symbol
 * rtModuleGetGlobal looks up with cuModuleGetGlobal). */
#define RT_GLOBAL __device__
/* The instantiation is named to NVRTC (nvrtcAddNameExpression) by the cuda target, which looks the kernel up by
 * its lowered name: nothing to emit here. */
#define RT_KERNEL_INSTANTIATE(name, ...) static_assert(true, #name)

/* rt_assert: the first failing thread of the device claims the runtime's fault record (pinned host memory the GPU
 * writes through: rt_cuda_fault_record_, which the cuda target defines in every program it builds and the runtime
 * points at the device's record when it loads the module), writes the expression, file, line and its ids into it,
 * and ends; every failing thread ends (PTX exit), the launch's other threads run on, and the context stays usable.
 * The queue reads the record after its next synchronize or query. Without a record (a kernel built outside the
 * runtime, or a module whose record could not be set): printf + __trap(), which loses the context.
 * Layout: src/backends/cuda/cuda_fault_record.h (same size and offsets). */
struct rt_cuda_fault_ {
    unsigned claimed, ready;
    int line;
    unsigned block[3], thread[3];
    char expr[240];
    char file[236];
};
/* Only 4-byte members, in the host's order: the size fixes every offset (NVRTC has no offsetof). */
static_assert(sizeof(rt_cuda_fault_) == 512, "the layout of RtCudaFaultRecord (src/backends/cuda/cuda_fault_record.h)");
#ifdef RT_CUDA_FAULT_RECORD_
extern "C" __device__ rt_cuda_fault_* rt_cuda_fault_record_;
#endif
RT_BUILTIN_ void rt_fault_text_(char* dst, const char* src, unsigned n) {
    unsigned i = 0;
    for (; i + 1 < n && src[i]; ++i) dst[i] = src[i];
    dst[i] = '\0';
}
static __device__ __noinline__ void rt_assert_fail_(const char* expr, const char* file, int line) {
#ifdef RT_CUDA_FAULT_RECORD_
    rt_cuda_fault_* f = rt_cuda_fault_record_;
    if (f) {
#if __CUDA_ARCH__ >= 600
        const bool first = atomicCAS_system(&f->claimed, 0u, 1u) == 0u;  // the host clears it: system scope
#else
        const bool first = atomicCAS(&f->claimed, 0u, 1u) == 0u;
#endif
        if (first) {
            rt_fault_text_(f->expr, expr, sizeof f->expr);
            rt_fault_text_(f->file, file, sizeof f->file);
            f->line = line;
            f->block[0] = blockIdx.x, f->block[1] = blockIdx.y, f->block[2] = blockIdx.z;
            f->thread[0] = threadIdx.x, f->thread[1] = threadIdx.y, f->thread[2] = threadIdx.z;
            __threadfence_system();  // the fields reach host memory before `ready` does
            *(volatile unsigned*)&f->ready = 1u;
        }
        asm volatile("exit;");  // ends this thread only: no trap, so the context is not lost
        return;
    }
#endif
    printf("%s:%d: rt_assert(%s) failed in block (%u,%u,%u) thread (%u,%u,%u)\n", file, line, expr, blockIdx.x,
           blockIdx.y, blockIdx.z, threadIdx.x, threadIdx.y, threadIdx.z);
    __trap();
}
#define rt_assert(cond) ((cond) ? (void)0 : rt_assert_fail_(#cond, __FILE__, __LINE__))
static __device__ __noinline__ void rt_index_fail_(const char* what, long long index, long long bound, const char* file,
                                                   int line) {
    char text[160];
    rt_index_text_(text, sizeof text, what, index, bound);
    rt_assert_fail_(text, file, line);
}
RT_BUILTIN_ long long rt_index_checked_(long long i, long long n, const char* what, const char* file, int line) {
    if (__builtin_expect((unsigned long long)i < (unsigned long long)n, 1)) return i;
    rt_index_fail_(what, i, n, file, line);
    return 0;
}
#define rt_index_(i, n, what) rt_index_checked_((i), (n), (what), __FILE__, __LINE__)

/* ---- work-groups (see "Work-groups" above): CUDA's own barrier and shared memory. */
#define rt_barrier() __syncthreads()
#define RT_LOCAL __shared__
RT_BUILTIN_ void* rt_local_memory() {
    extern __shared__ __align__(16) unsigned char rt_dynamic_local_[];
    return rt_dynamic_local_;
}
/* The item of an rt_items block (`it`): its linear index in the group (it converts to size_t), and the only index
 * rt_private takes (no integer converts to it). */
struct rt_item_id_ {
    size_t rt_linear_;
    __device__ __forceinline__ explicit rt_item_id_(size_t linear) : rt_linear_(linear) {}
    __device__ __forceinline__ operator size_t() const { return rt_linear_; }
};
/* The block runs once in every thread (`it`: the thread's linear index in the block), then the block's threads
 * meet at a barrier (in the loop's step, so `continue` reaches it too). */
#define rt_items(it)                                                                                              \
    for (rt_item_id_ it(((size_t)threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x),          \
         *rt_once_ = &it; rt_once_; rt_once_ = nullptr, __syncthreads())
/* One T per work-item: a register variable of the thread; `name[it]` is it. Any other index is refused (on cpu
 * it would select another item's value). */
template <class T> struct rt_private {
    T rt_value_;
    __device__ __forceinline__ T& operator[](const rt_item_id_&) { return rt_value_; }
    __device__ __forceinline__ const T& operator[](const rt_item_id_&) const { return rt_value_; }
    template <class I> __device__ T& operator[](const I&) {
        static_assert(sizeof(I) == 0, "rt_private<T> is indexed by the item of its rt_items block only: v[it]");
        return rt_value_;
    }
};

#undef RT_BUILTIN_

#else
/* ================================================================== cpu */
/* Needs rt_cpu_fault (cpu_kernel_abi.h), which the cpu kernel compiler places before this text. */

#define RT_KERNEL
#define RT_DEVICE
#define RT_BUILTIN_ static inline __attribute__((always_inline))

#define RT_INF __builtin_inf()
#define RT_NAN __builtin_nan("")
#define RT_INFF __builtin_inff()
#define RT_NANF __builtin_nanf("")

/* The work-item being run; written by the generated entry loop (local[0] innermost). */
struct rt_item_ {
    size_t group[3];
    size_t local[3];
    size_t block[3];
    size_t grid[3];
};

/* Base of the struct that wraps a kernel source: its members are what the source sees as built-ins.
 * Math and atomics are static members, not free functions, so they take precedence over (and never
 * clash with) <cmath>/<math.h> declarations a source may include. */
struct rt_kernel_base_ {
    rt_item_ rt_item;
    rt_cpu_fault* rt_fault;
    /* ---- work-groups: set by the entry (cpu_entry.h) */
    void* rt_local_mem_;              /* the launch's dynamic local memory (shared_bytes; per worker thread) */
    const rt_cpu_launch* rt_launch_;  /* its barrier hook (flat form) */

    void* rt_local_memory() const { return rt_local_mem_; }
    /* Flat form: this item waits here until every item of its group arrived (a fiber switch, cpu_kernel.cpp). A
     * kernel the front end did not see as a flat one (rt_barrier() through a macro) has no hook: the launch fails. */
    void rt_barrier_at_(const char* file, int line) const {
        if (__builtin_expect(rt_launch_->barrier != 0, 1)) rt_launch_->barrier(rt_launch_->group_ctx);
        else rt_barrier_unseen_(rt_fault, file, line);
    }
    __attribute__((noinline, cold)) static void rt_barrier_unseen_(rt_cpu_fault* fault, const char* file, int line) {
        if (__atomic_exchange_n(&fault->failed, RT_CPU_FAULT_UNSEEN_BARRIER, __ATOMIC_ACQ_REL) == 0) {
            fault->expr = "rt_barrier()";
            fault->file = file;
            fault->line = line;
        }
        if (fault->abandon) fault->abandon();
    }

    size_t get_local_id(unsigned d) const { return rt_item.local[d]; }
    size_t get_group_id(unsigned d) const { return rt_item.group[d]; }
    size_t get_local_size(unsigned d) const { return rt_item.block[d]; }
    size_t get_num_groups(unsigned d) const { return rt_item.grid[d]; }
    size_t get_global_id(unsigned d) const { return rt_item.group[d] * rt_item.block[d] + rt_item.local[d]; }
    size_t get_global_size(unsigned d) const { return rt_item.grid[d] * rt_item.block[d]; }

    /* The first failing work-item of a launch claims the fault record; every failing item then ends its
     * piece of the launch through fault->abandon (set by the runtime).
     * Static and given the fault pointer, so the kernel object's address never escapes the entry loop
     * (that keeps the ids in registers and the loop vectorisable). */
    __attribute__((noinline, cold)) static void rt_assert_fail_(rt_cpu_fault* fault, const char* expr,
                                                                const char* file, int line) {
        if (__atomic_exchange_n(&fault->failed, 1, __ATOMIC_ACQ_REL) == 0) {
            fault->expr = expr;
            fault->file = file;
            fault->line = line;
        }
        if (fault->abandon) fault->abandon();  /* does not return: the work-item stops here */
    }
    /* rt_index_ (see "index checks"): the claimant formats the text into the module's buffer, which the runtime
     * reads once the launch has ended. */
    __attribute__((noinline, cold)) static void rt_index_fail_(rt_cpu_fault* fault, const char* what, long long index,
                                                               long long bound, const char* file, int line) {
        static char text[160];
        if (__atomic_exchange_n(&fault->failed, 1, __ATOMIC_ACQ_REL) == 0) {
            rt_index_text_(text, sizeof text, what, index, bound);
            fault->expr = text;
            fault->file = file;
            fault->line = line;
        }
        if (fault->abandon) fault->abandon();
    }
    RT_BUILTIN_ long long rt_index_checked_(rt_cpu_fault* fault, long long i, long long n, const char* what,
                                            const char* file, int line) {
        if (__builtin_expect((unsigned long long)i < (unsigned long long)n, 1)) return i;
        rt_index_fail_(fault, what, i, n, file, line);
        return 0;  /* outside the runtime's recovery (no abandon hook): the item runs on with a safe index */
    }

#define RT_MATH1_(name, fbuiltin, dbuiltin)                                  \
    RT_BUILTIN_ float name(float x) { return fbuiltin(x); }                  \
    RT_BUILTIN_ double name(double x) { return dbuiltin(x); }
#define RT_MATH2_(name, fbuiltin, dbuiltin)                                  \
    RT_BUILTIN_ float name(float x, float y) { return fbuiltin(x, y); }      \
    RT_BUILTIN_ double name(double x, double y) { return dbuiltin(x, y); }
    RT_MATH1_(sqrt, __builtin_sqrtf, __builtin_sqrt)
    RT_MATH1_(cbrt, __builtin_cbrtf, __builtin_cbrt)
    RT_MATH1_(exp, __builtin_expf, __builtin_exp)
    RT_MATH1_(exp2, __builtin_exp2f, __builtin_exp2)
    RT_MATH1_(expm1, __builtin_expm1f, __builtin_expm1)
    RT_MATH1_(log, __builtin_logf, __builtin_log)
    RT_MATH1_(log2, __builtin_log2f, __builtin_log2)
    RT_MATH1_(log10, __builtin_log10f, __builtin_log10)
    RT_MATH1_(log1p, __builtin_log1pf, __builtin_log1p)
    RT_MATH1_(sin, __builtin_sinf, __builtin_sin)
    RT_MATH1_(cos, __builtin_cosf, __builtin_cos)
    RT_MATH1_(tan, __builtin_tanf, __builtin_tan)
    RT_MATH1_(asin, __builtin_asinf, __builtin_asin)
    RT_MATH1_(acos, __builtin_acosf, __builtin_acos)
    RT_MATH1_(atan, __builtin_atanf, __builtin_atan)
    RT_MATH1_(sinh, __builtin_sinhf, __builtin_sinh)
    RT_MATH1_(cosh, __builtin_coshf, __builtin_cosh)
    RT_MATH1_(tanh, __builtin_tanhf, __builtin_tanh)
    RT_MATH1_(asinh, __builtin_asinhf, __builtin_asinh)
    RT_MATH1_(acosh, __builtin_acoshf, __builtin_acosh)
    RT_MATH1_(atanh, __builtin_atanhf, __builtin_atanh)
    RT_MATH1_(fabs, __builtin_fabsf, __builtin_fabs)
    RT_MATH1_(floor, __builtin_floorf, __builtin_floor)
    RT_MATH1_(ceil, __builtin_ceilf, __builtin_ceil)
    RT_MATH1_(round, __builtin_roundf, __builtin_round)
    RT_MATH1_(trunc, __builtin_truncf, __builtin_trunc)
    RT_MATH1_(erf, __builtin_erff, __builtin_erf)
    RT_MATH1_(erfc, __builtin_erfcf, __builtin_erfc)
    RT_MATH2_(pow, __builtin_powf, __builtin_pow)
    RT_MATH2_(atan2, __builtin_atan2f, __builtin_atan2)
    RT_MATH2_(fmod, __builtin_fmodf, __builtin_fmod)
    RT_MATH2_(fmin, __builtin_fminf, __builtin_fmin)
    RT_MATH2_(fmax, __builtin_fmaxf, __builtin_fmax)
    RT_MATH2_(hypot, __builtin_hypotf, __builtin_hypot)
    RT_MATH2_(copysign, __builtin_copysignf, __builtin_copysign)
#undef RT_MATH1_
#undef RT_MATH2_
    RT_BUILTIN_ float rsqrt(float x) { return 1.0f / __builtin_sqrtf(x); }
    RT_BUILTIN_ double rsqrt(double x) { return 1.0 / __builtin_sqrt(x); }
    RT_BUILTIN_ float fma(float x, float y, float z) { return __builtin_fmaf(x, y, z); }
    RT_BUILTIN_ double fma(double x, double y, double z) { return __builtin_fma(x, y, z); }
    RT_BUILTIN_ bool isnan(float x) { return __builtin_isnan(x); }
    RT_BUILTIN_ bool isnan(double x) { return __builtin_isnan(x); }
    RT_BUILTIN_ bool isinf(float x) { return __builtin_isinf(x); }
    RT_BUILTIN_ bool isinf(double x) { return __builtin_isinf(x); }
    RT_BUILTIN_ bool isfinite(float x) { return __builtin_isfinite(x); }
    RT_BUILTIN_ bool isfinite(double x) { return __builtin_isfinite(x); }
    RT_BUILTIN_ int abs(int x) { return x < 0 ? -x : x; }
    RT_BUILTIN_ long abs(long x) { return x < 0 ? -x : x; }
    RT_BUILTIN_ long long abs(long long x) { return x < 0 ? -x : x; }
    RT_BUILTIN_ float abs(float x) { return __builtin_fabsf(x); }
    RT_BUILTIN_ double abs(double x) { return __builtin_fabs(x); }
    /* One operand type, as CUDA's overloads allow portably: operands of two types are refused (deleted), where
     * CUDA would find the call ambiguous. */
    template <class T> RT_BUILTIN_ T min(T a, T b) { return b < a ? b : a; }
    template <class T> RT_BUILTIN_ T max(T a, T b) { return a < b ? b : a; }
    template <class A, class B> static void min(A, B) = delete;
    template <class A, class B> static void max(A, B) = delete;

    /* Atomics: the generic __atomic builtins, with the order given (default seq_cst, as before the orders existed);
     * floating-point add/sub/min/max by compare-and-swap. */
#define RT_ORDER_DEFAULT_ rt_memory_order_seq_cst
    /* The order of a failed compare-and-swap: no release part, never stronger than `o`. */
    RT_BUILTIN_ int rt_fail_order_(rt_memory_order o) {
        return o == rt_memory_order_acq_rel ? __ATOMIC_ACQUIRE : o == rt_memory_order_release ? __ATOMIC_RELAXED : (int)o;
    }
    template <class T, class F> RT_BUILTIN_ T rt_atomic_update_(T* p, F f, rt_memory_order order) {
        T old, desired;
        __atomic_load(p, &old, __ATOMIC_RELAXED);
        do { desired = f(old); } while (!__atomic_compare_exchange(p, &old, &desired, true, (int)order, rt_fail_order_(order)));
        return old;
    }
    template <class T> RT_BUILTIN_ T atomic_add(T* p, typename rt_same_<T>::type v, rt_memory_order order = RT_ORDER_DEFAULT_) {
        if constexpr (rt_is_fp_<T>::value) return rt_atomic_update_(p, [v](T o) { return o + v; }, order);
        else return __atomic_fetch_add(p, v, (int)order);
    }
    template <class T> RT_BUILTIN_ T atomic_sub(T* p, typename rt_same_<T>::type v, rt_memory_order order = RT_ORDER_DEFAULT_) {
        if constexpr (rt_is_fp_<T>::value) return rt_atomic_update_(p, [v](T o) { return o - v; }, order);
        else return __atomic_fetch_sub(p, v, (int)order);
    }
    template <class T> RT_BUILTIN_ T atomic_and(T* p, typename rt_same_<T>::type v, rt_memory_order order = RT_ORDER_DEFAULT_) {
        static_assert(!rt_is_fp_<T>::value, "atomic_and takes an integer type");
        return __atomic_fetch_and(p, v, (int)order);
    }
    template <class T> RT_BUILTIN_ T atomic_or(T* p, typename rt_same_<T>::type v, rt_memory_order order = RT_ORDER_DEFAULT_) {
        static_assert(!rt_is_fp_<T>::value, "atomic_or takes an integer type");
        return __atomic_fetch_or(p, v, (int)order);
    }
    template <class T> RT_BUILTIN_ T atomic_xor(T* p, typename rt_same_<T>::type v, rt_memory_order order = RT_ORDER_DEFAULT_) {
        static_assert(!rt_is_fp_<T>::value, "atomic_xor takes an integer type");
        return __atomic_fetch_xor(p, v, (int)order);
    }
    /* OpenCL's atomic_inc/atomic_dec: add or subtract 1, return the old value. */
    template <class T> RT_BUILTIN_ T atomic_inc(T* p, rt_memory_order order = RT_ORDER_DEFAULT_) {
        static_assert(!rt_is_fp_<T>::value, "atomic_inc takes an integer type");
        return __atomic_fetch_add(p, (T)1, (int)order);
    }
    template <class T> RT_BUILTIN_ T atomic_dec(T* p, rt_memory_order order = RT_ORDER_DEFAULT_) {
        static_assert(!rt_is_fp_<T>::value, "atomic_dec takes an integer type");
        return __atomic_fetch_sub(p, (T)1, (int)order);
    }
    template <class T, bool Max> RT_BUILTIN_ T rt_atomic_minmax_(T* p, T v, rt_memory_order order) {
        T old;
        __atomic_load(p, &old, __ATOMIC_RELAXED);
        while (Max ? old < v : v < old) {
            if (__atomic_compare_exchange(p, &old, &v, true, (int)order, rt_fail_order_(order))) break;
        }
        return old;
    }
    template <class T> RT_BUILTIN_ T atomic_min(T* p, typename rt_same_<T>::type v, rt_memory_order order = RT_ORDER_DEFAULT_) {
        return rt_atomic_minmax_<T, false>(p, v, order);
    }
    template <class T> RT_BUILTIN_ T atomic_max(T* p, typename rt_same_<T>::type v, rt_memory_order order = RT_ORDER_DEFAULT_) {
        return rt_atomic_minmax_<T, true>(p, v, order);
    }
    template <class T>
    RT_BUILTIN_ T atomic_cas(T* p, typename rt_same_<T>::type expected, typename rt_same_<T>::type desired,
                             rt_memory_order order = RT_ORDER_DEFAULT_) {
        __atomic_compare_exchange(p, &expected, &desired, false, (int)order, rt_fail_order_(order));
        return expected;  // on failure the builtin stored the value it found; on success it is unchanged
    }
    template <class T> RT_BUILTIN_ T atomic_exchange(T* p, typename rt_same_<T>::type v, rt_memory_order order = RT_ORDER_DEFAULT_) {
        T old;
        __atomic_exchange(p, &v, &old, (int)order);
        return old;
    }
    RT_BUILTIN_ void rt_fence(rt_memory_order order) { __atomic_thread_fence((int)order); }

    /* ---- linear ids, x fastest */
    size_t get_global_linear_id() const {
        return (get_global_id(2) * get_global_size(1) + get_global_id(1)) * get_global_size(0) + get_global_id(0);
    }
    size_t get_local_linear_id() const {
        return (rt_item.local[2] * rt_item.block[1] + rt_item.local[1]) * rt_item.block[0] + rt_item.local[0];
    }
    size_t get_group_linear_id() const {
        return (rt_item.group[2] * rt_item.grid[1] + rt_item.group[1]) * rt_item.grid[0] + rt_item.group[0];
    }
};

#define rt_assert(cond) ((cond) ? (void)0 : rt_assert_fail_(rt_fault, #cond, __FILE__, __LINE__))
#define rt_index_(i, n, what) rt_index_checked_(rt_fault, (i), (n), (what), __FILE__, __LINE__)

/* ---- work-groups (see "Work-groups" above).
 * rt_barrier(): the call's place goes with it, for the failure of a kernel that has no barrier hook. */
#define rt_barrier() rt_barrier_at_(__FILE__, __LINE__)
/* RT_LOCAL: in a group kernel (rt_items) an array of the group function's frame, which runs once per group; in a
 * flat kernel (rt_barrier) the cpu target defines it as `static` around that kernel: every item of a group is a
 * fiber of one worker thread, so they share it, and the runtime runs one group of the module's flat kernels at a
 * time (the contents persist from one group to the next, which the kernel must not rely on: on CUDA shared memory
 * starts uninitialised). */
#define RT_LOCAL
/* The item of an rt_items block (`it`): its linear index in the group (it converts to size_t), and the only index
 * rt_private takes (no integer converts to it). */
struct rt_item_id_ {
    size_t rt_linear_;
    inline __attribute__((always_inline)) explicit rt_item_id_(size_t linear) : rt_linear_(linear) {}
    inline __attribute__((always_inline)) operator size_t() const { return rt_linear_; }
};
/* The group's items, x innermost (the loop the compiler vectorises, as the entry's loop of other kernels), each
 * running the block once (the innermost one-pass loop declares `it`: `continue` ends the item's turn); the ids are
 * the object's, as in other kernels. */
#define rt_items(it)                                                                                              \
    for (size_t rt_iz_ = 0; rt_iz_ < rt_item.block[2]; ++rt_iz_)                                                 \
        for (size_t rt_iy_ = (rt_item.local[2] = rt_iz_, 0); rt_iy_ < rt_item.block[1]; ++rt_iy_)                \
            for (size_t rt_ix_ = (rt_item.local[1] = rt_iy_, 0),                                                 \
                        rt_il_ = (rt_iz_ * rt_item.block[1] + rt_iy_) * rt_item.block[0];                        \
                 rt_ix_ < rt_item.block[0] && ((void)(rt_item.local[0] = rt_ix_), true); ++rt_ix_, ++rt_il_)     \
                for (rt_item_id_ it(rt_il_), *rt_once_ = &it; rt_once_; rt_once_ = nullptr)
/* One T per work-item of the group, kept from one rt_items block to the next: `name[it]`. Any other index is
 * refused (it would select another item's value here, and the thread's own on CUDA). */
template <class T> struct rt_private {
    T rt_values_[RT_CPU_MAX_GROUP_ITEMS];
    inline __attribute__((always_inline)) T& operator[](const rt_item_id_& i) { return rt_values_[i.rt_linear_]; }
    inline __attribute__((always_inline)) const T& operator[](const rt_item_id_& i) const {
        return rt_values_[i.rt_linear_];
    }
    template <class I> T& operator[](const I&) {
        static_assert(sizeof(I) == 0, "rt_private<T> is indexed by the item of its rt_items block only: v[it]");
        return rt_values_[0];
    }
};

/* ---- (cpu) 16-bit and vector types' helpers, rt_printf, RT_GLOBAL, RT_KERNEL_INSTANTIATE */
#define RT_TFN_ static inline __attribute__((always_inline))
#define RT_MFN_ inline __attribute__((always_inline))
RT_TFN_ uint32_t rt_f2u_(float f) { uint32_t u; __builtin_memcpy(&u, &f, 4); return u; }
RT_TFN_ float rt_u2f_(uint32_t u) { float f; __builtin_memcpy(&f, &u, 4); return f; }
/* The process's printf: C stdout, one call's text whole (stdio locks the stream for the call). */
#define rt_printf(...) __builtin_printf(__VA_ARGS__)
/* The source sits inside struct rt_module_: a module-scope variable is an inline static data member, one per
 * loaded module, listed (name, address, size) in the module's table of globals. */
#define RT_GLOBAL static inline
/* The cpu target generates the entry of the instantiation (rt_sig_<decltype(&rt_module_::axpy<float>)>); a
 * declaration that is valid at class scope stands here. */
#define RT_KERNEL_INSTANTIATE(name, ...) static_assert(true, #name)

#undef RT_BUILTIN_

#endif /* cpu */


/* ================================================================== types and built-ins of both backends */
/* rt_half (IEEE-754 binary16), rt_bfloat16 (the upper half of a binary32), and the vector types: plain structs of the
 * same layout on cpu and cuda (trivially copyable: kernel parameters, elements of device memory). RT_TFN_ and the
 * float bit casts rt_f2u_/rt_u2f_ (and RT_MFN_ for member functions) are given by the backend sections above. */

#ifndef RT_NO_16BIT_TYPES_
/* (Left out by the cpu target, as the vector types below, where the source and options do not name them.) */
/* Round to nearest, ties to even; NaN stays NaN (quiet), infinities and subnormals are exact. */
RT_TFN_ uint16_t rt_float_to_half_bits_(float f) {
    const uint32_t x = rt_f2u_(f), sign = (x >> 16) & 0x8000u, ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u) return (uint16_t)(sign | 0x7e00u | ((ax >> 13) & 0x3ffu));  /* NaN: quiet, payload kept */
    if (ax >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);  /* 65520 and up round to infinity */
    if (ax >= 0x38800000u)                                      /* normal: rebias, round at bit 13 */
        return (uint16_t)(sign | ((ax - 0x38000000u + 0xfffu + ((ax >> 13) & 1u)) >> 13));
    if (ax < 0x33000000u) return (uint16_t)sign;                /* below 2^-25 (a tie at 2^-25 goes to 0) */
    const uint32_t m = (ax & 0x7fffffu) | 0x800000u, shift = 126u - (ax >> 23);  /* subnormal: 14..24 */
    uint32_t q = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (q & 1u))) ++q;           /* may carry into the smallest normal: right */
    return (uint16_t)(sign | q);
}
RT_TFN_ float rt_half_bits_to_float_(uint16_t h) {
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0x1fu) return rt_u2f_(sign | 0x7f800000u | (m << 13));
    if (e != 0) return rt_u2f_(sign | ((e + 112u) << 23) | (m << 13));
    const float v = (float)m * 5.9604644775390625e-08f;  /* m * 2^-24, exact */
    return sign ? -v : v;
}
RT_TFN_ uint16_t rt_float_to_bfloat16_bits_(float f) {
    const uint32_t x = rt_f2u_(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x0040u);  /* NaN: quiet */
    return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);                      /* overflow gives infinity */
}

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
/* The GPU's conversion instructions (round to nearest even, subnormals kept; a NaN becomes the canonical NaN). */
RT_TFN_ uint16_t rt_half_from_float_(float f) {
    unsigned short h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
    return h;
}
RT_TFN_ float rt_half_to_float_(uint16_t h) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"((unsigned short)h));
    return f;
}
#if __CUDA_ARCH__ >= 800
RT_TFN_ uint16_t rt_bfloat16_from_float_(float f) {
    unsigned short h;
    asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f));
    return h;
}
#else
RT_TFN_ uint16_t rt_bfloat16_from_float_(float f) { return rt_float_to_bfloat16_bits_(f); }
#endif
#else
RT_TFN_ uint16_t rt_half_from_float_(float f) { return rt_float_to_half_bits_(f); }
RT_TFN_ float rt_half_to_float_(uint16_t h) { return rt_half_bits_to_float_(h); }
RT_TFN_ uint16_t rt_bfloat16_from_float_(float f) { return rt_float_to_bfloat16_bits_(f); }
#endif

/* 16-bit storage types: converted to float for arithmetic and comparisons (on both backends, so results agree:
 * an expression is computed in float and rounded once, where it is stored into an rt_half). `(float)h`,
 * `rt_half(x)`, `rt_half h = 1.5f;`, `h += x`. `bits` is the encoding; from_bits is constexpr (an RT_GLOBAL of these
 * types is initialised with it, `RT_GLOBAL rt_half h = rt_half::from_bits(0x3e00);`: a __device__ variable takes
 * constant initialisers only). */
struct rt_half {
    uint16_t bits;
    rt_half() = default;
    RT_MFN_ rt_half(float f) : bits(rt_half_from_float_(f)) {}
    RT_MFN_ operator float() const { return rt_half_to_float_(bits); }
    RT_MFN_ static constexpr rt_half from_bits(uint16_t b) { rt_half h{}; h.bits = b; return h; }
    RT_MFN_ rt_half& operator+=(float v) { return *this = rt_half((float)*this + v); }
    RT_MFN_ rt_half& operator-=(float v) { return *this = rt_half((float)*this - v); }
    RT_MFN_ rt_half& operator*=(float v) { return *this = rt_half((float)*this * v); }
    RT_MFN_ rt_half& operator/=(float v) { return *this = rt_half((float)*this / v); }
};
struct rt_bfloat16 {
    uint16_t bits;
    rt_bfloat16() = default;
    RT_MFN_ rt_bfloat16(float f) : bits(rt_bfloat16_from_float_(f)) {}
    RT_MFN_ operator float() const { return rt_u2f_((uint32_t)bits << 16); }
    RT_MFN_ static constexpr rt_bfloat16 from_bits(uint16_t b) { rt_bfloat16 h{}; h.bits = b; return h; }
    RT_MFN_ rt_bfloat16& operator+=(float v) { return *this = rt_bfloat16((float)*this + v); }
    RT_MFN_ rt_bfloat16& operator-=(float v) { return *this = rt_bfloat16((float)*this - v); }
    RT_MFN_ rt_bfloat16& operator*=(float v) { return *this = rt_bfloat16((float)*this * v); }
    RT_MFN_ rt_bfloat16& operator/=(float v) { return *this = rt_bfloat16((float)*this / v); }
};
static_assert(sizeof(rt_half) == 2 && alignof(rt_half) == 2, "rt_half: 2 bytes");
static_assert(sizeof(rt_bfloat16) == 2 && alignof(rt_bfloat16) == 2, "rt_bfloat16: 2 bytes");
#endif /* RT_NO_16BIT_TYPES_ */

#ifndef RT_NO_VECTOR_TYPES_
/* (The cpu target leaves them out of a translation unit whose source and options do not name them: parsing them
 * is a tenth of a small module's compile time.) */
/* Vector types: members x, y(, z(, w)); CUDA's sizes and alignments (2 and 4 components aligned to their size, up
 * to 16 bytes; 3 components to the element). Component-wise + - * / with a vector or a scalar of the element type
 * on either side, unary -, += -= *= /=, == and != (true when every component is equal), and the constructors
 * rt_make_<type>(x, y, ...), e.g. rt_make_float4(1, 2, 3, 4), or aggregate initialisation: rt_int2 v = {1, 2}. */
#define RT_VOP_(V, T, OP, L)                                                        \
    RT_TFN_ V operator OP(V a, V b) { return V{L(RT_VVV_, OP)}; }                \
    RT_TFN_ V operator OP(V a, T s) { return V{L(RT_VVS_, OP)}; }                \
    RT_TFN_ V operator OP(T s, V a) { return V{L(RT_VSV_, OP)}; }                \
    RT_TFN_ V& operator OP##=(V& a, V b) { return a = a OP b; }                  \
    RT_TFN_ V& operator OP##=(V& a, T s) { return a = a OP s; }
#define RT_VOPS_(V, T, L, B)                                                        \
    RT_VOP_(V, T, +, L) RT_VOP_(V, T, -, L) RT_VOP_(V, T, *, L) RT_VOP_(V, T, /, L) \
    RT_TFN_ V operator-(V a) { return V{L(RT_VNEG_, )}; }                        \
    RT_TFN_ bool operator==(V a, V b) { return B(RT_VEQ_); }                     \
    RT_TFN_ bool operator!=(V a, V b) { return !(a == b); }
/* L(F, OP): F(member, OP) for each member, as an initialiser list; B(F): their conjunction. */
#define RT_VVV_(m, OP) a.m OP b.m
#define RT_VVS_(m, OP) a.m OP s
#define RT_VSV_(m, OP) s OP a.m
#define RT_VNEG_(m, OP) -a.m
#define RT_VEQ_(m, OP) a.m == b.m
#define RT_VL2_(F, OP) F(x, OP), F(y, OP)
#define RT_VL3_(F, OP) F(x, OP), F(y, OP), F(z, OP)
#define RT_VL4_(F, OP) F(x, OP), F(y, OP), F(z, OP), F(w, OP)
#define RT_VB2_(F) (F(x, ) && F(y, ))
#define RT_VB3_(F) (F(x, ) && F(y, ) && F(z, ))
#define RT_VB4_(F) (F(x, ) && F(y, ) && F(z, ) && F(w, ))
#define RT_VECS_(N, T, A2, A4)                                                               \
    struct alignas(A2) rt_##N##2 { T x, y; };                                              \
    struct rt_##N##3 { T x, y, z; };                                                       \
    struct alignas(A4) rt_##N##4 { T x, y, z, w; };                                        \
    RT_TFN_ rt_##N##2 rt_make_##N##2(T x, T y) { return rt_##N##2{x, y}; }                 \
    RT_TFN_ rt_##N##3 rt_make_##N##3(T x, T y, T z) { return rt_##N##3{x, y, z}; }         \
    RT_TFN_ rt_##N##4 rt_make_##N##4(T x, T y, T z, T w) { return rt_##N##4{x, y, z, w}; } \
    RT_VOPS_(rt_##N##2, T, RT_VL2_, RT_VB2_)                                               \
    RT_VOPS_(rt_##N##3, T, RT_VL3_, RT_VB3_)                                               \
    RT_VOPS_(rt_##N##4, T, RT_VL4_, RT_VB4_)
RT_VECS_(float, float, 8, 16)
RT_VECS_(double, double, 16, 16)
RT_VECS_(int, int32_t, 8, 16)
RT_VECS_(uint, uint32_t, 8, 16)
#undef RT_VECS_
#undef RT_VOPS_
#undef RT_VOP_
#undef RT_VVV_
#undef RT_VVS_
#undef RT_VSV_
#undef RT_VNEG_
#undef RT_VEQ_
#undef RT_VL2_
#undef RT_VL3_
#undef RT_VL4_
#undef RT_VB2_
#undef RT_VB3_
#undef RT_VB4_
static_assert(sizeof(rt_float2) == 8 && alignof(rt_float2) == 8, "CUDA's float2");
static_assert(sizeof(rt_float3) == 12 && alignof(rt_float3) == 4, "CUDA's float3");
static_assert(sizeof(rt_float4) == 16 && alignof(rt_float4) == 16, "CUDA's float4");
static_assert(sizeof(rt_double2) == 16 && alignof(rt_double2) == 16, "CUDA's double2");
static_assert(sizeof(rt_double3) == 24 && alignof(rt_double3) == 8, "CUDA's double3");
static_assert(sizeof(rt_double4) == 32 && alignof(rt_double4) == 16, "CUDA's double4");
static_assert(sizeof(rt_int3) == 12 && alignof(rt_int4) == 16 && alignof(rt_uint2) == 8, "CUDA's int3, int4, uint2");
#endif /* RT_NO_VECTOR_TYPES_ */


#undef RT_TFN_
#undef RT_MFN_

#endif /* RUNTIME_KERNEL_H */
