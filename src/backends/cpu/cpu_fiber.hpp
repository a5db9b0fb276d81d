// Fibers for the flat work-group form (rt_barrier, kernel.h): stacks with guard pages and the context switch.
#pragma once

#include <cstddef>
#include <cstdint>

namespace rt::cpu {

/// True where this file has a context switch (x86-64 System V, aarch64 AAPCS64).
bool fibers_supported() noexcept;

/// One fiber's stack: mmap'ed (reserved, touched on use), with a PROT_NONE guard page below it.
struct FiberStack {
    void* map = nullptr;    // the mapping, guard page first
    size_t map_bytes = 0;
    uintptr_t lo = 0;       // lowest usable address (above the guard)
    size_t bytes = 0;       // usable bytes
    void* sp = nullptr;     // the saved stack pointer while the fiber is not running
    void* fake_stack = nullptr;  // ASan's fake-stack handle while it is not running mid-run (null otherwise)
    void* tsan = nullptr;        // TSan's fiber
};

/// The usable bytes of every fiber stack (larger under a sanitizer, whose frames are larger).
size_t fiber_stack_bytes() noexcept;

/// Maps `s` (fiber_stack_bytes() and a guard page); false when the system refuses.
bool allocate_fiber_stack(FiberStack& s) noexcept;

/// Gives the touched pages of `s` back to the system (MADV_DONTNEED: they read as zero when touched again).
void release_fiber_stack_pages(FiberStack& s) noexcept;

/// Lays out `s` so that the next switch to it runs entry(arg) on it from the top; entry must never return. Under
/// ASan, whatever a run left mid-way on it (the shadow of its frames, a saved fake stack) is cleared first.
void prepare_fiber(FiberStack& s, void (*entry)(void*), void* arg) noexcept;

}  // namespace rt::cpu

/// Saves the callee-saved registers and the FP control state on the current stack, stores the stack pointer to
/// *save and continues the context saved at `to` (by an earlier switch, or laid out by prepare_fiber).
extern "C" void rt_fiber_switch_(void** save, void* to);
