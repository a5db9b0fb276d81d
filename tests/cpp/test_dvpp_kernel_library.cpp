// test_dvpp_kernel_library.cpp — DVPP's kernel library seen through its operations (rtDvppNormalize to uint8 with
// mean 0 and deviation 1 is a copy, rtDvppConvertColor RGB -> BGR a channel swap: both exact): modules built for the
// stream's device whichever device is current, rebuilt after rtFinalize + rtInit, first uses racing from many
// threads, and launches that cover exactly the picture (odd sizes, rows wider than a work-group, one pixel).
#include <cstdint>
#include <algorithm>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "runtime/dvpp.h"
#include "test_util.hpp"

namespace {

using rt_test::contains;
using rt_test::last_message;

/// A GRAY8 or RGB888 picture in device memory of the current device, filled with a pattern, `guard` bytes of
/// sentinel after it (the launches must not write past the picture).
struct Picture {
    static constexpr size_t guard = 64;
    rt_test::DevBuf buf;
    rtPicture pic{};
    std::vector<unsigned char> host;
    Picture(rtPixelFormat f, uint32_t w, uint32_t h, uint32_t seed) {
        size_t bytes = 0;
        EXPECT_RT_OK(rtDvppPictureSize(f, w, h, 0, 0, &bytes));
        EXPECT_RT_OK(buf.alloc(bytes + guard));
        host = rt_test::pattern(bytes + guard, seed);
        EXPECT_RT_OK(rtMemcpy(buf.get(), host.data(), host.size(), RT_MEMCPY_HOST_TO_DEVICE));
        pic.data = buf.get();
        pic.size = bytes;
        pic.format = f;
        pic.width = w;
        pic.height = h;
    }
    std::vector<unsigned char> read() const {
        std::vector<unsigned char> v(host.size());
        EXPECT_RT_OK(rtMemcpy(v.data(), buf.get(), v.size(), RT_MEMCPY_DEVICE_TO_HOST));
        return v;
    }
};

/// rtDvppNormalize to uint8 in HWC order with mean 0 and deviation 1 must give the pixels themselves, densely;
/// `out` has Picture::guard bytes after them, which must keep their pattern.
std::vector<unsigned char> identity(const Picture& src, const std::vector<unsigned char>& out_before) {
    std::vector<unsigned char> out = out_before;
    std::copy(src.host.begin(), src.host.begin() + static_cast<long>(src.pic.size), out.begin());
    return out;
}

/// RGB888 -> BGR888 must swap the first and third channel, and nothing else.
std::vector<unsigned char> swapped(const Picture& src, const Picture& dst) {
    std::vector<unsigned char> out = dst.host;
    const size_t n = size_t(src.pic.width) * src.pic.height;
    for (size_t i = 0; i < n; ++i) {
        out[3 * i] = src.host[3 * i + 2];
        out[3 * i + 1] = src.host[3 * i + 1];
        out[3 * i + 2] = src.host[3 * i];
    }
    return out;
}

/// Normalizes (the normalize family) and converts (the color family) on a stream of `device`, with device
/// `current` current, checking both results exactly.
void normalize_and_convert(int device, int current, uint32_t seed, uint32_t w = 97, uint32_t h = 61) {
    ASSERT_RT_OK(rtSetDevice(device));
    rtStream_t stream = nullptr;
    ASSERT_RT_OK(rtStreamCreate(&stream));
    {
        Picture grey(RT_PIXEL_FORMAT_GRAY8, w, h, seed), out(RT_PIXEL_FORMAT_GRAY8, w, h, seed + 1);
        Picture rgb(RT_PIXEL_FORMAT_RGB888, w, h, seed + 2), bgr(RT_PIXEL_FORMAT_BGR888, w, h, seed + 3);
        ASSERT_RT_OK(rtSetDevice(current));
        EXPECT_RT_OK(rtDvppNormalize(&grey.pic, out.buf.get(), RT_UINT8, 0, nullptr, nullptr, stream));
        EXPECT_RT_OK(rtDvppConvertColor(&rgb.pic, &bgr.pic, RT_COLOR_BT601_LIMITED, stream));
        EXPECT_RT_OK(rtStreamSynchronize(stream));
        if (rt_test::launches_execute(device)) {
            EXPECT_EQ(rt_test::first_mismatch(out.read().data(), identity(grey, out.host).data(), out.host.size()),
                      -1);
            EXPECT_EQ(rt_test::first_mismatch(bgr.read().data(), swapped(rgb, bgr).data(), bgr.host.size()), -1);
        }
        ASSERT_RT_OK(rtSetDevice(device));
    }
    EXPECT_RT_OK(rtStreamDestroy(stream));
}

/// The devices under test (the fake driver's accept launches without running them: their results are not read).
std::vector<int> devices() { return rt_test::device_indices(); }

TEST(DvppKernelLibrary, KernelsRunOnTheStreamsDeviceWhicheverDeviceIsCurrent) {
    const std::vector<int> ds = devices();
    ASSERT_FALSE(ds.empty());
    for (int device : ds)
        for (int current : ds) {
            SCOPED_TRACE("stream of device " + std::to_string(device) + ", device " + std::to_string(current) +
                         " current");
            normalize_and_convert(device, current, 17u * device + current);
        }
    ASSERT_RT_OK(rtSetDevice(0));
}

TEST(DvppKernelLibrary, ARuntimeAfterFinalizeBuildsItsOwnModules) {
    // Handle values repeat from one runtime to the next: a module kept from the first would be a dead handle, or
    // another module's.
    for (int round = 0; round < 3; ++round) {
        SCOPED_TRACE("round " + std::to_string(round));
        const std::vector<int> ds = devices();
        ASSERT_FALSE(ds.empty());
        normalize_and_convert(ds.back(), ds.front(), 100u + round);
        // A module of the user's in the new runtime may get the handle value a DVPP module had in the old one.
        rtModule_t m = nullptr;
        ASSERT_RT_OK(rtModuleLoadSource(&m, "RT_KERNEL void user_kernel(int* p) { p[0] = 1; }", nullptr));
        ASSERT_RT_OK(rtFinalize());
        ASSERT_RT_OK(rtInit(nullptr));
    }
    normalize_and_convert(devices().front(), devices().front(), 7);
}

TEST(DvppKernelLibrary, FirstUsesRacingFromManyThreadsAgree) {
    // A fresh runtime, so the modules are built here, by whichever thread comes first for each device and family.
    ASSERT_RT_OK(rtFinalize());
    const std::vector<int> ds = devices();
    ASSERT_FALSE(ds.empty());
    const size_t n = ds.size();
    std::vector<std::thread> threads;
    for (size_t t = 0; t < 8; ++t)
        threads.emplace_back([&ds, t, n] { normalize_and_convert(ds[t % n], ds[(t / n) % n], 1000u + unsigned(t)); });
    for (auto& t : threads) t.join();
    ASSERT_RT_OK(rtSetDevice(0));
}

TEST(DvppKernelLibrary, LaunchesCoverExactlyThePicture) {
    // One item per output pixel (or per tile), the global size exact: odd sizes, one-pixel pictures, rows wider
    // than a work-group may be (1024 items on cpu), pictures taller than wide; nothing past the picture written.
    struct Size { uint32_t w, h; };
    const Size sizes[] = {{1, 1}, {1, 7}, {7, 1}, {2049, 3}, {3, 2500}, {63, 65}, {1920, 1080}, {1025, 1}};
    for (const Size& s : sizes) {
        SCOPED_TRACE(std::to_string(s.w) + "x" + std::to_string(s.h));
        for (int d : devices()) normalize_and_convert(d, d, s.w * 31 + s.h, s.w, s.h);
    }
}

}  // namespace
