// runtime._core's DVPP functions (dvpp.h): a thin binding of every rtDvpp* call for python/runtime/dvpp.py.
//
// Conventions (those of core_module.cpp, whose helpers are handed in by bind_dvpp):
//  - a picture is the tuple (data, size, format, width, height, width_stride, height_stride) of ints, a rectangle
//    (x, y, width, height); pointers are ints; the pixel formats, interpolations, matrices and data types are the
//    C enum values, exported as module constants (PIXEL_FORMAT_RGB888, INTERP_BILINEAR, ...);
//  - encoded input bytes are any C-contiguous bytes-like object, read during the call (the C API copies them);
//  - every call releases the GIL; a failure raises the exception class registered for its rtError_t, with the
//    library's message; an enqueue keeps `keep` (the Python objects its work uses) alive until the stream has
//    passed it, and a refused one queues nothing and keeps nothing.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <runtime/dvpp.h>

#include <dlfcn.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "bindings_common.hpp"

using rt_bindings::CheckFn;
using rt_bindings::g_check;
using rt_bindings::nogil;

namespace nb = nanobind;

namespace {

using RaiseFn = void (*)(rtError_t, const std::string&);
using KeepFn = rtError_t (*)(rtStream_t, PyObject*);
RaiseFn g_raise = nullptr;  // raises the registered class for `code` with "RT_ERROR_NAME: detail" (never returns)
KeepFn g_keep = nullptr;    // core_module.cpp's defer_keep(): hands a reference to rtStreamDeferRelease

[[noreturn]] void raise(rtError_t code, const std::string& detail) {
    g_raise(code, detail);
    throw nb::python_error();  // not reached: g_raise throws
}

// Whether the libruntime this extension was loaded with (found through one of its core symbols) exports `name`.
// Only for dvpp_available: the DVPP entry points themselves are linked directly.
bool libruntime_exports(const std::string& name) {
    static void* handle = [] {
        Dl_info info;
        std::memset(&info, 0, sizeof info);
        if (!dladdr(reinterpret_cast<void*>(&rtGetErrorName), &info) || !info.dli_fname)
            return static_cast<void*>(nullptr);
        return dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD);  // already loaded: this only returns its handle
    }();
    return handle && dlsym(handle, name.c_str());
}

// Runs `f` (an rt* call) with the GIL released and raises its failure.

// An enqueue `f` followed, on success, by the deferred release of `keep` (the GIL released across both); raises.
template <class F> void enqueue(const char* api, uintptr_t stream, nb::handle keep, F&& f) {
    rtStream_t st = reinterpret_cast<rtStream_t>(stream);
    PyObject* ref = nullptr;
    if (keep.is_valid() && !keep.is_none()) {
        ref = keep.ptr();
        Py_INCREF(ref);
    }
    rtError_t e, k = RT_SUCCESS;
    {
        nb::gil_scoped_release r;
        e = f(st);
        if (e == RT_SUCCESS && ref) k = g_keep(st, ref);  // refused: leaked, the queued work may still use it
    }
    if (e != RT_SUCCESS) Py_XDECREF(ref);
    g_check(e, api);
    g_check(k, "rtStreamDeferRelease");
}

// ---- conversions from the Python side's tuples

// The Python layer checks its arguments first; these refusals guard the C calls against what it would not pass.
[[noreturn]] void bad_argument(const std::string& msg) { raise(RT_ERROR_INVALID_VALUE, msg); }

template <class T> T int_at(nb::handle seq, size_t i, const char* what) {
    try {
        return nb::cast<T>(seq[i]);
    } catch (const nb::cast_error&) {
        bad_argument(std::string(what) + ": element " + std::to_string(i) + " is not an integer in range");
    }
}

rtPicture picture_of(nb::handle t, const char* what) {
    if (!nb::isinstance<nb::tuple>(t) || nb::len(t) != 7)
        bad_argument(std::string(what) + ": expected (data, size, format, width, height, width_stride, height_stride)");
    rtPicture p;
    std::memset(&p, 0, sizeof p);
    p.data = reinterpret_cast<void*>(int_at<uintptr_t>(t, 0, what));
    p.size = int_at<size_t>(t, 1, what);
    p.format = static_cast<rtPixelFormat>(int_at<int>(t, 2, what));
    p.width = int_at<uint32_t>(t, 3, what);
    p.height = int_at<uint32_t>(t, 4, what);
    p.width_stride = int_at<uint32_t>(t, 5, what);
    p.height_stride = int_at<uint32_t>(t, 6, what);
    return p;
}

nb::tuple picture_tuple(const rtPicture& p) {
    return nb::make_tuple(reinterpret_cast<uintptr_t>(p.data), p.size, static_cast<int>(p.format), p.width, p.height,
                          p.width_stride, p.height_stride);
}

std::vector<rtPicture> pictures_of(nb::handle seq, const char* what) {
    std::vector<rtPicture> out;
    const size_t n = nb::len(seq);
    out.reserve(n);
    for (size_t i = 0; i < n; ++i) out.push_back(picture_of(seq[i], what));
    return out;
}

rtRect rect_of(nb::handle t, const char* what) {
    if (!nb::isinstance<nb::tuple>(t) || nb::len(t) != 4)
        bad_argument(std::string(what) + ": expected (x, y, width, height)");
    return rtRect{int_at<uint32_t>(t, 0, what), int_at<uint32_t>(t, 1, what), int_at<uint32_t>(t, 2, what),
                  int_at<uint32_t>(t, 3, what)};
}

// An optional rectangle: None is NULL (the whole picture).
struct OptRect {
    rtRect rect{};
    bool given = false;
    OptRect(nb::handle t, const char* what) {
        if (!t.is_none()) {
            rect = rect_of(t, what);
            given = true;
        }
    }
    const rtRect* get() const { return given ? &rect : nullptr; }
};

std::vector<rtRect> rects_of(nb::handle seq, const char* what) {
    std::vector<rtRect> out;
    const size_t n = nb::len(seq);
    out.reserve(n);
    for (size_t i = 0; i < n; ++i) out.push_back(rect_of(seq[i], what));
    return out;
}

// Per-channel values (at most 4) in a float[4] padded with `pad`: the C API reads one per channel of the format.
void floats4(nb::handle seq, float pad, float out[4], const char* what) {
    const size_t n = nb::len(seq);
    if (n > 4) bad_argument(std::string(what) + ": at most 4 values (one per channel)");
    for (size_t i = 0; i < 4; ++i) out[i] = i < n ? nb::cast<float>(seq[i]) : pad;
}

// The bytes of a C-contiguous bytes-like object, held for the duration of one call.
struct HostBytes {
    Py_buffer view{};
    bool held = false;
    HostBytes(nb::handle obj, const char* what) {
        if (PyObject_GetBuffer(obj.ptr(), &view, PyBUF_C_CONTIGUOUS) != 0) {
            PyErr_Clear();
            bad_argument(std::string(what) + ": expected a C-contiguous bytes-like object (bytes, bytearray, a uint8 "
                                             "numpy array), got " + nb::type_name(obj.type()).c_str());
        }
        held = true;
    }
    ~HostBytes() {
        if (held) PyBuffer_Release(&view);
    }
    HostBytes(const HostBytes&) = delete;
    HostBytes& operator=(const HostBytes&) = delete;
    const void* data() const { return view.buf; }
    size_t size() const { return static_cast<size_t>(view.len); }
};

nb::tuple image_info(const char* api, rtError_t (*fn)(const void*, size_t, uint32_t*, uint32_t*, int*),
                     nb::handle data) {
    HostBytes b(data, api);
    uint32_t w = 0, h = 0;
    int c = 0;
    nogil(api, [&] { return fn(b.data(), b.size(), &w, &h, &c); });
    return nb::make_tuple(w, h, c);
}

}  // namespace

// Registered by core_module.cpp, which hands in its error and keep-alive helpers.
void bind_dvpp(nb::module_& m, CheckFn check, RaiseFn raise_fn, KeepFn keep) {
    g_check = check;
    g_raise = raise_fn;
    g_keep = keep;

    m.attr("PIXEL_FORMAT_GRAY8") = static_cast<int>(RT_PIXEL_FORMAT_GRAY8);
    m.attr("PIXEL_FORMAT_YUV420SP_NV12") = static_cast<int>(RT_PIXEL_FORMAT_YUV420SP_NV12);
    m.attr("PIXEL_FORMAT_YUV420SP_NV21") = static_cast<int>(RT_PIXEL_FORMAT_YUV420SP_NV21);
    m.attr("PIXEL_FORMAT_YUV420P") = static_cast<int>(RT_PIXEL_FORMAT_YUV420P);
    m.attr("PIXEL_FORMAT_RGB888") = static_cast<int>(RT_PIXEL_FORMAT_RGB888);
    m.attr("PIXEL_FORMAT_BGR888") = static_cast<int>(RT_PIXEL_FORMAT_BGR888);
    m.attr("PIXEL_FORMAT_RGBA8888") = static_cast<int>(RT_PIXEL_FORMAT_RGBA8888);
    m.attr("PIXEL_FORMAT_BGRA8888") = static_cast<int>(RT_PIXEL_FORMAT_BGRA8888);
    m.attr("INTERP_NEAREST") = static_cast<int>(RT_INTERP_NEAREST);
    m.attr("INTERP_BILINEAR") = static_cast<int>(RT_INTERP_BILINEAR);
    m.attr("INTERP_AREA") = static_cast<int>(RT_INTERP_AREA);
    m.attr("COLOR_BT601_FULL") = static_cast<int>(RT_COLOR_BT601_FULL);
    m.attr("COLOR_BT601_LIMITED") = static_cast<int>(RT_COLOR_BT601_LIMITED);
    m.attr("COLOR_BT709_FULL") = static_cast<int>(RT_COLOR_BT709_FULL);
    m.attr("COLOR_BT709_LIMITED") = static_cast<int>(RT_COLOR_BT709_LIMITED);

    // Transitional: the DVPP tests of the parts that landed one at a time guard on it (test_dvpp_codec, _color,
    // _resize); every entry point is linked now, so it is true for each of them.
    m.def("dvpp_available", [](const std::string& name) {
        return name.rfind("rtDvpp", 0) == 0 && libruntime_exports(name);
    }, nb::arg("name"), "Whether libruntime has the DVPP entry point `name` (e.g. 'rtDvppResize').");

    m.def("dvpp_picture_size", [](int format, uint32_t w, uint32_t h, uint32_t ws, uint32_t hs) {
        size_t bytes = 0;
        nogil("rtDvppPictureSize",
              [&] { return rtDvppPictureSize(static_cast<rtPixelFormat>(format), w, h, ws, hs, &bytes); });
        return bytes;
    }, nb::arg("format"), nb::arg("width"), nb::arg("height"), nb::arg("width_stride") = 0u,
          nb::arg("height_stride") = 0u);

    // ---- codecs
    m.def("dvpp_jpeg_get_info", [](nb::handle data) {
        return image_info("rtDvppJpegGetInfo", rtDvppJpegGetInfo, data);
    }, nb::arg("data"), "(width, height, components) of a JPEG's header.");
    m.def("dvpp_png_get_info", [](nb::handle data) {
        return image_info("rtDvppPngGetInfo", rtDvppPngGetInfo, data);
    }, nb::arg("data"), "(width, height, components) of a PNG's header.");
    m.def("dvpp_decode_jpeg", [](nb::handle data, nb::handle out, uintptr_t stream, nb::handle keep) {
        HostBytes b(data, "rtDvppDecodeJpeg: data");
        rtPicture p = picture_of(out, "rtDvppDecodeJpeg: out");
        enqueue("rtDvppDecodeJpeg", stream, keep,
                [&](rtStream_t s) { return rtDvppDecodeJpeg(b.data(), b.size(), &p, s); });
        return picture_tuple(p);
    }, nb::arg("data"), nb::arg("out"), nb::arg("stream"), nb::arg("keep") = nb::none(),
          "rtDvppDecodeJpeg; returns the picture as the call wrote it back (sizes, strides, size).");
    m.def("dvpp_decode_jpeg_scaled", [](nb::handle data, uint32_t min_w, uint32_t min_h, nb::handle out,
                                        uintptr_t stream, nb::handle keep) {
        HostBytes b(data, "rtDvppDecodeJpegScaled: data");
        rtPicture p = picture_of(out, "rtDvppDecodeJpegScaled: out");
        enqueue("rtDvppDecodeJpegScaled", stream, keep,
                [&](rtStream_t s) { return rtDvppDecodeJpegScaled(b.data(), b.size(), min_w, min_h, &p, s); });
        return picture_tuple(p);
    }, nb::arg("data"), nb::arg("min_width"), nb::arg("min_height"), nb::arg("out"), nb::arg("stream"),
          nb::arg("keep") = nb::none());
    m.def("dvpp_decode_jpeg_batch", [](nb::handle datas, nb::handle min_ws, nb::handle min_hs, nb::handle outs,
                                       uintptr_t stream, nb::handle keep) {
        const size_t n = nb::len(datas);
        if (nb::len(outs) != n) bad_argument("rtDvppDecodeJpegBatch: one output picture per image");
        if (min_ws.is_none() != min_hs.is_none())
            bad_argument("rtDvppDecodeJpegBatch: min_widths and min_heights are both given or both None");
        std::vector<uint32_t> mw, mh;
        if (!min_ws.is_none()) {
            if (nb::len(min_ws) != n || nb::len(min_hs) != n)
                bad_argument("rtDvppDecodeJpegBatch: one minimum width and height per image");
            for (size_t i = 0; i < n; ++i) {
                mw.push_back(int_at<uint32_t>(min_ws, i, "rtDvppDecodeJpegBatch: min_widths"));
                mh.push_back(int_at<uint32_t>(min_hs, i, "rtDvppDecodeJpegBatch: min_heights"));
            }
        }
        std::vector<std::unique_ptr<HostBytes>> held;
        std::vector<const void*> ptrs;
        std::vector<size_t> sizes;
        for (size_t i = 0; i < n; ++i) {
            held.push_back(std::make_unique<HostBytes>(datas[i], "rtDvppDecodeJpegBatch: datas"));
            ptrs.push_back(held.back()->data());
            sizes.push_back(held.back()->size());
        }
        std::vector<rtPicture> pics = pictures_of(outs, "rtDvppDecodeJpegBatch: outs");
        if (n > 0xffffffffull) bad_argument("rtDvppDecodeJpegBatch: more than 2**32-1 images");
        enqueue("rtDvppDecodeJpegBatch", stream, keep, [&](rtStream_t s) {
            return rtDvppDecodeJpegBatch(ptrs.data(), sizes.data(), static_cast<uint32_t>(n),
                                         mw.empty() ? nullptr : mw.data(), mh.empty() ? nullptr : mh.data(),
                                         pics.data(), s);
        });
        nb::list out;
        for (const rtPicture& p : pics) out.append(picture_tuple(p));
        return out;
    }, nb::arg("datas"), nb::arg("min_widths").none(), nb::arg("min_heights").none(), nb::arg("outs"),
          nb::arg("stream"), nb::arg("keep") = nb::none(),
          "rtDvppDecodeJpegBatch; returns the pictures as the call wrote them back.");
    m.def("dvpp_decode_png", [](nb::handle data, nb::handle out, uintptr_t stream, nb::handle keep) {
        HostBytes b(data, "rtDvppDecodePng: data");
        rtPicture p = picture_of(out, "rtDvppDecodePng: out");
        enqueue("rtDvppDecodePng", stream, keep,
                [&](rtStream_t s) { return rtDvppDecodePng(b.data(), b.size(), &p, s); });
        return picture_tuple(p);
    }, nb::arg("data"), nb::arg("out"), nb::arg("stream"), nb::arg("keep") = nb::none());
    m.def("dvpp_encode_jpeg_bound", [](nb::handle pic) {
        rtPicture p = picture_of(pic, "rtDvppEncodeJpegBound: picture");
        size_t bytes = 0;
        nogil("rtDvppEncodeJpegBound", [&] { return rtDvppEncodeJpegBound(&p, &bytes); });
        return bytes;
    }, nb::arg("picture"));
    // out and out_size are host addresses the caller keeps valid (in `keep`) until the operation has run;
    // *out_size holds the capacity on entry and the JPEG's length afterwards.
    m.def("dvpp_encode_jpeg", [](nb::handle pic, int quality, uintptr_t out, uintptr_t out_size, uintptr_t stream,
                                 nb::handle keep) {
        rtPicture p = picture_of(pic, "rtDvppEncodeJpeg: picture");
        enqueue("rtDvppEncodeJpeg", stream, keep, [&](rtStream_t s) {
            return rtDvppEncodeJpeg(&p, quality, reinterpret_cast<void*>(out), reinterpret_cast<size_t*>(out_size),
                                    s);
        });
    }, nb::arg("picture"), nb::arg("quality"), nb::arg("out"), nb::arg("out_size"), nb::arg("stream"),
          nb::arg("keep") = nb::none());

    // ---- pixel operations
    m.def("dvpp_resize", [](nb::handle src, nb::handle dst, int interp, uintptr_t stream, nb::handle keep) {
        rtPicture s_ = picture_of(src, "rtDvppResize: src"), d = picture_of(dst, "rtDvppResize: dst");
        enqueue("rtDvppResize", stream, keep,
                [&](rtStream_t s) { return rtDvppResize(&s_, &d, static_cast<rtInterpolation>(interp), s); });
    }, nb::arg("src"), nb::arg("dst"), nb::arg("interpolation"), nb::arg("stream"), nb::arg("keep") = nb::none());
    m.def("dvpp_crop_resize", [](nb::handle src, nb::handle crop, nb::handle dst, int interp, uintptr_t stream,
                                 nb::handle keep) {
        rtPicture s_ = picture_of(src, "rtDvppCropResize: src"), d = picture_of(dst, "rtDvppCropResize: dst");
        OptRect c(crop, "rtDvppCropResize: crop");
        enqueue("rtDvppCropResize", stream, keep,
                [&](rtStream_t s) {
                    return rtDvppCropResize(&s_, c.get(), &d, static_cast<rtInterpolation>(interp), s);
                });
    }, nb::arg("src"), nb::arg("crop").none(), nb::arg("dst"), nb::arg("interpolation"), nb::arg("stream"),
          nb::arg("keep") = nb::none());
    m.def("dvpp_crop_resize_paste", [](nb::handle src, nb::handle crop, nb::handle dst, nb::handle paste,
                                       nb::handle fill, int interp, uintptr_t stream, nb::handle keep) {
        rtPicture s_ = picture_of(src, "rtDvppCropResizePaste: src"), d = picture_of(dst, "rtDvppCropResizePaste: dst");
        OptRect c(crop, "rtDvppCropResizePaste: crop"), pa(paste, "rtDvppCropResizePaste: paste");
        uint8_t f[4] = {0, 0, 0, 0};
        if (!fill.is_none()) {
            const size_t n = nb::len(fill);
            if (n > 4) bad_argument("rtDvppCropResizePaste: fill: at most 4 values (one per channel)");
            for (size_t i = 0; i < n; ++i) f[i] = int_at<uint8_t>(fill, i, "rtDvppCropResizePaste: fill");
        }
        enqueue("rtDvppCropResizePaste", stream, keep, [&](rtStream_t s) {
            return rtDvppCropResizePaste(&s_, c.get(), &d, pa.get(), fill.is_none() ? nullptr : f,
                                         static_cast<rtInterpolation>(interp), s);
        });
    }, nb::arg("src"), nb::arg("crop").none(), nb::arg("dst"), nb::arg("paste").none(), nb::arg("fill").none(),
          nb::arg("interpolation"), nb::arg("stream"), nb::arg("keep") = nb::none());
    m.def("dvpp_batch_crop_resize", [](nb::handle srcs, nb::handle crops_per_src, nb::handle crops, nb::handle dsts,
                                       int interp, uintptr_t stream, nb::handle keep) {
        std::vector<rtPicture> s_ = pictures_of(srcs, "rtDvppBatchCropResize: srcs");
        std::vector<rtPicture> d = pictures_of(dsts, "rtDvppBatchCropResize: dsts");
        std::vector<uint32_t> per;
        if (!crops_per_src.is_none()) {
            if (nb::len(crops_per_src) != s_.size())
                bad_argument("rtDvppBatchCropResize: crops_per_src: one count per source picture");
            for (size_t i = 0; i < s_.size(); ++i)
                per.push_back(int_at<uint32_t>(crops_per_src, i, "rtDvppBatchCropResize: crops_per_src"));
        }
        std::vector<rtRect> c;
        if (!crops.is_none()) c = rects_of(crops, "rtDvppBatchCropResize: crops");
        // The C call reads as many crops and dsts as the counts say: make sure they are there.
        size_t total = 0;
        for (size_t i = 0; i < s_.size(); ++i) total += per.empty() ? 1 : per[i];
        if (d.size() != total)
            bad_argument("rtDvppBatchCropResize: dsts: " + std::to_string(d.size()) + " pictures for " +
                         std::to_string(total) + " crops");
        if (!crops.is_none() && c.size() != total)
            bad_argument("rtDvppBatchCropResize: crops: " + std::to_string(c.size()) + " rectangles for " +
                         std::to_string(total) + " crops");
        if (s_.size() > 0xffffffffull) bad_argument("rtDvppBatchCropResize: more than 2**32-1 pictures");
        enqueue("rtDvppBatchCropResize", stream, keep, [&](rtStream_t s) {
            return rtDvppBatchCropResize(s_.data(), static_cast<uint32_t>(s_.size()),
                                         per.empty() ? nullptr : per.data(), c.empty() ? nullptr : c.data(),
                                         d.data(), static_cast<rtInterpolation>(interp), s);
        });
    }, nb::arg("srcs"), nb::arg("crops_per_src").none(), nb::arg("crops").none(), nb::arg("dsts"),
          nb::arg("interpolation"), nb::arg("stream"), nb::arg("keep") = nb::none());
    m.def("dvpp_convert_color", [](nb::handle src, nb::handle dst, int matrix, uintptr_t stream, nb::handle keep) {
        rtPicture s_ = picture_of(src, "rtDvppConvertColor: src"), d = picture_of(dst, "rtDvppConvertColor: dst");
        enqueue("rtDvppConvertColor", stream, keep,
                [&](rtStream_t s) { return rtDvppConvertColor(&s_, &d, static_cast<rtColorMatrix>(matrix), s); });
    }, nb::arg("src"), nb::arg("dst"), nb::arg("matrix"), nb::arg("stream"), nb::arg("keep") = nb::none());
    m.def("dvpp_normalize", [](nb::handle src, uintptr_t dst, int dtype, bool chw, nb::handle mean, nb::handle std_,
                               uintptr_t stream, nb::handle keep) {
        rtPicture s_ = picture_of(src, "rtDvppNormalize: src");
        float mv[4], sv[4];
        if (!mean.is_none()) floats4(mean, 0.0f, mv, "rtDvppNormalize: mean");
        if (!std_.is_none()) floats4(std_, 1.0f, sv, "rtDvppNormalize: std");
        enqueue("rtDvppNormalize", stream, keep, [&](rtStream_t s) {
            return rtDvppNormalize(&s_, reinterpret_cast<void*>(dst), static_cast<rtDataType>(dtype), chw ? 1 : 0,
                                   mean.is_none() ? nullptr : mv, std_.is_none() ? nullptr : sv, s);
        });
    }, nb::arg("src"), nb::arg("dst"), nb::arg("dtype"), nb::arg("chw"), nb::arg("mean").none(),
          nb::arg("std").none(), nb::arg("stream"), nb::arg("keep") = nb::none());
    m.def("dvpp_preprocess", [](nb::handle srcs, nb::handle crops, uint32_t width, uint32_t height, int interp,
                                int format, int matrix, int dtype, bool chw, nb::handle mean, nb::handle std_,
                                nb::handle paste, nb::handle fill, uintptr_t dst, uintptr_t stream, nb::handle keep) {
        std::vector<rtPicture> s_ = pictures_of(srcs, "rtDvppPreprocess: srcs");
        std::vector<rtRect> c;
        if (!crops.is_none()) {
            c = rects_of(crops, "rtDvppPreprocess: crops");
            if (c.size() != s_.size()) bad_argument("rtDvppPreprocess: crops: one rectangle per picture");
        }
        rtDvppPreprocessParams p = RT_DVPP_PREPROCESS_INIT;
        p.width = width;
        p.height = height;
        p.interpolation = static_cast<rtInterpolation>(interp);
        p.format = static_cast<rtPixelFormat>(format);
        p.matrix = static_cast<rtColorMatrix>(matrix);
        p.dtype = static_cast<rtDataType>(dtype);
        p.chw = chw ? 1 : 0;
        if (!mean.is_none()) floats4(mean, 0.0f, p.mean, "rtDvppPreprocess: mean");
        if (!std_.is_none()) floats4(std_, 1.0f, p.std, "rtDvppPreprocess: std");
        if (!paste.is_none()) p.paste = rect_of(paste, "rtDvppPreprocess: paste");
        if (!fill.is_none()) {
            const size_t n = nb::len(fill);
            if (n > 4) bad_argument("rtDvppPreprocess: fill: at most 4 values (one per channel)");
            for (size_t i = 0; i < n; ++i) p.fill[i] = int_at<uint8_t>(fill, i, "rtDvppPreprocess: fill");
        }
        if (s_.size() > 0xffffffffull) bad_argument("rtDvppPreprocess: more than 2**32-1 pictures");
        enqueue("rtDvppPreprocess", stream, keep, [&](rtStream_t s) {
            return rtDvppPreprocess(s_.data(), static_cast<uint32_t>(s_.size()), c.empty() ? nullptr : c.data(), &p,
                                    reinterpret_cast<void*>(dst), s);
        });
    }, nb::arg("srcs"), nb::arg("crops").none(), nb::arg("width"), nb::arg("height"), nb::arg("interpolation"),
          nb::arg("format"), nb::arg("matrix"), nb::arg("dtype"), nb::arg("chw"), nb::arg("mean").none(),
          nb::arg("std").none(), nb::arg("paste").none(), nb::arg("fill").none(), nb::arg("dst"), nb::arg("stream"),
          nb::arg("keep") = nb::none(), "rtDvppPreprocess of len(srcs) pictures into dst.");
}
