// trace_json.hpp — reading a trace file in tests: a small JSON reader, the file's events, selections by phase and
// category, a track's tid by name (test_trace.cpp, test_trace_cuda_fake.cpp).
#pragma once

#include <unistd.h>

#include <cctype>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace rt_test::trace_json {

struct Json {
    enum Type { null, boolean, number, string, array, object } type = null;
    bool b = false;
    double n = 0;
    std::string s;
    std::vector<Json> items;
    std::map<std::string, Json> fields;

    bool has(const std::string& k) const { return type == object && fields.count(k) != 0; }
    const Json& operator[](const std::string& k) const {
        static const Json none;
        auto it = fields.find(k);
        return it == fields.end() ? none : it->second;
    }
    const Json& operator[](size_t i) const { return items.at(i); }
    std::string str() const { return s; }
};

class Parser {
public:
    explicit Parser(const std::string& text) : t_(text) {}
    Json parse() {
        Json v = value();
        ws();
        if (i_ != t_.size()) throw std::runtime_error("trailing text at " + std::to_string(i_));
        return v;
    }

private:
    void ws() {
        while (i_ < t_.size() && std::isspace(static_cast<unsigned char>(t_[i_]))) ++i_;
    }
    char peek() {
        ws();
        if (i_ >= t_.size()) throw std::runtime_error("unexpected end");
        return t_[i_];
    }
    void expect(char c) {
        if (peek() != c) throw std::runtime_error(std::string("expected ") + c + " at " + std::to_string(i_));
        ++i_;
    }
    Json value() {
        const char c = peek();
        Json v;
        if (c == '{') {
            v.type = Json::object;
            ++i_;
            if (peek() == '}') { ++i_; return v; }
            for (;;) {
                Json k = value();
                if (k.type != Json::string) throw std::runtime_error("key is not a string");
                expect(':');
                v.fields[k.s] = value();
                if (peek() == ',') { ++i_; continue; }
                expect('}');
                return v;
            }
        }
        if (c == '[') {
            v.type = Json::array;
            ++i_;
            if (peek() == ']') { ++i_; return v; }
            for (;;) {
                v.items.push_back(value());
                if (peek() == ',') { ++i_; continue; }
                expect(']');
                return v;
            }
        }
        if (c == '"') {
            v.type = Json::string;
            ++i_;
            while (i_ < t_.size() && t_[i_] != '"') {
                if (t_[i_] == '\\') {
                    ++i_;
                    if (i_ >= t_.size()) break;
                    if (t_[i_] == 'u') {
                        v.s += static_cast<char>(std::stoi(t_.substr(i_ + 1, 4), nullptr, 16));
                        i_ += 4;
                    } else {
                        v.s += t_[i_] == 'n' ? '\n' : t_[i_];
                    }
                } else {
                    v.s += t_[i_];
                }
                ++i_;
            }
            expect('"');
            return v;
        }
        if (t_.compare(i_, 4, "true") == 0) { i_ += 4; v.type = Json::boolean; v.b = true; return v; }
        if (t_.compare(i_, 5, "false") == 0) { i_ += 5; v.type = Json::boolean; return v; }
        if (t_.compare(i_, 4, "null") == 0) { i_ += 4; return v; }
        size_t used = 0;
        v.type = Json::number;
        v.n = std::stod(t_.substr(i_, 40), &used);
        if (used == 0) throw std::runtime_error("bad value at " + std::to_string(i_));
        i_ += used;
        return v;
    }
    const std::string& t_;
    size_t i_ = 0;
};

inline std::string read_text(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

/// The events of a trace file. `complete`: the file must end with the closing bracket; else an unterminated array
/// (a killed program's) is accepted as Chrome and Perfetto accept it.
inline std::vector<Json> read_trace(const std::string& path, bool complete = true) {
    std::string text = read_text(path);
    size_t end = text.find_last_not_of(" \n\r\t");
    const bool closed = end != std::string::npos && text[end] == ']';
    // A kill in the middle of a write may cut the last event: it is dropped (only in a file that is not closed).
    if (!complete && !closed && end != std::string::npos && text[end] != '}') text.erase(text.rfind('\n'));
    if (complete && !closed) ADD_FAILURE() << path << " does not end with ']': " << text.substr(text.size() > 200 ? text.size() - 200 : 0);
    if (!closed) text += "\n]";
    Json doc = Parser(text).parse();
    EXPECT_EQ(doc.type, Json::array);
    return doc.items;
}

inline std::vector<const Json*> select(const std::vector<Json>& events, const std::string& ph, const std::string& cat = "") {
    std::vector<const Json*> out;
    for (const Json& e : events)
        if (e["ph"].str() == ph && (cat.empty() || e["cat"].str() == cat)) out.push_back(&e);
    return out;
}

/// The tid of the track named `name` (thread_name metadata), or -1.
inline long track_of(const std::vector<Json>& events, const std::string& name) {
    for (const Json* m : select(events, "M"))
        if ((*m)["name"].str() == "thread_name" && (*m)["args"]["name"].str() == name) return static_cast<long>((*m)["tid"].n);
    return -1;
}

inline std::string temp_path(const std::string& name) {
    return (std::filesystem::temp_directory_path() / ("rt_trace_" + std::to_string(::getpid()) + "_" + name)).string();
}

}  // namespace rt_test::trace_json
