// runtime-compile — ahead-of-time compilation of kernel sources into cpu modules or cuda cubin/PTX, and kernel cache upkeep.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <ctime>
#include <memory>
#include <string>

#include "backends/cpu/cpu_target.hpp"
#include "backends/cpu/cpu_module.hpp"
#include "core/error.hpp"
#include "kernels/disk_cache.hpp"
#ifdef RUNTIME_HAVE_CUDA
#include "backends/cuda/cuda_target.hpp"
#endif

namespace {

const char* kUsage =
    "usage: runtime-compile KERNEL.cpp -o MODULE.so [--backend cpu] [--isa LIST] [-O0..-O3|-Os] [-g] [-DNAME[=V]]\n"
    "                       [-UNAME] [-IDIR]\n"
    "       runtime-compile KERNEL.cu -o MODULE.cubin|MODULE.ptx --backend cuda [--arch sm_XY] [options as above]\n"
    "       runtime-compile --list-cache [--backend NAME]\n"
    "       runtime-compile --clear-cache [--backend NAME]\n"
    "       runtime-compile --help\n"
    "\n"
    "Compiles a kernel source (include/runtime/kernel.h dialect) into a module that rtModuleLoadFile loads.\n"
    "The compilation goes through the kernel cache ($RUNTIME_CACHE_DIR, else $XDG_CACHE_HOME/runtime, else\n"
    "~/.cache/runtime): compiling the same file with the same options again copies the cached module.\n"
    "The host compiler is $RUNTIME_CXX, else clang++ / c++ / g++ from PATH.\n"
    "--isa: the instruction sets of a cpu module, comma-separated -march values (default native: this machine's,\n"
    "the fastest here). A module records what it needs; loading it where a feature is missing fails with\n"
    "RT_ERROR_NOT_SUPPORTED naming the features, before any of its code runs. To ship a module, list variants:\n"
    "--isa x86-64-v2,x86-64-v3,x86-64-v4 builds one file holding all three (one compiler run each, side by side),\n"
    "and the loader runs the best variant the machine supports; x86-64-v2 alone is a portable baseline.\n"
    "--backend cuda compiles with NVRTC (loaded at run time; no GPU needed) for --arch (default sm_90): a cubin,\n"
    "or PTX when the output name ends in .ptx. rtModuleLoadFile loads cubin, PTX and fatbin files on cuda.\n";

int usage_error(const char* fmt, const char* arg) {
    std::fprintf(stderr, "runtime-compile: ");
    std::fprintf(stderr, fmt, arg);
    std::fprintf(stderr, "\n\n%s", kUsage);
    return 2;
}

/// Copies via a temporary name + rename, so a reader of `dst` never sees half a module.
void copy_atomic(const std::string& src, const std::string& dst) {
    std::string data, why;
    if (!rt::kcache::read_bytes(src, data, why)) rt::fail(RT_ERROR_INVALID_VALUE, "cannot read '%s': %s", src.c_str(), why.c_str());
    rt::kcache::store_bytes(dst, data);
}

}  // namespace

int main(int argc, char** argv) {
    std::string input, output, backend = "cpu", options, arch = "sm_90", isa = "native";
    bool list = false, clear = false, backend_given = false;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        if (a == "--help" || a == "-h") {
            std::fputs(kUsage, stdout);
            return 0;
        } else if (a == "-o") {
            if (++i >= argc) return usage_error("%s needs a file name", "-o");
            output = argv[i];
        } else if (a == "--backend") {
            if (++i >= argc) return usage_error("%s needs a name", "--backend");
            backend = argv[i];
            backend_given = true;
        } else if (a.rfind("--backend=", 0) == 0) {
            backend = a.substr(10);
            backend_given = true;
        } else if (a == "--arch") {
            if (++i >= argc) return usage_error("%s needs an architecture (e.g. sm_90)", "--arch");
            arch = argv[i];
        } else if (a.rfind("--arch=", 0) == 0) {
            arch = a.substr(7);
        } else if (a == "--isa") {
            if (++i >= argc) return usage_error("%s needs instruction sets (e.g. x86-64-v2,x86-64-v3)", "--isa");
            isa = argv[i];
        } else if (a.rfind("--isa=", 0) == 0) {
            isa = a.substr(6);
        } else if (a == "--list-cache") {
            list = true;
        } else if (a == "--clear-cache") {
            clear = true;
        } else if (a == "-D" || a == "-U" || a == "-I") {  // separate value: keep the pair together
            if (++i >= argc) return usage_error("%s needs a value", a.c_str());
            options += " " + a + argv[i];
        } else if (a.size() > 1 && a[0] == '-') {
            options += " " + a;  // validated by the compiler's option parser
        } else if (input.empty()) {
            input = a;
        } else {
            return usage_error("more than one input file ('%s')", a.c_str());
        }
    }

    try {
        if (list || clear) {
            std::string which = backend_given ? backend : std::string();
            if (list) {
                auto entries = rt::kcache::list(which);
                uint64_t total = 0;
                for (const auto& e : entries) {
                    std::time_t t = static_cast<std::time_t>(e.mtime_ns / 1000000000);
                    char when[32];
                    std::strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", std::localtime(&t));
                    std::printf("%s  %10llu  %s\n", when, static_cast<unsigned long long>(e.size), e.path.c_str());
                    total += e.size;
                }
                std::printf("%zu entries, %llu bytes in %s\n", entries.size(), static_cast<unsigned long long>(total),
                            rt::kcache::cache_root().c_str());
            }
            if (clear) {
                size_t n = rt::kcache::clear(which);
                std::printf("removed %zu entries from %s\n", n, rt::kcache::cache_root().c_str());
            }
            return 0;
        }
        if (input.empty()) return usage_error("%s", "no input file");
        if (output.empty()) return usage_error("%s", "no output file (-o MODULE.so)");
#ifdef RUNTIME_HAVE_CUDA
        const char* supported = "cpu, cuda";
#else
        const char* supported = "cpu (this build has no cuda backend)";
#endif
        if (backend != "cpu" && !(backend == "cuda" && std::strstr(supported, "cuda"))) {
            std::fprintf(stderr, "runtime-compile: backend '%s' cannot be compiled ahead of time (supported: %s)\n",
                         backend.c_str(), supported);
            return 2;
        }

        std::string source;
        std::string why;
        if (!rt::kcache::read_bytes(input, source, why)) {
            std::fprintf(stderr, "runtime-compile: cannot read '%s': %s\n", input.c_str(), why.c_str());
            return 1;
        }
        // Quoted includes resolve relative to the source file, as they would in a normal compilation.
        size_t slash = input.rfind('/');
        std::string dir = slash == std::string::npos ? "." : input.substr(0, slash == 0 ? 1 : slash);
        std::string all_options = options + " -I" + dir;
        rt::kernels::Program program = rt::kernels::read_program(source, all_options, input);
        std::unique_ptr<rt::kernels::Target> target;
        std::string what = "cpu module";
#ifdef RUNTIME_HAVE_CUDA
        if (backend == "cuda") {
            const bool ptx = output.size() >= 4 && output.compare(output.size() - 4, 4, ".ptx") == 0;
            target = std::make_unique<rt::cuda::CudaTarget>(arch, ptx);
            what = (target->image_extension() == ".ptx" ? "PTX for " : "cubin for ") + arch;
        }
#endif
        if (!target) {
            auto cpu = std::make_unique<rt::cpu::CpuTarget>(rt::cpu::parse_isa(isa));
            what = "cpu module for " + rt::kernels::join(cpu->isa(), ",");
            target = std::move(cpu);
        }
        rt::kernels::Image image = rt::kernels::compile(*target, program);
        if (backend == "cpu") {
            try {
                (void)rt::cpu::CpuModule::from_file(image.path);  // proves it loads before publishing it
            } catch (const rt::Error& e) {
                if (e.code() != RT_ERROR_NOT_SUPPORTED) throw;
                // Built for other machines: it is checked as far as this one can (its records were read).
                std::fprintf(stderr, "runtime-compile: note: this machine cannot run it: %s\n", e.what());
            }
        }
        copy_atomic(image.path, output);
        std::printf("%s: %s %s (kernels: %s; %s)\n", output.c_str(), image.from_cache ? "from cache" : "compiled",
                    what.c_str(), rt::kernels::join(image.kernels).c_str(), image.path.c_str());
        return 0;
    } catch (const rt::Error& e) {
        std::fprintf(stderr, "runtime-compile: %s\n", e.what());
        return 1;
    }
}
