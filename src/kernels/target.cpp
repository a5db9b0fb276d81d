// The path of a kernel source through the in-process and disk caches to a loaded module, for any target.
#include "kernels/target.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>

#include "core/error.hpp"
#include "kernels/disk_cache.hpp"

namespace rt::kernels {

std::string cache_key(const Target& target, const std::string& name, const std::string& source,
                      const std::vector<std::string>& options) {
    kcache::Hasher h;
    h.add(target.cache_name())
        .add(format("%d.%d.%d", RUNTIME_VERSION_MAJOR, RUNTIME_VERSION_MINOR, RUNTIME_VERSION_PATCH))
        .add(target.identity())
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
    // An entry another user could have written is never loaded: it is compiled over.
    if (!force && kcache::trusted_entry(image.path)) {
        image.from_cache = true;
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
    return image;
}

std::shared_ptr<backend::Module> ModuleCache::load_source(Target& target, const std::string& source,
                                                          const std::string& options) {
    static const std::string kName = "kernel_source";
    const std::string key = cache_key(target, kName, source, parse_options(options));  // validates the options
    std::shared_ptr<Slot> slot;
    {
        std::lock_guard lock(mutex_);
        auto& s = slots_[key];
        if (!s) s = std::make_shared<Slot>();
        slot = s;
    }
    std::lock_guard slot_lock(slot->mutex);
    if (slot->module) return slot->module;
    Program program = read_program(source, options, kName);
    Image image = compile(target, program);
    std::shared_ptr<backend::Module> module = target.load(image.path, false);
    if (!module) {  // a damaged disk entry (a crashed older build, a driver that no longer accepts it): rebuild
        image = compile(target, program, /*force=*/true);
        module = target.load(image.path, /*precompiled=*/true);  // now a failure says why
    }
    slot->module = module;
    return module;
}

void ModuleCache::clear() {
    std::lock_guard lock(mutex_);
    slots_.clear();
}

}  // namespace rt::kernels
