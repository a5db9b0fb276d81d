// What a backend contributes to kernel compilation (a Target), and the one path every source takes through the caches.
//
//   source ──read_program──▶ Program ──Target::build──▶ image file in the disk cache ──Target::load──▶ backend::Module
//
// One key names a compilation in both caches: the target's identity (compiler, ISA or architecture, ABI, the
// embedded prelude and entry code) + the source's name + the source + the normalised options.
#pragma once

#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "backends/backend.hpp"
#include "kernels/dialect.hpp"

namespace rt::kernels {

class Target {
public:
    virtual ~Target() = default;
    /// The cache directory's name under the cache root ("cpu", "cuda").
    virtual const char* cache_name() const = 0;
    /// The image file's extension (".so", ".cubin").
    virtual std::string image_extension() const = 0;
    /// Everything besides the program that decides the image. Cheap (no subprocess); may change while the
    /// process runs (cpu: $RUNTIME_CXX), which then gives new keys.
    virtual std::string identity() const = 0;
    /// Builds `program` into the file `out` (a temporary name; the caller publishes it). Returns the compiler's
    /// run time in seconds. Throws rt::Error: COMPILE_FAILED with the diagnostics (lines of program.name) and the
    /// kernel names; NOT_SUPPORTED when the target has no compiler here.
    virtual double build(const Program& program, const std::string& out) const = 0;
    /// Loads an image file this target built, or a precompiled module (`precompiled`: the file the user named;
    /// else a cache entry). A cache entry that cannot be loaded returns nullptr (it is compiled over); a
    /// precompiled file that cannot throws rt::Error naming the file and why.
    virtual std::shared_ptr<backend::Module> load(const std::string& path, bool precompiled) = 0;
};

/// What compile() produced.
struct Image {
    std::string path;  ///< <cache root>/<target>/<key><extension>
    std::string key;   ///< 32 hex digits
    std::vector<std::string> kernels;
    bool from_cache = false;     ///< the entry existed and nothing was compiled
    double compile_seconds = 0;  ///< the compiler's run time (0 on a cache hit)
};

/// Everything besides the program that decides what `target` builds: the generator's version, the target's cache name,
/// the library's version and Target::identity(). Built code fits a target whose build identity is the same (saved
/// graphs keep it with their code). Throws what identity() throws.
std::string build_identity(const Target& target);

/// The key of a compilation in both caches: target identity + source name + source + normalised options.
std::string cache_key(const Target& target, const std::string& name, const std::string& source,
                      const std::vector<std::string>& options);

/// Builds `program` into the disk cache unless an entry for its key exists (`force`, or a program that includes files:
/// build anyway and replace it). Thread- and process-safe: a finished entry appears atomically (rename).
Image compile(const Target& target, const Program& program, bool force = false);

/// Modules loaded from source for one target (one device, or all devices that share code): a repeated load of
/// the same source returns the same module without touching the disk. Bounded: the `limit` most recently used
/// modules are kept (least recently used evicted first); an evicted module stays loaded while anything else holds
/// it (a module handle, a queued launch) and is unloaded after, and a later load of its source comes from the disk
/// cache. Thread-safe; concurrent loads of one key compile once, loads of other keys do not wait for them.
class ModuleCache {
public:
    static constexpr size_t kDefaultLimit = 256;

    /// The runtime sets the limit it was initialised with (rtInit module_cache_limit, $RUNTIME_MODULE_CACHE_LIMIT).
    ModuleCache() : limit_(kDefaultLimit) {}
    explicit ModuleCache(size_t limit) : limit_(limit) {}

    /// The module for (source, options) on `target`: from this cache, else the disk cache, else compiled.
    /// A damaged disk entry is compiled over. Throws rt::Error from read_program, compile and load.
    std::shared_ptr<backend::Module> load_source(Target& target, const std::string& source, const std::string& options);
    /// Forgets every module (loaded modules stay alive while referenced).
    void clear();
    /// Changes the limit (evicting down to it at once).
    void set_limit(size_t limit);
    size_t limit() const;
    /// Modules held now (at most limit()).
    size_t size() const;

private:
    struct Slot {
        std::mutex mutex;  // held while the slot's module is compiled: same-key callers wait, others don't
        std::shared_ptr<backend::Module> module;  // under ModuleCache::mutex_
        std::list<std::string>::iterator lru;      // its key's place in lru_, when module is set
    };
    /// Evicts least recently used modules down to the limit, into `dead` (destroyed by the caller after the lock:
    /// the last reference unloads the code). mutex_ held.
    void trim(std::vector<std::shared_ptr<backend::Module>>& dead);

    mutable std::mutex mutex_;
    size_t limit_;
    std::unordered_map<std::string, std::shared_ptr<Slot>> slots_;  // loaded, or being loaded
    std::list<std::string> lru_;                                     // keys of loaded slots, most recent first
};

}  // namespace rt::kernels
