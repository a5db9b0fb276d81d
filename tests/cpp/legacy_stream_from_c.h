/* legacy_stream_from_c.h — the C reproduction of the legacy default stream (legacy_stream_from_c.c), run by
 * test_stream.cpp. */
#ifndef RT_TEST_LEGACY_STREAM_FROM_C_H
#define RT_TEST_LEGACY_STREAM_FROM_C_H

#include <runtime/runtime.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A blocking stream sleeps 100 ms, then fills a buffer with 7; rtMemcpy D2H on the NULL stream right after. Returns
 * the number of bytes of the copy that are not 7 (0: ordered), or -1 when a call failed (*failed_call names it). */
int legacy_c_copy_after_blocking_stream(const char** failed_call);

#ifdef __cplusplus
}
#endif

#endif
