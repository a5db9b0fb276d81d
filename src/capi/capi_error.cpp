// C API: error names, descriptions and the thread-local last-error message.
#include "capi/capi_common.hpp"

extern "C" {

RT_API const char* rtGetErrorName(rtError_t error) {
    switch (error) {
        case RT_SUCCESS: return "RT_SUCCESS";
        case RT_ERROR_INVALID_VALUE: return "RT_ERROR_INVALID_VALUE";
        case RT_ERROR_INVALID_DEVICE: return "RT_ERROR_INVALID_DEVICE";
        case RT_ERROR_INVALID_HANDLE: return "RT_ERROR_INVALID_HANDLE";
        case RT_ERROR_OUT_OF_MEMORY: return "RT_ERROR_OUT_OF_MEMORY";
        case RT_ERROR_NOT_READY: return "RT_ERROR_NOT_READY";
        case RT_ERROR_COMPILE_FAILED: return "RT_ERROR_COMPILE_FAILED";
        case RT_ERROR_LAUNCH_FAILED: return "RT_ERROR_LAUNCH_FAILED";
        case RT_ERROR_NOT_SUPPORTED: return "RT_ERROR_NOT_SUPPORTED";
        case RT_ERROR_NOT_FOUND: return "RT_ERROR_NOT_FOUND";
        case RT_ERROR_NOT_PERMITTED: return "RT_ERROR_NOT_PERMITTED";
        case RT_ERROR_STREAM_CAPTURE_UNSUPPORTED: return "RT_ERROR_STREAM_CAPTURE_UNSUPPORTED";
        case RT_ERROR_STREAM_CAPTURE_INVALIDATED: return "RT_ERROR_STREAM_CAPTURE_INVALIDATED";
        case RT_ERROR_STREAM_CAPTURE_UNJOINED: return "RT_ERROR_STREAM_CAPTURE_UNJOINED";
        case RT_ERROR_STREAM_CAPTURE_IMPLICIT: return "RT_ERROR_STREAM_CAPTURE_IMPLICIT";
        case RT_ERROR_STREAM_CAPTURE_WRONG_THREAD: return "RT_ERROR_STREAM_CAPTURE_WRONG_THREAD";
        case RT_ERROR_STREAM_CAPTURE_ISOLATION: return "RT_ERROR_STREAM_CAPTURE_ISOLATION";
        case RT_ERROR_CAPTURED_EVENT: return "RT_ERROR_CAPTURED_EVENT";
        case RT_ERROR_GRAPH_EXEC_UPDATE_FAILURE: return "RT_ERROR_GRAPH_EXEC_UPDATE_FAILURE";
        case RT_ERROR_ILLEGAL_STATE: return "RT_ERROR_ILLEGAL_STATE";
        case RT_ERROR_INVALID_IMAGE: return "RT_ERROR_INVALID_IMAGE";
        case RT_ERROR_TIMEOUT: return "RT_ERROR_TIMEOUT";
        case RT_ERROR_NOT_INITIALIZED: return "RT_ERROR_NOT_INITIALIZED";
        case RT_ERROR_DEVICE_LOST: return "RT_ERROR_DEVICE_LOST";
        case RT_ERROR_UNKNOWN: return "RT_ERROR_UNKNOWN";
    }
    return "RT_ERROR_UNRECOGNIZED";
}

RT_API const char* rtGetErrorString(rtError_t error) {
    switch (error) {
        case RT_SUCCESS: return "no error";
        case RT_ERROR_INVALID_VALUE: return "an argument is invalid";
        case RT_ERROR_INVALID_DEVICE: return "no such device";
        case RT_ERROR_INVALID_HANDLE: return "the handle is not a live object of the expected kind";
        case RT_ERROR_OUT_OF_MEMORY: return "out of memory";
        case RT_ERROR_NOT_READY: return "the work has not completed yet";
        case RT_ERROR_COMPILE_FAILED: return "the kernel source failed to compile";
        case RT_ERROR_LAUNCH_FAILED: return "queued work failed";
        case RT_ERROR_NOT_SUPPORTED: return "not supported by this device or build";
        case RT_ERROR_NOT_FOUND: return "the named symbol was not found";
        case RT_ERROR_NOT_PERMITTED: return "the call would wait from inside a host function or release (queue context)";
        case RT_ERROR_STREAM_CAPTURE_UNSUPPORTED: return "the operation is not permitted while a stream is being captured";
        case RT_ERROR_STREAM_CAPTURE_INVALIDATED: return "the stream capture was invalidated by an earlier error";
        case RT_ERROR_STREAM_CAPTURE_UNJOINED: return "a stream forked into the capture was not joined back before it ended";
        case RT_ERROR_STREAM_CAPTURE_IMPLICIT: return "the default stream was used while a stream was being captured";
        case RT_ERROR_STREAM_CAPTURE_WRONG_THREAD: return "the capture was begun on another thread";
        case RT_ERROR_STREAM_CAPTURE_ISOLATION: return "a dependency would connect two different captures";
        case RT_ERROR_CAPTURED_EVENT: return "the event was last recorded in a capture";
        case RT_ERROR_GRAPH_EXEC_UPDATE_FAILURE: return "the executable graph cannot take that update";
        case RT_ERROR_ILLEGAL_STATE: return "the object is not in a state that allows the call";
        case RT_ERROR_INVALID_IMAGE: return "the encoded image is corrupt, truncated or not of the expected format";
        case RT_ERROR_TIMEOUT: return "the wait ran out of time (a collective's peer, a synchronize with a timeout)";
        case RT_ERROR_NOT_INITIALIZED: return "the driver under the backend is not initialised";
        case RT_ERROR_DEVICE_LOST: return "the device was lost: its work and memory are gone";
        case RT_ERROR_UNKNOWN: return "internal error";
    }
    return "unrecognized error code";
}

RT_API const char* rtGetLastErrorMessage(void) { return rt::last_error_message(); }

RT_API size_t rtDataTypeSize(rtDataType type) {
    switch (type) {
        case RT_INT8:
        case RT_UINT8: return 1;
        case RT_FLOAT16:
        case RT_BFLOAT16: return 2;
        case RT_INT32:
        case RT_UINT32:
        case RT_FLOAT32: return 4;
        case RT_INT64:
        case RT_UINT64:
        case RT_FLOAT64: return 8;
    }
    return 0;
}

}  // extern "C"
