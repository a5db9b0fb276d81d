// The path of a kernel source through the in-process and disk caches to a loaded module, for any target.
#include "kernels/target.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>

#include "core/error.hpp"
#include "kernels/disk_cache.hpp"
#include "observe/log.hpp"

namespace rt::kernels {

namespace {
/// Bumped whenever the front end or a target changes what it generates from the same inputs in a way the embedded
/// texts do not show (kernel discovery, the cuda rewrite): old cache entries are then never loaded.
constexpr uint64_t kGeneratorVersion = 4;  // 4: flat kernels' RT_LOCAL arrays are static, not thread_local
}  // namespace

std::string build_identity(const Target& target) {
    return format("generator %llu|%s|%d.%d.%d|", static_cast<unsigned long long>(kGeneratorVersion),
                  target.cache_name(), RUNTIME_VERSION_MAJOR, RUNTIME_VERSION_MINOR, RUNTIME_VERSION_PATCH) +
           target.identity();
}

std::string cache_key(const Target& target, const std::string& name, const std::string& source,
                      const std::vector<std::string>& options) {
    kcache::Hasher h;
    h.add(build_identity(target))
        .add(name)
        .add(source)
        .add(static_cast<uint64_t>(options.size()));
    for (const std::string& o : options) h.add(o);
    return h.hex();
}

Image compile(const Target& target, const Program& program, bool force) {
    Image image;
    image.kernels = program.kernel_names();
    image.key = cache_key(target, program.name, program.source, program.options);
    const std::string ext = target.image_extension();
    image.path = kcache::entry_path(target.cache_name(), image.key, ext);
    // An entry another user could have written is never loaded: it is compiled over. Neither is one of a source that
    // includes files: what they hold is not in the key (a changed header, another directory's file of the same
    // name), so such a source is compiled again in every process (the in-process cache still holds it).
    if (!force && !program.includes_files() && kcache::trusted_entry(image.path)) {
        image.from_cache = true;
        RT_LOG(kernels, info, "disk cache hit: module '%s' (kernels: %s) for %s: %s", program.name.c_str(),
               join(image.kernels).c_str(), target.cache_name(), image.path.c_str());
        return image;
    }
    const std::string temp = kcache::unique_temp_path(kcache::backend_dir(target.cache_name()), image.key, ext);
    try {
        image.compile_seconds = target.build(program, temp);
    } catch (...) {
        ::unlink(temp.c_str());
        throw;
    }
    ::chmod(temp.c_str(), 0755);  // under umask 002 it would be group-writable, which the cache never loads
    kcache::publish(temp, image.path);
    RT_LOG(kernels, info, "compiled module '%s' (kernels: %s; options: '%s') for %s in %.3f s%s: %s",
           program.name.c_str(), join(image.kernels).c_str(), program.option_text.c_str(), target.cache_name(),
           image.compile_seconds, force ? " (forced)" : program.includes_files() ? " (it includes files: never "
           "taken from the disk cache)" : "", image.path.c_str());
    return image;
}

std::shared_ptr<backend::Module> ModuleCache::load_source(Target& target, const std::string& source,
                                                          const std::string& options) {
    static const std::string kName = "kernel_source";
    const std::string key = cache_key(target, kName, source, parse_options(options));  // validates the options
    std::shared_ptr<Slot> slot;
    std::shared_ptr<backend::Module> hit;
    {
        std::lock_guard lock(mutex_);
        auto& s = slots_[key];
        if (!s) s = std::make_shared<Slot>();
        if (s->module) {
            lru_.splice(lru_.begin(), lru_, s->lru);
            hit = s->module;
        }
        slot = s;
    }
    if (hit) {  // logged outside the cache's lock
        RT_LOG(kernels, debug, "memory cache hit: a kernel source of %zu bytes for %s (key %s)", source.size(),
               target.cache_name(), key.c_str());
        return hit;
    }
    std::lock_guard slot_lock(slot->mutex);
    {
        std::lock_guard lock(mutex_);
        if (slot->module) return slot->module;  // loaded by the caller this one waited for
    }
    std::shared_ptr<backend::Module> module;
    try {
        Program program = read_program(source, options, kName);
        Image image = compile(target, program);
        module = target.load(image.path, false);
        if (!module) {  // a damaged disk entry (a crashed older build, a driver that no longer accepts it): rebuild
            RT_LOG(kernels, info, "the kernel cache entry '%s' cannot be loaded (damaged, or from another driver): "
                   "compiling it again", image.path.c_str());
            image = compile(target, program, /*force=*/true);
            module = target.load(image.path, /*precompiled=*/true);  // now a failure says why
        }
    } catch (...) {
        std::lock_guard lock(mutex_);
        auto it = slots_.find(key);
        if (it != slots_.end() && it->second == slot) slots_.erase(it);  // a caller waiting on it retries
        throw;
    }
    std::vector<std::shared_ptr<backend::Module>> dead;
    {
        std::lock_guard lock(mutex_);
        auto it = slots_.find(key);
        if (it != slots_.end() && it->second == slot) {  // not cleared meanwhile
            if (limit_ == 0) {
                slots_.erase(it);  // callers waiting on this slot load again (from the disk cache)
            } else {
                slot->module = module;
                lru_.push_front(key);
                slot->lru = lru_.begin();
                trim(dead);
            }
        }
    }
    return module;
}

void ModuleCache::trim(std::vector<std::shared_ptr<backend::Module>>& dead) {
    while (lru_.size() > limit_) {
        auto it = slots_.find(lru_.back());
        dead.push_back(std::move(it->second->module));
        slots_.erase(it);
        lru_.pop_back();
    }
}

void ModuleCache::clear() {
    std::vector<std::shared_ptr<backend::Module>> dead;
    std::unordered_map<std::string, std::shared_ptr<Slot>> slots;
    {
        std::lock_guard lock(mutex_);
        for (auto& [key, slot] : slots_)
            if (slot->module) dead.push_back(std::move(slot->module));
        slots.swap(slots_);
        lru_.clear();
    }
}

void ModuleCache::set_limit(size_t limit) {
    std::vector<std::shared_ptr<backend::Module>> dead;
    std::lock_guard lock(mutex_);
    limit_ = limit;
    trim(dead);
    // `dead` is destroyed after the lock (declared before it)
}

size_t ModuleCache::limit() const {
    std::lock_guard lock(mutex_);
    return limit_;
}

size_t ModuleCache::size() const {
    std::lock_guard lock(mutex_);
    return lru_.size();
}

}  // namespace rt::kernels
