/* abi_from_c.c — the C side of test_version: runtime.h's version and launch-config initialiser as a C caller sees
 * them (compiled as C11 with -Wall -Wextra -Werror, so the initialiser stays warning-free for C users). */
#include <runtime/runtime.h>

#include "abi_from_c.h"

/* RT_LAUNCH_CONFIG_INIT is a constant initialiser in C: usable for objects of static storage duration. */
static const rtLaunchConfig g_static_config = RT_LAUNCH_CONFIG_INIT;

rtLaunchConfig abi_c_static_config(void) { return g_static_config; }

rtLaunchConfig abi_c_automatic_config(void) {
    rtLaunchConfig c = RT_LAUNCH_CONFIG_INIT;
    c.grid.x = 4;
    return c;
}

rtLaunchConfig abi_c_default_config(void) { return rtLaunchConfigDefault(); }

size_t abi_c_config_size(void) { return sizeof(rtLaunchConfig); }

int abi_c_header_version(void) { return RUNTIME_VERSION; }

rtError_t abi_c_get_version(int* version) { return rtGetVersion(version); }
