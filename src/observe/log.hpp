// The runtime's diagnostic lines on stderr (RUNTIME_LOG): a level per subsystem, tested inline so that a line that
// is not printed costs one load and one branch.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>

namespace rt::log {

/// Most severe first: a subsystem at level L prints the lines of L and of every level before it.
enum class Level : uint8_t { error = 0, warn = 1, info = 2, debug = 3 };
/// Where a line comes from; the names RUNTIME_LOG accepts are these, lower case.
enum class Subsystem : uint8_t { core = 0, backend, kernels, memory, graph, dvpp, comm };
inline constexpr int kSubsystems = 7;

/// The level of each subsystem, indexed by Subsystem. Constant-initialised to warn (so a line of a static
/// initialiser that runs before the environment is read sees the default), set from RUNTIME_LOG when the library
/// loads; relaxed: a level is one independent byte.
extern std::atomic<uint8_t> g_levels[kSubsystems];

/// Whether a line of `level` from `subsystem` is printed. Inline: the cost of a disabled line.
inline bool enabled(Subsystem subsystem, Level level) {
    return static_cast<uint8_t>(level) <= g_levels[static_cast<int>(subsystem)].load(std::memory_order_relaxed);
}

/// Prints one line `[runtime HH:MM:SS.uuuuuu tid T <subsystem> <level>] <message>` on stderr with one write(2), so
/// that lines of concurrent threads never interleave; no lock of the runtime is taken. Callers test enabled() first
/// (RT_LOG does). Never throws: a line that cannot be formatted or written is dropped.
void write(Subsystem subsystem, Level level, const char* fmt, ...) noexcept __attribute__((format(printf, 3, 4)));

/// The levels a RUNTIME_LOG value asks for. Grammar: comma-separated items, each `LEVEL` (every subsystem) or
/// `SUBSYSTEM=LEVEL` (that one, whatever the order of the items); blanks around items and `=` are ignored; a later
/// item for the same subsystem wins; empty = the default (warn). False, with `why` naming the item and what was
/// expected, when an item is not understood; `levels` is then unchanged.
bool parse_spec(std::string_view spec, uint8_t (&levels)[kSubsystems], std::string* why);

/// Applies `spec` (nullptr or empty: the default). A spec that is not understood changes nothing and prints one
/// warning naming it and the accepted form; returns whether it was understood. Called when the library loads with
/// getenv("RUNTIME_LOG"); tests call it to change levels at run time.
bool configure(const char* spec) noexcept;

/// "kernels", "warn": the names lines and specs use.
const char* subsystem_name(Subsystem subsystem);
const char* level_name(Level level);

}  // namespace rt::log

/// RT_LOG(kernels, info, "compiled %s", name): prints the line when the subsystem's level lets it through; the
/// arguments are evaluated only then.
#define RT_LOG(subsystem, level, ...)                                                                  \
    do {                                                                                              \
        if (::rt::log::enabled(::rt::log::Subsystem::subsystem, ::rt::log::Level::level)) [[unlikely]] \
            ::rt::log::write(::rt::log::Subsystem::subsystem, ::rt::log::Level::level, __VA_ARGS__);  \
    } while (0)
