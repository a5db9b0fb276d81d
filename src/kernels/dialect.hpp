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

/// How the work-items of a kernel's groups cooperate (kernel.h, "Work-groups"): not at all, through `rt_items`
/// blocks (the fast form: on cpu the kernel runs once per group), or through `rt_barrier()` (the flat form: on cpu
/// each item is a fiber). Both forms need launches of whole work-groups.
enum class GroupForm { none, items, barrier };

/// An `RT_LOCAL` array of a kernel: `type` is its type with its bounds (`float[16][16]`), spelled as in the source.
struct LocalDecl {
    std::string type;
    size_t line = 0;  ///< of the RT_LOCAL, 1-based
};

/// A kernel of a source: `RT_KERNEL void name(parameters) { body }`, found outside comments and literals.
struct KernelDecl {
    std::string name;
    size_t params_open = 0;   ///< offset of the '(' of the parameter list in the source
    size_t params_close = 0;  ///< offset of its matching ')'
    size_t body_open = 0;     ///< offset of the body's '{' (after any attributes between ')' and it)
    bool no_params = false;   ///< the list holds nothing but `void` (comments and whitespace aside)
    bool is_template = false; ///< `template <...> RT_KERNEL void name(...)`: a kernel only through RT_KERNEL_INSTANTIATE
    size_t template_start = std::string::npos;  ///< offset of its `template` (its header runs from there to start)
    // ---- work-groups
    size_t start = 0;         ///< offset of its RT_KERNEL
    size_t body_close = 0;    ///< offset of the body's matching '}' (the source's end if unbalanced)
    GroupForm form = GroupForm::none;
    std::vector<LocalDecl> locals;  ///< its RT_LOCAL arrays, in source order
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
/// Work-group rules, checked here once for every target (INVALID_VALUE naming the line): rt_barrier, rt_items and
/// RT_LOCAL only in kernel bodies, and in no #define (nor -D option: read_program); a kernel uses rt_items or
/// rt_barrier, not both; rt_items blocks do not nest and hold no `return` (but a lambda's), RT_LOCAL, or `break`
/// outside a loop or switch of the block; the group code of an rt_items kernel (outside its blocks and lambdas) does
/// not call get_local_id, get_global_id, get_local_linear_id or get_global_linear_id; RT_LOCAL arrays take no
/// initializer, and their types use no name declared in the kernel body.
std::vector<KernelDecl> scan_kernels(const std::string& source);
/// The names of the kernels of scan_kernels(source) that are not templates.
std::vector<std::string> find_kernel_names(const std::string& source);

/// The 1-based line of `offset` in `text`, and the offset where 1-based `line` starts (text.size() past the end).
size_t line_of(const std::string& text, size_t offset);
size_t line_offset(const std::string& text, size_t line);

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
        size_t kernel = 0;  ///< its definition: kernels[kernel] (the template of an instantiation)
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
