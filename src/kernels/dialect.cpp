// The kernel dialect's front end: option rules, kernel discovery (outside comments and literals), include splitting.
#include "kernels/dialect.hpp"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <iterator>
#include <string>

#include "core/error.hpp"

namespace rt::kernels {

size_t line_of(const std::string& text, size_t offset) {
    size_t line = 1;
    for (size_t i = 0; i < offset && i < text.size(); ++i) line += text[i] == '\n';
    return line;
}

size_t line_offset(const std::string& text, size_t line) {
    size_t p = 0;
    for (size_t l = 1; l < line && p < text.size(); ++l) {
        const size_t nl = text.find('\n', p);
        if (nl == std::string::npos) return text.size();
        p = nl + 1;
    }
    return p;
}

namespace {

bool is_ident_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool is_ident(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

/// The source with comments and string/character literals blanked (same length, newlines kept).
std::string code_only(const std::string& source) {
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
    return code;
}

/// The path inside an #include line; false if the line is not one.
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


// ---------------------------------------------------------------- work-groups

/// The offset of the closing bracket matching the opening one (`{` or `(`) at `open` in `code` (comments, literals
/// and directives blanked); the end of `code` if it is unbalanced (the compiler reports that).
size_t match_bracket(const std::string& code, size_t open) {
    const char o = code[open], c = o == '{' ? '}' : o == '(' ? ')' : ']';
    int depth = 0;
    for (size_t i = open; i < code.size(); ++i) {
        if (code[i] == o) ++depth;
        else if (code[i] == c && --depth == 0) return i;
    }
    return code.size();
}
size_t match_brace(const std::string& code, size_t open) { return match_bracket(code, open); }

/// Whole-word occurrences of `word` in code[from, to).
std::vector<size_t> find_words(const std::string& code, const char* word, size_t from, size_t to) {
    std::vector<size_t> out;
    const size_t n = std::char_traits<char>::length(word);
    for (size_t p = code.find(word, from); p != std::string::npos && p + n <= to; p = code.find(word, p + 1))
        if ((p == 0 || !is_ident(code[p - 1])) && (p + n >= code.size() || !is_ident(code[p + n]))) out.push_back(p);
    return out;
}

size_t skip_space(const std::string& code, size_t p) {
    while (p < code.size() && std::isspace(static_cast<unsigned char>(code[p]))) ++p;
    return p;
}

std::string trim(const std::string& s) {
    size_t b = 0, e = s.size();
    while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
    while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
    return s.substr(b, e - b);
}

/// The end (exclusive) of the statement that starts at `p`: a braced block, or up to its ';' at depth 0.
size_t statement_end(const std::string& code, size_t p) {
    p = skip_space(code, p);
    if (p < code.size() && code[p] == '{') return std::min(code.size(), match_brace(code, p) + 1);
    int depth = 0;
    for (; p < code.size(); ++p) {
        const char c = code[p];
        if (c == '(' || c == '[' || c == '{') ++depth;
        else if (c == ')' || c == ']' || c == '}') --depth;
        else if (c == ';' && depth <= 0) return p + 1;
    }
    return code.size();
}

/// The arrays of one `RT_LOCAL <type> a[..][..], b[..];` (at `p`, the RT_LOCAL): each declarator's type with its
/// bounds, e.g. `float[16][16]`.
void parse_local(const std::string& code, size_t p, const std::string& kernel, std::vector<LocalDecl>& out) {
    const size_t line = line_of(code, p);
    const size_t begin = p + 8, end = statement_end(code, begin);
    std::string text = code.substr(begin, end - begin);
    if (!text.empty() && text.back() == ';') text.pop_back();
    std::vector<std::string> declarators;
    int depth = 0;
    size_t last = 0;
    for (size_t i = 0; i < text.size(); ++i) {
        const char c = text[i];
        if (c == '(' || c == '[' || c == '{' || c == '<') ++depth;
        else if (c == ')' || c == ']' || c == '}' || c == '>') --depth;
        else if (c == '=' && depth == 0)
            fail(RT_ERROR_INVALID_VALUE,
                 "line %zu: the RT_LOCAL array of kernel '%s' has an initializer: local memory takes none (as CUDA's "
                 "__shared__); write it from the work-items, then rt_barrier()", line, kernel.c_str());
        else if (c == ',' && depth == 0) {
            declarators.push_back(text.substr(last, i - last));
            last = i + 1;
        }
    }
    declarators.push_back(text.substr(last));
    std::string type;
    for (size_t d = 0; d < declarators.size(); ++d) {
        const std::string decl = trim(declarators[d]);
        const size_t bracket = std::min(decl.find('['), decl.size());
        size_t name_end = bracket;
        while (name_end > 0 && std::isspace(static_cast<unsigned char>(decl[name_end - 1]))) --name_end;
        size_t name_begin = name_end;
        while (name_begin > 0 && is_ident(decl[name_begin - 1])) --name_begin;
        if (name_begin == name_end || !is_ident_start(decl[name_begin]))
            fail(RT_ERROR_INVALID_VALUE,
                 "line %zu: kernel '%s': expected `RT_LOCAL <type> <name>[<size>]...;`", line, kernel.c_str());
        if (d == 0) type = trim(decl.substr(0, name_begin));
        if (type.empty())
            fail(RT_ERROR_INVALID_VALUE, "line %zu: kernel '%s': the RT_LOCAL array has no type", line, kernel.c_str());
        out.push_back(LocalDecl{type + decl.substr(bracket), line});
    }
}

using Range = std::pair<size_t, size_t>;  // [first, second)

bool in_ranges(const std::vector<Range>& ranges, size_t p) {
    for (const Range& r : ranges)
        if (p >= r.first && p < r.second) return true;
    return false;
}

/// The bodies (from '{' to its '}') of the lambdas in code[from, to): a `[...]` that does not follow an expression
/// (an identifier, `)` or `]`: a subscript), then an optional parameter list and specifiers, then a '{'.
std::vector<Range> lambda_bodies(const std::string& code, size_t from, size_t to) {
    std::vector<Range> out;
    for (size_t p = from; p < to; ++p) {
        if (code[p] != '[') continue;
        if (p + 1 < to && code[p + 1] == '[') {  // an attribute [[...]]
            p = match_bracket(code, p);
            continue;
        }
        size_t b = p;
        while (b > from && std::isspace(static_cast<unsigned char>(code[b - 1]))) --b;
        if (b > 0 && (is_ident(code[b - 1]) || code[b - 1] == ')' || code[b - 1] == ']')) {
            // `return [..]` and the like start a lambda; other words before '[' are an expression being subscripted
            size_t w = b;
            while (w > 0 && is_ident(code[w - 1])) --w;
            const std::string word = code.substr(w, b - w);
            if (word != "return" && word != "co_return" && word != "case") continue;
        }
        size_t q = skip_space(code, match_bracket(code, p) + 1);
        if (q < to && code[q] == '(') q = match_bracket(code, q) + 1;
        int depth = 0;
        for (; q < to; ++q) {  // specifiers and a trailing return type, up to the body
            const char c = code[q];
            if (c == '(' || c == '<' || c == '[') ++depth;
            else if (c == ')' || c == '>' || c == ']') --depth;
            else if (depth <= 0 && (c == ';' || c == ',' || c == '{' || c == '}' || c == '=')) break;
        }
        if (q < to && code[q] == '{') {
            const size_t close = match_brace(code, q);
            out.emplace_back(q, close + 1);
            p = close;
        }
    }
    return out;
}

/// The statements of code[from, to) that a `break` inside them leaves instead of the enclosing block: loops and
/// switches (from their keyword to their end).
std::vector<Range> break_scopes(const std::string& code, size_t from, size_t to) {
    std::vector<Range> out;
    for (const char* w : {"for", "while", "switch", "do"})
        for (size_t p : find_words(code, w, from, to)) {
            size_t q = skip_space(code, p + std::char_traits<char>::length(w));
            if (w[0] != 'd') {
                if (q >= to || code[q] != '(') continue;
                q = match_bracket(code, q) + 1;
            }
            out.emplace_back(p, std::min(to, statement_end(code, q)));
        }
    return out;
}

/// The offset of a declaration of `name` in code[from, to) (`int N = ..`, `struct N {`, `using N = ..`,
/// `typedef .. N;`), or npos: a word before it that is not a keyword of an expression, and one of = ; { [ , : after.
size_t declaration_of(const std::string& code, const std::string& name, size_t from, size_t to) {
    static const char* const kExpressionWords[] = {"return", "case", "sizeof", "alignof", "new", "delete", "else", "do",
                                                   "goto", "throw", "decltype", "typename", "co_return", "not", "and",
                                                   "or", "xor", "bitand", "bitor", "compl"};
    for (size_t p : find_words(code, name.c_str(), from, to)) {
        size_t b = p;
        while (b > from && std::isspace(static_cast<unsigned char>(code[b - 1]))) --b;
        if (b == from || !is_ident(code[b - 1])) continue;
        size_t w = b;
        while (w > from && is_ident(code[w - 1])) --w;
        const std::string before = code.substr(w, b - w);
        if (std::find(std::begin(kExpressionWords), std::end(kExpressionWords), before) != std::end(kExpressionWords))
            continue;
        const size_t n = skip_space(code, p + name.size());
        if (n < to && std::strchr("=;{[,:", code[n]) && !(code[n] == ':' && n + 1 < to && code[n + 1] == ':')) return p;
    }
    return std::string::npos;
}

/// The checks of scan_kernels' comment (dialect.hpp), and each kernel's form and local arrays.
void analyse_groups(const std::string& code, std::vector<KernelDecl>& kernels) {
    static const char* const kWords[] = {"rt_barrier", "rt_items", "RT_LOCAL"};
    auto inside_kernel = [&](size_t p) -> KernelDecl* {
        for (KernelDecl& k : kernels)
            if (p > k.body_open && p < k.body_close) return &k;
        return nullptr;
    };
    for (const char* w : kWords)
        for (size_t p : find_words(code, w, 0, code.size()))
            if (!inside_kernel(p))
                fail(RT_ERROR_INVALID_VALUE,
                     "line %zu: %s is used outside a kernel body: barriers, rt_items blocks and local memory belong to "
                     "a RT_KERNEL's own body (not to RT_DEVICE or other functions)",
                     line_of(code, p), std::string(w) == "RT_LOCAL" ? "RT_LOCAL" : (std::string(w) + "()").c_str());
    for (KernelDecl& k : kernels) {
        const size_t from = k.body_open + 1, to = k.body_close;
        const std::vector<size_t> barriers = find_words(code, "rt_barrier", from, to);
        const std::vector<size_t> items = find_words(code, "rt_items", from, to);
        if (!barriers.empty() && !items.empty())
            fail(RT_ERROR_INVALID_VALUE,
                 "kernel '%s' uses both rt_items blocks (line %zu) and rt_barrier() (line %zu): a kernel takes one form "
                 "(rt_items blocks end with a barrier of their own)",
                 k.name.c_str(), line_of(code, items[0]), line_of(code, barriers[0]));
        k.form = !items.empty() ? GroupForm::items : !barriers.empty() ? GroupForm::barrier : GroupForm::none;
        const std::vector<Range> lambdas = lambda_bodies(code, from, to);
        std::vector<Range> blocks;
        for (size_t p : items) {
            size_t q = skip_space(code, p + 8);
            size_t close = q < to && code[q] == '(' ? code.find(')', q) : std::string::npos;
            if (close == std::string::npos || close >= to)
                fail(RT_ERROR_INVALID_VALUE, "line %zu: kernel '%s': expected `rt_items(name) { ... }`",
                     line_of(code, p), k.name.c_str());
            const size_t end = statement_end(code, close + 1);
            blocks.emplace_back(close + 1, end);
            for (const char* w : {"rt_items", "return", "RT_LOCAL"})
                for (size_t inner : find_words(code, w, close + 1, end)) {
                    if (w[0] == 'r' && w[1] == 'e' && in_ranges(lambdas, inner)) continue;  // a lambda's own return
                    fail(RT_ERROR_INVALID_VALUE,
                         "line %zu: kernel '%s': %s inside the rt_items block of line %zu (%s)", line_of(code, inner),
                         k.name.c_str(), w, line_of(code, p),
                         std::string(w) == "rt_items" ? "rt_items blocks do not nest"
                         : std::string(w) == "return" ? "a block runs for every item in turn: use `continue` to end an item's turn"
                                                      : "declare local arrays in the kernel's group code, outside the blocks");
                }
            // A break of the block itself would end the loop over the items on cpu and skip the barrier on CUDA.
            const std::vector<Range> scopes = break_scopes(code, close + 1, end);
            for (size_t b : find_words(code, "break", close + 1, end))
                if (!in_ranges(scopes, b) && !in_ranges(lambdas, b))
                    fail(RT_ERROR_INVALID_VALUE,
                         "line %zu: kernel '%s': break inside the rt_items block of line %zu, outside a loop or switch "
                         "of the block (a block runs for every item in turn: use `continue` to end an item's turn)",
                         line_of(code, b), k.name.c_str(), line_of(code, p));
        }
        // Group code is uniform: the work-item ids have no single value there (on cpu it runs once per group).
        if (k.form == GroupForm::items)
            for (const char* w : {"get_local_id", "get_global_id", "get_local_linear_id", "get_global_linear_id"})
                for (size_t p : find_words(code, w, from, to))
                    if (!in_ranges(blocks, p) && !in_ranges(lambdas, p))
                        fail(RT_ERROR_INVALID_VALUE,
                             "line %zu: kernel '%s': %s() in group code, outside its rt_items blocks: group code runs "
                             "once per group on cpu (in every thread on CUDA) and must be uniform; read the work-item ids "
                             "inside a block (`rt_items(it) { ... get_local_id(0) ... }`)",
                             line_of(code, p), k.name.c_str(), w);
        for (size_t p : find_words(code, "RT_LOCAL", from, to)) {
            const size_t first = k.locals.size();
            parse_local(code, p, k.name, k.locals);
            // The cpu target sizes the arrays outside the kernel: names of the kernel body are not visible there.
            for (size_t l = first; l < k.locals.size(); ++l) {
                const std::string& type = k.locals[l].type;
                for (size_t i = 0; i < type.size();) {
                    if (!is_ident_start(type[i]) || (i > 0 && is_ident(type[i - 1]))) {
                        ++i;
                        continue;
                    }
                    size_t j = i;
                    while (j < type.size() && is_ident(type[j])) ++j;
                    const std::string name = type.substr(i, j - i);
                    const size_t decl = declaration_of(code, name, from, p);
                    if (decl != std::string::npos)
                        fail(RT_ERROR_INVALID_VALUE,
                             "line %zu: kernel '%s': the RT_LOCAL array of type `%s` uses '%s', declared in the kernel "
                             "body (line %zu): the element types and bounds of local arrays must be known outside the "
                             "kernel (file-scope static constexpr constants, structs or macros, or template parameters)",
                             k.locals[l].line, k.name.c_str(), type.c_str(), name.c_str(), line_of(code, decl));
                    i = j;
                }
            }
        }
    }
}

/// A #define whose replacement uses rt_barrier, rt_items or RT_LOCAL is refused: the front end does not expand
/// macros, so a kernel using the macro would not be seen as using barriers (cpu: no fibers; CUDA: no whole-group
/// check) or local memory (its bytes not counted).
void refuse_group_macros(const std::string& source) {
    const std::string code = code_only(source);
    for (size_t line = 0; line < code.size();) {
        size_t end = code.find('\n', line);
        if (end == std::string::npos) end = code.size();
        const size_t first = code.find_first_not_of(" \t", line);
        size_t last = end;  // the directive with its '\' continuations
        while (last < code.size() && last > line && source[last - 1] == '\\') {
            const size_t next = code.find('\n', last + 1);
            last = next == std::string::npos ? code.size() : next;
        }
        if (first < end && code[first] == '#') {
            size_t d = skip_space(code, first + 1);
            if (code.compare(d, 6, "define") == 0 && d + 6 < code.size() && !is_ident(code[d + 6])) {
                size_t n = d + 6;
                while (n < last && (code[n] == ' ' || code[n] == '\t')) ++n;
                size_t e = n;
                while (e < last && is_ident(code[e])) ++e;
                for (const char* w : {"rt_barrier", "rt_items", "RT_LOCAL"})
                    for (size_t p : find_words(code, w, e, last))
                        fail(RT_ERROR_INVALID_VALUE,
                             "line %zu: the macro '%s' uses %s: write rt_barrier(), rt_items blocks and RT_LOCAL arrays "
                             "out in the kernel body (the front end does not expand macros, so a kernel using the macro "
                             "would not be prepared for them)",
                             line_of(code, p), code.substr(n, e - n).c_str(), w);
            }
        }
        line = last + 1;
    }
}
}  // namespace

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
             "kernel compile option '%s' is not accepted: %s (accepted: -O0 -O1 -O2 -O3 -Os -g -fwrapv "
             "-mprefer-vector-width=128|256|512 -DNAME[=VALUE] -UNAME -IDIR)",
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
        // The vector width the cpu compiler's vectoriser prefers (clang's and GCC's option; their x86 default is 256
        // even where the machine has 512-bit vectors). A tuning hint: ignored on cuda and where vectors are narrower.
        if (opt.rfind("-mprefer-vector-width=", 0) == 0) {
            const std::string w = opt.substr(std::strlen("-mprefer-vector-width="));
            if (w != "128" && w != "256" && w != "512") reject(opt, "the width must be 128, 256 or 512");
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

namespace {
/// code_only(source) with the preprocessor directives blanked too (with their '\\' continuations): a kernel written
/// inside a #define is not a kernel of the source until the macro is expanded, which the front end does not do.
std::string declarations_only(const std::string& source) {
    std::string code = code_only(source);
    for (size_t line = 0; line < code.size();) {
        size_t end = code.find('\n', line);
        if (end == std::string::npos) end = code.size();
        size_t first = code.find_first_not_of(" \t", line);
        if (first < end && code[first] == '#') {
            for (;;) {
                const bool continued = end > line && source[end - 1] == '\\';
                for (size_t i = line; i < end; ++i) code[i] = ' ';
                if (!continued || end >= code.size()) break;
                line = end + 1;
                end = code.find('\n', line);
                if (end == std::string::npos) end = code.size();
            }
        }
        line = end + 1;
    }
    return code;
}

/// Offsets of the whole-word occurrences of `word` in `code`, each with the brace depth there.
std::vector<std::pair<size_t, int>> find_words_with_depth(const std::string& code, const std::string& word) {
    std::vector<std::pair<size_t, int>> out;
    int depth = 0;
    for (size_t i = 0; i < code.size(); ++i) {
        const char c = code[i];
        if (c == '{') ++depth;
        else if (c == '}') --depth;
        else if (c == word[0] && code.compare(i, word.size(), word) == 0 && (i == 0 || !is_ident(code[i - 1])) &&
                 (i + word.size() >= code.size() || !is_ident(code[i + word.size()]))) {
            out.emplace_back(i, depth);
            i += word.size() - 1;
        }
    }
    return out;
}

/// The offset of the `template` of a `template <...>` that ends just before `pos` (whitespace between), or npos.
size_t template_header_before(const std::string& code, size_t pos) {
    size_t p = pos;
    while (p > 0 && std::isspace(static_cast<unsigned char>(code[p - 1]))) --p;
    if (p == 0 || code[p - 1] != '>') return std::string::npos;
    int depth = 0;
    size_t q = p;
    while (q > 0) {
        --q;
        if (code[q] == '>') ++depth;
        else if (code[q] == '<' && --depth == 0) break;
    }
    if (depth != 0) return std::string::npos;
    while (q > 0 && std::isspace(static_cast<unsigned char>(code[q - 1]))) --q;
    const bool is_template = q >= 8 && code.compare(q - 8, 8, "template") == 0 && (q == 8 || !is_ident(code[q - 9]));
    return is_template ? q - 8 : std::string::npos;
}

std::string collapse_spaces(const std::string& text) {
    std::string out;
    for (char c : text) {
        const bool space = std::isspace(static_cast<unsigned char>(c));
        if (space && (out.empty() || out.back() == ' ')) continue;
        out += space ? ' ' : c;
    }
    while (!out.empty() && out.back() == ' ') out.pop_back();
    return out;
}
}  // namespace

std::vector<KernelDecl> scan_kernels(const std::string& source) {
    const std::string code = declarations_only(source);
    std::vector<KernelDecl> kernels;
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
        KernelDecl k;
        k.name = code.substr(start, p - start);
        k.template_start = template_header_before(code, pos);
        k.is_template = k.template_start != std::string::npos;
        skip_ws(p);
        if (p >= code.size() || code[p] != '(') continue;
        k.params_open = p;
        int depth = 0;
        for (; p < code.size(); ++p) {
            if (code[p] == '(') ++depth;
            else if (code[p] == ')' && --depth == 0) break;
        }
        if (p >= code.size()) continue;  // unbalanced: the compiler reports it
        k.params_close = p++;
        {
            size_t b = k.params_open + 1, e = k.params_close;
            while (b < e && std::isspace(static_cast<unsigned char>(code[b]))) ++b;
            while (e > b && std::isspace(static_cast<unsigned char>(code[e - 1]))) --e;
            k.no_params = b == e || code.compare(b, e - b, "void") == 0;
        }
        // The body is the first '{' at parenthesis depth 0 (attributes may come first); a ';' first makes this a
        // declaration, which is not a kernel of the source (its definition is).
        int depth_after = 0;
        size_t q = p;
        for (; q < code.size(); ++q) {
            if (code[q] == '(') ++depth_after;
            else if (code[q] == ')') --depth_after;
            else if (depth_after == 0 && (code[q] == '{' || code[q] == ';')) break;
        }
        if (q >= code.size() || code[q] == ';') continue;
        k.body_open = q;
        k.start = pos;
        k.body_close = match_brace(code, q);
        for (size_t w = code.find("noexcept", p); w != std::string::npos && w < q; w = code.find("noexcept", w + 8))
            if ((w == 0 || !is_ident(code[w - 1])) && (w + 8 >= code.size() || !is_ident(code[w + 8])))
                fail(RT_ERROR_INVALID_VALUE,
                     "kernel '%s' is declared noexcept, which the dialect does not take (kernels never throw: remove it)",
                     k.name.c_str());
        for (const KernelDecl& other : kernels)
            if (other.name == k.name)
                fail(RT_ERROR_INVALID_VALUE, "kernel '%s' is defined more than once (kernels cannot be overloaded)",
                     k.name.c_str());
        kernels.push_back(std::move(k));
    }
    refuse_group_macros(source);
    analyse_groups(code, kernels);
    return kernels;
}

std::vector<std::string> find_kernel_names(const std::string& source) {
    std::vector<std::string> names;
    for (const KernelDecl& k : scan_kernels(source))
        if (!k.is_template) names.push_back(k.name);
    return names;
}

std::string line_directive(const std::string& name, size_t line) {
    std::string out = "#line " + std::to_string(line) + " \"";
    for (char c : name) {
        if (c == '"' || c == '\\') out += '\\';
        out += c == '\n' ? ' ' : c;
    }
    return out + "\"\n";
}

namespace {

/// The directive a line starts with ("include", "if", "define", ...), "" for a line that is not one. `code` is the
/// line with comments and literals blanked, so a directive inside a comment is not one.
std::string directive_of(const std::string& code) {
    size_t i = code.find_first_not_of(" \t");
    if (i == std::string::npos || code[i] != '#') return {};
    i = code.find_first_not_of(" \t", i + 1);
    if (i == std::string::npos) return "#";  // a null directive
    size_t e = i;
    while (e < code.size() && is_ident(code[e])) ++e;
    return code.substr(i, e - i);
}

bool is_blank(const std::string& code) { return code.find_first_not_of(" \t\r") == std::string::npos; }

std::vector<std::string> split_lines(const std::string& text) {
    std::vector<std::string> lines;
    size_t pos = 0;
    while (pos < text.size()) {
        size_t end = text.find('\n', pos);
        if (end == std::string::npos) end = text.size();
        lines.push_back(text.substr(pos, end - pos));
        pos = end + 1;
    }
    return lines;
}

}  // namespace

SplitSource split_includes(const std::string& source, const std::string& name) {
    const std::vector<std::string> lines = split_lines(source), code = split_lines(code_only(source));
    const size_t n = lines.size();
    // What moves: every include at file scope; a conditional block at file scope made of directives only that holds
    // an include (`#ifdef __CUDACC__ / #include <cuda_fp16.h> / #endif`), whole; and the #define/#undef lines at
    // file scope before the last include that moves, so the headers see the macros they saw in the source. Lines
    // continued with '\' go with their directive.
    std::vector<char> moves(n, 0);
    std::vector<std::string> kind(n);
    for (size_t i = 0; i < n; ++i) kind[i] = directive_of(code[i]);
    auto continued = [&](size_t i) { return !lines[i].empty() && lines[i].back() == '\\'; };
    size_t last_moved = 0;
    bool any = false;
    int depth = 0;
    for (size_t i = 0; i < n; ++i) {
        const std::string& k = kind[i];
        if (depth == 0 && (k == "if" || k == "ifdef" || k == "ifndef")) {
            size_t j = i;
            int d = 0;
            bool directives_only = true, has_include = false;
            for (; j < n; ++j) {
                const std::string& kj = kind[j];
                if (kj == "if" || kj == "ifdef" || kj == "ifndef") ++d;
                else if (kj == "endif" && --d == 0) break;
                if (kj == "include") has_include = true;
                if (kj.empty() && !is_blank(code[j]) && !(j > 0 && continued(j - 1))) directives_only = false;
            }
            if (j < n && directives_only && has_include) {
                for (size_t m = i; m <= j; ++m) moves[m] = 1;
                last_moved = j;
                any = true;
                i = j;
                continue;
            }
        }
        if (k == "if" || k == "ifdef" || k == "ifndef") ++depth;
        else if (k == "endif" && depth > 0) --depth;
        if (depth == 0 && k == "include") {
            moves[i] = 1;
            last_moved = i;
            any = true;
        }
    }
    if (any) {
        depth = 0;
        for (size_t i = 0; i < last_moved; ++i) {
            const std::string& k = kind[i];
            if (k == "if" || k == "ifdef" || k == "ifndef") ++depth;
            else if (k == "endif" && depth > 0) --depth;
            if (depth == 0 && !moves[i] && (k == "define" || k == "undef"))
                for (size_t m = i; m < n; ++m) {
                    moves[m] = 1;
                    if (!continued(m)) break;
                }
        }
    }
    SplitSource out;
    out.body.reserve(source.size() + 64);
    std::string target;
    for (size_t i = 0; i < n; ++i) {
        if (!moves[i]) {
            out.body += lines[i] + "\n";
            continue;
        }
        out.body += "\n";  // the line stays, blank: the numbering of the rest is unchanged
        if (kind[i] == "include" && include_target(lines[i], target) && is_prelude_include(target)) continue;
        if (i == 0 || !moves[i - 1] || continued(i - 1) == false) out.includes += line_directive(name, i + 1);
        out.includes += lines[i] + "\n";
    }
    return out;
}

bool Program::includes_files() const { return !split_includes(source, name).includes.empty(); }

std::vector<Program::EntryPoint> Program::entry_points() const {
    std::vector<EntryPoint> out;
    for (size_t k = 0; k < kernels.size(); ++k)
        if (!kernels[k].is_template) out.push_back({kernels[k].name, kernels[k].name, k});
    for (const Instantiation& i : instantiations)
        for (size_t k = 0; k < kernels.size(); ++k)
            if (kernels[k].is_template && kernels[k].name == i.templ) out.push_back({i.name, i.expression, k});
    return out;
}

std::vector<std::string> Program::kernel_names() const {
    std::vector<std::string> names;
    for (const EntryPoint& e : entry_points()) names.push_back(e.name);
    return names;
}

std::vector<Instantiation> scan_instantiations(const std::string& source, const std::vector<KernelDecl>& kernels) {
    static const std::string kWord = "RT_KERNEL_INSTANTIATE";
    const std::string code = declarations_only(source);
    std::vector<std::string> templates, names;
    for (const KernelDecl& k : kernels) (k.is_template ? templates : names).push_back(k.name);
    std::vector<Instantiation> out;
    for (const auto& [pos, depth] : find_words_with_depth(code, kWord)) {
        const size_t line = line_of(code, pos);
        auto refuse = [&](const std::string& why) {
            fail(RT_ERROR_INVALID_VALUE, "RT_KERNEL_INSTANTIATE at line %zu: %s (expected `RT_KERNEL_INSTANTIATE(name, "
                 "template<arguments>);` at file scope, e.g. RT_KERNEL_INSTANTIATE(axpy_f32, axpy<float>);)", line,
                 why.c_str());
        };
        if (depth != 0) refuse("it is not at file scope");
        size_t open = pos + kWord.size();
        while (open < code.size() && std::isspace(static_cast<unsigned char>(code[open]))) ++open;
        if (open >= code.size() || code[open] != '(') refuse("no argument list follows");
        size_t close = open, comma = std::string::npos;
        int d = 0;
        for (; close < code.size(); ++close) {
            if (code[close] == '(') ++d;
            else if (code[close] == ')' && --d == 0) break;
            else if (code[close] == ',' && d == 1 && comma == std::string::npos) comma = close;
        }
        if (close >= code.size()) refuse("its argument list is not closed");
        if (comma == std::string::npos) refuse("it takes two arguments, the kernel's name and the instantiation");
        Instantiation inst;
        inst.name = collapse_spaces(code.substr(open + 1, comma - open - 1));
        inst.expression = collapse_spaces(code.substr(comma + 1, close - comma - 1));
        bool ident = !inst.name.empty() && is_ident_start(inst.name[0]);
        for (char c : inst.name) ident = ident && is_ident(c);
        if (!ident) refuse("the name '" + inst.name + "' is not an identifier");
        const size_t lt = inst.expression.find('<');
        inst.templ = collapse_spaces(inst.expression.substr(0, lt));
        if (lt == std::string::npos || inst.expression.back() != '>')
            refuse("'" + inst.expression + "' is not a template with its arguments (e.g. axpy<float>)");
        if (std::find(templates.begin(), templates.end(), inst.templ) == templates.end())
            refuse("'" + inst.templ + "' is not a kernel template of the source (its kernel templates: " +
                   (templates.empty() ? std::string("none") : join(templates)) + ")");
        if (std::find(names.begin(), names.end(), inst.name) != names.end())
            refuse("the kernel name '" + inst.name + "' is already taken (a kernel or an instantiation has it)");
        names.push_back(inst.name);
        out.push_back(std::move(inst));
    }
    return out;
}

std::vector<std::string> scan_globals(const std::string& source) {
    const std::string code = declarations_only(source);
    std::vector<std::string> out;
    for (const auto& [pos, depth] : find_words_with_depth(code, "RT_GLOBAL")) {
        const size_t line = line_of(code, pos);
        auto refuse = [&](const std::string& why) {
            fail(RT_ERROR_INVALID_VALUE, "RT_GLOBAL at line %zu: %s (expected one variable at file scope: `RT_GLOBAL "
                 "type name = value;` or `RT_GLOBAL type name[count];`)", line, why.c_str());
        };
        if (depth != 0) refuse("it is not at file scope (module globals are declared outside functions and structs)");
        // The declarator runs to the initialiser or the end of the declaration; the name is the last identifier
        // before its first '[' (an array) or before its end.
        size_t end = pos + 9, bracket = std::string::npos;
        int parens = 0;
        for (; end < code.size(); ++end) {
            const char c = code[end];
            if (c == '(' || c == '<') ++parens;
            else if (c == ')' || c == '>') --parens;
            else if (parens == 0 && (c == '=' || c == ';' || c == '{')) break;
            else if (parens == 0 && c == ',') refuse("it declares several variables: declare one per RT_GLOBAL");
            else if (c == '[' && bracket == std::string::npos) bracket = end;
        }
        const std::string decl = code.substr(pos + 9, (bracket == std::string::npos ? end : bracket) - pos - 9);
        std::vector<std::string> words;
        for (size_t i = 0; i < decl.size();) {
            if (is_ident_start(decl[i])) {
                size_t j = i;
                while (j < decl.size() && is_ident(decl[j])) ++j;
                words.push_back(decl.substr(i, j - i));
                i = j;
            } else {
                ++i;
            }
        }
        if (words.size() < 2) refuse("no type and name follow it");
        for (const std::string& w : words)
            if (w == "const" || w == "constexpr")
                refuse("'" + words.back() + "' is " + w + ", but the host writes module globals (use `static constexpr` "
                       "for a constant)");
        if (words.back().rfind("rt_", 0) == 0) refuse("the name '" + words.back() + "' starts with rt_, the runtime's");
        if (std::find(out.begin(), out.end(), words.back()) != out.end())
            refuse("'" + words.back() + "' is declared twice");
        out.push_back(words.back());
    }
    return out;
}

Program read_program(const std::string& source, const std::string& options, const std::string& name) {
    Program p;
    p.options = parse_options(options);
    for (const std::string& o : p.options)  // (as refuse_group_macros: the front end would not see them)
        if (o.compare(0, 2, "-D") == 0)
            for (const char* w : {"rt_barrier", "rt_items", "RT_LOCAL"})
                if (!find_words(o, w, 2, o.size()).empty())
                    fail(RT_ERROR_INVALID_VALUE,
                         "kernel compile option '%s' is not accepted: a macro may not expand to %s (write rt_barrier(), "
                         "rt_items blocks and RT_LOCAL arrays out in the kernel body)", o.c_str(), w);
    p.kernels = scan_kernels(source);
    p.instantiations = scan_instantiations(source, p.kernels);
    p.globals = scan_globals(source);
    if (p.entry_points().empty()) {
        std::vector<std::string> templates;
        for (const KernelDecl& k : p.kernels) templates.push_back(k.name);
        if (!templates.empty())
            fail(RT_ERROR_INVALID_VALUE,
                 "no kernel in source '%s': its kernel templates (%s) are never instantiated (add "
                 "`RT_KERNEL_INSTANTIATE(name, %s<arguments>);`)", name.c_str(), join(templates).c_str(),
                 templates[0].c_str());
        fail(RT_ERROR_INVALID_VALUE,
             "no kernel in source '%s': a kernel is declared as `RT_KERNEL void name(parameters) { … }`", name.c_str());
    }
    p.source = source;
    p.name = name;
    p.option_text = options;
    return p;
}

std::string join(const std::vector<std::string>& items, const char* separator) {
    std::string out;
    for (size_t i = 0; i < items.size(); ++i) out += (i ? separator : "") + items[i];
    return out;
}

}  // namespace rt::kernels
