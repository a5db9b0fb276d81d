/* legacy_stream_from_c.c — rtMemcpy after a blocking stream's work, from C (the reproduction). */
#include "legacy_stream_from_c.h"

#include <string.h>
#include <time.h>

static void sleep_100ms(void* unused) {
    struct timespec t = {0, 100 * 1000 * 1000};
    (void)unused;
    nanosleep(&t, NULL);
}

#define CALL(expr)                  \
    do {                            \
        if ((expr) != RT_SUCCESS) { \
            *failed_call = #expr;   \
            goto out;               \
        }                           \
    } while (0)

int legacy_c_copy_after_blocking_stream(const char** failed_call) {
    enum { n = 4096 };
    static unsigned char host[n];
    rtStream_t s = NULL;
    void* d = NULL;
    int result = -1;
    size_t i;
    CALL(rtStreamCreate(&s));
    CALL(rtMalloc(&d, n));
    CALL(rtMemset(d, 0, n));
    CALL(rtLaunchHostFunc(s, sleep_100ms, NULL));
    CALL(rtMemsetAsync(d, 7, n, s));
    memset(host, 0xEE, n);
    CALL(rtMemcpy(host, d, n, RT_MEMCPY_DEVICE_TO_HOST));
    result = 0;
    for (i = 0; i < n; ++i) result += host[i] != 7;
out:
    if (d) rtFree(d);
    if (s) rtStreamDestroy(s);
    return result;
}
