// Errors inside the runtime: rt::Error carries an rtError_t and a message; the C boundary converts it.
#pragma once

#include <atomic>
#include <cstdarg>
#include <mutex>
#include <stdexcept>
#include <string>

#include "runtime/runtime.h"

namespace rt {

/// Thrown inside the library only; the C boundary (capi/) catches it and never lets it escape.
class Error : public std::runtime_error {
public:
    Error(rtError_t code, std::string message) : std::runtime_error(std::move(message)), code_(code) {}
    rtError_t code() const noexcept { return code_; }

private:
    rtError_t code_;
};

/// printf-style message builder.
std::string format(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

/// Throws Error(code, formatted message).
[[noreturn]] void fail(rtError_t code, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

/// Sets this thread's last error message (what rtGetLastErrorMessage returns).
void set_last_error_message(std::string message);
const char* last_error_message() noexcept;

/// A failure of queued work, kept where it happened until the next synchronize/query on it reports it.
/// While a failure is pending, the stream skips the work queued behind it (counted, and said in the report).
/// Thread-safe: set from executor/callback threads, taken by host threads.
class AsyncErrorSlot {
public:
    /// Keeps the first failure; later ones only increase the count mentioned in the report.
    void set(rtError_t code, std::string message);
    /// Throws the stored failure (and clears it) if there is one.
    void take_and_throw();
    /// Whether a failure is pending (one acquire load: checked before every queued operation).
    bool failed() const { return failed_.load(std::memory_order_acquire); }
    /// An operation was skipped because a failure is pending.
    void count_skipped();
    /// The pending failure, prefixed with the stream it happened on, without clearing it; RT_SUCCESS if none.
    rtError_t peek(std::string* message) const;
    /// Names the stream in reports that travel to other streams and events ("stream 0x53... on cpu:0").
    void set_origin(std::string origin);
    std::string origin() const;
    /// Takes the pending failure without throwing: RT_SUCCESS if none.
    rtError_t take(std::string* message);

private:
    mutable std::mutex mutex_;
    std::atomic<bool> failed_{false};
    rtError_t code_ = RT_SUCCESS;
    std::string message_;
    std::string origin_;
    size_t more_ = 0;
    size_t skipped_ = 0;
};

}  // namespace rt
