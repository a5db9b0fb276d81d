// The backend registry, the option-value parsers the backends share, and the host-oversubscription hint.
#include "backends/registry.hpp"

#include <algorithm>
#include <atomic>
#include <cassert>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <limits>

#include "core/error.hpp"

namespace rt::backend {

namespace {
std::atomic<bool> g_host_oversubscribed{false};
}  // namespace

void set_host_oversubscribed(bool yes) noexcept { g_host_oversubscribed.store(yes, std::memory_order_relaxed); }
bool host_oversubscribed() noexcept { return g_host_oversubscribed.load(std::memory_order_relaxed); }

void Registry::add(BackendEntry entry) {
    assert(!find(entry.name) && "a backend is registered twice");
    // Stable: equal orders keep the registration order.
    auto at = std::upper_bound(entries_.begin(), entries_.end(), entry.order,
                               [](int order, const BackendEntry& e) { return order < e.order; });
    entries_.insert(at, std::move(entry));
}

void Registry::add_absent(std::string name, std::string reason) {
    BackendEntry e;
    e.name = std::move(name);
    e.order = std::numeric_limits<int>::max();  // last: an absent backend has no devices to order
    e.absent_reason = reason.empty() ? "left out of this build" : std::move(reason);
    add(std::move(e));
}

const BackendEntry* Registry::find(std::string_view name) const {
    for (const BackendEntry& e : entries_)
        if (e.name == name) return &e;
    return nullptr;
}

std::string Registry::names() const {
    std::string out;
    for (size_t i = 0; i < entries_.size(); ++i)
        out += (i == 0 ? "" : i + 1 == entries_.size() ? " or " : ", ") + entries_[i].name;
    return out;
}

const Registry& registry() {
    static const Registry r = [] {
        Registry built;
        register_backends(built);
        return built;
    }();
    return r;
}

bool parse_size(const std::string& text, size_t* out) {
    if (text.empty() || !(text[0] >= '0' && text[0] <= '9')) return false;
    char* end = nullptr;
    errno = 0;
    unsigned long long v = std::strtoull(text.c_str(), &end, 10);
    if (errno == ERANGE) return false;
    std::string suffix = end;
    unsigned shift = 0;
    if (suffix == "" || suffix == "B") shift = 0;
    else if (suffix == "K" || suffix == "k" || suffix == "KiB") shift = 10;
    else if (suffix == "M" || suffix == "m" || suffix == "MiB") shift = 20;
    else if (suffix == "G" || suffix == "g" || suffix == "GiB") shift = 30;
    else if (suffix == "T" || suffix == "t" || suffix == "TiB") shift = 40;
    else return false;
    if (shift && v > (~0ull >> shift)) return false;
    *out = static_cast<size_t>(v << shift);
    return true;
}

int parse_count(const Setting& s, const char* what, int min, int max) {
    const std::string& t = s.value;
    bool ok = !t.empty() && t.size() <= 10 && std::all_of(t.begin(), t.end(), [](char c) { return c >= '0' && c <= '9'; });
    long long v = ok ? std::strtoll(t.c_str(), nullptr, 10) : -1;
    if (!ok || v < min || v > max)
        fail(RT_ERROR_INVALID_VALUE, "%s='%s' is not %s (expected an integer %d..%d)", s.origin.c_str(), t.c_str(), what,
             min, max);
    return static_cast<int>(v);
}

size_t parse_bytes(const Setting& s, const char* what, bool allow_zero) {
    size_t v = 0;
    if (!parse_size(s.value, &v) || (v == 0 && !allow_zero))
        fail(RT_ERROR_INVALID_VALUE, "%s='%s' is not %s (expected bytes with an optional K/M/G/T suffix, e.g. %s)",
             s.origin.c_str(), s.value.c_str(), what, allow_zero ? "0, 4096, 32M" : "1048576, 512M, 2G");
    return v;
}

bool parse_switch(const Setting& s, const char* what) {
    std::string v = s.value;
    for (char& c : v) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (v == "1" || v == "on" || v == "yes" || v == "true") return true;
    if (v == "0" || v == "off" || v == "no" || v == "false") return false;
    fail(RT_ERROR_INVALID_VALUE, "%s='%s' is not %s (expected 1 or 0, on or off, yes or no, true or false)",
         s.origin.c_str(), s.value.c_str(), what);
}

}  // namespace rt::backend
