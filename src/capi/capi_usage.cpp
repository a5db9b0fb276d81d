// C API: the usage of a device by the calling process (rtDeviceGetUsage), what runtime-smi shows of every process.
#include "capi/capi_common.hpp"
#include "observe/usage.hpp"

using namespace rt;

extern "C" {

RT_API rtError_t rtDeviceGetUsage(int device, rtDeviceUsage* usage) {
    return capi_call("rtDeviceGetUsage", [&] {
        require_out(usage, "usage");
        *usage = observe::device_usage(runtime().device(device));
    });
}

}  // extern "C"
