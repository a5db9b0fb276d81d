// acl_init.cpp — aclInit / aclFinalize (the configuration file, repeated init and finalize), versions, the run mode,
// the SoC name, and the base helpers of acl_base.h (aclFloat16 conversion, aclDataTypeSize).
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include "acl/acl.h"
#include "acl_internal.hpp"

namespace acl {

namespace {

std::mutex g_init_mutex;       // serialises aclInit / aclFinalize
bool g_finalized_once = false; // an aclFinalize has run: a further one is a repeat, not a call before aclInit
std::vector<void (*)()> g_finalizers;

/// Checks the configuration file: readable, and a JSON object (strings, escapes and nesting respected). Returns
/// ACL_SUCCESS and sets *has_settings when the object is not empty.
aclError check_config(const char* path, bool* has_settings) {
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        return fail(ACL_ERROR_INVALID_FILE, "aclInit", "cannot read the configuration file '%s': %s", path,
                    std::strerror(errno));
    }
    std::stringstream buffer;
    buffer << in.rdbuf();
    const std::string text = buffer.str();
    size_t i = 0;
    auto skip_space = [&] {
        while (i < text.size() && (text[i] == ' ' || text[i] == '\t' || text[i] == '\n' || text[i] == '\r')) ++i;
    };
    skip_space();
    if (i == text.size()) {
        *has_settings = false;  // an empty file configures nothing
        return ACL_SUCCESS;
    }
    if (text[i] != '{') {
        return fail(ACL_ERROR_PARSE_FILE, "aclInit", "the configuration file '%s' is not a JSON object (it starts "
                    "with '%c', expected '{')", path, text[i]);
    }
    int depth = 0;
    bool in_string = false;
    size_t end = std::string::npos;
    for (size_t j = i; j < text.size(); ++j) {
        char c = text[j];
        if (in_string) {
            if (c == '\\') ++j;
            else if (c == '"') in_string = false;
            continue;
        }
        if (c == '"') in_string = true;
        else if (c == '{' || c == '[') ++depth;
        else if (c == '}' || c == ']') {
            if (--depth == 0) {
                end = j;
                break;
            }
        }
    }
    if (end == std::string::npos) {
        return fail(ACL_ERROR_PARSE_FILE, "aclInit", "the configuration file '%s' is not a complete JSON object "
                    "(unbalanced braces or an unterminated string)", path);
    }
    i = end + 1;
    skip_space();
    if (i != text.size()) {
        return fail(ACL_ERROR_PARSE_FILE, "aclInit", "the configuration file '%s' has text after its JSON object "
                    "(at byte %zu)", path, i);
    }
    size_t k = text.find('{') + 1;
    while (k < end && (text[k] == ' ' || text[k] == '\t' || text[k] == '\n' || text[k] == '\r')) ++k;
    *has_settings = k < end;
    return ACL_SUCCESS;
}

uint32_t float_bits(float f) {
    uint32_t u;
    std::memcpy(&u, &f, sizeof u);
    return u;
}

}  // namespace

void on_finalize(void (*fn)()) noexcept {
    std::lock_guard lock(g_init_mutex);
    for (auto f : g_finalizers)
        if (f == fn) return;
    try {
        g_finalizers.push_back(fn);
    } catch (...) {
    }
}

}  // namespace acl

extern "C" {

aclError aclInit(const char* configPath) {
    std::lock_guard lock(acl::g_init_mutex);
    if (acl::initialised())
        return acl::fail(ACL_ERROR_REPEAT_INITIALIZE, "aclInit", "AscendCL is initialised already (aclFinalize first)");
    if (configPath != nullptr && configPath[0] != '\0') {
        bool has_settings = false;
        if (aclError e = acl::check_config(configPath, &has_settings); e != ACL_SUCCESS) return e;
        if (has_settings) {
            std::fprintf(stderr, "aclInit: the settings in '%s' (dump, profiling, error-message mode, ...) are not "
                         "acted on by this AscendCL implementation\n", configPath);
        }
    }
    if (rtError_t e = rtInit(nullptr); e != RT_SUCCESS) return acl::fail_rt(e, "aclInit");
    acl::init_callbacks();
    acl::g_initialised.store(true, std::memory_order_release);
    return ACL_SUCCESS;
}

aclError aclFinalize(void) {
    std::lock_guard lock(acl::g_init_mutex);
    if (!acl::initialised()) {
        if (acl::g_finalized_once)
            return acl::fail(ACL_ERROR_REPEAT_FINALIZE, "aclFinalize", "AscendCL was finalised already");
        return acl::not_initialised("aclFinalize");
    }
    // From queue context (a host function or a callback's trampoline) the runtime cannot wait for its work: refused
    // before anything changes. A wait with no event is refused for that reason first, and for the handle otherwise.
    if (rtError_t e = rtEventSynchronizeWithTimeout(nullptr, 0); e == RT_ERROR_NOT_PERMITTED) {
        return acl::fail(ACL_ERROR_RT_NO_PERMISSION, "aclFinalize", "called from a host function running on a "
                         "stream: aclFinalize waits for every stream's work, which includes the caller");
    }
    acl::g_initialised.store(false, std::memory_order_release);
    acl::close_report_queues();
    if (rtError_t e = rtFinalize(); e != RT_SUCCESS) {
        acl::reopen_report_queues();
        acl::g_initialised.store(true, std::memory_order_release);
        return acl::fail_rt(e, "aclFinalize");
    }
    for (auto fn : acl::g_finalizers) fn();
    acl::reset_models();
    acl::reset_callbacks();
    acl::reset_contexts();
    acl::reset_events();
    acl::g_finalized_once = true;
    return ACL_SUCCESS;
}

aclError aclrtGetVersion(int32_t* majorVersion, int32_t* minorVersion, int32_t* patchVersion) {
    ACL_REQUIRE_NOT_NULL("aclrtGetVersion", majorVersion);
    ACL_REQUIRE_NOT_NULL("aclrtGetVersion", minorVersion);
    ACL_REQUIRE_NOT_NULL("aclrtGetVersion", patchVersion);
    *majorVersion = ACL_MAJOR_VERSION;
    *minorVersion = ACL_MINOR_VERSION;
    *patchVersion = ACL_PATCH_VERSION;
    return ACL_SUCCESS;
}

aclError aclrtGetRunMode(aclrtRunMode* runMode) {
    ACL_REQUIRE_NOT_NULL("aclrtGetRunMode", runMode);
    *runMode = ACL_HOST;
    return ACL_SUCCESS;
}

const char* aclrtGetSocName(void) {
    int device = 0;
    if (acl::Context* c = acl::current_context()) device = c->device;
    rtDeviceProp prop;
    if (rtGetDeviceProperties(&prop, device) != RT_SUCCESS) return nullptr;
    return std::strcmp(prop.backend, "cuda") == 0 ? "runtime-cuda" : "runtime-cpu";
}

float aclFloat16ToFloat(aclFloat16 value) {
    const uint32_t sign = (value & 0x8000u) << 16;
    const uint32_t exponent = (value >> 10) & 0x1Fu;
    const uint32_t mantissa = value & 0x3FFu;
    float magnitude;
    if (exponent == 0) magnitude = std::ldexp(static_cast<float>(mantissa), -24);  // zero and subnormals
    else if (exponent == 31) magnitude = mantissa ? NAN : INFINITY;
    else magnitude = std::ldexp(static_cast<float>(mantissa | 0x400u), static_cast<int>(exponent) - 25);
    uint32_t bits = acl::float_bits(magnitude) | sign;
    float out;
    std::memcpy(&out, &bits, sizeof out);
    return out;
}

aclFloat16 aclFloatToFloat16(float value) {
    const uint32_t bits = acl::float_bits(value);
    const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
    const uint32_t abs = bits & 0x7FFFFFFFu;
    if (abs > 0x7F800000u) return static_cast<aclFloat16>(sign | 0x7E00u);  // NaN
    if (abs >= 0x477FF000u) return static_cast<aclFloat16>(sign | 0x7C00u); // rounds past 65504: infinity
    if (abs < 0x38800000u) {
        // Below the smallest normal binary16 (2^-14): a subnormal, rounded to nearest even in units of 2^-24.
        float a;
        std::memcpy(&a, &abs, sizeof a);
        return static_cast<aclFloat16>(sign | static_cast<uint16_t>(std::nearbyint(std::ldexp(a, 24))));
    }
    // Normal: rebias the exponent and round the 13 dropped mantissa bits to nearest even (a carry may bump the
    // exponent, which is the right result).
    uint32_t h = ((abs >> 13) - (112u << 10));
    const uint32_t dropped = abs & 0x1FFFu;
    if (dropped > 0x1000u || (dropped == 0x1000u && (h & 1u))) ++h;
    return static_cast<aclFloat16>(sign | h);
}

size_t aclDataTypeSize(aclDataType dataType) {
    switch (acl::enum_value(dataType)) {
    case ACL_FLOAT: case ACL_INT32: case ACL_UINT32: return 4;
    case ACL_FLOAT16: case ACL_INT16: case ACL_UINT16: case ACL_BF16: return 2;
    case ACL_INT8: case ACL_UINT8: case ACL_BOOL: case ACL_HIFLOAT8: case ACL_FLOAT8_E5M2: case ACL_FLOAT8_E4M3FN:
    case ACL_FLOAT8_E8M0: case ACL_FLOAT6_E3M2: case ACL_FLOAT6_E2M3: case ACL_FLOAT4_E2M1: case ACL_FLOAT4_E1M2:
    case ACL_INT4: case ACL_UINT1: return 1;
    case ACL_INT64: case ACL_UINT64: case ACL_DOUBLE: case ACL_COMPLEX64: return 8;
    case ACL_COMPLEX128: return 16;
    case ACL_COMPLEX32: return 4;
    default: return 0;
    }
}

}  // extern "C"
