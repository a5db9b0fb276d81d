/* abi_from_c.h — what abi_from_c.c (compiled as C) reports to test_version.cpp. */
#ifndef RT_TEST_ABI_FROM_C_H
#define RT_TEST_ABI_FROM_C_H

#include <runtime/runtime.h>

#ifdef __cplusplus
extern "C" {
#endif

rtLaunchConfig abi_c_static_config(void);     /* a static object initialised with RT_LAUNCH_CONFIG_INIT */
rtLaunchConfig abi_c_automatic_config(void);  /* RT_LAUNCH_CONFIG_INIT on the stack, then grid.x = 4 */
rtLaunchConfig abi_c_default_config(void);    /* rtLaunchConfigDefault() */
size_t abi_c_config_size(void);               /* sizeof(rtLaunchConfig) in C */
int abi_c_header_version(void);               /* RUNTIME_VERSION in C */
rtError_t abi_c_get_version(int* version);    /* rtGetVersion called from C */

#ifdef __cplusplus
}
#endif

#endif
