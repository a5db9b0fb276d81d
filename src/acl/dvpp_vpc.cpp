// dvpp_vpc.cpp — VPC: resize, crop, crop-and-paste and their batch forms, each checked against DVPP's rules
// (dvpp_rules.cpp) and run by the runtime's exact pixel kernels (rtDvppCropResize, rtDvppConvertColor). A paste writes
// only its area of the output, as VPC does: the crop is resized into a stream-ordered scratch picture and copied in.
#include <cstdio>
#include <vector>

#include "dvpp_internal.hpp"

using namespace acl::dvpp;

namespace {

/// One VPC operation, checked: `crop` of `src` resized into `paste` of `dst` (all of dst when !has_paste).
struct Job {
    rtPicture src{}, dst{};
    rtRect crop{}, paste{};
    bool has_paste = false;
};

/// Bytes of an NV12/NV21 picture of w x h with no padding.
size_t yuv420sp_bytes(uint32_t w, uint32_t h) { return size_t{w} * h * 3 / 2; }

/// Queues `job` on `stream`. The checks have passed: a failure here is the runtime's.
aclError run(const char* api, const Job& job, rtInterpolation interp, rtStream_t stream) {
    const bool same_format = job.src.format == job.dst.format;
    if (!job.has_paste && same_format) {
        rtPicture dst = job.dst;
        DVPP_TRY_RT(api, rtDvppCropResize(&job.src, &job.crop, &dst, interp, stream));
        return ACL_SUCCESS;
    }
    // Scratch pictures on the stream: the resized crop in src's format, then (NV12 <-> NV21) in dst's.
    const rtRect area = job.has_paste ? job.paste : rtRect{0, 0, job.dst.width, job.dst.height};
    const size_t bytes = yuv420sp_bytes(area.width, area.height);
    void* scratch[2] = {nullptr, nullptr};
    const int scratches = same_format || !job.has_paste ? 1 : 2;
    aclError result = ACL_SUCCESS;
    for (int i = 0; i < scratches && result == ACL_SUCCESS; ++i)
        if (rtError_t e = rtMallocAsync(&scratch[i], bytes, stream)) result = rt_failed(e, api);
    if (result == ACL_SUCCESS) {
        rtPicture resized{scratch[0], bytes, job.src.format, area.width, area.height, 0, 0};
        rtError_t e = rtDvppCropResize(&job.src, &job.crop, &resized, interp, stream);
        rtPicture converted{scratch[1], bytes, job.dst.format, area.width, area.height, 0, 0};
        if (!e && !same_format) {
            // All of dst without paste: convert straight into it.
            rtPicture target = job.has_paste ? converted : job.dst;
            e = rtDvppConvertColor(&resized, &target, RT_COLOR_BT601_LIMITED, stream);
        }
        if (!e && job.has_paste) {
            // The area's Y rows, then its interleaved chroma rows (half as many, at the chroma plane's offset).
            const auto* from = static_cast<const uint8_t*>(same_format ? resized.data : converted.data);
            auto* to = static_cast<uint8_t*>(job.dst.data);
            const size_t pitch = job.dst.width_stride;
            const size_t y_at = size_t{area.y} * pitch + area.x;
            const size_t uv_at = pitch * job.dst.height_stride + size_t{area.y / 2} * pitch + area.x;
            e = rtMemcpy2DAsync(to + y_at, pitch, from, area.width, area.width, area.height,
                                RT_MEMCPY_DEVICE_TO_DEVICE, stream);
            if (!e)
                e = rtMemcpy2DAsync(to + uv_at, pitch, from + size_t{area.width} * area.height, area.width, area.width,
                                    area.height / 2, RT_MEMCPY_DEVICE_TO_DEVICE, stream);
        }
        if (e) result = rt_failed(e, api);
    }
    for (void* p : scratch)
        if (p) rtFreeAsync(p, stream);
    return result;
}

/// Checks and queues crop -> (paste of) output for the single-picture calls.
aclError single(const char* api, acldvppChannelDesc* channel, acldvppPicDesc* input, acldvppPicDesc* output,
                const acldvppRoiConfig* crop, const acldvppRoiConfig* paste, const acldvppResizeConfig* config,
                bool config_required, aclrtStream stream) {
    ACL_REQUIRE_INIT(api);
    DVPP_REQUIRE_CONTEXT(api);
    DVPP_TRY(require_channel(api, channel));
    Job job;
    DVPP_TRY(vpc_picture(api, "inputDesc", input, true, &job.src));
    DVPP_TRY(vpc_picture(api, "outputDesc", output, false, &job.dst));
    if (crop) DVPP_TRY(vpc_area(api, "cropArea", crop, job.src, "inputDesc", false, &job.crop));
    else job.crop = rtRect{0, 0, job.src.width, job.src.height};
    job.has_paste = paste != nullptr;
    if (paste) DVPP_TRY(vpc_area(api, "pasteArea", paste, job.dst, "outputDesc", true, &job.paste));
    const rtRect to = job.has_paste ? job.paste : rtRect{0, 0, job.dst.width, job.dst.height};
    DVPP_TRY(vpc_scale(api, crop ? "cropArea" : "inputDesc", job.crop, to));
    rtInterpolation interp = RT_INTERP_BILINEAR;
    if (config || config_required) DVPP_TRY(interpolation(api, "resizeConfig", config, &interp));
    DVPP_TRY(run(api, job, interp, static_cast<rtStream_t>(stream)));
    output->retCode = 0;
    return ACL_SUCCESS;
}

/// Checks every crop of a batch call, then queues them in order.
aclError batch(const char* api, acldvppChannelDesc* channel, acldvppBatchPicDesc* srcs, const uint32_t* roiNums,
               uint32_t size, acldvppBatchPicDesc* dsts, acldvppRoiConfig* const* cropAreas,
               acldvppRoiConfig* const* pasteAreas, bool with_paste, const acldvppResizeConfig* config,
               bool config_required, aclrtStream stream) {
    ACL_REQUIRE_INIT(api);
    DVPP_REQUIRE_CONTEXT(api);
    DVPP_TRY(require_channel(api, channel));
    ACL_REQUIRE_NOT_NULL(api, srcs);
    ACL_REQUIRE_NOT_NULL(api, roiNums);
    ACL_REQUIRE_NOT_NULL(api, dsts);
    ACL_REQUIRE_NOT_NULL(api, cropAreas);
    if (with_paste) ACL_REQUIRE_NOT_NULL(api, pasteAreas);
    if (size == 0 || size > srcs->pics.size())
        return acl::fail(ACL_ERROR_INVALID_PARAM, api, "size %u is out of range (expected 1 .. %zu, the pictures of "
                         "srcBatchPicDescs)", size, srcs->pics.size());
    uint64_t total = 0;
    for (uint32_t i = 0; i < size; ++i) total += roiNums[i];
    if (total == 0 || total > kMaxBatch)
        return acl::fail(ACL_ERROR_INVALID_PARAM, api, "roiNums add up to %llu crops (expected 1 .. %u)",
                         static_cast<unsigned long long>(total), kMaxBatch);
    if (total != dsts->pics.size())
        return acl::fail(ACL_ERROR_INVALID_PARAM, api, "roiNums add up to %llu crops, but dstBatchPicDescs holds %zu "
                         "pictures (one per crop)", static_cast<unsigned long long>(total), dsts->pics.size());
    rtInterpolation interp = RT_INTERP_BILINEAR;
    if (config || config_required) DVPP_TRY(interpolation(api, "resizeConfig", config, &interp));
    std::vector<Job> jobs(static_cast<size_t>(total));
    char what[64], area[64];
    size_t k = 0;
    for (uint32_t i = 0; i < size; ++i) {
        rtPicture src;
        std::snprintf(what, sizeof what, "srcBatchPicDescs[%u]", i);
        DVPP_TRY(vpc_picture(api, what, &srcs->pics[i], true, &src));
        for (uint32_t n = 0; n < roiNums[i]; ++n, ++k) {
            Job& job = jobs[k];
            job.src = src;
            char dst_what[64];
            std::snprintf(dst_what, sizeof dst_what, "dstBatchPicDescs[%zu]", k);
            DVPP_TRY(vpc_picture(api, dst_what, &dsts->pics[k], false, &job.dst));
            std::snprintf(area, sizeof area, "cropAreas[%zu]", k);
            DVPP_TRY(vpc_area(api, area, cropAreas[k], src, what, false, &job.crop));
            job.has_paste = with_paste;
            if (with_paste) {
                char paste_what[64];
                std::snprintf(paste_what, sizeof paste_what, "pasteAreas[%zu]", k);
                DVPP_TRY(vpc_area(api, paste_what, pasteAreas[k], job.dst, dst_what, true, &job.paste));
            }
            const rtRect to = with_paste ? job.paste : rtRect{0, 0, job.dst.width, job.dst.height};
            DVPP_TRY(vpc_scale(api, area, job.crop, to));
        }
    }
    for (const Job& job : jobs) DVPP_TRY(run(api, job, interp, static_cast<rtStream_t>(stream)));
    for (auto& pic : dsts->pics) pic.retCode = 0;
    return ACL_SUCCESS;
}

}  // namespace

extern "C" {

aclError acldvppVpcResizeAsync(acldvppChannelDesc* channelDesc, acldvppPicDesc* inputDesc, acldvppPicDesc* outputDesc,
                               acldvppResizeConfig* resizeConfig, aclrtStream stream) {
    return single("acldvppVpcResizeAsync", channelDesc, inputDesc, outputDesc, nullptr, nullptr, resizeConfig, true,
                  stream);
}

aclError acldvppVpcCropAsync(acldvppChannelDesc* channelDesc, acldvppPicDesc* inputDesc, acldvppPicDesc* outputDesc,
                             acldvppRoiConfig* cropArea, aclrtStream stream) {
    constexpr const char* api = "acldvppVpcCropAsync";
    if (!cropArea) return acl::fail(ACL_ERROR_INVALID_PARAM, api, "cropArea is NULL (expected an acldvppRoiConfig)");
    return single(api, channelDesc, inputDesc, outputDesc, cropArea, nullptr, nullptr, false, stream);
}

aclError acldvppVpcCropResizeAsync(acldvppChannelDesc* channelDesc, acldvppPicDesc* inputDesc,
                                   acldvppPicDesc* outputDesc, acldvppRoiConfig* cropArea,
                                   acldvppResizeConfig* resizeConfig, aclrtStream stream) {
    constexpr const char* api = "acldvppVpcCropResizeAsync";
    if (!cropArea) return acl::fail(ACL_ERROR_INVALID_PARAM, api, "cropArea is NULL (expected an acldvppRoiConfig)");
    return single(api, channelDesc, inputDesc, outputDesc, cropArea, nullptr, resizeConfig, true, stream);
}

aclError acldvppVpcCropAndPasteAsync(acldvppChannelDesc* channelDesc, acldvppPicDesc* inputDesc,
                                     acldvppPicDesc* outputDesc, acldvppRoiConfig* cropArea,
                                     acldvppRoiConfig* pasteArea, aclrtStream stream) {
    constexpr const char* api = "acldvppVpcCropAndPasteAsync";
    if (!cropArea) return acl::fail(ACL_ERROR_INVALID_PARAM, api, "cropArea is NULL (expected an acldvppRoiConfig)");
    if (!pasteArea) return acl::fail(ACL_ERROR_INVALID_PARAM, api, "pasteArea is NULL (expected an acldvppRoiConfig)");
    return single(api, channelDesc, inputDesc, outputDesc, cropArea, pasteArea, nullptr, false, stream);
}

aclError acldvppVpcCropResizePasteAsync(acldvppChannelDesc* channelDesc, acldvppPicDesc* inputDesc,
                                        acldvppPicDesc* outputDesc, acldvppRoiConfig* cropArea,
                                        acldvppRoiConfig* pasteArea, acldvppResizeConfig* resizeConfig,
                                        aclrtStream stream) {
    constexpr const char* api = "acldvppVpcCropResizePasteAsync";
    if (!cropArea) return acl::fail(ACL_ERROR_INVALID_PARAM, api, "cropArea is NULL (expected an acldvppRoiConfig)");
    if (!pasteArea) return acl::fail(ACL_ERROR_INVALID_PARAM, api, "pasteArea is NULL (expected an acldvppRoiConfig)");
    return single(api, channelDesc, inputDesc, outputDesc, cropArea, pasteArea, resizeConfig, true, stream);
}

aclError acldvppVpcBatchCropAsync(acldvppChannelDesc* channelDesc, acldvppBatchPicDesc* srcBatchPicDescs,
                                  uint32_t* roiNums, uint32_t size, acldvppBatchPicDesc* dstBatchPicDescs,
                                  acldvppRoiConfig* cropAreas[], aclrtStream stream) {
    return batch("acldvppVpcBatchCropAsync", channelDesc, srcBatchPicDescs, roiNums, size, dstBatchPicDescs, cropAreas,
                 nullptr, false, nullptr, false, stream);
}

aclError acldvppVpcBatchCropResizeAsync(acldvppChannelDesc* channelDesc, acldvppBatchPicDesc* srcBatchPicDescs,
                                        uint32_t* roiNums, uint32_t size, acldvppBatchPicDesc* dstBatchPicDescs,
                                        acldvppRoiConfig* cropAreas[], acldvppResizeConfig* resizeConfig,
                                        aclrtStream stream) {
    return batch("acldvppVpcBatchCropResizeAsync", channelDesc, srcBatchPicDescs, roiNums, size, dstBatchPicDescs,
                 cropAreas, nullptr, false, resizeConfig, true, stream);
}

aclError acldvppVpcBatchCropAndPasteAsync(acldvppChannelDesc* channelDesc, acldvppBatchPicDesc* srcBatchPicDescs,
                                          uint32_t* roiNums, uint32_t size, acldvppBatchPicDesc* dstBatchPicDescs,
                                          acldvppRoiConfig* cropAreas[], acldvppRoiConfig* pasteAreas[],
                                          aclrtStream stream) {
    return batch("acldvppVpcBatchCropAndPasteAsync", channelDesc, srcBatchPicDescs, roiNums, size, dstBatchPicDescs,
                 cropAreas, pasteAreas, true, nullptr, false, stream);
}

}  // extern "C"
