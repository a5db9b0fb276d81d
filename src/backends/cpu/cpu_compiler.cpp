// cpu kernel compiler: wraps a kernel source in the module struct, generates entries, runs the host compiler, caches.
#include "backends/cpu/cpu_compiler.hpp"

#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "backends/cpu/cpu_kernel_abi.h"
#include "core/error.hpp"
#include "core/kernel_cache.hpp"
#include "core/kernel_prelude.hpp"

extern char** environ;

namespace rt::cpu {

namespace {

constexpr size_t kMaxDiagnostics = 32 * 1024;  // keep error messages readable; the head has the first error

bool is_ident_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool is_ident(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

std::string find_on_path(const std::string& name) {
    if (name.find('/') != std::string::npos) return ::access(name.c_str(), X_OK) == 0 ? name : std::string();
    const char* path = std::getenv("PATH");
    std::string dirs = path && *path ? path : "/usr/local/bin:/usr/bin:/bin";
    size_t start = 0;
    while (start <= dirs.size()) {
        size_t end = dirs.find(':', start);
        if (end == std::string::npos) end = dirs.size();
        std::string dir = dirs.substr(start, end - start);
        std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
        if (::access(candidate.c_str(), X_OK) == 0) return candidate;
        start = end + 1;
    }
    return {};
}

/// What -march=native means here, without running anything: the CPUID signature and feature words.
std::string cpu_identity() {
    std::string id;
#if defined(__x86_64__) || defined(__i386__)
    auto cpuid = [&](unsigned leaf, unsigned sub) {
        unsigned a, b, c, d;
        __asm__ volatile("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d) : "a"(leaf), "c"(sub));
        id += format("%x.%x:%08x%08x%08x%08x;", leaf, sub, a, b, c, d);
        return a;
    };
    unsigned max_leaf = cpuid(0, 0);                 // vendor
    cpuid(1, 0);                                     // family/model/stepping, SSE…AVX, OSXSAVE
    if (max_leaf >= 7) cpuid(7, 0);                  // AVX2, AVX-512…
    if (max_leaf >= 7) cpuid(7, 1);
    if (max_leaf >= 0xd) cpuid(0xd, 0);              // OS-enabled register state
    if (cpuid(0x80000000, 0) >= 0x80000001) cpuid(0x80000001, 0);
    // cpuid(1).ebx holds the APIC id of the current core: drop it so every core gives the same key.
    size_t p = id.find(";1.0:");
    if (p != std::string::npos) id.replace(p + 5 + 8, 8, "--------");
#else
    id = "cpu:" __VERSION__;
#endif
    return id;
}

struct CompilerCache {
    std::mutex mutex;
    bool valid = false;
    std::string env;  // the $RUNTIME_CXX value it was resolved for
    HostCompiler compiler;
};

void append_escaped_line(std::string& out, const std::string& name, size_t line) {
    out += "#line " + std::to_string(line) + " \"";
    for (char c : name) {
        if (c == '"' || c == '\\') out += '\\';
        if (c == '\n') c = ' ';
        out += c;
    }
    out += "\"\n";
}

/// The path inside an #include line ("" if the line is not one).
bool include_target(const std::string& line, std::string& target) {
    size_t i = 0;
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
    if (i >= line.size() || line[i] != '#') return false;
    ++i;
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
    if (line.compare(i, 7, "include") != 0) return false;
    i += 7;
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
    target.clear();
    if (i < line.size() && (line[i] == '<' || line[i] == '"')) {
        char close = line[i] == '<' ? '>' : '"';
        size_t end = line.find(close, i + 1);
        if (end != std::string::npos) target = line.substr(i + 1, end - i - 1);
    }
    return true;
}

bool is_prelude_include(const std::string& target) {
    return target == "runtime/kernel.h" || target == "kernel.h" ||
           (target.size() > 17 && target.compare(target.size() - 17, 17, "/runtime/kernel.h") == 0);
}

/// Runs argv[0] with argv, stdout+stderr captured. Returns the exit status (-1 if it did not run).
int run_capture(const std::vector<std::string>& args, std::string& output) {
    std::vector<char*> argv;
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) {  // CLOEXEC: children spawned concurrently must not hold our pipe
        output = format("pipe: %s", std::strerror(errno));
        return -1;
    }
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, fds[1], 1);
    posix_spawn_file_actions_adddup2(&actions, fds[1], 2);
    pid_t pid = -1;
    int rc = ::posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    ::close(fds[1]);
    if (rc != 0) {
        ::close(fds[0]);
        output = format("cannot run '%s': %s", argv[0], std::strerror(rc));
        return -1;
    }
    char buf[4096];
    for (;;) {
        ssize_t n = ::read(fds[0], buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        if (output.size() < kMaxDiagnostics) output.append(buf, static_cast<size_t>(n));
    }
    ::close(fds[0]);
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (output.size() >= kMaxDiagnostics) output += "\n[diagnostics truncated]\n";
    if (WIFEXITED(status)) return WEXITSTATUS(status);
    output += format("\n[compiler killed by signal %d]\n", WIFSIGNALED(status) ? WTERMSIG(status) : 0);
    return -1;
}

std::string join(const std::vector<std::string>& v, const char* sep) {
    std::string out;
    for (size_t i = 0; i < v.size(); ++i) out += (i ? sep : "") + v[i];
    return out;
}

/// Generated after the struct: argument unpacking and the work-group loop, shared by every entry.
constexpr const char* kEntrySupport = R"rt_gen(
template <class T> struct rt_plain_ { typedef T type; };
template <class T> struct rt_plain_<const T> { typedef T type; };
template <class T> struct rt_plain_<T&> : rt_plain_<T> {};
template <unsigned long... I> struct rt_seq_ {};
template <unsigned long N, unsigned long... I> struct rt_make_seq_ : rt_make_seq_<N - 1, N - 1, I...> {};
template <unsigned long... I> struct rt_make_seq_<0, I...> { typedef rt_seq_<I...> type; };
template <unsigned long I, class T> struct rt_leaf_ {
    static_assert(__is_trivially_copyable(T), "kernel parameters must be trivially copyable (scalars, pointers, plain structs)");
    T value;
};
template <class S, class... P> struct rt_pack_;
template <unsigned long... I, class... P> struct rt_pack_<rt_seq_<I...>, P...> : rt_leaf_<I, P>... {
    explicit rt_pack_(void* const* args) : rt_leaf_<I, P>{*static_cast<const P*>(args[I])}... { (void)args; }
};
/* n bytes from src to dst with streaming (non-temporal) stores for the whole 64-byte lines of dst and
 * plain ones for its partial first and last lines. Where the target has no streaming store: a memcpy. */
static inline __attribute__((always_inline)) void rt_stream_copy_(void* dst, const void* src, size_t n) {
    unsigned char* d = (unsigned char*)dst;
    const unsigned char* s = (const unsigned char*)src;
#if defined(__AVX__) || defined(__SSE2__)
    size_t head = (size_t)(-(unsigned long)d) & 63;
    if (head > n) head = n;
    __builtin_memcpy(d, s, head);
    d += head; s += head; n -= head;
#if defined(__AVX__)
    typedef long long v_ __attribute__((vector_size(32)));
#else
    typedef long long v_ __attribute__((vector_size(16)));
#endif
    for (; n >= 64; n -= 64, d += 64, s += 64) {
        for (unsigned o = 0; o < 64; o += sizeof(v_)) {
            v_ v;
            __builtin_memcpy(&v, s + o, sizeof v);
#if defined(__clang__)
            __builtin_nontemporal_store(v, (v_*)(d + o));
#elif defined(__AVX__)
            __builtin_ia32_movntdq256((v_*)(d + o), v);
#else
            __builtin_ia32_movntdq((v_*)(d + o), v);
#endif
        }
    }
#endif
    __builtin_memcpy(d, s, n);
}
static inline __attribute__((always_inline)) void rt_stream_fence_() {
#if defined(__AVX__) || defined(__SSE2__)
    __builtin_ia32_sfence();
#endif
}
template <class F> struct rt_sig_;
template <class... P> struct rt_sig_<void (rt_module_::*)(P...)> {
    static constexpr int count = sizeof...(P);
    static constexpr size_t sizes[sizeof...(P) + 1] = {sizeof(typename rt_plain_<P>::type)..., 0};
    /* The destinations of a row's staged outputs and how many of its leading items run. Out of line:
     * inlined, its index arithmetic is merged with the twin's, and GCC then no longer sees the twin's
     * loads as contiguous (it gathers). */
    template <long long (rt_module_::*Row)(void**, P...)>
    static __attribute__((noinline)) long long row_addresses(rt_item_ item, rt_cpu_fault* fault, void** dst,
                                                             typename rt_plain_<P>::type... p) {
        rt_module_ m;
        m.rt_item = item;
        m.rt_fault = fault;
        return (m.*Row)(dst, p...);
    }
    /* Unpacks the arguments once, then runs groups [group_begin, group_end) row by row (fixed local y and
     * z), items x-innermost, on a local kernel object whose address never escapes: ids stay in registers,
     * the x loop vectorises. (Keep the loops in this one function: handing m or the arguments by reference
     * to a helper, or a lambda capturing them, costs the vectorisation of some kernels.) Group coordinates
     * are divided out once, then stepped (x fastest). Items past the global size are never run
     * (RT_ITEMS_BOUNDED): a partial last group has shorter rows, so kernels need no bounds test of their
     * own, and a loop without one vectorises.
     * With a staged twin (Staged, Row, Staging; kernel.h, RT_ROW_STAGING) each row runs the twin over the
     * row's leading items that Row says run, which stores the staged outputs into stages in L1; the stages
     * are then copied to the row's destinations, with streaming stores when Stream. */
    template <void (rt_module_::*F)(P...), void (rt_module_::*Staged)(unsigned char*, P...),
              long long (rt_module_::*Row)(void**, P...), class Staging, bool Stream, unsigned long... I>
    static inline __attribute__((always_inline)) void run_items(const rt_cpu_launch* L, void* const* args,
                                                                rt_seq_<I...>) {
        constexpr bool staged = Staged != nullptr;
        rt_pack_<rt_seq_<I...>, typename rt_plain_<P>::type...> a(args);
        rt_cpu_fault spare = {0, 0, 0, 0, 0};
        rt_cpu_fault* fault = L->fault ? L->fault : &spare;
        rt_module_ m;
        m.rt_fault = fault;
        /* Handed to the twin as an argument, not held in m: a base the compiler sees as invariant. */
        alignas(64) unsigned char stage[staged ? Staging::count * RT_STAGE_BYTES : 1];
        const unsigned long long gx = L->grid[0], gy = L->grid[1];
        for (int d = 0; d < 3; ++d) { m.rt_item.block[d] = L->block[d]; m.rt_item.grid[d] = L->grid[d]; }
        size_t g0 = L->group_begin % gx, g1 = (L->group_begin / gx) % gy, g2 = L->group_begin / (gx * gy);
        for (unsigned long long g = L->group_begin; g < L->group_end; ++g) {
            m.rt_item.group[0] = g0;
            m.rt_item.group[1] = g1;
            m.rt_item.group[2] = g2;
            if (++g0 == gx) {
                g0 = 0;
                if (++g1 == gy) { g1 = 0; ++g2; }
            }
            size_t ext[3];
            for (int d = 0; d < 3; ++d) {
                const unsigned long long left = L->global[d] - m.rt_item.group[d] * m.rt_item.block[d];
                ext[d] = left < m.rt_item.block[d] ? (size_t)left : m.rt_item.block[d];
            }
            for (size_t z = 0; z < ext[2]; ++z) {
                m.rt_item.local[2] = z;
                for (size_t y = 0; y < ext[1]; ++y) {
                    m.rt_item.local[1] = y;
                    if constexpr (staged) {
                        void* dst[staged ? Staging::count : 1];
                        rt_item_ first = m.rt_item;
                        first.local[0] = 0;
                        const long long run = row_addresses<Row>(
                            first, fault, dst, static_cast<rt_leaf_<I, typename rt_plain_<P>::type>&>(a).value...);
                        const size_t n = run <= 0 ? 0 : (unsigned long long)run < ext[0] ? (size_t)run : ext[0];
                        for (size_t x = 0; x < n; ++x) {
                            m.rt_item.local[0] = x;
                            (m.*Staged)(stage, static_cast<rt_leaf_<I, typename rt_plain_<P>::type>&>(a).value...);
                        }
                        for (unsigned j = 0; n && j < Staging::count; ++j) {
                            if constexpr (Stream) rt_stream_copy_(dst[j], stage + j * RT_STAGE_BYTES, n * Staging::bytes[j]);
                            else __builtin_memcpy(dst[j], stage + j * RT_STAGE_BYTES, n * Staging::bytes[j]);
                        }
                    } else {
                        for (size_t x = 0; x < ext[0]; ++x) {
                            m.rt_item.local[0] = x;
                            (m.*F)(static_cast<rt_leaf_<I, typename rt_plain_<P>::type>&>(a).value...);
                        }
                    }
                }
            }
            if (__atomic_load_n(&fault->failed, __ATOMIC_RELAXED)) break;
        }
        if constexpr (Stream) rt_stream_fence_();  /* streaming stores are weakly ordered: complete them first */
    }
    struct no_staging_ { enum { count = 0, clipped = 0 }; static constexpr unsigned bytes[1] = {0}; };
    template <void (rt_module_::*F)(P...)>
    static inline __attribute__((always_inline)) void run(const rt_cpu_launch* L, void* const* args) {
        run_items<F, nullptr, nullptr, no_staging_, false>(L, args, typename rt_make_seq_<sizeof...(P)>::type());
    }
    /* A kernel with a staged twin. Launches that write at least L->stream_min_bytes through the staged
     * outputs stream them: streaming stores skip the read of each destination line that a plain store
     * costs (a third of the memory traffic of a copy-like kernel). Smaller launches leave their output in
     * cache for whatever reads it next: they run the kernel itself, or, when its guard clips the rows
     * (Staging::clipped), the twin with plain copies, since a loop without the guard vectorises. Only the
     * variants a kernel can take are instantiated (each costs compile time). */
    template <void (rt_module_::*F)(P...), void (rt_module_::*Staged)(unsigned char*, P...),
              long long (rt_module_::*Row)(void**, P...), class Staging>
    static inline __attribute__((always_inline)) void run_staged(const rt_cpu_launch* L, void* const* args) {
        static_assert(Staging::count >= 1 && Staging::count <= RT_MAX_STAGED, "1 to RT_MAX_STAGED staged outputs");
        typedef typename rt_make_seq_<sizeof...(P)>::type seq;
        unsigned long long bytes = 0;
        for (unsigned j = 0; j < Staging::count; ++j) bytes += Staging::bytes[j];
        bytes *= L->global[0] * L->global[1] * L->global[2];
        /* block[0] <= RT_CPU_MAX_BLOCK_X = RT_STAGE_ITEMS: launches with larger blocks are refused. */
        if (bytes >= L->stream_min_bytes) run_items<F, Staged, Row, Staging, true>(L, args, seq());
        else if constexpr (Staging::clipped) run_items<F, Staged, Row, Staging, false>(L, args, seq());
        else run<F>(L, args);
    }
};
)rt_gen";

}  // namespace

HostCompiler host_compiler() {
    static CompilerCache cache;
    const char* env = std::getenv("RUNTIME_CXX");
    std::string env_value = env ? env : "";
    std::lock_guard lock(cache.mutex);
    if (cache.valid && cache.env == env_value) return cache.compiler;

    std::string found;
    if (!env_value.empty()) {
        found = find_on_path(env_value);
        if (found.empty())
            fail(RT_ERROR_COMPILE_FAILED, "RUNTIME_CXX='%s' is not an executable (nor found on PATH)", env_value.c_str());
    } else {
        for (const char* name : {"c++", "g++", "clang++"})
            if (!(found = find_on_path(name)).empty()) break;
        if (found.empty())
            fail(RT_ERROR_COMPILE_FAILED,
                 "no C++ compiler for cpu kernels: none of c++, g++, clang++ is on PATH (set RUNTIME_CXX)");
    }
    char resolved[PATH_MAX];
    HostCompiler hc;
    hc.path = ::realpath(found.c_str(), resolved) ? std::string(resolved) : found;
    struct stat st {};
    ::stat(hc.path.c_str(), &st);
    hc.identity = format("%s|%lld|%lld.%09ld|", hc.path.c_str(), static_cast<long long>(st.st_size),
                         static_cast<long long>(st.st_mtim.tv_sec), st.st_mtim.tv_nsec) +
                  cpu_identity();
    cache.compiler = hc;
    cache.env = env_value;
    cache.valid = true;
    return hc;
}

std::vector<std::string> parse_options(const std::string& options) {
    std::vector<std::string> tokens;
    size_t i = 0;
    while (i < options.size()) {
        while (i < options.size() && std::isspace(static_cast<unsigned char>(options[i]))) ++i;
        size_t start = i;
        while (i < options.size() && !std::isspace(static_cast<unsigned char>(options[i]))) ++i;
        if (i > start) tokens.push_back(options.substr(start, i - start));
    }
    auto reject = [](const std::string& opt, const char* why) {
        fail(RT_ERROR_INVALID_VALUE,
             "kernel compile option '%s' is not accepted: %s (accepted: -O0 -O1 -O2 -O3 -Os -g -fwrapv -DNAME[=VALUE] "
             "-UNAME -IDIR)",
             opt.c_str(), why);
    };
    std::vector<std::string> out;
    for (size_t t = 0; t < tokens.size(); ++t) {
        std::string opt = tokens[t];
        for (char c : opt)
            if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) reject(opt, "it contains a control character");
        // -fwrapv: signed overflow wraps (the @runtime.jit front end asks for it: NumPy's integer semantics).
        if (opt == "-O0" || opt == "-O1" || opt == "-O2" || opt == "-O3" || opt == "-Os" || opt == "-g" ||
            opt == "-fwrapv") {
            out.push_back(opt);
            continue;
        }
        std::string flag = opt.substr(0, 2);
        if (flag == "-D" || flag == "-U" || flag == "-I") {
            std::string value = opt.substr(2);
            if (value.empty()) {
                if (t + 1 >= tokens.size()) reject(opt, "a value must follow it");
                value = tokens[++t];
            }
            if (flag == "-I") {
                if (value[0] == '-') reject(opt, "the directory must not start with '-'");
            } else {
                size_t end = flag == "-D" ? value.find('=') : std::string::npos;
                std::string name = value.substr(0, end);
                bool ok = !name.empty() && is_ident_start(name[0]);
                for (char c : name) ok = ok && is_ident(c);
                if (!ok) reject(opt, "the macro name is not an identifier");
            }
            out.push_back(flag + value);
            continue;
        }
        reject(opt, "unknown option");
    }
    return out;
}

static bool has_staged_twin(const std::string& source, const std::string& kernel) {
    // The names rt_* are the runtime's in a kernel source (kernel.h); the twin's own declaration decides.
    return source.find("void rt_staged_" + kernel + "(") != std::string::npos;
}

std::vector<std::string> find_kernel_names(const std::string& source) {
    // Blank out comments and literals (keeping length) so the scan sees only code.
    std::string code = source;
    for (size_t i = 0; i < code.size();) {
        if (code.compare(i, 2, "//") == 0) {
            while (i < code.size() && code[i] != '\n') code[i++] = ' ';
        } else if (code.compare(i, 2, "/*") == 0) {
            size_t end = code.find("*/", i + 2);
            end = end == std::string::npos ? code.size() : end + 2;
            for (; i < end; ++i)
                if (code[i] != '\n') code[i] = ' ';
        } else if (code[i] == '"' || code[i] == '\'') {
            char quote = code[i++];
            while (i < code.size() && code[i] != quote && code[i] != '\n') {
                if (code[i] == '\\' && i + 1 < code.size()) code[i++] = ' ';
                code[i++] = ' ';
            }
            ++i;
        } else {
            ++i;
        }
    }
    std::vector<std::string> names;
    auto skip_ws = [&](size_t& p) {
        while (p < code.size() && std::isspace(static_cast<unsigned char>(code[p]))) ++p;
    };
    for (size_t pos = code.find("RT_KERNEL"); pos != std::string::npos; pos = code.find("RT_KERNEL", pos + 1)) {
        if (pos > 0 && is_ident(code[pos - 1])) continue;
        size_t p = pos + 9;
        if (p < code.size() && is_ident(code[p])) continue;
        skip_ws(p);
        if (code.compare(p, 4, "void") != 0 || (p + 4 < code.size() && is_ident(code[p + 4]))) continue;
        p += 4;
        skip_ws(p);
        size_t start = p;
        while (p < code.size() && is_ident(code[p])) ++p;
        if (p == start || !is_ident_start(code[start])) continue;
        std::string name = code.substr(start, p - start);
        skip_ws(p);
        if (p >= code.size() || code[p] != '(') continue;
        for (const std::string& n : names)
            if (n == name)
                fail(RT_ERROR_INVALID_VALUE, "kernel '%s' is defined more than once (kernels cannot be overloaded)",
                     name.c_str());
        names.push_back(name);
    }
    return names;
}

std::string generate_translation_unit(const std::string& source, const std::string& source_name,
                                      const std::vector<std::string>& kernels) {
    std::string includes, body;
    body.reserve(source.size() + 64);
    size_t line_no = 1, pos = 0;
    std::string target;
    while (pos < source.size()) {
        size_t end = source.find('\n', pos);
        if (end == std::string::npos) end = source.size();
        std::string line = source.substr(pos, end - pos);
        if (include_target(line, target)) {
            // Moved before the struct; the line stays (blank) so the numbering of the rest is unchanged.
            if (!is_prelude_include(target)) {
                append_escaped_line(includes, source_name, line_no);
                includes += line + "\n";
            }
            body += "\n";
        } else {
            body += line + "\n";
        }
        pos = end + 1;
        ++line_no;
    }

    std::string tu;
    tu.reserve(body.size() + 24 * 1024);
    tu += "// generated by the runtime's cpu kernel compiler from '" + source_name + "'\n";
    tu += cpu_kernel_abi_text();
    tu += "\n";
    append_escaped_line(tu, "runtime/kernel.h", 1);
    tu += kernel_prelude_text();
    tu += "\n";
    tu += includes;
    tu += "struct rt_module_ : rt_kernel_base_ {\n";
    append_escaped_line(tu, source_name, 1);
    tu += body;
    tu += "\n};\n";
    append_escaped_line(tu, "<rt generated entries>", 1);
    tu += kEntrySupport;
    for (const std::string& k : kernels) {
        tu += "extern \"C\" __attribute__((flatten)) void rt_entry_" + k +
              "(const rt_cpu_launch* L, void* const* args) {\n"
              "    typedef rt_sig_<decltype(&rt_module_::" + k + ")> S;\n";
        if (has_staged_twin(source, k))
            tu += "    S::run_staged<&rt_module_::" + k + ", &rt_module_::rt_staged_" + k + ", &rt_module_::rt_row_" + k +
                  ", rt_module_::rt_staging_" + k + ">(L, args);\n}\n";
        else
            tu += "    S::run<&rt_module_::" + k + ">(L, args);\n}\n";
    }
    tu += "static const rt_cpu_kernel_info rt_kernels_[] = {\n";
    for (const std::string& k : kernels)
        tu += "    {\"" + k + "\", &rt_entry_" + k + ", rt_sig_<decltype(&rt_module_::" + k +
              ")>::count, rt_sig_<decltype(&rt_module_::" + k + ")>::sizes},\n";
    tu += "};\n"
          "extern \"C\" __attribute__((visibility(\"default\"))) int rt_cpu_module_abi(void) { return RT_CPU_ABI_VERSION; }\n"
          "extern \"C\" __attribute__((visibility(\"default\"))) const rt_cpu_kernel_info* rt_cpu_module_kernels(int* count) {\n"
          "    *count = " + std::to_string(kernels.size()) + ";\n    return rt_kernels_;\n}\n";
    return tu;
}

CompileResult compile(const std::string& source, const std::string& options, const std::string& source_name,
                      bool force) {
    std::vector<std::string> opts = parse_options(options);
    CompileResult result;
    result.kernels = find_kernel_names(source);
    if (result.kernels.empty())
        fail(RT_ERROR_INVALID_VALUE,
             "no kernel in source '%s': a kernel is declared as `RT_KERNEL void name(parameters) { … }`",
             source_name.c_str());
    std::string tu = generate_translation_unit(source, source_name, result.kernels);
    HostCompiler hc = host_compiler();

    kcache::Hasher h;
    h.add("cpu-module")
        .add(format("%d.%d.%d", RUNTIME_VERSION_MAJOR, RUNTIME_VERSION_MINOR, RUNTIME_VERSION_PATCH))
        .add(static_cast<uint64_t>(RT_CPU_ABI_VERSION))
        .add(kernel_prelude_text())
        .add(tu)
        .add(hc.identity)
        .add(static_cast<uint64_t>(opts.size()));
    for (const std::string& o : opts) h.add(o);
    result.key = h.hex();
    result.path = kcache::entry_path("cpu", result.key, ".so");

    if (!force && kcache::trusted_entry(result.path)) {  // an entry another user could have written is compiled over
        result.from_cache = true;
        return result;
    }

    std::string dir = kcache::backend_dir("cpu");
    std::string src_path = kcache::unique_temp_path(dir, result.key, ".cpp");
    std::string so_path = kcache::unique_temp_path(dir, result.key, ".so");
    kcache::store_bytes(src_path, tu);

    // -O3, not -O2: GCC 12's -O2 cost model does not vectorise the work-group loop even for
    // `out[i] = in[i] * 2`; -O3 does, at no measurable compile-time cost on kernel-sized sources.
    std::vector<std::string> args = {hc.path,           "-std=c++17",   "-O3",        "-march=native",
                                     "-fPIC",           "-shared",      "-fno-exceptions", "-fno-rtti",
                                     "-fno-math-errno", "-fvisibility=hidden", "-fdiagnostics-color=never",
                                     "-pipe"};
    args.insert(args.end(), opts.begin(), opts.end());  // after the defaults: a user -O wins
    args.insert(args.end(), {"-o", so_path, src_path});

    std::string diagnostics;
    auto t0 = std::chrono::steady_clock::now();
    int status = run_capture(args, diagnostics);
    result.compile_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    bool keep_source = std::getenv("RUNTIME_KEEP_KERNEL_SOURCE") != nullptr;
    if (status != 0) {
        ::unlink(so_path.c_str());
        if (!keep_source) ::unlink(src_path.c_str());
        fail(RT_ERROR_COMPILE_FAILED,
             "compiling cpu kernel module '%s' (kernels: %s; options: '%s') failed with %s (status %d):\n%s",
             source_name.c_str(), join(result.kernels, ", ").c_str(), options.c_str(), hc.path.c_str(), status,
             diagnostics.c_str());
    }
    if (keep_source) kcache::publish(src_path, kcache::entry_path("cpu", result.key, ".cpp"));
    else ::unlink(src_path.c_str());
    ::chmod(so_path.c_str(), 0755);  // under umask 002 it would be group-writable, which the cache never loads
    kcache::publish(so_path, result.path);
    return result;
}

}  // namespace rt::cpu
