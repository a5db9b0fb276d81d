// The instruction sets a cpu module is built for: the record each build writes into the module, and the check that a
// machine can run it, made on the file before it is loaded (no module code runs on a machine that lacks a feature).
#pragma once

#include <string>
#include <vector>

namespace rt::cpu {

/// The ELF section a module's ISA records live in: one NUL-terminated text per variant,
/// "rt-cpu-isa <index> <variant>:[ <feature>]*" (features as GCC and clang spell -m<feature>).
inline constexpr const char* kIsaSection = ".rt_cpu_isa";

/// Source text, for a generated translation unit, that records the features its compiler targets (from the
/// compiler's predefined macros: __AVX2__, __FMA__, ...) as variant `index` named `variant`. No initialiser runs.
std::string isa_record_source(int index, const std::string& variant);

/// One variant of a module, as recorded.
struct IsaVariant {
    int index = 0;
    std::string name;                   ///< "native", "x86-64-v3", ...
    std::vector<std::string> features;  ///< what its code may use
};

/// The variants recorded in the module file `path`, by index; empty (and `why` set) when the file has no record or
/// is not an ELF shared object. Reads the file; loads nothing.
std::vector<IsaVariant> read_isa_records(const std::string& path, std::string& why);

/// Whether this machine, and its operating system (register state), support `feature`; false for a name this
/// runtime does not know. Thread-safe.
bool host_supports(const std::string& feature);
/// Whether `feature` is one this runtime knows (checks on this machine).
bool known_feature(const std::string& feature);

/// The variant to run on this machine: the one with the most features among those whose features this machine
/// all has — provided variant 0 is among them (the others may share its out-of-line code). nullptr otherwise, with
/// `missing` set to what variant 0 needs and the machine lacks (unknown names included, as they are).
const IsaVariant* pick_variant(const std::vector<IsaVariant>& variants, std::vector<std::string>& missing);

}  // namespace rt::cpu
