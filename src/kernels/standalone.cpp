// The core services the kernel toolchain's objects call, for executables that link them without the core
// (runtime-compile, internal tests): no runtime runs there, so no work is queued and a release happens at once.
#include "backends/backend.hpp"

namespace rt::backend {

bool defer_after_queued_work(std::function<void()> action) noexcept {
    try {
        action();
        return true;
    } catch (...) {
        return false;
    }
}

}  // namespace rt::backend
