/* consumer.c — plain C use of the installed runtime: the library's version, allocate, copy there and back (through a
 * one-rank all-reduce on cpu devices: comm.h), check. */
#include <runtime/comm.h>
#include <runtime/runtime.h>

#include <string.h>

#include <stdio.h>
#include <stdlib.h>

#define CHECK(call)                                                                          \
    do {                                                                                     \
        rtError_t err_ = (call);                                                             \
        if (err_ != RT_SUCCESS) {                                                            \
            fprintf(stderr, "%s failed: %s: %s\n", #call, rtGetErrorName(err_),             \
                    rtGetLastErrorMessage());                                                \
            return 1;                                                                        \
        }                                                                                    \
    } while (0)

int main(void) {
    enum { N = 4096 };
    static int in[N], out[N];
    int count = 0, i, version = 0;
    void* dev = NULL;
    rtStream_t stream = NULL;
    rtDeviceProp prop;

    for (i = 0; i < N; ++i) in[i] = i * 3 + 1;
    CHECK(rtGetVersion(&version));
    if (version != RUNTIME_VERSION) {
        fprintf(stderr, "the library is version %d, the header %d\n", version, RUNTIME_VERSION);
        return 1;
    }
    CHECK(rtGetDeviceCount(&count));
    CHECK(rtGetDeviceProperties(&prop, 0));
    CHECK(rtMalloc(&dev, sizeof in));
    CHECK(rtStreamCreate(&stream));
    CHECK(rtMemcpyAsync(dev, in, sizeof in, RT_MEMCPY_HOST_TO_DEVICE, stream));
    if (strcmp(prop.backend, "cpu") == 0) { /* in-process collectives run on cpu devices */
        rtComm_t comm = NULL;
        CHECK(rtCommInitAll(&comm, 1, NULL));
        CHECK(rtAllReduce(dev, dev, N, RT_INT32, RT_REDUCE_SUM, comm, stream)); /* one rank: the data itself */
        CHECK(rtCommDestroy(comm));
    }
    CHECK(rtMemcpyAsync(out, dev, sizeof out, RT_MEMCPY_DEVICE_TO_HOST, stream));
    CHECK(rtStreamSynchronize(stream));
    CHECK(rtStreamDestroy(stream));
    CHECK(rtFree(dev));
    for (i = 0; i < N; ++i) {
        if (out[i] != in[i]) {
            fprintf(stderr, "mismatch at %d: %d != %d\n", i, out[i], in[i]);
            return 1;
        }
    }
    printf("consumer_c: OK (version %d, %d device(s), device 0 = %s, backend %s)\n", version, count, prop.name,
           prop.backend);
    return 0;
}
