// test_memcpy_2d.cpp — rtMallocPitch, rtMemcpy2D/3D(Async), rtMemset2D(Async), peer copies and access, managed memory
// and rtMemPrefetchAsync, on every device: results, and the refusals of bad shapes and operands.
#include "test_util.hpp"

#include <cstring>

using namespace rt_test;

namespace {

class Memcpy2D : public DeviceTest {};

TEST_P(Memcpy2D, MallocPitchAlignsRowsAndAllocatesThemAll) {
    void* p = nullptr;
    size_t pitch = 0;
    ASSERT_RT_OK(rtMallocPitch(&p, &pitch, 100, 7));
    EXPECT_GE(pitch, 100u);
    EXPECT_EQ(pitch % 256, 0u);
    rtPointerAttributes a{};
    ASSERT_RT_OK(rtPointerGetAttributes(&a, p));
    EXPECT_EQ(a.type, RT_MEMORY_TYPE_DEVICE);
    EXPECT_GE(a.size, pitch * 7);
    ASSERT_RT_OK(rtFree(p));
    ASSERT_RT_OK(rtMallocPitch(&p, &pitch, 0, 7));
    EXPECT_EQ(p, nullptr);
    EXPECT_EQ(pitch, 0u);
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtMallocPitch(nullptr, &pitch, 1, 1));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtMallocPitch(&p, nullptr, 1, 1));
}

TEST_P(Memcpy2D, RoundTripCopiesOnlyTheRows) {
    const size_t width = 37, height = 5, hpitch = 64;
    void* d = nullptr;
    size_t dpitch = 0;
    ASSERT_RT_OK(rtMallocPitch(&d, &dpitch, width, height));
    ASSERT_RT_OK(rtMemset(d, 0xEE, dpitch * height));
    std::vector<unsigned char> src = pattern(hpitch * height, 7), back(hpitch * height, 0x11);
    ASSERT_RT_OK(rtMemcpy2D(d, dpitch, src.data(), hpitch, width, height, RT_MEMCPY_HOST_TO_DEVICE));
    // The device rows hold the source rows, the padding keeps its fill.
    std::vector<unsigned char> raw(dpitch * height);
    ASSERT_RT_OK(rtMemcpy(raw.data(), d, raw.size(), RT_MEMCPY_DEVICE_TO_HOST));
    for (size_t y = 0; y < height; ++y) {
        EXPECT_EQ(first_mismatch(raw.data() + y * dpitch, src.data() + y * hpitch, width), -1) << "row " << y;
        EXPECT_EQ(raw[y * dpitch + width], 0xEE) << "padding of row " << y;
    }
    StreamGuard s;
    ASSERT_RT_OK(rtMemcpy2DAsync(back.data(), hpitch, d, dpitch, width, height, RT_MEMCPY_DEFAULT, s));
    ASSERT_RT_OK(rtStreamSynchronize(s));
    for (size_t y = 0; y < height; ++y) {
        EXPECT_EQ(first_mismatch(back.data() + y * hpitch, src.data() + y * hpitch, width), -1) << "row " << y;
        EXPECT_EQ(back[y * hpitch + width], 0x11) << "host padding of row " << y;
    }
    ASSERT_RT_OK(rtFree(d));
}

TEST_P(Memcpy2D, ShapesAndRangesValidated) {
    DevBuf d(1000);
    std::vector<unsigned char> h(4096);
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtMemcpy2D(d.get(), 10, h.data(), 100, 20, 2, RT_MEMCPY_HOST_TO_DEVICE));
    EXPECT_TRUE(contains(last_message(), "dpitch 10 is smaller than the width 20"));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtMemcpy2D(d.get(), 100, h.data(), 10, 20, 2, RT_MEMCPY_HOST_TO_DEVICE));
    EXPECT_TRUE(contains(last_message(), "spitch 10"));
    // 10 rows of pitch 100 end at byte 920 of the device buffer: fits; 11 rows reach 1020: past its 1000 bytes.
    EXPECT_RT_OK(rtMemcpy2D(d.get(), 100, h.data(), 100, 20, 10, RT_MEMCPY_HOST_TO_DEVICE));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtMemcpy2D(d.get(), 100, h.data(), 100, 30, 11, RT_MEMCPY_HOST_TO_DEVICE));
    EXPECT_TRUE(contains(last_message(), "rtMemcpy2D"));
    // The kind is checked against each operand.
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtMemcpy2D(d.get(), 100, h.data(), 100, 20, 2, RT_MEMCPY_DEVICE_TO_HOST));
    // Nothing to copy: nothing checked.
    EXPECT_RT_OK(rtMemcpy2D(nullptr, 0, nullptr, 0, 0, 5, RT_MEMCPY_DEFAULT));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE,
                    rtMemcpy2DAsync(d.get(), 100, h.data(), 100, 20, 2, RT_MEMCPY_DEFAULT, garbage_handle<rtStream_t>()));
}

TEST_P(Memcpy2D, Memset2DFillsRowsOnly) {
    void* d = nullptr;
    size_t pitch = 0;
    ASSERT_RT_OK(rtMallocPitch(&d, &pitch, 10, 4));
    ASSERT_RT_OK(rtMemset(d, 0, pitch * 4));
    ASSERT_RT_OK(rtMemset2D(d, pitch, 0x5A, 10, 3));
    StreamGuard s;
    ASSERT_RT_OK(rtMemset2DAsync(static_cast<char*>(d) + 3 * pitch, pitch, 0x21, 4, 1, s));
    ASSERT_RT_OK(rtStreamSynchronize(s));
    std::vector<unsigned char> raw(pitch * 4);
    ASSERT_RT_OK(rtMemcpy(raw.data(), d, raw.size(), RT_MEMCPY_DEVICE_TO_HOST));
    for (size_t y = 0; y < 3; ++y)
        for (size_t x = 0; x < pitch; ++x) ASSERT_EQ(raw[y * pitch + x], x < 10 ? 0x5A : 0) << y << "," << x;
    for (size_t x = 0; x < pitch; ++x) ASSERT_EQ(raw[3 * pitch + x], x < 4 ? 0x21 : 0) << x;
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtMemset2D(d, 5, 0, 10, 2));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtMemset2D(d, pitch, 0, 10, 5));  // a fifth row runs past the allocation
    ASSERT_RT_OK(rtFree(d));
}

TEST_P(Memcpy2D, Copy3DMovesASubBox) {
    // A 4 x 3 x 2 box (bytes x rows x slices) from position (1, 1, 0) of a 8 x 4 x 2 host array into (0, 0, 1) of a
    // pitched device array of 3 slices.
    const size_t hx = 8, hy = 4, hz = 2;
    std::vector<unsigned char> host = pattern(hx * hy * hz, 3), back(hx * hy * hz, 0);
    void* d = nullptr;
    size_t pitch = 0;
    ASSERT_RT_OK(rtMallocPitch(&d, &pitch, 8, 4 * 3));
    ASSERT_RT_OK(rtMemset(d, 0, pitch * 12));
    rtMemcpy3DParms p{};
    p.src = make_rtPitchedPtr(host.data(), hx, hx, hy);
    p.src_pos = make_rtPos(1, 1, 0);
    p.dst = make_rtPitchedPtr(d, pitch, 8, 4);
    p.dst_pos = make_rtPos(0, 0, 1);
    p.extent = make_rtExtent(4, 3, 2);
    p.kind = RT_MEMCPY_HOST_TO_DEVICE;
    ASSERT_RT_OK(rtMemcpy3D(&p));
    std::vector<unsigned char> raw(pitch * 12);
    ASSERT_RT_OK(rtMemcpy(raw.data(), d, raw.size(), RT_MEMCPY_DEVICE_TO_HOST));
    for (size_t z = 0; z < 3; ++z)
        for (size_t y = 0; y < 4; ++y)
            for (size_t x = 0; x < 8; ++x) {
                const bool inside = z >= 1 && z - 1 < 2 && y < 3 && x < 4;
                const unsigned char want = inside ? host[(z - 1) * hx * hy + (y + 1) * hx + (x + 1)] : 0;
                ASSERT_EQ(raw[z * pitch * 4 + y * pitch + x], want) << z << "," << y << "," << x;
            }
    // And back, asynchronously.
    rtMemcpy3DParms q{};
    q.src = p.dst;
    q.src_pos = p.dst_pos;
    q.dst = make_rtPitchedPtr(back.data(), hx, hx, hy);
    q.dst_pos = p.src_pos;
    q.extent = p.extent;
    q.kind = RT_MEMCPY_DEVICE_TO_HOST;
    StreamGuard s;
    ASSERT_RT_OK(rtMemcpy3DAsync(&q, s));
    ASSERT_RT_OK(rtStreamSynchronize(s));
    for (size_t z = 0; z < 2; ++z)
        for (size_t y = 1; y < 4; ++y)
            for (size_t x = 1; x < 5; ++x) {
                const size_t i = z * hx * hy + y * hx + x;
                ASSERT_EQ(back[i], host[i]) << z << "," << y << "," << x;
            }
    EXPECT_EQ(back[0], 0);
    // Refusals: no parameters, a row past the pitch, rows past ysize.
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtMemcpy3D(nullptr));
    rtMemcpy3DParms bad = p;
    bad.extent.width = 8;  // from x 1: 9 bytes of an 8-byte pitch
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtMemcpy3D(&bad));
    EXPECT_TRUE(contains(last_message(), "exceeds its pitch"));
    bad = p;
    bad.extent.height = 4;  // from y 1: rows 1..5 of 4
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtMemcpy3D(&bad));
    EXPECT_TRUE(contains(last_message(), "ysize"));
    bad = p;
    bad.dst.ptr = nullptr;
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtMemcpy3D(&bad));
    ASSERT_RT_OK(rtFree(d));
}
RT_INSTANTIATE_DEVICE_TEST(Memcpy2D);

class Peer : public DeviceTest {};

TEST_P(Peer, CopiesBetweenDevicesOfOneBackend) {
    int n = 0;
    ASSERT_RT_OK(rtGetDeviceCount(&n));
    int can = -1;
    ASSERT_RT_OK(rtDeviceCanAccessPeer(&can, device(), device()));
    EXPECT_EQ(can, 0);  // a device is not its own peer
    EXPECT_RT_ERROR(RT_ERROR_INVALID_DEVICE, rtDeviceEnablePeerAccess(device(), 0));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_DEVICE, rtDeviceCanAccessPeer(&can, device(), n));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtDeviceCanAccessPeer(nullptr, device(), device()));
    for (int other = 0; other < n; ++other) {
        if (other == device() || backend_of(other) != backend_of(device())) continue;
        ASSERT_RT_OK(rtDeviceCanAccessPeer(&can, device(), other));
        if (backend_of(device()) == "cpu") {
            EXPECT_EQ(can, 1);
        }
        if (can) {
            ASSERT_RT_OK(rtDeviceEnablePeerAccess(other, 0));
            EXPECT_RT_ERROR(RT_ERROR_ILLEGAL_STATE, rtDeviceEnablePeerAccess(other, 0));
            EXPECT_TRUE(contains(last_message(), "already enabled"));
        }
        DevBuf mine(4096);
        ASSERT_RT_OK(rtSetDevice(other));
        DevBuf theirs(4096);
        ASSERT_RT_OK(rtSetDevice(device()));
        std::vector<unsigned char> src = pattern(4096, 9), back(4096);
        ASSERT_RT_OK(rtMemcpy(mine.get(), src.data(), 4096, RT_MEMCPY_HOST_TO_DEVICE));
        ASSERT_RT_OK(rtMemcpyPeer(theirs.get(), other, mine.get(), device(), 4096));
        StreamGuard s;
        ASSERT_RT_OK(rtMemcpyPeerAsync(mine.get() + 2048, device(), theirs.get(), other, 2048, s));
        ASSERT_RT_OK(rtStreamSynchronize(s));
        ASSERT_RT_OK(rtMemcpy(back.data(), mine.get(), 4096, RT_MEMCPY_DEVICE_TO_HOST));
        EXPECT_EQ(first_mismatch(back.data(), src.data(), 2048), -1);
        EXPECT_EQ(first_mismatch(back.data() + 2048, src.data(), 2048), -1);
        // The devices named must be the pointers' own.
        EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtMemcpyPeer(theirs.get(), device(), mine.get(), device(), 16));
        EXPECT_TRUE(contains(last_message(), "the call names device"));
        std::vector<unsigned char> h(16);
        EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtMemcpyPeer(theirs.get(), other, h.data(), device(), 16));
        EXPECT_TRUE(contains(last_message(), "is not device memory"));
        EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtMemcpyPeer(theirs.get(), other, mine.get(), device(), 8192));
        return;
    }
    GTEST_SKIP() << "no second device of this backend (rerun with RUNTIME_CPU_DEVICES=2)";
}
RT_INSTANTIATE_DEVICE_TEST(Peer);

class Managed : public DeviceTest {};

TEST_P(Managed, HostAndDeviceShareItAndPrefetchIsOrdered) {
    int supported = 0;
    ASSERT_RT_OK(rtDeviceGetAttribute(&supported, RT_DEV_ATTR_MANAGED_MEMORY, device()));
    if (!supported) GTEST_SKIP() << "no managed memory on this device";
    int* p = nullptr;
    ASSERT_RT_OK(rtMallocManaged(reinterpret_cast<void**>(&p), 64 * sizeof(int), RT_MEM_ATTACH_GLOBAL));
    for (int i = 0; i < 64; ++i) p[i] = i;  // the host writes through the same address
    StreamGuard s;
    ASSERT_RT_OK(rtMemPrefetchAsync(p, 64 * sizeof(int), device(), s));
    ASSERT_RT_OK(rtMemsetAsync(p, 0, 16 * sizeof(int), s));
    ASSERT_RT_OK(rtMemPrefetchAsync(p, 64 * sizeof(int), RT_CPU_DEVICE_ID, s));
    ASSERT_RT_OK(rtStreamSynchronize(s));
    EXPECT_EQ(p[0], 0);
    EXPECT_EQ(p[15], 0);
    EXPECT_EQ(p[16], 16);
    EXPECT_EQ(p[63], 63);
    // Refusals: not managed, past the allocation, a bad device, bad flags.
    DevBuf plain(64);
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtMemPrefetchAsync(plain.get(), 64, device(), s));
    EXPECT_TRUE(contains(last_message(), "not managed memory"));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtMemPrefetchAsync(p + 1, 64 * sizeof(int), device(), s));
    EXPECT_TRUE(contains(last_message(), "run past its managed allocation"));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_DEVICE, rtMemPrefetchAsync(p, 4, 1000, s));
    void* q = nullptr;
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtMallocManaged(&q, 64, 0x4));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtMallocManaged(nullptr, 64, RT_MEM_ATTACH_GLOBAL));
    ASSERT_RT_OK(rtMallocManaged(&q, 0, RT_MEM_ATTACH_HOST));
    EXPECT_EQ(q, nullptr);
    ASSERT_RT_OK(rtFree(p));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtFree(p));  // freed once only
}
RT_INSTANTIATE_DEVICE_TEST(Managed);

}  // namespace
