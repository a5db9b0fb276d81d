// cpu module ISA records: the feature table (compiler macro, CPUID bit, OS register state), the record a build embeds,
// and reading it from a module file's ELF sections before anything is loaded.
#include "backends/cpu/cpu_isa.hpp"

#include <elf.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstring>
#include <sstream>

#include "core/error.hpp"

namespace rt::cpu {

namespace {

enum Reg : unsigned char { EAX, EBX, ECX, EDX };

/// What a module may need of the machine. `xcr0`: register state the OS must have enabled (XGETBV).
struct Feature {
    const char* name;   // as -m<name> spells it
    const char* macro;  // predefined by GCC and clang when it is enabled
    unsigned leaf, subleaf;
    Reg reg;
    unsigned bit;
    unsigned long long xcr0;
};

constexpr unsigned long long kAvxState = 0x6;        // SSE + AVX (XMM, YMM)
constexpr unsigned long long kAvx512State = 0xe6;    // + opmask, ZMM0-15 upper halves, ZMM16-31
constexpr unsigned long long kAmxState = 0x60000;    // TILECFG, TILEDATA

// The x86-64 feature levels (x86-64-v2: cx16 … sse4.2; v3: avx … movbe; v4: the avx512 five) and the rest that
// -march values enable and compilers use on their own or through intrinsics.
constexpr Feature kFeatures[] = {
    {"sse3", "__SSE3__", 1, 0, ECX, 0, 0},
    {"pclmul", "__PCLMUL__", 1, 0, ECX, 1, 0},
    {"ssse3", "__SSSE3__", 1, 0, ECX, 9, 0},
    {"fma", "__FMA__", 1, 0, ECX, 12, kAvxState},
    {"cx16", "__GCC_HAVE_SYNC_COMPARE_AND_SWAP_16", 1, 0, ECX, 13, 0},
    {"sse4.1", "__SSE4_1__", 1, 0, ECX, 19, 0},
    {"sse4.2", "__SSE4_2__", 1, 0, ECX, 20, 0},
    {"movbe", "__MOVBE__", 1, 0, ECX, 22, 0},
    {"popcnt", "__POPCNT__", 1, 0, ECX, 23, 0},
    {"aes", "__AES__", 1, 0, ECX, 25, 0},
    {"xsave", "__XSAVE__", 1, 0, ECX, 26, 0},
    {"avx", "__AVX__", 1, 0, ECX, 28, kAvxState},
    {"f16c", "__F16C__", 1, 0, ECX, 29, kAvxState},
    {"rdrnd", "__RDRND__", 1, 0, ECX, 30, 0},
    {"bmi", "__BMI__", 7, 0, EBX, 3, 0},
    {"avx2", "__AVX2__", 7, 0, EBX, 5, kAvxState},
    {"bmi2", "__BMI2__", 7, 0, EBX, 8, 0},
    {"avx512f", "__AVX512F__", 7, 0, EBX, 16, kAvx512State},
    {"avx512dq", "__AVX512DQ__", 7, 0, EBX, 17, kAvx512State},
    {"rdseed", "__RDSEED__", 7, 0, EBX, 18, 0},
    {"adx", "__ADX__", 7, 0, EBX, 19, 0},
    {"avx512ifma", "__AVX512IFMA__", 7, 0, EBX, 21, kAvx512State},
    {"avx512cd", "__AVX512CD__", 7, 0, EBX, 28, kAvx512State},
    {"sha", "__SHA__", 7, 0, EBX, 29, 0},
    {"avx512bw", "__AVX512BW__", 7, 0, EBX, 30, kAvx512State},
    {"avx512vl", "__AVX512VL__", 7, 0, EBX, 31, kAvx512State},
    {"avx512vbmi", "__AVX512VBMI__", 7, 0, ECX, 1, kAvx512State},
    {"avx512vbmi2", "__AVX512VBMI2__", 7, 0, ECX, 6, kAvx512State},
    {"gfni", "__GFNI__", 7, 0, ECX, 8, 0},
    {"vaes", "__VAES__", 7, 0, ECX, 9, kAvxState},
    {"vpclmulqdq", "__VPCLMULQDQ__", 7, 0, ECX, 10, kAvxState},
    {"avx512vnni", "__AVX512VNNI__", 7, 0, ECX, 11, kAvx512State},
    {"avx512bitalg", "__AVX512BITALG__", 7, 0, ECX, 12, kAvx512State},
    {"avx512vpopcntdq", "__AVX512VPOPCNTDQ__", 7, 0, ECX, 14, kAvx512State},
    {"avx512fp16", "__AVX512FP16__", 7, 0, EDX, 23, kAvx512State},
    {"amx-tile", "__AMX_TILE__", 7, 0, EDX, 24, kAmxState},
    {"amx-int8", "__AMX_INT8__", 7, 0, EDX, 25, kAmxState},
    {"amx-bf16", "__AMX_BF16__", 7, 0, EDX, 22, kAmxState},
    {"avxvnni", "__AVXVNNI__", 7, 1, EAX, 4, kAvxState},
    {"avx512bf16", "__AVX512BF16__", 7, 1, EAX, 5, kAvx512State},
    {"lzcnt", "__LZCNT__", 0x80000001, 0, ECX, 5, 0},
    {"sse4a", "__SSE4A__", 0x80000001, 0, ECX, 6, 0},
    {"prfchw", "__PRFCHW__", 0x80000001, 0, ECX, 8, 0},
    {"xop", "__XOP__", 0x80000001, 0, ECX, 11, kAvxState},
    {"fma4", "__FMA4__", 0x80000001, 0, ECX, 16, kAvxState},
};

const Feature* find_feature(const std::string& name) {
    for (const Feature& f : kFeatures)
        if (name == f.name) return &f;
    return nullptr;
}

#if defined(__x86_64__) || defined(__i386__)
void cpuid(unsigned leaf, unsigned sub, unsigned r[4]) {
    __asm__ volatile("cpuid" : "=a"(r[0]), "=b"(r[1]), "=c"(r[2]), "=d"(r[3]) : "a"(leaf), "c"(sub));
}

/// The supported bit of each kFeatures entry, computed once.
struct HostFeatures {
    bool has[sizeof kFeatures / sizeof kFeatures[0]] = {};
    HostFeatures() {
        unsigned r[4];
        cpuid(0, 0, r);
        const unsigned max_leaf = r[0];
        cpuid(0x80000000, 0, r);
        const unsigned max_ext = r[0];
        unsigned long long xcr0 = 0;
        cpuid(1, 0, r);
        if (r[ECX] & (1u << 27)) {  // OSXSAVE: XGETBV tells which register state the OS saves
            unsigned lo, hi;
            __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
            xcr0 = (static_cast<unsigned long long>(hi) << 32) | lo;
        }
        for (size_t i = 0; i < sizeof kFeatures / sizeof kFeatures[0]; ++i) {
            const Feature& f = kFeatures[i];
            if (f.leaf >= 0x80000000 ? f.leaf > max_ext : f.leaf > max_leaf) continue;
            cpuid(f.leaf, f.subleaf, r);
            has[i] = (r[f.reg] >> f.bit & 1) && (xcr0 & f.xcr0) == f.xcr0;
        }
    }
};
#endif

}  // namespace

std::string isa_record_source(int index, const std::string& variant) {
    std::string s = "extern \"C\" __attribute__((used, section(\"" + std::string(kIsaSection) +
                    "\"))) const char rt_cpu_isa_v" + std::to_string(index) + "_[] = \"rt-cpu-isa " +
                    std::to_string(index) + " " + variant + ":\"\n";
    for (const Feature& f : kFeatures) s += "#ifdef " + std::string(f.macro) + "\n    \" " + f.name + "\"\n#endif\n";
    s += ";\n";
    return s;
}

std::vector<IsaVariant> read_isa_records(const std::string& path, std::string& why) {
    std::vector<IsaVariant> out;
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        why = std::strerror(errno);
        return out;
    }
    auto read_at = [&](void* buf, size_t n, uint64_t off) {
        return ::pread(fd, buf, n, static_cast<off_t>(off)) == static_cast<ssize_t>(n);
    };
    std::string section;
    Elf64_Ehdr eh{};
    bool found = false;
    if (!read_at(&eh, sizeof eh, 0) || std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 ||
        eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_shentsize != sizeof(Elf64_Shdr) || eh.e_shstrndx >= eh.e_shnum) {
        why = "not a 64-bit ELF shared object";
    } else {
        std::vector<Elf64_Shdr> sh(eh.e_shnum);
        std::string names;
        if (read_at(sh.data(), sh.size() * sizeof(Elf64_Shdr), eh.e_shoff) && sh[eh.e_shstrndx].sh_size < (1u << 20)) {
            names.resize(sh[eh.e_shstrndx].sh_size);
            if (!read_at(names.data(), names.size(), sh[eh.e_shstrndx].sh_offset)) names.clear();
        }
        for (const Elf64_Shdr& s : sh) {
            if (s.sh_name >= names.size() || std::strcmp(names.c_str() + s.sh_name, kIsaSection) != 0) continue;
            if (s.sh_type != SHT_PROGBITS || s.sh_size > (1u << 16)) break;
            section.resize(s.sh_size);
            found = read_at(section.data(), section.size(), s.sh_offset);
            break;
        }
        if (!found) why = "it has no ISA record (not built by this runtime's cpu target)";
    }
    ::close(fd);
    if (!found) return out;
    for (size_t p = 0; p < section.size();) {
        size_t end = section.find('\0', p);
        if (end == std::string::npos) end = section.size();
        std::istringstream text(section.substr(p, end - p));
        p = end + 1;
        std::string tag, name;
        IsaVariant v;
        if (!(text >> tag >> v.index >> name) || tag != "rt-cpu-isa" || name.empty() || name.back() != ':') continue;
        v.name = name.substr(0, name.size() - 1);
        for (std::string f; text >> f;) v.features.push_back(f);
        if (v.index == static_cast<int>(out.size())) out.push_back(std::move(v));
    }
    if (out.empty()) why = "its ISA record is malformed";
    return out;
}

bool known_feature(const std::string& feature) { return find_feature(feature) != nullptr; }

bool host_supports(const std::string& feature) {
#if defined(__x86_64__) || defined(__i386__)
    static const HostFeatures host;
    const Feature* f = find_feature(feature);
    return f && host.has[f - kFeatures];
#else
    (void)feature;
    return false;
#endif
}

const IsaVariant* pick_variant(const std::vector<IsaVariant>& variants, std::vector<std::string>& missing) {
    missing.clear();
    const IsaVariant* best = nullptr;
    for (const IsaVariant& v : variants) {
        bool ok = true;
        for (const std::string& f : v.features) {
            if (host_supports(f)) continue;
            ok = false;
            if (v.index == 0) missing.push_back(f);
        }
        if (v.index == 0 && !ok) return nullptr;
        if (ok && (!best || v.features.size() > best->features.size())) best = &v;
    }
    return best;
}

}  // namespace rt::cpu
