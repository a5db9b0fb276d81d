// Compiled-kernel cache shared by the backends: stable 128-bit keys, the on-disk cache directory, atomic stores.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace rt::kcache {

/// Stable across processes, builds and machines (never std::hash): two FNV-1a 64 streams with different
/// offset bases, each finished with an avalanche mix, printed as 32 hex digits. Every field is added with
/// its length, so ("ab","c") and ("a","bc") give different keys.
class Hasher {
public:
    Hasher& add(std::string_view field);
    Hasher& add(uint64_t value);
    std::string hex() const;

private:
    void bytes(const void* data, size_t n);
    uint64_t a_ = 0xcbf29ce484222325ull;
    uint64_t b_ = 0x84222325cbf29ce4ull ^ 0x9e3779b97f4a7c15ull;
};

/// The configured cache root: $RUNTIME_CACHE_DIR, else $XDG_CACHE_HOME/runtime, else ~/.cache/runtime, else
/// /tmp/runtime-cache-<uid> (read at each call, so a process may redirect it before compiling). Compilers use
/// backend_dir()/entry_path(), which refuse a root that is not safe.
std::string cache_root();

/// <root>/<backend>, created (with parents, mode 0700) if missing. Throws rt::Error(INVALID_VALUE) if impossible.
/// A root or backend directory that is not the current user's, or that group or others may write, is never used
/// (a file planted there would be loaded as code): this process then compiles into a private mkdtemp directory
/// instead, removed at exit, and says so once on stderr. Decided once per root and backend per process.
std::string backend_dir(const std::string& backend);

/// <backend_dir(backend)>/<key><ext>; creates the backend directory as backend_dir() does.
std::string entry_path(const std::string& backend, const std::string& key, const std::string& ext);

/// True if `path` may be loaded from the cache: a non-empty regular file (not a symbolic link) owned by the
/// current user and not writable by group or others.
bool trusted_entry(const std::string& path);

/// A name in `dir` no other thread or process uses: <dir>/<stem>.tmp.<pid>.<counter>.<random><ext>.
/// Temporary names contain ".tmp." so listing and clearing can tell them from finished entries.
std::string unique_temp_path(const std::string& dir, const std::string& stem, const std::string& ext);

/// Publishes a finished temporary file under its final name with rename(2): readers see either the old
/// complete file or the new complete one, never a partial one; concurrent writers of the same key are
/// both correct (the last rename wins, and both files hold the same content). Throws on failure.
void publish(const std::string& temp_path, const std::string& final_path);

/// Writes `data` to a temporary name in the final file's directory, then publish()es it.
void store_bytes(const std::string& final_path, std::string_view data);

/// The whole file at `path` into `out`; false with the reason (strerror) in `why` if it cannot be read.
bool read_bytes(const std::string& path, std::string& out, std::string& why);

struct Entry {
    std::string path;
    uint64_t size = 0;
    int64_t mtime_ns = 0;  ///< modification time, ns since the epoch
};

/// Every file under <root>/<backend> for each backend directory (all backends when `backend` is empty),
/// sorted by path; temporary files of compilations in progress or abandoned included.
std::vector<Entry> list(const std::string& backend = {});

/// Removes the files list() would return; returns how many were removed. Processes that already
/// loaded an entry keep working (their mapping survives unlinking).
size_t clear(const std::string& backend = {});

}  // namespace rt::kcache
