// rtInit's options: environment defaults, the option string, the core's key and the routing of backends' keys.
#include "core/options.hpp"

#include <cstdlib>

#include "core/error.hpp"
#include "observe/usage.hpp"

namespace rt {

namespace {

std::string trim(const std::string& s) {
    size_t b = s.find_first_not_of(" \t\n");
    size_t e = s.find_last_not_of(" \t\n");
    return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
}

/// Every key rtInit accepts, for the message about an unknown one.
std::string known_keys(const backend::Registry& reg) {
    std::string out = "backend, module_cache_limit, default_stream";
    for (const backend::BackendEntry& e : reg.entries()) {
        for (const backend::OptionKey& k : e.options) {
            out += ", " + e.name + "." + k.key;
            for (size_t i = 0; i < k.aliases.size(); ++i) out += (i ? " or " : " (also ") + k.aliases[i];
            if (!k.aliases.empty()) out += ")";
        }
    }
    return out;
}

/// Collects settings per backend (same order as the registry's entries) and the core's own.
class Router {
public:
    explicit Router(const backend::Registry& reg) : reg_(reg), settings_(reg.entries().size()) {}

    void set(const std::string& key, const std::string& value, const std::string& origin_prefix) {
        if (key == "backend") {
            if (!reg_.find(value))
                fail(RT_ERROR_INVALID_VALUE, "%sbackend='%s' is not a backend (expected %s)", origin_prefix.c_str(),
                     value.c_str(), reg_.names().c_str());
            first_backend_ = value;
            return;
        }
        if (key == "module_cache_limit") {
            module_cache_limit_ = parse_limit(value, origin_prefix + key);
            return;
        }
        if (key == "default_stream") {
            per_thread_default_ = parse_default_stream(value, origin_prefix + key);
            return;
        }
        const auto& entries = reg_.entries();
        for (size_t i = 0; i < entries.size(); ++i) {
            const backend::BackendEntry& e = entries[i];
            bool prefixed = key.size() > e.name.size() && key.compare(0, e.name.size(), e.name) == 0 &&
                            key[e.name.size()] == '.';
            if (prefixed && !e.absent_reason.empty())
                fail(RT_ERROR_INVALID_VALUE, "%soption '%s': this build of the runtime has no %s backend (%s)",
                     origin_prefix.c_str(), key.c_str(), e.name.c_str(), e.absent_reason.c_str());
            for (const backend::OptionKey& k : e.options) {
                bool match = prefixed && key.compare(e.name.size() + 1, std::string::npos, k.key) == 0;
                for (const std::string& a : k.aliases) match = match || key == a;
                if (match) {
                    settings_[i].push_back({k.key, value, origin_prefix + key});
                    return;
                }
            }
        }
        fail(RT_ERROR_INVALID_VALUE, "%sunknown option '%s' (known: %s)", origin_prefix.c_str(), key.c_str(),
             known_keys(reg_).c_str());
    }

    /// The environment's defaults: RUNTIME_BACKEND and each backend option's variable.
    void read_environment() {
        if (const char* v = std::getenv("RUNTIME_BACKEND"); v && *v) {
            std::string value = trim(v);
            if (!reg_.find(value))
                fail(RT_ERROR_INVALID_VALUE, "RUNTIME_BACKEND='%s' is not a backend (expected %s)", v,
                     reg_.names().c_str());
            first_backend_ = value;
        }
        if (const char* v = std::getenv("RUNTIME_MODULE_CACHE_LIMIT"); v && *v)
            module_cache_limit_ = parse_limit(trim(v), "RUNTIME_MODULE_CACHE_LIMIT");
        if (const char* v = std::getenv("RUNTIME_DEFAULT_STREAM"); v && *v)
            per_thread_default_ = parse_default_stream(trim(v), "RUNTIME_DEFAULT_STREAM");
        const auto& entries = reg_.entries();
        for (size_t i = 0; i < entries.size(); ++i)
            for (const backend::OptionKey& k : entries[i].options)
                if (const char* v = k.env.empty() ? nullptr : std::getenv(k.env.c_str()); v && *v)
                    settings_[i].push_back({k.key, trim(v), k.env});
    }

    InitOptions finish() {
        InitOptions o;
        const auto& entries = reg_.entries();
        o.first_backend = first_backend_.empty() && !entries.empty() ? entries.front().name : first_backend_;
        o.module_cache_limit = module_cache_limit_;
        o.per_thread_default_stream = per_thread_default_;
        for (size_t i = 0; i < entries.size(); ++i)
            if (entries[i].absent_reason.empty()) o.backends.push_back({&entries[i], entries[i].parse(settings_[i])});
        return o;
    }

private:
    static size_t parse_limit(const std::string& value, const std::string& origin) {
        const backend::Setting s{"module_cache_limit", value, origin};
        return static_cast<size_t>(backend::parse_count(s, "a count of modules", 0, 1 << 20));
    }

    static bool parse_default_stream(const std::string& value, const std::string& origin) {
        if (value == "legacy") return false;
        if (value == "per-thread") return true;
        fail(RT_ERROR_INVALID_VALUE, "%s='%s' is not a default stream kind (expected legacy or per-thread)",
             origin.c_str(), value.c_str());
    }

    size_t module_cache_limit_ = kernels::ModuleCache::kDefaultLimit;
    bool per_thread_default_ = false;
    const backend::Registry& reg_;
    std::vector<std::vector<backend::Setting>> settings_;
    std::string first_backend_;
};

}  // namespace

bool InitOptions::same_as(const InitOptions& other) const {
    if (first_backend != other.first_backend || backends.size() != other.backends.size() ||
        module_cache_limit != other.module_cache_limit || per_thread_default_stream != other.per_thread_default_stream)
        return false;
    for (size_t i = 0; i < backends.size(); ++i)
        if (backends[i].entry != other.backends[i].entry || !backends[i].options->same_as(*other.backends[i].options))
            return false;
    return true;
}

InitOptions parse_options(const char* text) {
    Router router(backend::registry());
    router.read_environment();
    std::string all = text ? text : "";
    size_t pos = 0;
    while (pos < all.size()) {
        size_t end = all.find(';', pos);
        if (end == std::string::npos) end = all.size();
        std::string item = trim(all.substr(pos, end - pos));
        pos = end + 1;
        if (item.empty()) continue;
        size_t eq = item.find('=');
        if (eq == std::string::npos)
            fail(RT_ERROR_INVALID_VALUE, "rtInit: option '%s' has no value (expected key=value;key=value)", item.c_str());
        router.set(trim(item.substr(0, eq)), trim(item.substr(eq + 1)), "rtInit: ");
    }
    InitOptions o = router.finish();
    o.publish_usage = observe::publishing_enabled();
    return o;
}

}  // namespace rt
