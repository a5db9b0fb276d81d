// Core stream semantics: synchronize/query report asynchronous failures; host functions run through a trampoline.
#include "core/stream.hpp"

namespace rt {

void Stream::synchronize() {
    queue_->synchronize_impl();
    errors_.take_and_throw();
}

bool Stream::query() {
    errors_.take_and_throw();
    return queue_->query_impl();
}

namespace {
/// The failure reported by rtHostFuncSetError inside the host function running on this thread.
struct HostCallFailure {
    rtError_t code = RT_SUCCESS;
    std::string message;
};
thread_local HostCallFailure* t_host_call = nullptr;
}  // namespace

bool set_host_call_error(rtError_t code, const char* message) {
    if (!t_host_call) return false;
    if (t_host_call->code == RT_SUCCESS) {
        t_host_call->code = code;
        t_host_call->message = message ? message : "";
    }
    return true;
}

namespace backend {
void run_host_call(const HostCall& call) noexcept {
    HostCallFailure failure;
    HostCallFailure* outer = t_host_call;  // host functions do not nest, but stay correct if a backend does
    t_host_call = &failure;
    try {
        call.fn(call.user_data);
    } catch (const std::exception& e) {
        if (failure.code == RT_SUCCESS) {
            failure.code = RT_ERROR_LAUNCH_FAILED;
            failure.message = std::string("threw: ") + e.what();
        }
    } catch (...) {
        if (failure.code == RT_SUCCESS) {
            failure.code = RT_ERROR_LAUNCH_FAILED;
            failure.message = "threw an exception of unknown type";
        }
    }
    t_host_call = outer;
    if (failure.code != RT_SUCCESS) {
        try {
            call.slot->set(failure.code,
                           format("host function %p (operation #%llu on the stream) failed: %s",
                                  reinterpret_cast<void*>(call.fn), static_cast<unsigned long long>(call.op_index),
                                  failure.message.c_str()));
        } catch (...) {
            // Out of memory while reporting: the code alone still reaches the stream.
            call.slot->set(failure.code, {});
        }
    }
}
}  // namespace backend

}  // namespace rt
