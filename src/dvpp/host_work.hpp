// DVPP's host work on streams: the codecs' work objects, run by host functions, spread over worker streams for a
// batch, and freed by deferred releases (so work that is skipped, or captured into a graph, is freed exactly once).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "dvpp/picture.hpp"
#include "observe/trace_dvpp.hpp"
#include "runtime/runtime.h"

namespace rt {
class CoreDevice;
}

namespace rt::dvpp {

/// The device of `stream` (NULL: the current device's default stream). Throws INVALID_HANDLE for a dead stream.
const CoreDevice& stream_device(rtStream_t stream);
/// Whether the host may write and read the memory of `device` directly (the cpu device): codecs then work in place;
/// otherwise through pinned staging and a copy on the stream.
bool host_addressable(const CoreDevice& device);

/// Page-locked host memory (rtMallocHost) owned by a work object; rtFreeHost returns at once, so it may be dropped
/// in queue context.
class PinnedBuffer {
public:
    PinnedBuffer() = default;
    explicit PinnedBuffer(size_t bytes);
    ~PinnedBuffer();
    PinnedBuffer(const PinnedBuffer&) = delete;
    PinnedBuffer& operator=(const PinnedBuffer&) = delete;
    uint8_t* data() const { return data_; }

private:
    uint8_t* data_ = nullptr;
};

/// The state of one DVPP call whose work runs on the host. Its steps (host functions) receive it; it is freed once
/// every stream it was queued on has run or skipped what was queued for it (one rtStreamDeferRelease per stream) —
/// for a captured call, once the graph and every executable graph made from it are gone. A graph replays its steps,
/// so steps read only what the call stored in the work (the encoded bytes were copied during the call) and leave it
/// ready for the next replay. Executable graphs instantiated from one capture share its work: their launches, if
/// they overlap in time, decode the same bytes into the same staging (launches of one executable graph never overlap).
class HostWork {
public:
    HostWork() = default;
    virtual ~HostWork();
    HostWork(const HostWork&) = delete;
    HostWork& operator=(const HostWork&) = delete;

private:
    friend class HostWorkQueue;
    struct Step {
        HostWork* work;
        void (*fn)(HostWork& work, size_t index);
        size_t index;
    };
    static void run_step(void* step);
    static void release(void* work);

    std::atomic<int> refs_{1};
    std::deque<Step> steps_;            // stable addresses: the host functions' user data
    std::vector<rtStream_t> streams_;  // worker streams of a captured call, destroyed with the work
};

/// Queues the steps and copies of one HostWork onto streams, then hands the work over to them: the destructor defers
/// a release on every stream used (a work queued nowhere is deleted at once), so a call that throws half-way still
/// frees the work exactly once, after what was queued has run. Not thread-safe (one call builds one queue).
class HostWorkQueue {
public:
    HostWorkQueue(std::unique_ptr<HostWork> work, rtStream_t stream, const char* api);
    ~HostWorkQueue();
    HostWorkQueue(const HostWorkQueue&) = delete;
    HostWorkQueue& operator=(const HostWorkQueue&) = delete;

    template <class T>
    T& work() const { return static_cast<T&>(*work_); }

    /// Queues fn(work, index) as a host function on lane `lane` (0: the call's stream); in a trace, a `dvpp` span
    /// described by `what`. A step that throws rt::Error fails its host function with the error's code and message
    /// (rtHostFuncSetError): that stream's next synchronize reports it, and the work behind it is skipped.
    void step(unsigned lane, void (*fn)(HostWork& work, size_t index), size_t index, const trace::DvppWork& what);
    /// rtMemcpyAsync(dst, src, bytes, RT_MEMCPY_DEFAULT) on lane `lane`.
    void copy(unsigned lane, void* dst, const void* src, size_t bytes);

    /// Spreads the call over `lanes` streams: lane 0 is the call's stream, the others are new streams of its device
    /// (non-blocking, so a capture they join never involves the default stream) that start after everything queued on
    /// the call's stream so far. Steps on different lanes run concurrently (each stream on its own executor). Call
    /// once, before queuing on lanes above 0.
    /// The lane streams belong to this call alone: they are destroyed after it (when the call's stream is capturing:
    /// with the work, once the capture is over), so a lane never carries another call's pending failure (a failure
    /// before the fork reaches the lanes as "dependency failed") nor belongs to another thread's capture. Their cost
    /// (a stream and two events per lane) is small beside a decoded image.
    void fork(unsigned lanes);
    /// The call's stream waits for everything queued on every lane so far: after join, lane 0 is ordered after all.
    void join();
    unsigned lanes() const { return static_cast<unsigned>(lanes_.size()); }

private:
    rtStream_t lane_stream(unsigned lane) const;
    void defer_releases() noexcept;

    std::unique_ptr<HostWork> work_;
    const char* api_;
    std::vector<rtStream_t> lanes_;  // lanes_[0]: the call's stream (may be NULL: the default stream)
    std::vector<bool> used_;         // lanes that got something queued
    bool capturing_ = false;
    bool joined_ = true;
};

/// One image of a decode call: the encoded bytes (copied during the call), the layout of the output picture and
/// where its pixels go. Implemented by each codec.
class DecodeImage {
public:
    DecodeImage(const void* data, size_t size, const Layout& layout, void* out);
    virtual ~DecodeImage() = default;
    /// Decodes into `dst` (laid out as `layout`, in host memory). Throws rt::Error(RT_ERROR_INVALID_IMAGE, the
    /// decoder's message) for a corrupt or truncated image. Called once per run of the operation (graph replays too),
    /// from any runtime thread: it keeps no state between calls.
    virtual void decode(uint8_t* dst) const = 0;
    /// The spans of this codec's decodes in a trace: one image ("jpeg decode"), and a batch's outcome.
    struct TraceNames {
        const char* image;
        const char* batch;
    };
    virtual TraceNames trace_names() const = 0;
    /// The encoded image's width and height (a scaled decode's output is smaller).
    virtual std::pair<uint32_t, uint32_t> encoded_size() const { return {layout_.width, layout_.height}; }
    /// How the codec decodes this image, for the dvpp debug log ("a 4:2:0 YCbCr JPEG of 1001 x 667, straight into
    /// the picture's planes").
    virtual std::string describe() const = 0;

    const uint8_t* bytes() const { return bytes_.get(); }
    size_t size() const { return size_; }
    const Layout& layout() const { return layout_; }
    void* out() const { return out_; }

private:
    std::unique_ptr<uint8_t[]> bytes_;
    size_t size_;
    Layout layout_;
    void* out_;
};

/// The first bytes of an encoded buffer in hex ("89 50 4E 47 ..."), for "not a JPEG" and "not a PNG" messages,
/// followed by ": a PNG (rtDvppDecodePng reads it)" or ": a JPEG (rtDvppDecodeJpeg reads it)" when it is one.
std::string describe_start(const void* data, size_t size);

/// Refuses (INVALID_VALUE naming `what`'s width_stride, "rtDvppEncodeJpeg: picture") a layout with rows of more than
/// INT_MAX bytes: TurboJPEG and libpng take row pitches as int.
void check_codec_pitch(const Layout& layout, const char* what);

/// Checks the output descriptor of a decode (`what`: "rtDvppDecodeJpeg: out") for an image of width x height:
/// out not NULL, out->format one of `formats` (listed in the refusal), even sizes for the 4:2:0 formats (the refusal
/// says what the image decodes to, from `source`: "the JPEG (1001 x 667)"), then check_picture with those sizes and
/// the caller's strides, data and capacity, and check_codec_pitch. Throws INVALID_VALUE naming the field.
Layout decode_output(const CoreDevice& device, const rtPicture* out, uint32_t width, uint32_t height,
                     const std::vector<rtPixelFormat>& formats, const char* what, const std::string& source);
/// Writes back what a decode call promises: width, height, the strides used and the bytes the picture occupies.
void write_back(rtPicture* out, const Layout& layout);

/// Queues the decode of images[i] into its picture on `stream` (NULL: the default stream) as one stream operation.
/// On a device the host can write (cpu) each image is decoded in place; otherwise into pinned staging, then copied on
/// the stream. `batch` false (one image): a failure fails the stream with "<api>: image 0: <decoder's message>".
/// `batch` true: the images are spread over worker streams of the stream's device (at most one per compute unit,
/// balanced by pixel count), forked from `stream` and joined back to it; a failed image is recorded and the others are
/// decoded; after the join the stream fails with "<api>: image 3 of the batch: ..." naming the first failed index (and
/// how many others failed), while the worker streams stay healthy.
void queue_decode(rtStream_t stream, const char* api, std::vector<std::unique_ptr<DecodeImage>> images, bool batch);

/// Thread-local scratch memory of the codecs' host steps (executor threads keep theirs): at least `bytes`, contents
/// undefined. Given back to the system after a step that needed more than 32 MiB (release_scratch).
uint8_t* scratch(size_t bytes);
void release_large_scratch() noexcept;

}  // namespace rt::dvpp
