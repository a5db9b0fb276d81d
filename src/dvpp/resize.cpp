// rtDvppResize, rtDvppCropResize, rtDvppCropResizePaste and rtDvppBatchCropResize: every descriptor checked, then
// one launch of the resize kernels (kernels/resize.cpp) per plane of every crop.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "capi/capi_common.hpp"
#include "core/error.hpp"
#include "core/runtime.hpp"
#include "dvpp/kernel_library.hpp"
#include "dvpp/picture.hpp"
#include "dvpp/resize_plan.hpp"
#include "observe/trace_dvpp.hpp"

namespace rt::dvpp {

namespace {

/// One crop of one picture resized into a rectangle of another, checked.
struct Job {
    const rtPicture* src;
    rtPicture* dst;
    Layout src_layout, dst_layout;
    rtRect crop, paste;
    uint8_t fill[4];
};

/// Names of the pictures and rectangles of a call, for messages ("rtDvppBatchCropResize: dsts[3]").
struct Names {
    std::string src, dst, crop, paste;
};

Names names(const char* api, const char* src, const char* dst, const char* crop, const char* paste) {
    const std::string a = std::string(api) + ": ";
    return Names{a + src, a + dst, a + crop, a + paste};
}

/// Whether [a, a + na) and [b, b + nb) share a byte.
bool overlaps(const void* a, size_t na, const void* b, size_t nb) {
    const auto x = reinterpret_cast<uintptr_t>(a), y = reinterpret_cast<uintptr_t>(b);
    return x < y + nb && y < x + na;
}

/// Checks one crop-resize-paste; throws INVALID_VALUE naming the argument and field.
Job check_job(const CoreDevice& device, const rtPicture* src, const rtRect* crop, rtPicture* dst,
              const rtRect* paste, const uint8_t* fill, const Names& n) {
    Job j;
    j.src = src;
    j.dst = dst;
    j.src_layout = check_picture(device, src, n.src.c_str());
    j.dst_layout = check_picture(device, dst, n.dst.c_str());
    if (j.dst_layout.format != j.src_layout.format)
        fail(RT_ERROR_INVALID_VALUE,
             "%s->format %s differs from %s->format %s (a resize keeps the format: rtDvppConvertColor converts)",
             n.dst.c_str(), format_name(j.dst_layout.format), n.src.c_str() + n.src.find(": ") + 2,
             format_name(j.src_layout.format));
    if (overlaps(src->data, j.src_layout.bytes, dst->data, j.dst_layout.bytes))
        fail(RT_ERROR_INVALID_VALUE,
             "%s->data [%p, +%zu bytes) overlaps %s->data [%p, +%zu bytes) (a resize does not work in place)",
             n.dst.c_str(), dst->data, j.dst_layout.bytes, n.src.c_str() + n.src.find(": ") + 2, src->data,
             j.src_layout.bytes);
    j.crop = check_rect(crop, j.src_layout, n.crop.c_str());
    j.paste = check_rect(paste, j.dst_layout, n.paste.c_str());
    check_resize_extent(j.crop.width, j.crop.height, (crop ? n.crop : n.src).c_str());
    check_resize_extent(j.paste.width, j.paste.height, (paste ? n.paste : n.dst).c_str());
    // The kernels address rows with 32-bit pitches.
    for (const Layout* l : {&j.src_layout, &j.dst_layout})
        if (l->planes[0].pitch > UINT32_MAX)
            fail(RT_ERROR_INVALID_VALUE, "%s: rows of %zu bytes (width_stride %u) exceed the 4 GiB a resize takes",
                 (l == &j.src_layout ? n.src : n.dst).c_str(), l->planes[0].pitch, l->width_stride);
    for (int c = 0; c < 4; ++c) j.fill[c] = fill ? fill[c] : 0;
    return j;
}

/// The resize kernel for a mode and channel count; `wide`: word loads (kernels/resize.cpp).
std::string kernel_name(int mode, uint32_t channels, bool wide) {
    static const char* const modes[4] = {"nearest", "bilinear", "area", "area_linear"};
    std::string n = std::string("dvpp_resize_") + modes[mode] + "_c" + std::to_string(channels);
    if (!wide && mode != DVPP_MODE_AREA) n += "_narrow";  // area averaging loads bytes anyway
    return n;
}

/// The kernels of one call, each looked up once.
class Kernels {
public:
    explicit Kernels(rtStream_t stream) : stream_(stream) {}
    rtFunction_t resize(int mode, uint32_t channels, bool wide) {
        rtFunction_t& f = resize_[mode][channels - 1][wide ? 1 : 0];
        if (!f) f = kernel(stream_, Family::resize, kernel_name(mode, channels, wide).c_str());
        return f;
    }
    rtFunction_t columns() {
        if (!columns_) columns_ = kernel(stream_, Family::resize, "dvpp_resize_columns");
        return columns_;
    }
    rtFunction_t fill(uint32_t channels) {
        rtFunction_t& f = fill_[channels - 1];
        if (!f) f = kernel(stream_, Family::resize, ("dvpp_fill_outside_c" + std::to_string(channels)).c_str());
        return f;
    }

private:
    rtStream_t stream_;
    rtFunction_t resize_[4][4][2] = {};
    rtFunction_t fill_[4] = {};
    rtFunction_t columns_ = nullptr;
};

/// Whether crops `width` pixels wide let the kernels load pixels as words (dvpp_wide_).
bool wide_rows(uint32_t width, uint32_t channels) {
    switch (channels) {
        case 1: return dvpp_wide_<1>(width);
        case 2: return dvpp_wide_<2>(width);
        case 3: return dvpp_wide_<3>(width);
        default: return dvpp_wide_<4>(width);
    }
}

/// One plane's launches: the columns table (modes that use one), the resize over the paste rectangle, and the fill
/// around it when the rectangle leaves some of the plane.
struct PlaneLaunch {
    DvppResizeArgs args{};
    size_t columns_at = 0;  // the table's first entry in the call's memory
    rtFunction_t columns = nullptr, resize = nullptr, fill = nullptr;
    uint32_t width = 0, height = 0;          // the paste rectangle
    uint8_t* plane = nullptr;                // fill: the destination plane
    uint32_t pitch = 0, plane_width = 0, plane_height = 0;
    uint32_t x0 = 0, y0 = 0, x1 = 0, y1 = 0, fill_value = 0;
    size_t job = 0;                          // its job in the call
};

/// The launches of one checked job, a plane at a time (4:2:0 chroma at half the size: its rectangles are even),
/// appended to `out`; `columns` counts the table entries used so far. Looks every kernel up (so a module that
/// fails to build fails the call before anything is queued).
void plan(Kernels& kernels, const Job& j, size_t job, rtInterpolation interpolation, std::vector<PlaneLaunch>& out,
          size_t& columns) {
    const Layout& ls = j.src_layout;
    const Layout& ld = j.dst_layout;
    // The fill value of each plane's channels: packed formats in order; 4:2:0 takes fill[0..2] as Y, U, V.
    uint8_t fills[3][4] = {};
    if (!is_yuv420(ld.format)) {
        std::memcpy(fills[0], j.fill, 4);
    } else {
        fills[0][0] = j.fill[0];
        if (ld.format == RT_PIXEL_FORMAT_YUV420SP_NV12) {
            fills[1][0] = j.fill[1];
            fills[1][1] = j.fill[2];
        } else if (ld.format == RT_PIXEL_FORMAT_YUV420SP_NV21) {
            fills[1][0] = j.fill[2];
            fills[1][1] = j.fill[1];
        } else {
            fills[1][0] = j.fill[1];
            fills[2][0] = j.fill[2];
        }
    }
    for (int p = 0; p < ls.num_planes; ++p) {
        const Plane& sp = ls.planes[p];
        const Plane& dp = ld.planes[p];
        const uint32_t div = p == 0 ? 1 : 2;
        const rtRect crop{j.crop.x / div, j.crop.y / div, j.crop.width / div, j.crop.height / div};
        const rtRect paste{j.paste.x / div, j.paste.y / div, j.paste.width / div, j.paste.height / div};
        PlaneLaunch l;
        l.job = job;
        DvppResizeArgs& a = l.args;
        a.src = static_cast<const uint8_t*>(j.src->data) + sp.offset + size_t(crop.y) * sp.pitch +
                size_t(crop.x) * sp.channels;
        a.dst = static_cast<uint8_t*>(j.dst->data) + dp.offset + size_t(paste.y) * dp.pitch +
                size_t(paste.x) * dp.channels;
        a.src_pitch = static_cast<uint32_t>(sp.pitch);
        a.dst_pitch = static_cast<uint32_t>(dp.pitch);
        a.r = make_resample(interpolation, crop.width, crop.height, paste.width, paste.height);
        l.width = paste.width;
        l.height = paste.height;
        if (a.r.mode != DVPP_MODE_AREA) {
            l.columns = kernels.columns();
            l.columns_at = columns;
            columns += paste.width;
        }
        l.resize = kernels.resize(a.r.mode, sp.channels, wide_rows(crop.width, sp.channels));
        if (paste.width < dp.width || paste.height < dp.height) {
            l.fill = kernels.fill(sp.channels);
            l.plane = static_cast<uint8_t*>(j.dst->data) + dp.offset;
            l.pitch = static_cast<uint32_t>(dp.pitch);
            l.plane_width = dp.width;
            l.plane_height = dp.height;
            l.x0 = paste.x;
            l.y0 = paste.y;
            l.x1 = paste.x + paste.width;
            l.y1 = paste.y + paste.height;
            for (int c = 0; c < 4; ++c) l.fill_value |= uint32_t(fills[p][c]) << (8 * c);
        }
        out.push_back(l);
    }
}

/// Queues the jobs of one call: stream-ordered memory for their columns tables, the launches (in a trace: `dvpp`
/// spans named `trace_name`, each with its job's pictures), and its release (queued even when a launch fails
/// half-way: what was queued before still reads it).
void enqueue_all(rtStream_t stream, const std::vector<Job>& jobs, rtInterpolation interpolation,
                 const char* trace_name) {
    Kernels kernels(stream);
    std::vector<PlaneLaunch> launches;
    size_t count = 0;
    for (size_t k = 0; k < jobs.size(); ++k) plan(kernels, jobs[k], k, interpolation, launches, count);
    trace::DvppWork traced;
    traced.name = trace_name;
    trace::DvppScope scope(traced);
    void* memory = nullptr;
    check(rtMallocAsync(&memory, std::max<size_t>(count, 1) * sizeof(uint32_t), stream), "rtMallocAsync");
    try {
        for (PlaneLaunch& l : launches) {
            const Job& j = jobs[l.job];
            traced.bytes = j.dst_layout.bytes;
            traced.src[0] = j.crop.width;
            traced.src[1] = j.crop.height;
            traced.dst[0] = j.paste.width;
            traced.dst[1] = j.paste.height;
            traced.image = jobs.size() > 1 ? l.job : 0;
            traced.format = format_name(j.dst_layout.format);
            if (l.columns) {
                uint32_t* table = static_cast<uint32_t*>(memory) + l.columns_at;
                l.args.columns = table;
                void* cargs[] = {&l.args.r, &table};
                launch_2d(stream, l.columns, l.width, 1, cargs, 2);
            }
            void* args[] = {&l.args};
            launch_2d(stream, l.resize, l.width, l.height, args, 1);
            if (l.fill) {
                void* fargs[] = {&l.plane, &l.pitch, &l.x0, &l.y0, &l.x1, &l.y1, &l.fill_value};
                launch_2d(stream, l.fill, l.plane_width, l.plane_height, fargs, 7);
            }
        }
    } catch (...) {
        rtFreeAsync(memory, stream);
        throw;
    }
    check(rtFreeAsync(memory, stream), "rtFreeAsync");
}

void crop_resize_paste(const char* api, const char* trace_name, const rtPicture* src, const rtRect* crop,
                       rtPicture* dst, const rtRect* paste, const uint8_t* fill, int interpolation, rtStream_t stream) {
    const std::shared_ptr<Stream> s = runtime().stream(stream);
    const rtInterpolation interp = check_interpolation(interpolation, (std::string(api) + ": interpolation").c_str());
    const Job j = check_job(s->device(), src, crop, dst, paste, fill, names(api, "src", "dst", "crop", "paste"));
    enqueue_all(stream, {j}, interp, trace_name);
}

}  // namespace

}  // namespace rt::dvpp

using namespace rt;
using namespace rt::dvpp;

RT_API rtError_t rtDvppResize(const rtPicture* src, rtPicture* dst, rtInterpolation interpolation, rtStream_t stream) {
    return capi_call("rtDvppResize", [&] {
        crop_resize_paste("rtDvppResize", "resize", src, nullptr, dst, nullptr, nullptr, read_int(&interpolation),
                          stream);
    });
}

RT_API rtError_t rtDvppCropResize(const rtPicture* src, const rtRect* crop, rtPicture* dst,
                                  rtInterpolation interpolation, rtStream_t stream) {
    return capi_call("rtDvppCropResize", [&] {
        crop_resize_paste("rtDvppCropResize", "crop resize", src, crop, dst, nullptr, nullptr,
                          read_int(&interpolation), stream);
    });
}

RT_API rtError_t rtDvppCropResizePaste(const rtPicture* src, const rtRect* crop, rtPicture* dst, const rtRect* paste,
                                       const uint8_t fill[4], rtInterpolation interpolation, rtStream_t stream) {
    return capi_call("rtDvppCropResizePaste", [&] {
        crop_resize_paste("rtDvppCropResizePaste", "crop resize paste", src, crop, dst, paste, fill,
                          read_int(&interpolation), stream);
    });
}

RT_API rtError_t rtDvppBatchCropResize(const rtPicture* srcs, uint32_t nsrc, const uint32_t* crops_per_src,
                                       const rtRect* crops, rtPicture* dsts, rtInterpolation interpolation,
                                       rtStream_t stream) {
    constexpr const char* api = "rtDvppBatchCropResize";
    return capi_call(api, [&] {
        const std::shared_ptr<Stream> s = runtime().stream(stream);
        const rtInterpolation interp = check_interpolation(read_int(&interpolation), "rtDvppBatchCropResize: interpolation");
        if (nsrc == 0) return;  // an empty batch: nothing to do
        if (!srcs) fail(RT_ERROR_INVALID_VALUE, "%s: srcs is NULL with nsrc %u (expected %u pictures)", api, nsrc, nsrc);
        if (!dsts) fail(RT_ERROR_INVALID_VALUE, "%s: dsts is NULL (expected a picture per crop)", api);
        std::vector<Job> jobs;
        uint64_t k = 0;
        for (uint32_t i = 0; i < nsrc; ++i) {
            const uint32_t count = crops_per_src ? crops_per_src[i] : 1;
            for (uint32_t c = 0; c < count; ++c, ++k) {
                const std::string si = "srcs[" + std::to_string(i) + "]", ki = std::to_string(k);
                const Names n = names(api, si.c_str(), ("dsts[" + ki + "]").c_str(), ("crops[" + ki + "]").c_str(),
                                      "paste");
                jobs.push_back(check_job(s->device(), &srcs[i], crops ? &crops[k] : nullptr, &dsts[k], nullptr,
                                         nullptr, n));
            }
        }
        enqueue_all(stream, jobs, interp, "batch crop resize");
    });
}
