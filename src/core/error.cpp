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
        failed_.store(true, std::memory_order_release);
    } else {
        ++more_;
    }
}

void AsyncErrorSlot::count_skipped() {
    std::lock_guard lock(mutex_);
    ++skipped_;
}

void AsyncErrorSlot::set_origin(std::string origin) {
    std::lock_guard lock(mutex_);
    origin_ = std::move(origin);
}

std::string AsyncErrorSlot::origin() const {
    std::lock_guard lock(mutex_);
    return origin_;
}

rtError_t AsyncErrorSlot::peek(std::string* message) const {
    std::lock_guard lock(mutex_);
    if (code_ != RT_SUCCESS) *message = (origin_.empty() ? std::string("a stream") : origin_) + ": " + message_;
    return code_;
}

rtError_t AsyncErrorSlot::take(std::string* message) {
    std::lock_guard lock(mutex_);
    if (code_ == RT_SUCCESS) return RT_SUCCESS;
    rtError_t code = code_;
    *message = std::move(message_);
    if (more_) *message += format(" (and %zu later failure(s) on the same stream)", more_);
    if (skipped_) *message += format("; %zu operation(s) queued after it were skipped", skipped_);
    code_ = RT_SUCCESS;
    message_.clear();
    more_ = skipped_ = 0;
    failed_.store(false, std::memory_order_release);
    return code;
}

void AsyncErrorSlot::take_and_throw() {
    if (!failed()) return;
    std::string message;
    rtError_t code = take(&message);
    if (code != RT_SUCCESS) throw Error(code, std::move(message));
}

}  // namespace rt
