// Fibers for the flat work-group form: the context switch (our own, a few instructions) and fiber stacks.
#include "backends/cpu/cpu_fiber.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <cstring>

#include "backends/cpu/cpu_sanitizer.hpp"
#ifdef RT_CPU_TSAN_
#include <sanitizer/tsan_interface.h>
#endif
#ifdef RT_CPU_ASAN_
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

extern "C" void rt_fiber_start_();

// The switch saves what the calling convention says a callee preserves — and nothing else, since it is called as a
// function: x86-64 System V: rbx, rbp, r12-r15, the MXCSR control bits and the x87 control word; AAPCS64: x19-x29,
// the link register, d8-d15 and FPCR. A new fiber "returns" into rt_fiber_start_, which calls entry(arg) (held in
// r12/r13, x19/x20 by prepare_fiber) with the stack aligned as at any call.
#if defined(__x86_64__)
asm(R"(
    .pushsection .text
    .globl rt_fiber_switch_
    .hidden rt_fiber_switch_
    .type rt_fiber_switch_, @function
    .p2align 4
rt_fiber_switch_:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    subq $8, %rsp
    stmxcsr (%rsp)
    fnstcw 4(%rsp)
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    ldmxcsr (%rsp)
    fldcw 4(%rsp)
    addq $8, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
    .size rt_fiber_switch_, .-rt_fiber_switch_

    .globl rt_fiber_start_
    .hidden rt_fiber_start_
    .type rt_fiber_start_, @function
    .p2align 4
rt_fiber_start_:
    movq %r12, %rdi
    callq *%r13
    ud2
    .size rt_fiber_start_, .-rt_fiber_start_
    .popsection
)");
#elif defined(__aarch64__)
asm(R"(
    .pushsection .text
    .globl rt_fiber_switch_
    .hidden rt_fiber_switch_
    .type rt_fiber_switch_, %function
    .p2align 4
rt_fiber_switch_:
    sub sp, sp, #176
    stp x19, x20, [sp, #0]
    stp x21, x22, [sp, #16]
    stp x23, x24, [sp, #32]
    stp x25, x26, [sp, #48]
    stp x27, x28, [sp, #64]
    stp x29, x30, [sp, #80]
    stp d8, d9, [sp, #96]
    stp d10, d11, [sp, #112]
    stp d12, d13, [sp, #128]
    stp d14, d15, [sp, #144]
    mrs x9, fpcr
    str x9, [sp, #160]
    mov x9, sp
    str x9, [x0]
    mov sp, x1
    ldp x19, x20, [sp, #0]
    ldp x21, x22, [sp, #16]
    ldp x23, x24, [sp, #32]
    ldp x25, x26, [sp, #48]
    ldp x27, x28, [sp, #64]
    ldp x29, x30, [sp, #80]
    ldp d8, d9, [sp, #96]
    ldp d10, d11, [sp, #112]
    ldp d12, d13, [sp, #128]
    ldp d14, d15, [sp, #144]
    ldr x9, [sp, #160]
    msr fpcr, x9
    add sp, sp, #176
    ret
    .size rt_fiber_switch_, .-rt_fiber_switch_

    .globl rt_fiber_start_
    .hidden rt_fiber_start_
    .type rt_fiber_start_, %function
    .p2align 4
rt_fiber_start_:
    mov x0, x19
    blr x20
    brk #0
    .size rt_fiber_start_, .-rt_fiber_start_
    .popsection
)");
#else
extern "C" void rt_fiber_switch_(void**, void*) { __builtin_trap(); }
extern "C" void rt_fiber_start_() { __builtin_trap(); }
#endif

namespace rt::cpu {

bool fibers_supported() noexcept {
#if defined(__x86_64__) || defined(__aarch64__)
    return true;
#else
    return false;
#endif
}

size_t fiber_stack_bytes() noexcept {
#if defined(RT_CPU_ASAN_) || defined(RT_CPU_TSAN_)
    return size_t{1} << 20;
#else
    return size_t{256} << 10;
#endif
}

bool allocate_fiber_stack(FiberStack& s) noexcept {
    const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
    const size_t bytes = fiber_stack_bytes();
    void* m = ::mmap(nullptr, page + bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK,
                     -1, 0);
    if (m == MAP_FAILED) return false;
    if (::mprotect(m, page, PROT_NONE) != 0) {  // the guard: an overflow faults (reported as a stack overflow)
        ::munmap(m, page + bytes);
        return false;
    }
    s.map = m;
    s.map_bytes = page + bytes;
    s.lo = reinterpret_cast<uintptr_t>(m) + page;
    s.bytes = bytes;
#ifdef RT_CPU_TSAN_
    s.tsan = __tsan_create_fiber(0);
#endif
    return true;
}

void release_fiber_stack_pages(FiberStack& s) noexcept {
    if (s.map) ::madvise(reinterpret_cast<void*>(s.lo), s.bytes, MADV_DONTNEED);
}

#ifdef RT_CPU_ASAN_
namespace {
/// Destroys the fake stack a fiber left saved when it was abandoned at a barrier (its group failed): ASan destroys a
/// fiber's fake stack when it switches away from it for good, so the fiber's is made the running one for a moment
/// and switched away from (no stack changes: only ASan's record of the current stack does, and back).
__attribute__((noinline)) void drop_fake_stack(FiberStack& s) noexcept {
    void* own = nullptr;
    const void* bottom = nullptr;
    size_t size = 0;
    __sanitizer_start_switch_fiber(&own, reinterpret_cast<const void*>(s.lo), s.bytes);
    __sanitizer_finish_switch_fiber(s.fake_stack, &bottom, &size);
    __sanitizer_start_switch_fiber(nullptr, bottom, size);
    __sanitizer_finish_switch_fiber(own, nullptr, nullptr);
    s.fake_stack = nullptr;
}
}  // namespace
#endif

void prepare_fiber(FiberStack& s, void (*entry)(void*), void* arg) noexcept {
#ifdef RT_CPU_ASAN_
    // A stack its fiber left mid-run (the group failed while it waited at a barrier) still has the shadow of that
    // run's frames (redzones poisoned) and, with detect_stack_use_after_return, a fake stack saved.
    if (s.fake_stack) drop_fake_stack(s);
    __asan_unpoison_memory_region(reinterpret_cast<const volatile void*>(s.lo), s.bytes);
#endif
    const uintptr_t top = (s.lo + s.bytes) & ~uintptr_t{15};
#if defined(__x86_64__)
    // From the saved stack pointer up: MXCSR and x87 control word (8 bytes), r15, r14, r13, r12, rbx, rbp, the
    // return address; after the `ret` the stack is 16-byte aligned, as rt_fiber_start_'s call needs.
    auto* frame = reinterpret_cast<uint64_t*>(top - 64);
    std::memset(frame, 0, 64);
    const uint32_t mxcsr = 0x1F80;  // the ABI's initial state: all exceptions masked, round to nearest
    const uint16_t fcw = 0x037F;
    std::memcpy(reinterpret_cast<char*>(frame), &mxcsr, 4);
    std::memcpy(reinterpret_cast<char*>(frame) + 4, &fcw, 2);
    frame[3] = reinterpret_cast<uint64_t>(entry);  // r13
    frame[4] = reinterpret_cast<uint64_t>(arg);    // r12
    frame[6] = 0;                                  // rbp: the end of the frame chain
    frame[7] = reinterpret_cast<uint64_t>(&rt_fiber_start_);
    s.sp = frame;
#elif defined(__aarch64__)
    auto* frame = reinterpret_cast<uint64_t*>(top - 176);
    std::memset(frame, 0, 176);
    frame[0] = reinterpret_cast<uint64_t>(arg);    // x19
    frame[1] = reinterpret_cast<uint64_t>(entry);  // x20
    frame[11] = reinterpret_cast<uint64_t>(&rt_fiber_start_);  // x30
    s.sp = frame;
#else
    (void)top, (void)entry, (void)arg;
    s.sp = nullptr;
#endif
}

}  // namespace rt::cpu
