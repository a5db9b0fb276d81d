// Error formatting, the thread-local last-error message and the asynchronous error slot.
#include "core/error.hpp"

#include <cstdio>
#include <vector>

namespace rt {

namespace {
std::string vformat(const char* fmt, va_list args) {
    va_list copy;
    va_copy(copy, args);
    int n = std::vsnprintf(nullptr, 0, fmt, copy);
    va_end(copy);
    if (n <= 0) return {};
    std::string out(static_cast<size_t>(n), '\0');
    std::vsnprintf(out.data(), out.size() + 1, fmt, args);
    return out;
}

thread_local std::string t_last_message;
}  // namespace

std::string format(const char* fmt, ...) {
    va_list args;
    va_start(args, fmt);
    std::string s = vformat(fmt, args);
    va_end(args);
    return s;
}

void fail(rtError_t code, const char* fmt, ...) {
    va_list args;
    va_start(args, fmt);
    std::string s = vformat(fmt, args);
    va_end(args);
    throw Error(code, std::move(s));
}

void set_last_error_message(std::string message) { t_last_message = std::move(message); }
const char* last_error_message() noexcept { return t_last_message.c_str(); }

void AsyncErrorSlot::set(rtError_t code, std::string message) {
    std::lock_guard lock(mutex_);
    if (code_ == RT_SUCCESS) {
        code_ = code;
        message_ = std::move(message);
    } else {
        ++more_;
    }
}

void AsyncErrorSlot::take_and_throw() {
    std::unique_lock lock(mutex_);
    if (code_ == RT_SUCCESS) return;
    rtError_t code = code_;
    std::string message = std::move(message_);
    if (more_) message += format(" (and %zu later failure(s) on the same stream)", more_);
    code_ = RT_SUCCESS;
    message_.clear();
    more_ = 0;
    lock.unlock();
    throw Error(code, std::move(message));
}

bool AsyncErrorSlot::pending() const {
    std::lock_guard lock(mutex_);
    return code_ != RT_SUCCESS;
}

}  // namespace rt
