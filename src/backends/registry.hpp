// The backends of this build: each registers a name, an enumeration order, its own rtInit options and a factory.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "backends/backend.hpp"

namespace rt::backend {

/// One rtInit option of a backend, spelled `<backend>.<key>` (cpu.devices=2); older spellings and an environment
/// variable may set it too.
struct OptionKey {
    std::string key;                   ///< without the prefix: "devices"
    std::vector<std::string> aliases;  ///< older spellings accepted as well ("cpu_devices")
    std::string env;                   ///< the environment variable that gives the default, or ""
};

/// A value for one of a backend's options, routed to that backend by the core.
struct Setting {
    std::string key;     ///< the OptionKey::key it sets ("devices"), whatever the spelling used
    std::string value;   ///< trimmed, possibly empty
    std::string origin;  ///< for messages, as the user wrote it: "rtInit: cpu.devices", "rtInit: cpu_devices",
                         ///< "RUNTIME_CPU_DEVICES"
};

/// A backend of this build, or (absent_reason set) one this build leaves out.
struct BackendEntry {
    std::string name;  ///< device names (cpu:0) and the option prefix (cpu.)
    int order = 0;     ///< device enumeration order, lowest first, unless rtInit's backend= puts another first
    std::vector<OptionKey> options;
    /// Parses and validates `settings` (the environment's first, then rtInit's in the order written: a later one
    /// wins); none = the defaults. Throws rt::Error(RT_ERROR_INVALID_VALUE) naming the origin, the value and what
    /// was expected. Called without any lock held; must not touch the runtime.
    std::function<std::unique_ptr<Options>(const std::vector<Setting>& settings)> parse;
    /// Creates the backend, which enumerates its devices, with options made by `parse`. Throws rt::Error.
    std::function<std::unique_ptr<Backend>(const Options& options)> create;
    /// Non-empty: the build leaves this backend out, and says why (parse and create are unset).
    std::string absent_reason;
};

/// The set of backends. Filled once, before any lookup; read-only (and so thread-safe) afterwards.
class Registry {
public:
    /// Adds a backend; a name registered twice is a programming error (asserted).
    void add(BackendEntry entry);
    /// Records a backend this build leaves out, so that its devices and options are refused with `reason`.
    void add_absent(std::string name, std::string reason);
    /// Every entry, built and absent, in enumeration order (order, then registration order).
    const std::vector<BackendEntry>& entries() const { return entries_; }
    /// The entry named `name` (built or absent), or nullptr.
    const BackendEntry* find(std::string_view name) const;
    /// "cpu or cuda", "cpu, cuda or x": the names of every entry, for messages.
    std::string names() const;

private:
    std::vector<BackendEntry> entries_;
};

/// The backends of this build, registered on first use by register_backends.
const Registry& registry();

/// Registers every backend of this build, each through its register_<name>_backend(Registry&). Defined in the
/// backend list that src/CMakeLists.txt generates from the backends it builds (an explicit call per backend, so
/// a static link keeps them all and no static-initialisation order is involved).
void register_backends(Registry& registry);

/// Option values as backends take them. Each throws RT_ERROR_INVALID_VALUE
/// "<origin>='<value>' is not <what> (expected <expected>)".
int parse_count(const Setting& s, const char* what, int min, int max);
/// Bytes with an optional K/M/G/T suffix (powers of 1024: 512M, 2G, 1048576); 0 refused unless `allow_zero`.
size_t parse_bytes(const Setting& s, const char* what, bool allow_zero);
/// 1/0, on/off, yes/no, true/false (any case).
bool parse_switch(const Setting& s, const char* what);
/// Parses "64M", "2G", "1048576" into bytes; false if it is not such a size or does not fit.
bool parse_size(const std::string& text, size_t* out);

/// A backend's options as a plain struct `T` with operator==: what most backends' parse returns.
template <class T> class OptionsOf final : public Options {
public:
    explicit OptionsOf(T v) : value(std::move(v)) {}
    bool same_as(const Options& other) const override {
        auto* o = dynamic_cast<const OptionsOf*>(&other);
        return o && o->value == value;
    }
    T value;
};

}  // namespace rt::backend
