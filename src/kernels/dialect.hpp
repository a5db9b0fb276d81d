// The kernel dialect's front end, shared by every target: option rules, kernel discovery, the program a target builds.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace rt::kernels {

/// Validates a user option string (whitespace-separated): -O0..-O3, -Os, -g, -fwrapv, -DNAME[=VALUE], -UNAME,
/// -IDIR (or "-D NAME", "-I DIR"). Returns them normalised (one token each). Targets translate them (cuda: -g
/// becomes -lineinfo, -O levels and -fwrapv are dropped). Anything else: rt::Error(INVALID_VALUE) naming it.
std::vector<std::string> parse_options(const std::string& options);

/// A kernel of a source: `RT_KERNEL void name(parameters) { body }`, found outside comments and literals.
struct KernelDecl {
    std::string name;
    size_t params_open = 0;   ///< offset of the '(' of the parameter list in the source
    size_t params_close = 0;  ///< offset of its matching ')'
    size_t body_open = 0;     ///< offset of the body's '{' (after any attributes between ')' and it)
    bool no_params = false;   ///< the list holds nothing but `void` (comments and whitespace aside)
    size_t keyword = 0;       ///< offset of its RT_KERNEL
    bool is_template = false; ///< `template <...> RT_KERNEL void name(...)`: a kernel only through RT_KERNEL_INSTANTIATE
};

/// `RT_KERNEL_INSTANTIATE(name, expression);` at file scope: the kernel `name` is the instantiation `expression`
/// (e.g. `axpy<float>`) of the kernel template `templ`.
struct Instantiation {
    std::string name;
    std::string expression;  ///< as written, whitespace runs made one space
    std::string templ;
};
/// The kernel instantiations of `source`. Refused (INVALID_VALUE, with the line): a malformed one, one not at file
/// scope, one whose template is not a kernel template of `kernels`, a name used twice (with the kernels' names).
std::vector<Instantiation> scan_instantiations(const std::string& source, const std::vector<KernelDecl>& kernels);

/// The names of the module-scope variables `RT_GLOBAL type name[dims] = init;` of `source`, in source order.
/// Refused (INVALID_VALUE, with the line): one not at file scope, several names in one declaration, a const or
/// constexpr one (the host writes globals), a name starting with rt_ (the runtime's).
std::vector<std::string> scan_globals(const std::string& source);

/// The kernel definitions of `source`, in source order (a declaration without a body is not one). A name defined
/// twice: rt::Error(INVALID_VALUE) (kernels cannot be overloaded: a name is what rtModuleGetFunction looks up on every
/// backend); `noexcept`: INVALID_VALUE. Kernels must be written out: one produced by a macro is not found.
std::vector<KernelDecl> scan_kernels(const std::string& source);
/// The names of the kernels of scan_kernels(source) that are not templates.
std::vector<std::string> find_kernel_names(const std::string& source);

/// `#line <line> "<name>"` with the name escaped, and a newline.
std::string line_directive(const std::string& name, size_t line);

/// A source's `#include` lines, split from the rest so a target can place them outside its wrapper: `includes`
/// holds them (each after a #line giving its own position) — the includes at file scope, the conditional blocks at
/// file scope made only of directives that hold one (`#ifdef __CUDACC__` / `#include <cuda_fp16.h>` / `#endif`),
/// and the file-scope #define/#undef lines before the last of those — and `body` the source with each such line
/// left blank (the line numbers of the rest do not change). Directives inside comments are not seen. An include
/// of the prelude itself (runtime/kernel.h) is dropped: every target includes it first.
struct SplitSource {
    std::string includes;
    std::string body;
};
SplitSource split_includes(const std::string& source, const std::string& name);

/// What a target builds: the user's source as the front end read it.
struct Program {
    std::string source;               ///< verbatim
    std::string name;                 ///< the file name diagnostics and rt_assert report (via #line)
    std::string option_text;          ///< as given (for messages)
    std::vector<std::string> options; ///< parse_options(option_text)
    std::vector<KernelDecl> kernels;  ///< kernels and kernel templates
    std::vector<Instantiation> instantiations;
    std::vector<std::string> globals; ///< scan_globals(source)
    /// What a module of this program exports, each as its name and the member or expression a target calls: the
    /// kernels that are not templates (name, name), then the instantiations (name, expression). At least one.
    struct EntryPoint {
        std::string name, expression;
    };
    std::vector<EntryPoint> entry_points() const;
    /// The names of entry_points().
    std::vector<std::string> kernel_names() const;
    /// True if the source includes a file other than the prelude (whose contents a cache key does not cover).
    bool includes_files() const;
};

/// Reads a source: validates the options and finds the kernels. No kernel, or a bad option: INVALID_VALUE.
Program read_program(const std::string& source, const std::string& options, const std::string& name = "kernel_source");

/// "a, b, c".
std::string join(const std::vector<std::string>& items, const char* separator = ", ");

}  // namespace rt::kernels
