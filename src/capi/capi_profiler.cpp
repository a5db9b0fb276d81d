// rtProfilerStart / rtProfilerStop: the timeline trace (observe/trace.cpp).
#include "capi/capi_common.hpp"
#include "observe/trace.hpp"
#include "runtime/profiler.h"

using namespace rt;

RT_API rtError_t rtProfilerStart(const char* path, unsigned int flags) {
    return capi_call("rtProfilerStart", [&] { trace::start(path, flags); });
}

RT_API rtError_t rtProfilerStop(void) {
    return capi_call("rtProfilerStop", [&] { trace::stop(); });
}
