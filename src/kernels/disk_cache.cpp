// Stable hashing, the disk cache directory and atomic publication of compiled kernels.
#include "kernels/disk_cache.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>

#include "core/error.hpp"
#include "observe/log.hpp"

namespace rt::kcache {

namespace {
constexpr uint64_t kFnvPrime = 0x100000001b3ull;

uint64_t mix(uint64_t x) {  // splitmix64 finaliser: spreads FNV's weak high bits
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    x ^= x >> 31;
    return x;
}

std::string errno_text() { return std::strerror(errno); }

void make_dirs(const std::string& path) {
    std::string partial;
    size_t pos = 0;
    while (pos != std::string::npos) {
        pos = path.find('/', pos + 1);
        partial = path.substr(0, pos);
        if (partial.empty()) continue;
        // 0700: a cache holds code this process will load; nobody else may add to it (or read what it compiles).
        if (::mkdir(partial.c_str(), 0700) != 0 && errno != EEXIST)
            fail(RT_ERROR_INVALID_VALUE, "kernel cache: cannot create directory '%s': %s", partial.c_str(),
                 errno_text().c_str());
    }
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
        fail(RT_ERROR_INVALID_VALUE, "kernel cache: '%s' is not a directory", path.c_str());
}

/// Why a cache directory or entry with status `st` must not be used, or nullptr if it may: a file there is
/// loaded as code, so only the current user may be able to create, replace or change it.
const char* distrust(const struct stat& st) {
    if (st.st_uid != ::geteuid()) return "is owned by another user";
    if (st.st_mode & (S_IWGRP | S_IWOTH)) return "is writable by group or others";
    return nullptr;
}

/// The directory each configured <root>/<backend> resolves to in this process: itself when it is safe, else a
/// private directory made with mkdtemp (removed at exit). Decided once per root and backend.
class Roots {
public:
    std::string resolve(const std::string& root, const std::string& backend) {
        std::lock_guard lock(mutex_);
        std::string& dir = resolved_[root + '\n' + backend];
        if (!dir.empty()) return dir;
        std::string wanted = root + "/" + backend;
        make_dirs(wanted);
        const char* why = nullptr;
        std::string where;
        for (const std::string& d : {root, wanted}) {
            struct stat st {};
            if (::stat(d.c_str(), &st) != 0) {
                why = "cannot be examined";
            } else if (!S_ISDIR(st.st_mode)) {
                why = "is not a directory";
            } else {
                why = distrust(st);
            }
            if (why) {
                where = d;
                break;
            }
        }
        if (!why) return dir = root;
        const char* tmp = std::getenv("TMPDIR");
        std::string tmpl = std::string(tmp && *tmp ? tmp : "/tmp") + "/runtime-cache-private.XXXXXX";
        if (!::mkdtemp(tmpl.data()))
            fail(RT_ERROR_INVALID_VALUE, "kernel cache: '%s' %s and no private directory could be made ('%s': %s)",
                 where.c_str(), why, tmpl.c_str(), errno_text().c_str());
        make_dirs(tmpl + "/" + backend);
        private_.push_back(tmpl);
        RT_LOG(kernels, warn, "kernel cache directory '%s' %s: not used; this process compiles into the private "
               "directory '%s' instead (make it yours and `chmod go-w` it to cache across runs)", where.c_str(), why,
               tmpl.c_str());
        return dir = tmpl;
    }
    ~Roots() {  // best effort: the private directories are of this process only
        for (const std::string& d : private_) {
            if (DIR* top = ::opendir(d.c_str())) {
                while (dirent* b = ::readdir(top)) {
                    std::string name = b->d_name;
                    if (name == "." || name == "..") continue;
                    std::string sub = d + "/" + name;
                    if (DIR* in = ::opendir(sub.c_str())) {
                        while (dirent* e = ::readdir(in))
                            if (std::strcmp(e->d_name, ".") && std::strcmp(e->d_name, ".."))
                                ::unlink((sub + "/" + e->d_name).c_str());
                        ::closedir(in);
                    }
                    ::rmdir(sub.c_str());
                }
                ::closedir(top);
            }
            ::rmdir(d.c_str());
        }
    }

private:
    std::mutex mutex_;
    std::map<std::string, std::string> resolved_;
    std::vector<std::string> private_;
};

Roots& roots() {
    static Roots r;
    return r;
}

bool is_dir(const std::string& path) {
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

std::vector<std::string> backend_dirs(const std::string& backend) {
    std::string root = cache_root();
    std::vector<std::string> dirs;
    if (!backend.empty()) {
        if (is_dir(root + "/" + backend)) dirs.push_back(root + "/" + backend);
        return dirs;
    }
    if (DIR* d = ::opendir(root.c_str())) {
        while (dirent* e = ::readdir(d)) {
            std::string name = e->d_name;
            if (name == "." || name == "..") continue;
            if (is_dir(root + "/" + name)) dirs.push_back(root + "/" + name);
        }
        ::closedir(d);
    }
    return dirs;
}
}  // namespace

void Hasher::bytes(const void* data, size_t n) {
    const auto* p = static_cast<const unsigned char*>(data);
    uint64_t a = a_, b = b_;
    for (size_t i = 0; i < n; ++i) {
        a = (a ^ p[i]) * kFnvPrime;
        b = (b ^ p[i]) * kFnvPrime;
    }
    a_ = a;
    b_ = b;
}

Hasher& Hasher::add(uint64_t value) {
    unsigned char le[8];
    for (int i = 0; i < 8; ++i) le[i] = static_cast<unsigned char>(value >> (8 * i));  // byte order fixed
    bytes(le, sizeof le);
    return *this;
}

Hasher& Hasher::add(std::string_view field) {
    add(static_cast<uint64_t>(field.size()));
    bytes(field.data(), field.size());
    return *this;
}

std::string Hasher::hex() const {
    static const char digits[] = "0123456789abcdef";
    uint64_t words[2] = {mix(a_), mix(b_ ^ 0x5851f42d4c957f2dull)};
    std::string out(32, '0');
    for (int w = 0; w < 2; ++w)
        for (int i = 0; i < 16; ++i) out[w * 16 + i] = digits[(words[w] >> (60 - 4 * i)) & 0xf];
    return out;
}

std::string cache_root() {
    if (const char* dir = std::getenv("RUNTIME_CACHE_DIR"); dir && *dir) return dir;
    if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) return std::string(xdg) + "/runtime";
    if (const char* home = std::getenv("HOME"); home && *home) return std::string(home) + "/.cache/runtime";
    return "/tmp/runtime-cache-" + std::to_string(::getuid());
}

std::string backend_dir(const std::string& backend) {
    return roots().resolve(cache_root(), backend) + "/" + backend;
}

std::string entry_path(const std::string& backend, const std::string& key, const std::string& ext) {
    return backend_dir(backend) + "/" + key + ext;
}

bool trusted_entry(const std::string& path) {
    struct stat st {};
    return ::lstat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0 && !distrust(st);
}

std::string unique_temp_path(const std::string& dir, const std::string& stem, const std::string& ext) {
    static std::atomic<uint64_t> counter{0};
    uint64_t salt = static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
    Hasher h;
    h.add(salt).add(counter.load()).add(static_cast<uint64_t>(::getpid()));
    return dir + "/" + stem + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++) + "." +
           h.hex().substr(0, 8) + ext;
}

void publish(const std::string& temp_path, const std::string& final_path) {
    if (::rename(temp_path.c_str(), final_path.c_str()) != 0) {
        std::string why = errno_text();
        ::unlink(temp_path.c_str());
        fail(RT_ERROR_INVALID_VALUE, "kernel cache: cannot rename '%s' to '%s': %s", temp_path.c_str(),
             final_path.c_str(), why.c_str());
    }
}

bool read_bytes(const std::string& path, std::string& out, std::string& why) {
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        why = std::strerror(errno);
        return false;
    }
    std::ostringstream ss;
    ss << in.rdbuf();
    if (in.bad()) {
        why = "read error";
        return false;
    }
    out = ss.str();
    return true;
}

void store_bytes(const std::string& final_path, std::string_view data) {
    size_t slash = final_path.rfind('/');
    std::string dir = slash == std::string::npos ? "." : final_path.substr(0, slash);
    std::string name = slash == std::string::npos ? final_path : final_path.substr(slash + 1);
    make_dirs(dir);
    std::string temp = unique_temp_path(dir, name, "");
    int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) fail(RT_ERROR_INVALID_VALUE, "kernel cache: cannot create '%s': %s", temp.c_str(), errno_text().c_str());
    size_t done = 0;
    while (done < data.size()) {
        ssize_t n = ::write(fd, data.data() + done, data.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            std::string why = errno_text();
            ::close(fd);
            ::unlink(temp.c_str());
            fail(RT_ERROR_INVALID_VALUE, "kernel cache: cannot write '%s': %s", temp.c_str(), why.c_str());
        }
        done += static_cast<size_t>(n);
    }
    ::close(fd);
    publish(temp, final_path);
}

std::vector<Entry> list(const std::string& backend) {
    std::vector<Entry> out;
    for (const std::string& dir : backend_dirs(backend)) {
        DIR* d = ::opendir(dir.c_str());
        if (!d) continue;
        while (dirent* e = ::readdir(d)) {
            std::string path = dir + "/" + e->d_name;
            struct stat st {};
            if (::lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
            out.push_back({path, static_cast<uint64_t>(st.st_size),
                           static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec});
        }
        ::closedir(d);
    }
    std::sort(out.begin(), out.end(), [](const Entry& x, const Entry& y) { return x.path < y.path; });
    return out;
}

size_t clear(const std::string& backend) {
    size_t removed = 0;
    for (const Entry& e : list(backend))
        if (::unlink(e.path.c_str()) == 0) ++removed;
    return removed;
}

}  // namespace rt::kcache
