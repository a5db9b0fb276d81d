// DVPP's host work on streams (host_work.hpp): steps as host functions, worker streams for batches, deferred release.
#include "dvpp/host_work.hpp"

#include <algorithm>
#include <climits>
#include <cstring>
#include <new>
#include <tuple>

#include "core/device.hpp"
#include "core/error.hpp"
#include "core/runtime.hpp"
#include "dvpp/kernel_library.hpp"
#include "observe/log.hpp"

namespace rt::dvpp {

const CoreDevice& stream_device(rtStream_t stream) { return runtime().stream(stream)->device(); }

bool host_addressable(const CoreDevice& device) { return device.info().host_addressable; }

PinnedBuffer::PinnedBuffer(size_t bytes) {
    void* p = nullptr;
    check(rtMallocHost(&p, bytes), "rtMallocHost (staging)");
    data_ = static_cast<uint8_t*>(p);
}

PinnedBuffer::~PinnedBuffer() {
    if (data_) rtFreeHost(data_);
}

// ---------------------------------------------------------------- work and its steps

HostWork::~HostWork() {
    // Worker streams of a captured call: the capture is over once the graph that held this work is gone.
    for (rtStream_t s : streams_) rtStreamDestroy(s);
}

void HostWork::run_step(void* p) {
    const Step& step = *static_cast<const Step*>(p);
    try {
        step.fn(*step.work, step.index);
        return;
    } catch (const Error& e) {
        rtHostFuncSetError(e.code(), e.what());
    } catch (const std::bad_alloc&) {
        rtHostFuncSetError(RT_ERROR_OUT_OF_MEMORY, "DVPP host work: out of host memory");
    } catch (const std::exception& e) {
        std::string m = std::string("DVPP host work: internal error: ") + e.what();
        rtHostFuncSetError(RT_ERROR_UNKNOWN, m.c_str());
    } catch (...) {
        rtHostFuncSetError(RT_ERROR_UNKNOWN, "DVPP host work: internal error");
    }
}

void HostWork::release(void* p) {
    auto* work = static_cast<HostWork*>(p);
    if (work->refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete work;
}

// ---------------------------------------------------------------- queue

namespace {

/// Makes `device` current for the calling thread for a scope: streams and events are created on the current device.
class CurrentDevice {
public:
    explicit CurrentDevice(int device) {
        check(rtGetDevice(&saved_), "rtGetDevice");
        if (saved_ != device) check(rtSetDevice(device), "rtSetDevice");
    }
    ~CurrentDevice() { rtSetDevice(saved_); }
    CurrentDevice(const CurrentDevice&) = delete;
    CurrentDevice& operator=(const CurrentDevice&) = delete;

private:
    int saved_ = 0;
};

/// An event that only orders (no timing), destroyed with the scope: a wait keeps the record it waits for.
class OrderEvent {
public:
    OrderEvent() { check(rtEventCreateWithFlags(&event_, RT_EVENT_DISABLE_TIMING), "rtEventCreateWithFlags"); }
    ~OrderEvent() { rtEventDestroy(event_); }
    OrderEvent(const OrderEvent&) = delete;
    OrderEvent& operator=(const OrderEvent&) = delete;
    rtEvent_t get() const { return event_; }

private:
    rtEvent_t event_ = nullptr;
};

}  // namespace

HostWorkQueue::HostWorkQueue(std::unique_ptr<HostWork> work, rtStream_t stream, const char* api)
    : work_(std::move(work)), api_(api), lanes_{stream}, used_{false} {}

HostWorkQueue::~HostWorkQueue() {
    if (!joined_) {
        try {
            join();  // a call that failed half-way: still one stream operation for the streams that got work
        } catch (...) {
        }
    }
    defer_releases();
    if (capturing_) {
        // Streams that joined a capture cannot be destroyed before it ends: the work destroys them with itself.
        return;
    }
    for (size_t i = 1; i < lanes_.size(); ++i) rtStreamDestroy(lanes_[i]);  // their queued work still runs
}

void HostWorkQueue::defer_releases() noexcept {
    HostWork* work = work_.release();
    if (capturing_) work->streams_.assign(lanes_.begin() + 1, lanes_.end());
    int used = static_cast<int>(std::count(used_.begin(), used_.end(), true));
    work->refs_.fetch_add(used, std::memory_order_relaxed);
    for (size_t i = 0; i < lanes_.size(); ++i) {
        if (!used_[i]) continue;
        // A release that cannot be deferred keeps its reference: the work leaks rather than being freed under
        // steps that may still run.
        (void)rtStreamDeferRelease(lanes_[i], &HostWork::release, work);
    }
    HostWork::release(work);  // this queue's own reference: the work goes at once when nothing was queued
}

rtStream_t HostWorkQueue::lane_stream(unsigned lane) const {
    if (lane >= lanes_.size())
        fail(RT_ERROR_UNKNOWN, "%s: internal error: lane %u of %zu", api_, lane, lanes_.size());
    return lanes_[lane];
}

void HostWorkQueue::step(unsigned lane, void (*fn)(HostWork&, size_t), size_t index, const trace::DvppWork& what) {
    rtStream_t s = lane_stream(lane);
    HostWork::Step& st = work_->steps_.emplace_back(HostWork::Step{work_.get(), fn, index});
    rtError_t code;
    {
        trace::DvppScope traced(what);
        code = rtLaunchHostFunc(s, &HostWork::run_step, &st);
    }
    if (code != RT_SUCCESS) {
        work_->steps_.pop_back();
        check(code, "rtLaunchHostFunc");
    }
    used_[lane] = true;
}

void HostWorkQueue::copy(unsigned lane, void* dst, const void* src, size_t bytes) {
    check(rtMemcpyAsync(dst, src, bytes, RT_MEMCPY_DEFAULT, lane_stream(lane)), "rtMemcpyAsync");
    used_[lane] = true;
}

void HostWorkQueue::fork(unsigned lanes) {
    if (lanes_.size() != 1) fail(RT_ERROR_UNKNOWN, "%s: internal error: forked twice", api_);
    if (lanes <= 1) return;
    rtStreamCaptureStatus status = RT_STREAM_CAPTURE_STATUS_NONE;
    check(rtStreamGetCaptureInfo(lanes_[0], &status, nullptr), "rtStreamGetCaptureInfo");
    capturing_ = status != RT_STREAM_CAPTURE_STATUS_NONE;
    CurrentDevice on(stream_device(lanes_[0]).index());
    OrderEvent start;
    check(rtEventRecord(start.get(), lanes_[0]), "rtEventRecord");
    joined_ = false;
    for (unsigned i = 1; i < lanes; ++i) {
        rtStream_t s = nullptr;
        check(rtStreamCreateWithFlags(&s, RT_STREAM_NON_BLOCKING), "rtStreamCreateWithFlags");
        lanes_.push_back(s);
        used_.push_back(false);
        check(rtStreamWaitEvent(s, start.get()), "rtStreamWaitEvent");
    }
}

void HostWorkQueue::join() {
    joined_ = true;
    if (lanes_.size() <= 1) return;
    CurrentDevice on(stream_device(lanes_[0]).index());
    for (size_t i = 1; i < lanes_.size(); ++i) {
        OrderEvent done;
        check(rtEventRecord(done.get(), lanes_[i]), "rtEventRecord");
        check(rtStreamWaitEvent(lanes_[0], done.get()), "rtStreamWaitEvent");
        used_[0] = true;
    }
}

// ---------------------------------------------------------------- decode calls

Layout decode_output(const CoreDevice& device, const rtPicture* out, uint32_t width, uint32_t height,
                     const std::vector<rtPixelFormat>& formats, const char* what, const std::string& source) {
    if (!out) fail(RT_ERROR_INVALID_VALUE, "%s is NULL (expected the output picture's descriptor)", what);
    int format;
    static_assert(sizeof format == sizeof out->format);
    std::memcpy(&format, &out->format, sizeof format);  // the C ABI may pass any integer
    if (!is_format(format) ||
        std::find(formats.begin(), formats.end(), static_cast<rtPixelFormat>(format)) == formats.end()) {
        std::string list;
        for (rtPixelFormat f : formats) list += std::string(list.empty() ? "" : ", ") + format_name(f);
        fail(RT_ERROR_INVALID_VALUE, "%s->format %s is not a format this decoder writes (expected one of %s)", what,
             format_name(format), list.c_str());
    }
    if (is_yuv420(static_cast<rtPixelFormat>(format)) && (width % 2 || height % 2))
        fail(RT_ERROR_INVALID_VALUE, "%s->format %s needs even sizes (4:2:0 chroma covers 2 x 2 pixels), but %s "
             "decodes to %u x %u (choose a packed format, or a scale whose size is even)", what,
             format_name(format), source.c_str(), width, height);
    rtPicture picture = *out;
    picture.width = width;
    picture.height = height;
    // The pitch before the memory: a refused pitch needs no allocation to be refused.
    check_codec_pitch(check_descriptor(&picture, what), what);
    return check_picture(device, &picture, what);
}

std::string describe_start(const void* data, size_t size) {
    const auto* p = static_cast<const uint8_t*>(data);
    std::string s;
    for (size_t i = 0; i < std::min<size_t>(size, 8); ++i) s += format("%s%02X", i ? " " : "", p[i]);
    static const uint8_t png[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
    if (size >= 8 && std::memcmp(p, png, 8) == 0) s += ": a PNG (rtDvppDecodePng reads it)";
    if (size >= 3 && p[0] == 0xFF && p[1] == 0xD8 && p[2] == 0xFF) s += ": a JPEG (rtDvppDecodeJpeg reads it)";
    return s;
}

void check_codec_pitch(const Layout& layout, const char* what) {
    for (int i = 0; i < layout.num_planes; ++i)
        if (layout.planes[i].pitch > size_t(INT_MAX))
            fail(RT_ERROR_INVALID_VALUE, "%s->width_stride %u makes rows of %zu bytes (the codecs take rows of at "
                 "most INT_MAX = %d bytes)", what, layout.width_stride, layout.planes[i].pitch, INT_MAX);
}

void write_back(rtPicture* out, const Layout& layout) {
    out->width = layout.width;
    out->height = layout.height;
    out->width_stride = layout.width_stride;
    out->height_stride = layout.height_stride;
    out->size = layout.bytes;
}

DecodeImage::DecodeImage(const void* data, size_t size, const Layout& layout, void* out)
    : bytes_(new uint8_t[size ? size : 1]), size_(size), layout_(layout), out_(out) {
    if (size) std::memcpy(bytes_.get(), data, size);
}

namespace {

/// The images of one decode call, where each is decoded (in place, or at an offset of the staging) and, for a
/// batch, each image's failure of the latest run.
class DecodeWork final : public HostWork {
public:
    const char* api = "";
    std::vector<std::unique_ptr<DecodeImage>> images;
    std::vector<size_t> staging_offset;  // per image, when staged
    std::unique_ptr<PinnedBuffer> staging;
    bool staged = false;

    std::mutex mutex;                  // errors: written by the lanes, read by the report (replays may overlap)
    std::vector<std::string> errors;  // per image: "" or the decoder's message

    uint8_t* target(size_t i) const {
        return staged ? staging->data() + staging_offset[i] : static_cast<uint8_t*>(images[i]->out());
    }
};

void decode_one(HostWork& w, size_t i) {
    auto& work = static_cast<DecodeWork&>(w);
    try {
        work.images[i]->decode(work.target(i));
    } catch (const Error& e) {
        release_large_scratch();
        fail(e.code(), "%s: image %zu: %s", work.api, i, e.what());
    }
    release_large_scratch();
}

void decode_of_batch(HostWork& w, size_t i) {
    auto& work = static_cast<DecodeWork&>(w);
    std::string error;
    try {
        work.images[i]->decode(work.target(i));
    } catch (const Error& e) {
        error = e.what();
    } catch (const std::bad_alloc&) {
        error = "out of host memory";
    }
    release_large_scratch();
    std::lock_guard lock(work.mutex);
    work.errors[i] = std::move(error);
}

/// After the join: fails the call's stream naming the first image that failed in this run.
void report_batch(HostWork& w, size_t) {
    auto& work = static_cast<DecodeWork&>(w);
    std::lock_guard lock(work.mutex);
    size_t first = work.errors.size(), failed = 0;
    for (size_t i = 0; i < work.errors.size(); ++i) {
        if (work.errors[i].empty()) continue;
        if (failed++ == 0) first = i;
    }
    if (failed == 0) return;
    std::string others;
    if (failed > 1) {
        others = format(" (%zu more of the %zu images failed:", failed - 1, work.errors.size());
        size_t listed = 0;
        for (size_t i = first + 1; i < work.errors.size() && listed < 8; ++i)
            if (!work.errors[i].empty()) others += format("%s %zu", listed++ ? "," : "", i);
        others += failed - 1 > listed ? ", ...)" : ")";
    }
    fail(RT_ERROR_INVALID_IMAGE, "%s: image %zu of the batch: %s%s", work.api, first, work.errors[first].c_str(),
         others.c_str());
}

/// Longest-processing-time assignment of images to lanes by pixel count: each image, largest first, goes to the lane
/// with the least work so far. Returns each lane's images in index order.
std::vector<std::vector<size_t>> balance(const std::vector<std::unique_ptr<DecodeImage>>& images, unsigned lanes) {
    std::vector<size_t> order(images.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    auto pixels = [&](size_t i) { return uint64_t{images[i]->layout().width} * images[i]->layout().height; };
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return pixels(a) > pixels(b); });
    std::vector<uint64_t> load(lanes, 0);
    std::vector<std::vector<size_t>> out(lanes);
    for (size_t i : order) {
        size_t lane = static_cast<size_t>(std::min_element(load.begin(), load.end()) - load.begin());
        load[lane] += pixels(i) + 1;
        out[lane].push_back(i);
    }
    for (auto& v : out) std::sort(v.begin(), v.end());
    return out;
}

}  // namespace

void queue_decode(rtStream_t stream, const char* api, std::vector<std::unique_ptr<DecodeImage>> images, bool batch) {
    if (images.empty()) return;
    const CoreDevice& device = stream_device(stream);
    auto work = std::make_unique<DecodeWork>();
    DecodeWork& w = *work;
    w.api = api;
    w.images = std::move(images);
    w.errors.resize(w.images.size());
    w.staged = !host_addressable(device);
    if (w.staged) {
        size_t total = 0;
        for (const auto& image : w.images) {
            w.staging_offset.push_back(total);
            total += (image->layout().bytes + 255) & ~size_t{255};
        }
        w.staging = std::make_unique<PinnedBuffer>(total);
    }

    if (log::enabled(log::Subsystem::dvpp, log::Level::debug))
        for (size_t i = 0; i < w.images.size(); ++i) {
            const Layout& l = w.images[i]->layout();
            RT_LOG(dvpp, debug, "%s: image %zu: %s, into %u x %u %s %s", api, i, w.images[i]->describe().c_str(),
                   l.width, l.height, format_name(l.format),
                   w.staged ? "through pinned staging and a copy (the device's memory is not the host's)"
                            : "in place");
        }

    HostWorkQueue queue(std::move(work), stream, api);
    auto copy_back = [&](unsigned lane, size_t i) {
        if (w.staged) queue.copy(lane, w.images[i]->out(), w.target(i), w.images[i]->layout().bytes);
    };
    const DecodeImage::TraceNames names = w.images[0]->trace_names();
    auto traced = [&](size_t i) {
        const DecodeImage& image = *w.images[i];
        trace::DvppWork t;
        t.name = names.image;
        t.bytes = image.layout().bytes;
        std::tie(t.src[0], t.src[1]) = image.encoded_size();
        t.dst[0] = image.layout().width;
        t.dst[1] = image.layout().height;
        t.image = batch ? i : 0;
        t.format = format_name(image.layout().format);
        return t;
    };
    if (!batch) {
        for (size_t i = 0; i < w.images.size(); ++i) {
            queue.step(0, &decode_one, i, traced(i));
            copy_back(0, i);
        }
        return;
    }
    const unsigned units = static_cast<unsigned>(std::max(1, device.info().compute_units));
    const unsigned lanes = static_cast<unsigned>(std::min<size_t>(units, w.images.size()));
    queue.fork(lanes);
    std::vector<std::vector<size_t>> plan = balance(w.images, lanes);
    for (unsigned lane = 0; lane < lanes; ++lane)
        for (size_t i : plan[lane]) {
            queue.step(lane, &decode_of_batch, i, traced(i));
            copy_back(lane, i);
        }
    queue.join();
    trace::DvppWork outcome;  // the batch's outcome: failed when an image failed
    outcome.name = names.batch;
    for (const auto& image : w.images) outcome.bytes += image->layout().bytes;
    queue.step(0, &report_batch, 0, outcome);
}

// ---------------------------------------------------------------- scratch

namespace {
constexpr size_t kKeepScratch = size_t{32} << 20;
thread_local std::unique_ptr<uint8_t[]> t_scratch;
thread_local size_t t_scratch_bytes = 0;
}  // namespace

uint8_t* scratch(size_t bytes) {
    if (bytes > t_scratch_bytes) {
        t_scratch.reset();
        t_scratch_bytes = 0;
        t_scratch.reset(new uint8_t[bytes]);
        t_scratch_bytes = bytes;
    }
    return t_scratch.get();
}

void release_large_scratch() noexcept {
    if (t_scratch_bytes > kKeepScratch) {
        t_scratch.reset();
        t_scratch_bytes = 0;
    }
}

}  // namespace rt::dvpp
