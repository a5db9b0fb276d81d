// The kernel dialect's front end: option rules, kernel discovery (outside comments and literals), include splitting.
#include "kernels/dialect.hpp"

#include <cctype>

#include "core/error.hpp"

namespace rt::kernels {

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

std::vector<KernelDecl> scan_kernels(const std::string& source) {
    const std::string code = code_only(source);
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
        skip_ws(p);
        k.body_open = p < code.size() && code[p] == '{' ? p : std::string::npos;
        for (const KernelDecl& other : kernels)
            if (other.name == k.name)
                fail(RT_ERROR_INVALID_VALUE, "kernel '%s' is defined more than once (kernels cannot be overloaded)",
                     k.name.c_str());
        kernels.push_back(std::move(k));
    }
    return kernels;
}

std::vector<std::string> find_kernel_names(const std::string& source) {
    std::vector<std::string> names;
    for (const KernelDecl& k : scan_kernels(source)) names.push_back(k.name);
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

SplitSource split_includes(const std::string& source, const std::string& name) {
    SplitSource out;
    out.body.reserve(source.size() + 64);
    size_t line_no = 1, pos = 0;
    std::string target;
    while (pos < source.size()) {
        size_t end = source.find('\n', pos);
        if (end == std::string::npos) end = source.size();
        std::string line = source.substr(pos, end - pos);
        if (include_target(line, target)) {
            if (!is_prelude_include(target)) {
                out.includes += line_directive(name, line_no);
                out.includes += line + "\n";
            }
            out.body += "\n";
        } else {
            out.body += line + "\n";
        }
        pos = end + 1;
        ++line_no;
    }
    return out;
}

std::vector<std::string> Program::kernel_names() const {
    std::vector<std::string> names;
    for (const KernelDecl& k : kernels) names.push_back(k.name);
    return names;
}

Program read_program(const std::string& source, const std::string& options, const std::string& name) {
    Program p;
    p.options = parse_options(options);
    p.kernels = scan_kernels(source);
    if (p.kernels.empty())
        fail(RT_ERROR_INVALID_VALUE,
             "no kernel in source '%s': a kernel is declared as `RT_KERNEL void name(parameters) { … }`", name.c_str());
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
