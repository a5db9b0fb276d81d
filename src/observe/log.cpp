// RUNTIME_LOG: parsing the spec, and the formatting and writing of one line.
#include "observe/log.hpp"

#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <vector>

namespace rt::log {

std::atomic<uint8_t> g_levels[kSubsystems] = {1, 1, 1, 1, 1, 1, 1};

namespace {

constexpr const char* kSubsystemNames[kSubsystems] = {"core", "backend", "kernels", "memory", "graph", "dvpp", "comm"};
constexpr const char* kLevelNames[] = {"error", "warn", "info", "debug"};
constexpr const char* kAcceptedForm =
    "expected LEVEL or SUBSYSTEM=LEVEL items separated by commas, LEVEL one of error, warn, info, debug and "
    "SUBSYSTEM one of core, backend, kernels, memory, graph, dvpp, comm (e.g. RUNTIME_LOG=warn,kernels=debug)";

std::string_view trim(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
    return s;
}

template <size_t N>
int find_name(const char* const (&names)[N], std::string_view s) {
    for (size_t i = 0; i < N; ++i)
        if (s == names[i]) return static_cast<int>(i);
    return -1;
}

void write_all(const char* data, size_t size) {
    while (size > 0) {
        ssize_t n = ::write(STDERR_FILENO, data, size);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return;  // stderr closed or full: the line is dropped
        data += n;
        size -= static_cast<size_t>(n);
    }
}

// The environment is read when the library loads, before any runtime call can log.
[[maybe_unused]] const bool g_from_environment = configure(std::getenv("RUNTIME_LOG"));

}  // namespace

const char* subsystem_name(Subsystem subsystem) { return kSubsystemNames[static_cast<int>(subsystem)]; }
const char* level_name(Level level) { return kLevelNames[static_cast<int>(level)]; }

bool parse_spec(std::string_view spec, uint8_t (&levels)[kSubsystems], std::string* why) {
    int all = static_cast<int>(Level::warn);
    int per[kSubsystems];
    for (int& p : per) p = -1;
    std::string_view rest = spec;
    while (true) {
        size_t comma = rest.find(',');
        std::string_view item = trim(rest.substr(0, comma));
        if (!item.empty()) {
            size_t eq = item.find('=');
            std::string_view sub = eq == std::string_view::npos ? std::string_view() : trim(item.substr(0, eq));
            std::string_view lvl = eq == std::string_view::npos ? item : trim(item.substr(eq + 1));
            int level = find_name(kLevelNames, lvl);
            int s = eq == std::string_view::npos ? -2 : find_name(kSubsystemNames, sub);
            if (s == -1 || level < 0) {
                if (why) {  // appended piece by piece: GCC 12 warns (-Wrestrict, wrongly) on a chain of operator+
                    why->assign("item '").append(item).append("': '");
                    why->append(s == -1 ? sub : lvl).append(s == -1 ? "' is not a subsystem" : "' is not a level");
                }
                return false;
            }
            if (s == -2) all = level;
            else per[s] = level;
        } else if (comma != std::string_view::npos || !trim(spec).empty()) {
            if (why) *why = "an empty item";
            return false;
        }
        if (comma == std::string_view::npos) break;
        rest.remove_prefix(comma + 1);
    }
    for (int i = 0; i < kSubsystems; ++i) levels[i] = static_cast<uint8_t>(per[i] >= 0 ? per[i] : all);
    return true;
}

bool configure(const char* spec) noexcept {
    try {
        uint8_t levels[kSubsystems];
        std::string why;
        if (!parse_spec(spec ? spec : "", levels, &why)) {
            RT_LOG(core, warn, "RUNTIME_LOG='%s' is not understood (%s): ignored; %s", spec, why.c_str(),
                   kAcceptedForm);
            return false;
        }
        for (int i = 0; i < kSubsystems; ++i) g_levels[i].store(levels[i], std::memory_order_relaxed);
        return true;
    } catch (...) {
        return false;  // out of memory at load: the default levels stay
    }
}

void write(Subsystem subsystem, Level level, const char* fmt, ...) noexcept {
    try {
        timespec now {};
        ::clock_gettime(CLOCK_REALTIME, &now);
        tm local {};
        ::localtime_r(&now.tv_sec, &local);
        char line[1024];
        int head = std::snprintf(line, sizeof line, "[runtime %02d:%02d:%02d.%06ld tid %ld %s %s] ", local.tm_hour,
                                 local.tm_min, local.tm_sec, now.tv_nsec / 1000,
                                 static_cast<long>(::syscall(SYS_gettid)),
                                 subsystem_name(subsystem), level_name(level));
        if (head < 0) return;
        va_list args;
        va_start(args, fmt);
        va_list again;
        va_copy(again, args);
        int body = std::vsnprintf(line + head, sizeof line - head, fmt, args);
        va_end(args);
        if (body < 0) {
            va_end(again);
            return;
        }
        size_t total = static_cast<size_t>(head) + static_cast<size_t>(body) + 1;  // with the newline
        if (total < sizeof line) {
            va_end(again);
            line[total - 1] = '\n';
            write_all(line, total);
            return;
        }
        std::vector<char> big(total + 1);  // a long line (a compiler's command line, its diagnostics)
        std::copy(line, line + head, big.data());
        std::vsnprintf(big.data() + head, big.size() - head, fmt, again);
        va_end(again);
        big[total - 1] = '\n';
        write_all(big.data(), total);
    } catch (...) {
    }
}

}  // namespace rt::log
