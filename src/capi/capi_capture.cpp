// C API: stream capture (rtStreamBeginCapture, rtStreamEndCapture, rtStreamGetCaptureInfo,
// rtThreadExchangeStreamCaptureMode) over graph/capture.hpp.
#include <cstring>

#include "capi/capi_common.hpp"
#include "graph/capture.hpp"
#include "graph/graph.hpp"
#include "graph/handles.hpp"

using namespace rt;

namespace {
/// The C ABI may pass any integer as an rtStreamCaptureMode: read its bytes, never load it as the enum.
rtStreamCaptureMode read_mode(const rtStreamCaptureMode& mode, const char* what) {
    int m;
    static_assert(sizeof m == sizeof mode);
    std::memcpy(&m, &mode, sizeof m);
    if (m < RT_STREAM_CAPTURE_MODE_GLOBAL || m > RT_STREAM_CAPTURE_MODE_RELAXED)
        fail(RT_ERROR_INVALID_VALUE, "%s %d is not an rtStreamCaptureMode (expected RT_STREAM_CAPTURE_MODE_GLOBAL, "
             "_THREAD_LOCAL or _RELAXED: 0..2)", what, m);
    return static_cast<rtStreamCaptureMode>(m);
}
}  // namespace

extern "C" {

RT_API rtError_t rtStreamBeginCapture(rtStream_t stream, rtStreamCaptureMode mode) {
    return capi_call("rtStreamBeginCapture", [&] {
        const rtStreamCaptureMode m = read_mode(mode, "mode");
        graph::begin_capture(runtime().stream(stream), m);
    });
}

RT_API rtError_t rtStreamEndCapture(rtStream_t stream, rtGraph_t* graph) {
    return capi_call("rtStreamEndCapture", [&] {
        require_out(graph, "graph");
        *graph = nullptr;
        std::shared_ptr<graph::Graph> g = graph::end_capture(*runtime().stream(stream));
        *graph = graph::publish_graph(std::move(g));
    });
}

RT_API rtError_t rtStreamGetCaptureInfo(rtStream_t stream, rtStreamCaptureStatus* status, unsigned long long* id) {
    return capi_call("rtStreamGetCaptureInfo", [&] {
        require_out(status, "status");
        uint64_t captured = 0;
        *status = graph::capture_status(*runtime().stream(stream), &captured);
        if (id && *status != RT_STREAM_CAPTURE_STATUS_NONE) *id = captured;
    });
}

RT_API rtError_t rtThreadExchangeStreamCaptureMode(rtStreamCaptureMode* mode) {
    return capi_call("rtThreadExchangeStreamCaptureMode", [&] {
        require_out(mode, "mode");
        *mode = graph::exchange_thread_mode(read_mode(*mode, "*mode"));
    });
}

}  // extern "C"
