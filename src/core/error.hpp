// Errors inside the runtime: rt::Error carries an rtError_t and a message; the C boundary converts it.
#pragma once

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
/// Thread-safe: set from executor/callback threads, taken by host threads.
class AsyncErrorSlot {
public:
    /// Keeps the first failure; later ones only increase the count mentioned in the report.
    void set(rtError_t code, std::string message);
    /// Throws the stored failure (and clears it) if there is one.
    void take_and_throw();
    bool pending() const;

private:
    mutable std::mutex mutex_;
    rtError_t code_ = RT_SUCCESS;
    std::string message_;
    size_t more_ = 0;
};

}  // namespace rt
