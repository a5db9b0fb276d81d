// The cpu target: the host C++ compiler (found without a subprocess), the generated translation unit, dlopen.
#include "backends/cpu/cpu_target.hpp"

#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <mutex>
#include <system_error>
#include <thread>

#include "backends/cpu/cpu_isa.hpp"
#include "backends/cpu/cpu_kernel_abi.h"
#include "backends/cpu/cpu_module.hpp"
#include "core/error.hpp"
#include "kernels/disk_cache.hpp"
#include "kernels/prelude.hpp"
#include "observe/log.hpp"

extern char** environ;

namespace rt::cpu {

namespace {

constexpr size_t kMaxDiagnostics = 32 * 1024;  // keep error messages readable; the head has the first error

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

bool has_staged_twin(const std::string& source, const std::string& kernel) {
    // The names rt_* are the runtime's in a kernel source; the twin's own declaration decides.
    return source.find("void rt_staged_" + kernel + "(") != std::string::npos;
}

// ---- work-groups

/// The offset in `body` (split_includes' body of `source`: the same lines, some blanked) of `offset` in `source`,
/// which lies on a line that was not blanked (kernels are not directives).
size_t body_offset(const std::string& source, const std::string& body, size_t offset) {
    const size_t line = kernels::line_of(source, offset);
    return kernels::line_offset(body, line) + (offset - kernels::line_offset(source, line));
}

/// The body with each flat kernel (rt_barrier) between a #define of RT_LOCAL as `static` (its items are fibers of one
/// thread, each reaching the same arrays; the runtime runs one group of a module's flat kernels at a time:
/// CpuModule::flat_launch_mutex) and the prelude's own (empty) one again; #line keeps the source's numbering. Not
/// thread_local: a worker's TLS block of a module can be stale across an unload and reload of modules (glibc updates
/// a thread's TLS lazily), and kernel code would then store into freed memory.
std::string place_flat_locals(const kernels::Program& program, std::string body) {
    for (auto k = program.kernels.rbegin(); k != program.kernels.rend(); ++k) {
        if (k->form != kernels::GroupForm::barrier || k->locals.empty()) continue;
        const size_t close = std::min(k->body_close + 1, program.source.size());
        const size_t b_close = body_offset(program.source, body, close), b_start = body_offset(program.source, body, k->start);
        body.insert(b_close, "\n#undef RT_LOCAL\n#define RT_LOCAL\n" + kernels::line_directive(program.name, kernels::line_of(program.source, close)));
        body.insert(b_start, "\n#undef RT_LOCAL\n#define RT_LOCAL static\n" +
                                 kernels::line_directive(program.name, kernels::line_of(program.source, k->start)));
    }
    return body;
}

/// Inside the module's struct: `rt_local_bytes_<kernel>`, the bytes of the kernel's RT_LOCAL arrays (their types
/// must be known at the source's top level, which the front end checks: kernel.h), each at the line of its RT_LOCAL
/// for diagnostics.
/// A kernel template's is a function template with the template's header (its arrays' types may depend on its
/// parameters): `rt_local_bytes_axpy<float>()`.
std::string local_bytes_members(const kernels::Program& program) {
    std::string out;
    for (const kernels::KernelDecl& k : program.kernels) {
        if (k.is_template)
            out += program.source.substr(k.template_start, k.start - k.template_start) +
                   " static constexpr unsigned long long rt_local_bytes_" + k.name + "() { return 0";
        else
            out += "static constexpr unsigned long long rt_local_bytes_" + k.name + " = 0";
        for (const kernels::LocalDecl& l : k.locals) {
            out += '\n';  // (appended piecewise: GCC 12 warns falsely of overlap (-Wrestrict) for "\n" + string)
            out += kernels::line_directive(program.name, l.line);
            out += " + sizeof(" + l.type + ")";
        }
        out += k.is_template ? "; }\n" : ";\n";
    }
    return out;
}

/// True if the source or its options may name one of `prefixes` (e.g. the prelude's vector types, rt_float4,
/// rt_make_int2, ...), or it includes files (which may): otherwise the cpu target leaves those parts of the prelude
/// out of its translation unit (the vector types are ~300 inline functions, a tenth of a small module's compile time
/// to parse; the 16-bit types a few percent). Any text that holds a prefix counts, in comments and macros too, and
/// any token pasting (`##`): erring towards keeping them.
bool may_name(const kernels::Program& program, const kernels::SplitSource& split,
              std::initializer_list<const char*> prefixes) {
    if (!split.includes.empty()) return true;
    for (const std::string* text : {&program.source, &program.option_text})
        if (text->find("##") != std::string::npos) return true;  // a name pasted together (rt_##t##4) may be one
    for (const std::string* text : {&program.source, &program.option_text})
        for (const char* prefix : prefixes)
            if (text->find(prefix) != std::string::npos) return true;
    return false;
}

int form_code(kernels::GroupForm form) {
    return form == kernels::GroupForm::items ? RT_CPU_GROUP_ITEMS
           : form == kernels::GroupForm::barrier ? RT_CPU_GROUP_BARRIER : RT_CPU_GROUP_NONE;
}

/// The embedded texts every module is generated from, hashed once: part of the target's identity.
const std::string& generator_identity() {
    static const std::string id = kcache::Hasher()
                                      .add(static_cast<uint64_t>(RT_CPU_ABI_VERSION))
                                      .add(cpu_kernel_abi_text_digest())
                                      .add(kernel_prelude_text_digest())
                                      .add(cpu_entry_text_digest())
                                      .hex();
    return id;
}

/// The compiler's flags before the user's options (a user -O wins: it comes later).
const std::vector<std::string>& default_flags() {
    // -O3, not -O2: GCC 12's -O2 cost model does not vectorise the work-group loop even for `out[i] = in[i] * 2`.
    // -march comes per variant (CpuTarget::isa); -shared where the object is linked.
    static const std::vector<std::string> flags = {
        "-std=c++17", "-O3",        "-fPIC",       "-fno-exceptions",
        "-fno-rtti",  "-fno-math-errno", "-fvisibility=hidden", "-fdiagnostics-color=never", "-pipe"};
    return flags;
}

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
        for (const char* name : {"clang++", "c++", "g++"})
            if (!(found = find_on_path(name)).empty()) break;
        if (found.empty())
            fail(RT_ERROR_COMPILE_FAILED,
                 "no C++ compiler for cpu kernels: none of clang++, c++, g++ is on PATH (set RUNTIME_CXX)");
    }
    // Run as found (clang++ is a link to clang, which picks its language mode from the name it is run by); known
    // by what the link resolves to.
    char resolved[PATH_MAX];
    HostCompiler hc;
    hc.path = found;
    const std::string real = ::realpath(found.c_str(), resolved) ? std::string(resolved) : found;
    hc.clang = real.find("clang", real.rfind('/') + 1) != std::string::npos;
    struct stat st {};
    ::stat(real.c_str(), &st);
    hc.identity = format("%s|%s|%lld|%lld.%09ld|", hc.path.c_str(), real.c_str(), static_cast<long long>(st.st_size),
                         static_cast<long long>(st.st_mtim.tv_sec), st.st_mtim.tv_nsec) +
                  cpu_identity();
    cache.compiler = hc;
    cache.env = env_value;
    cache.valid = true;
    RT_LOG(kernels, info, "cpu kernels are compiled by '%s'%s%s (%s)", hc.path.c_str(), real != hc.path ? " = " : "",
           real != hc.path ? real.c_str() : "",
           env_value.empty() ? "the first of clang++, c++, g++ on PATH" : "RUNTIME_CXX");
    return hc;
}

std::vector<std::string> parse_isa(const std::string& list) {
    std::vector<std::string> out;
    size_t start = 0;
    for (;;) {
        size_t end = list.find(',', start);
        std::string item = list.substr(start, end == std::string::npos ? std::string::npos : end - start);
        bool ok = !item.empty() && item[0] != '-';
        for (char c : item) ok = ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.');
        if (!ok)
            fail(RT_ERROR_INVALID_VALUE,
                 "--isa '%s': '%s' is not an instruction set (expected native, x86-64, x86-64-v2, x86-64-v3, x86-64-v4 "
                 "or another -march value, comma-separated)",
                 list.c_str(), item.c_str());
        if (std::find(out.begin(), out.end(), item) == out.end()) out.push_back(item);
        if (end == std::string::npos) break;
        start = end + 1;
    }
    // The x86-64 levels nest: put them baseline first (a variant list the machine must support from its first entry).
    auto level = [](const std::string& n) -> int {
        if (n == "x86-64") return 1;
        if (n.size() == 9 && n.compare(0, 8, "x86-64-v") == 0 && n[8] >= '2' && n[8] <= '4') return n[8] - '0';
        return 0;
    };
    if (std::all_of(out.begin(), out.end(), [&](const std::string& n) { return level(n) > 0; }))
        std::sort(out.begin(), out.end(), [&](const std::string& a, const std::string& b) { return level(a) < level(b); });
    return out;
}

std::string generate_translation_unit(const kernels::Program& program, int index, const std::string& isa) {
    const std::string suffix = index == 0 ? std::string() : "_v" + std::to_string(index);
    kernels::SplitSource split = kernels::split_includes(program.source, program.name);
    std::string tu;
    tu.reserve(split.body.size() + 24 * 1024);
    tu += "// generated by the runtime's cpu target from '" + program.name + "'\n";
    tu += kernels::line_directive("runtime/cpu_kernel_abi.h", 1);
    tu += cpu_kernel_abi_text();
    tu += "\n";
    if (!may_name(program, split, {"rt_float", "rt_double", "rt_int", "rt_uint", "rt_make_"}))
        tu += "#define RT_NO_VECTOR_TYPES_ 1\n";
    if (!may_name(program, split, {"half", "bfloat16"})) tu += "#define RT_NO_16BIT_TYPES_ 1\n";
    tu += kernels::line_directive("runtime/kernel.h", 1);
    tu += kernel_prelude_text();
    tu += "\n";
    tu += split.includes;
    tu += "struct rt_module_ : rt_kernel_base_ {\n";
    tu += kernels::line_directive(program.name, 1);
    tu += place_flat_locals(program, split.body);
    tu += "\n";
    tu += local_bytes_members(program);
    tu += "};\n";
    tu += kernels::line_directive("runtime/cpu_entry.h", 1);
    tu += cpu_entry_text();
    tu += kernels::line_directive("<rt generated entries>", 1);
    const std::vector<kernels::Program::EntryPoint> entries = program.entry_points();
    // Variants of one module are linked together: their entries and tables have names of their own, and code they
    // share (inline functions, templates not inlined) is variant 0's, the baseline (the linker keeps the first copy).
    // An entry calls its kernel by member: `k`, or the instantiation `axpy<float>` of a kernel template.
    for (const auto& e : entries) {
        const kernels::KernelDecl& decl = program.kernels[e.kernel];
        const std::string& k = e.name;
        const std::string& member = e.expression;
        tu += "extern \"C\" __attribute__((flatten)) void rt_entry_" + k + suffix +
              "(const rt_cpu_launch* L, void* const* args) {\n"
              "    typedef rt_sig_<decltype(&rt_module_::" + member + ")> S;\n";
        if (decl.form == kernels::GroupForm::items)
            tu += "    S::run_groups<&rt_module_::" + member + " >(L, args);\n}\n";
        else if (decl.form == kernels::GroupForm::barrier)
            tu += "    S::run_fibers<&rt_module_::" + member + " >(L, args);\n}\n";
        else if (k == member && has_staged_twin(program.source, k))
            tu += "    S::run_staged<&rt_module_::" + k + ", &rt_module_::rt_staged_" + k + ", &rt_module_::rt_row_" + k +
                  ", rt_module_::rt_staging_" + k + ">(L, args);\n}\n";
        else
            tu += "    S::run<&rt_module_::" + member + " >(L, args);\n}\n";
    }
    tu += "static const rt_cpu_kernel_info rt_kernels_[] = {\n";
    for (const auto& e : entries) {
        const kernels::KernelDecl& decl = program.kernels[e.kernel];
        // A template's local bytes are a function template of its parameters: called with the instantiation's.
        const std::string local_bytes = decl.is_template
                                            ? "rt_local_bytes_" + e.expression + "()"
                                            : "rt_local_bytes_" + e.name;
        tu += "    {\"" + e.name + "\", &rt_entry_" + e.name + suffix + ", rt_sig_<decltype(&rt_module_::" + e.expression +
              ")>::count, rt_sig_<decltype(&rt_module_::" + e.expression + ")>::sizes, " +
              std::to_string(form_code(decl.form)) + ", rt_module_::" + local_bytes + "},\n";
    }
    tu += "};\n";
    if (index == 0) {
        tu += "extern \"C\" __attribute__((visibility(\"default\"))) int rt_cpu_module_abi(void) { return RT_CPU_ABI_VERSION; }\n";
        // The module's RT_GLOBAL variables (inline static members of rt_module_: one copy, whatever the variants).
        if (!program.globals.empty()) {
            tu += "static const rt_cpu_global_info rt_globals_[] = {\n";
            for (const std::string& g : program.globals)
                tu += "    {\"" + g + "\", (void*)&rt_module_::" + g + ", sizeof(rt_module_::" + g + ")},\n";
            tu += "};\n";
        }
        tu += "extern \"C\" __attribute__((visibility(\"default\"))) const rt_cpu_global_info* "
              "rt_cpu_module_globals(int* count) {\n    *count = " + std::to_string(program.globals.size()) +
              ";\n    return " + (program.globals.empty() ? "0" : "rt_globals_") + ";\n}\n";
    }
    tu += "extern \"C\" __attribute__((visibility(\"default\"))) const rt_cpu_kernel_info* rt_cpu_module_kernels" + suffix +
          "(int* count) {\n"
          "    *count = " + std::to_string(entries.size()) + ";\n    return rt_kernels_;\n}\n";
    tu += isa_record_source(index, isa);
    return tu;
}

std::string CpuTarget::identity() const {
    // Asked at every load from source: rebuilt only when the compiler's identity changes ($RUNTIME_CXX).
    const HostCompiler hc = host_compiler();
    std::lock_guard lock(identity_mutex_);
    if (identity_compiler_ != hc.identity) {
        identity_ = generator_identity() + "|" + hc.identity;
        for (const std::string& f : default_flags()) identity_ += "|" + f;
        identity_ += "|isa=" + kernels::join(isa_, ",");
        identity_compiler_ = hc.identity;
    }
    return identity_;
}

double CpuTarget::build(const kernels::Program& program, const std::string& out) const {
    const HostCompiler hc = host_compiler();
    const std::string stem = out.substr(0, out.size() - image_extension().size());
    const size_t n = isa_.size();
    // One translation unit per variant; a single variant is compiled and linked in one run (the JIT's path).
    struct Run {
        std::string source, object, diagnostics;
        int status = -1;
    };
    std::vector<Run> runs(n);
    for (size_t i = 0; i < n; ++i) {
        runs[i].source = n == 1 ? stem + ".cpp" : stem + ".v" + std::to_string(i) + ".cpp";
        runs[i].object = n == 1 ? out : stem + ".v" + std::to_string(i) + ".o";
        kcache::store_bytes(runs[i].source, generate_translation_unit(program, static_cast<int>(i), isa_[i]));
    }
    // A source without includes can use only the prelude (builtins): its module needs no C++ runtime library, and
    // not linking one is a quarter of a cold JIT compile with clang. One with includes links it as usual.
    const bool no_cxx_runtime = hc.clang && kernels::split_includes(program.source, program.name).includes.empty();
    auto compile_one = [&](size_t i) {
        std::vector<std::string> args = {hc.path};
        args.insert(args.end(), default_flags().begin(), default_flags().end());
        args.push_back("-march=" + isa_[i]);
        for (const std::string& o : program.options) {
#if !defined(__x86_64__) && !defined(__i386__)
            if (o.rfind("-mprefer-vector-width=", 0) == 0) continue;  // an x86 option of GCC's
#endif
            args.push_back(o);
        }
        args.push_back(n == 1 ? "-shared" : "-c");
        if (n == 1 && no_cxx_runtime) args.push_back("-nostdlib++");
        args.insert(args.end(), {"-o", runs[i].object, runs[i].source});
        RT_LOG(kernels, debug, "running the compiler: %s", kernels::join(args, " ").c_str());
        runs[i].status = run_capture(args, runs[i].diagnostics);
    };
    const auto t0 = std::chrono::steady_clock::now();
    {
        std::vector<std::thread> threads;  // the compilers run side by side: a variant list costs ~one compile
        size_t next = 1;
        try {
            for (; next < n; ++next) threads.emplace_back(compile_one, next);
        } catch (const std::system_error&) {  // no thread to spare: the rest run here
        }
        compile_one(0);
        for (size_t i = next; i < n; ++i) compile_one(i);
        for (std::thread& t : threads) t.join();
    }
    int status = 0;
    std::string diagnostics, failed_isa;
    for (size_t i = 0; i < n && status == 0; ++i)
        if (runs[i].status != 0) {
            status = runs[i].status;
            diagnostics = runs[i].diagnostics;
            failed_isa = isa_[i];
        }
    if (status == 0 && n > 1) {  // variant 0 first: its copies of shared code are the ones kept
        std::vector<std::string> args = {hc.path, "-shared", "-o", out};
        if (no_cxx_runtime) args.push_back("-nostdlib++");
        for (const Run& r : runs) args.push_back(r.object);
        RT_LOG(kernels, debug, "running the linker: %s", kernels::join(args, " ").c_str());
        status = run_capture(args, diagnostics);
        failed_isa = "the link";
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const bool keep_source = std::getenv("RUNTIME_KEEP_KERNEL_SOURCE") != nullptr;
    for (size_t i = 0; i < n; ++i) {
        if (n > 1) ::unlink(runs[i].object.c_str());
        if (keep_source && status == 0) {
            const std::string key = out.substr(out.rfind('/') + 1, 32);
            kcache::publish(runs[i].source,
                            kcache::entry_path(cache_name(), key, n == 1 ? ".cpp" : ".v" + std::to_string(i) + ".cpp"));
        } else if (!keep_source) {
            ::unlink(runs[i].source.c_str());
        }
    }
    if (status != 0)
        fail(RT_ERROR_COMPILE_FAILED,
             "compiling cpu kernel module '%s' (kernels: %s; options: '%s'; isa: %s) failed with %s (status %d%s%s):\n%s",
             program.name.c_str(), kernels::join(program.kernel_names()).c_str(), program.option_text.c_str(),
             kernels::join(isa_, ",").c_str(), hc.path.c_str(), status, n > 1 ? ", in " : "",
             n > 1 ? failed_isa.c_str() : "", diagnostics.c_str());
    return seconds;
}

std::shared_ptr<backend::Module> CpuTarget::load(const std::string& path, bool precompiled) {
    std::shared_ptr<CpuModule> m = precompiled ? CpuModule::from_file(path) : CpuModule::load(path, true);
    if (!m) return nullptr;
    return std::make_shared<CpuKernelModule>(std::move(m));
}

CpuTarget& cpu_target() {
    static CpuTarget* target = new CpuTarget;  // never destroyed: executors may run kernels during static destruction
    return *target;
}

kernels::ModuleCache& cpu_modules() {
    static kernels::ModuleCache* cache = new kernels::ModuleCache;  // never destroyed, as cpu_target()
    return *cache;
}

}  // namespace rt::cpu
