/* acl/ops/acl_dvpp.h — the acldvpp V1 face: channels, DVPP memory, picture descriptors, ROI / resize / JPEG-encode
 * configurations, VPC (resize, crop, crop-and-paste, batch crop), JPEGD and JPEGE, with the names, values and
 * signatures of AscendCL's public reference, running on the runtime's DVPP (runtime/dvpp.h). Link libacl_dvpp (and
 * libascendcl).
 *
 * DVPP's own rules are enforced, so that a program that runs here also runs on an Ascend NPU: the rules of the
 * classic acldvpp V1 targets (Atlas 200/300/500 inference and Atlas training products), the strictest of them. A
 * call that breaks one returns ACL_ERROR_INVALID_PARAM and aclGetRecentErrMsg names the descriptor, the field and
 * the rule. The rules:
 *   - memory: every picture's data, and JPEG input and output, lie inside one acldvppMalloc allocation, with `size`
 *     bytes available there;
 *   - VPC pictures (input and output) are YUV420SP NV12 or NV21: width and height even; widthStride a multiple of 16,
 *     at least width, 32 .. 4096 (an input may reach 8192); heightStride even, at least height, 6 .. 4096 (an input
 *     may reach 8192); size >= widthStride * heightStride * 3 / 2;
 *   - crop areas: left and top even, right and bottom odd (right - left + 1 is the width), 10 x 6 .. 4096 x 4096,
 *     inside the input; paste areas: the same, left a multiple of 16, inside the output; each side scaled by a
 *     factor in [1/32, 16]; a batch holds at most 256 crops;
 *   - JPEGD: a baseline or extended Huffman JPEG of 8-bit samples, 32 x 32 .. 8192 x 8192 (progressive, lossless
 *     and arithmetic-coded JPEGs: ACL_ERROR_UNSUPPORTED_JPEG); output NV12 or NV21 with widthStride = width rounded
 *     up to 128 and heightStride = height rounded up to 16 (written into the output descriptor by the call), size at
 *     least widthStride * heightStride * 3 / 2 (acldvppJpegPredictDecSize);
 *   - JPEGE: NV12 or NV21 input, 32 x 32 .. 8192 x 8192, width and height even, widthStride a multiple of 16 and at
 *     least width, heightStride the height or the height rounded up to 16; output capacity at least
 *     acldvppJpegPredictEncSize.
 * What the runtime cannot do returns ACL_ERROR_FEATURE_UNSUPPORTED naming it: other pixel formats, resize algorithms
 * 3 and 4 (TensorFlow's), and decoding a JPEG of odd width or height to 4:2:0 (an NPU rounds it down to even).
 *
 * Asynchrony. Every *Async call is queued on `stream` (NULL: the current context's default stream) and returns at
 * once; the call checks its arguments first and queues nothing when it refuses. Descriptors and configurations are
 * read during the call. JPEGD reads the JPEG's bytes when the work queued before it on the stream has run (the call
 * waits for that work if there is any). JPEGE writes *size when it has run (read it after synchronizing). */
#ifndef ACL_OPS_ACL_DVPP_H_
#define ACL_OPS_ACL_DVPP_H_

#include <stddef.h>
#include <stdint.h>

#include "acl/acl.h"
#include "acl/acl_base.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct acldvppPicDesc acldvppPicDesc;
typedef struct acldvppBatchPicDesc acldvppBatchPicDesc;
typedef struct acldvppRoiConfig acldvppRoiConfig;
typedef struct acldvppResizeConfig acldvppResizeConfig;
typedef struct acldvppChannelDesc acldvppChannelDesc;
typedef struct acldvppJpegeConfig acldvppJpegeConfig;

/** Pixel formats (AscendCL's values). The operations here take PIXEL_FORMAT_YUV_SEMIPLANAR_420 (NV12) and
 *  PIXEL_FORMAT_YVU_SEMIPLANAR_420 (NV21); the others are named so that programs compile. */
typedef enum acldvppPixelFormat {
    PIXEL_FORMAT_YUV_400 = 0,
    PIXEL_FORMAT_YUV_SEMIPLANAR_420 = 1,  /* NV12: Y plane, then interleaved U, V */
    PIXEL_FORMAT_YVU_SEMIPLANAR_420 = 2,  /* NV21: Y plane, then interleaved V, U */
    PIXEL_FORMAT_YUV_SEMIPLANAR_422 = 3,
    PIXEL_FORMAT_YVU_SEMIPLANAR_422 = 4,
    PIXEL_FORMAT_YUV_SEMIPLANAR_444 = 5,
    PIXEL_FORMAT_YVU_SEMIPLANAR_444 = 6,
    PIXEL_FORMAT_YUYV_PACKED_422 = 7,
    PIXEL_FORMAT_UYVY_PACKED_422 = 8,
    PIXEL_FORMAT_YVYU_PACKED_422 = 9,
    PIXEL_FORMAT_VYUY_PACKED_422 = 10,
    PIXEL_FORMAT_YUV_PACKED_444 = 11,
    PIXEL_FORMAT_RGB_888 = 12,
    PIXEL_FORMAT_BGR_888 = 13,
    PIXEL_FORMAT_ARGB_8888 = 14,
    PIXEL_FORMAT_ABGR_8888 = 15,
    PIXEL_FORMAT_RGBA_8888 = 16,
    PIXEL_FORMAT_BGRA_8888 = 17,
    PIXEL_FORMAT_YUV_SEMI_PLANNER_420_10BIT = 18,
    PIXEL_FORMAT_YVU_SEMI_PLANNER_420_10BIT = 19,
    PIXEL_FORMAT_YVU_PLANAR_420 = 20,
    PIXEL_FORMAT_YVU_PLANAR_422 = 21,
    PIXEL_FORMAT_YVU_PLANAR_444 = 22,
    PIXEL_FORMAT_RGB_444 = 23,
    PIXEL_FORMAT_BGR_444 = 24,
    PIXEL_FORMAT_ARGB_4444 = 25,
    PIXEL_FORMAT_ABGR_4444 = 26,
    PIXEL_FORMAT_RGBA_4444 = 27,
    PIXEL_FORMAT_BGRA_4444 = 28,
    PIXEL_FORMAT_RGB_555 = 29,
    PIXEL_FORMAT_BGR_555 = 30,
    PIXEL_FORMAT_RGB_565 = 31,
    PIXEL_FORMAT_BGR_565 = 32,
    PIXEL_FORMAT_UNKNOWN = 10000
} acldvppPixelFormat;

/* ---------------------------------------------------------------- DVPP memory */

/** Device memory of the current context's device for DVPP's pictures and JPEG data (every operation here requires
 *  it). size 0: ACL_ERROR_INVALID_PARAM. */
ACL_FUNC_VISIBILITY aclError acldvppMalloc(void** devPtr, size_t size);
/** Frees memory from acldvppMalloc (other pointers: ACL_ERROR_INVALID_PARAM); memory still used by queued work goes
 *  once it has run. */
ACL_FUNC_VISIBILITY aclError acldvppFree(void* devPtr);

/* ---------------------------------------------------------------- channels */

ACL_FUNC_VISIBILITY acldvppChannelDesc* acldvppCreateChannelDesc(void);
ACL_FUNC_VISIBILITY aclError acldvppDestroyChannelDesc(acldvppChannelDesc* channelDesc);
/** The id acldvppCreateChannel gave the channel (0 before). */
ACL_FUNC_VISIBILITY uint64_t acldvppGetChannelDescChannelId(const acldvppChannelDesc* channelDesc);
/** Opens a channel on the current context's device; every operation names the channel it runs in. */
ACL_FUNC_VISIBILITY aclError acldvppCreateChannel(acldvppChannelDesc* channelDesc);
ACL_FUNC_VISIBILITY aclError acldvppDestroyChannel(acldvppChannelDesc* channelDesc);

/* ---------------------------------------------------------------- picture descriptors */

/** A picture: data (acldvppMalloc memory), size in bytes, format, width and height in pixels, widthStride (bytes of a
 *  row; for NV12/NV21, pixels) and heightStride (rows of the Y plane). All 0 when created. */
ACL_FUNC_VISIBILITY acldvppPicDesc* acldvppCreatePicDesc(void);
ACL_FUNC_VISIBILITY aclError acldvppDestroyPicDesc(acldvppPicDesc* picDesc);
ACL_FUNC_VISIBILITY aclError acldvppSetPicDescData(acldvppPicDesc* picDesc, void* dataDev);
ACL_FUNC_VISIBILITY aclError acldvppSetPicDescSize(acldvppPicDesc* picDesc, uint32_t size);
ACL_FUNC_VISIBILITY aclError acldvppSetPicDescFormat(acldvppPicDesc* picDesc, acldvppPixelFormat format);
ACL_FUNC_VISIBILITY aclError acldvppSetPicDescWidth(acldvppPicDesc* picDesc, uint32_t width);
ACL_FUNC_VISIBILITY aclError acldvppSetPicDescHeight(acldvppPicDesc* picDesc, uint32_t height);
ACL_FUNC_VISIBILITY aclError acldvppSetPicDescWidthStride(acldvppPicDesc* picDesc, uint32_t widthStride);
ACL_FUNC_VISIBILITY aclError acldvppSetPicDescHeightStride(acldvppPicDesc* picDesc, uint32_t heightStride);
ACL_FUNC_VISIBILITY aclError acldvppSetPicDescRetCode(acldvppPicDesc* picDesc, uint32_t retCode);
/** The getters return 0 (NULL, PIXEL_FORMAT_YUV_400) for a NULL descriptor, as AscendCL's do. */
ACL_FUNC_VISIBILITY void* acldvppGetPicDescData(const acldvppPicDesc* picDesc);
ACL_FUNC_VISIBILITY uint32_t acldvppGetPicDescSize(const acldvppPicDesc* picDesc);
ACL_FUNC_VISIBILITY acldvppPixelFormat acldvppGetPicDescFormat(const acldvppPicDesc* picDesc);
ACL_FUNC_VISIBILITY uint32_t acldvppGetPicDescWidth(const acldvppPicDesc* picDesc);
ACL_FUNC_VISIBILITY uint32_t acldvppGetPicDescHeight(const acldvppPicDesc* picDesc);
ACL_FUNC_VISIBILITY uint32_t acldvppGetPicDescWidthStride(const acldvppPicDesc* picDesc);
ACL_FUNC_VISIBILITY uint32_t acldvppGetPicDescHeightStride(const acldvppPicDesc* picDesc);
/** 0: the last operation that wrote the picture succeeded (failures are reported by the stream). */
ACL_FUNC_VISIBILITY uint32_t acldvppGetPicDescRetCode(const acldvppPicDesc* picDesc);

/** `batchSize` picture descriptors (1 .. 256) in one object, reached with acldvppGetPicDesc. */
ACL_FUNC_VISIBILITY acldvppBatchPicDesc* acldvppCreateBatchPicDesc(uint32_t batchSize);
/** Descriptor `index` of the batch (NULL, with a message, past its size). */
ACL_FUNC_VISIBILITY acldvppPicDesc* acldvppGetPicDesc(acldvppBatchPicDesc* batchPicDesc, uint32_t index);
ACL_FUNC_VISIBILITY aclError acldvppDestroyBatchPicDesc(acldvppBatchPicDesc* batchPicDesc);

/* ---------------------------------------------------------------- configurations */

/** A rectangle by its inclusive edges: columns left .. right, rows top .. bottom. */
ACL_FUNC_VISIBILITY acldvppRoiConfig* acldvppCreateRoiConfig(uint32_t left, uint32_t right, uint32_t top,
                                                             uint32_t bottom);
ACL_FUNC_VISIBILITY aclError acldvppDestroyRoiConfig(acldvppRoiConfig* config);
ACL_FUNC_VISIBILITY aclError acldvppSetRoiConfigLeft(acldvppRoiConfig* config, uint32_t left);
ACL_FUNC_VISIBILITY aclError acldvppSetRoiConfigRight(acldvppRoiConfig* config, uint32_t right);
ACL_FUNC_VISIBILITY aclError acldvppSetRoiConfigTop(acldvppRoiConfig* config, uint32_t top);
ACL_FUNC_VISIBILITY aclError acldvppSetRoiConfigBottom(acldvppRoiConfig* config, uint32_t bottom);
ACL_FUNC_VISIBILITY aclError acldvppSetRoiConfig(acldvppRoiConfig* config, uint32_t left, uint32_t right,
                                                 uint32_t top, uint32_t bottom);

/** The resize algorithm: 0 (default) and 1 bilinear as OpenCV's (here: exactly cv2.INTER_LINEAR_EXACT; an Ascend 310
 *  uses its own filter for 0), 2 nearest neighbour as OpenCV's (exactly cv2.INTER_NEAREST); 3 and 4 (TensorFlow's):
 *  ACL_ERROR_FEATURE_UNSUPPORTED when used. Values above 4: ACL_ERROR_INVALID_PARAM. */
ACL_FUNC_VISIBILITY acldvppResizeConfig* acldvppCreateResizeConfig(void);
ACL_FUNC_VISIBILITY aclError acldvppDestroyResizeConfig(acldvppResizeConfig* resizeConfig);
ACL_FUNC_VISIBILITY aclError acldvppSetResizeConfigInterpolation(acldvppResizeConfig* resizeConfig,
                                                                 uint32_t interpolation);
ACL_FUNC_VISIBILITY uint32_t acldvppGetResizeConfigInterpolation(const acldvppResizeConfig* resizeConfig);

/** The JPEG encoder's quality level 0 .. 100 (0, the default, encodes as 100 does). */
ACL_FUNC_VISIBILITY acldvppJpegeConfig* acldvppCreateJpegeConfig(void);
ACL_FUNC_VISIBILITY aclError acldvppDestroyJpegeConfig(acldvppJpegeConfig* jpegeConfig);
ACL_FUNC_VISIBILITY aclError acldvppSetJpegeConfigLevel(acldvppJpegeConfig* jpegeConfig, uint32_t level);
ACL_FUNC_VISIBILITY uint32_t acldvppGetJpegeConfigLevel(const acldvppJpegeConfig* jpegeConfig);

/* ---------------------------------------------------------------- VPC (the runtime's exact pixel kernels) */

/** Resizes all of inputDesc to outputDesc's width x height. */
ACL_FUNC_VISIBILITY aclError acldvppVpcResizeAsync(acldvppChannelDesc* channelDesc, acldvppPicDesc* inputDesc,
                                                   acldvppPicDesc* outputDesc, acldvppResizeConfig* resizeConfig,
                                                   aclrtStream stream);
/** Resizes cropArea of inputDesc to all of outputDesc (bilinear). */
ACL_FUNC_VISIBILITY aclError acldvppVpcCropAsync(acldvppChannelDesc* channelDesc, acldvppPicDesc* inputDesc,
                                                 acldvppPicDesc* outputDesc, acldvppRoiConfig* cropArea,
                                                 aclrtStream stream);
/** acldvppVpcCropAsync with the algorithm of resizeConfig. */
ACL_FUNC_VISIBILITY aclError acldvppVpcCropResizeAsync(acldvppChannelDesc* channelDesc, acldvppPicDesc* inputDesc,
                                                       acldvppPicDesc* outputDesc, acldvppRoiConfig* cropArea,
                                                       acldvppResizeConfig* resizeConfig, aclrtStream stream);
/** Resizes cropArea of inputDesc into pasteArea of outputDesc (bilinear); the rest of the output is left as it was. */
ACL_FUNC_VISIBILITY aclError acldvppVpcCropAndPasteAsync(acldvppChannelDesc* channelDesc, acldvppPicDesc* inputDesc,
                                                         acldvppPicDesc* outputDesc, acldvppRoiConfig* cropArea,
                                                         acldvppRoiConfig* pasteArea, aclrtStream stream);
/** acldvppVpcCropAndPasteAsync with the algorithm of resizeConfig. */
ACL_FUNC_VISIBILITY aclError acldvppVpcCropResizePasteAsync(acldvppChannelDesc* channelDesc, acldvppPicDesc* inputDesc,
                                                            acldvppPicDesc* outputDesc, acldvppRoiConfig* cropArea,
                                                            acldvppRoiConfig* pasteArea,
                                                            acldvppResizeConfig* resizeConfig, aclrtStream stream);
/** Picture i of srcBatchPicDescs (i < size) gives roiNums[i] crops, taken in order from cropAreas; crop k goes to all
 *  of picture k of dstBatchPicDescs (bilinear). The crops number at most 256. */
ACL_FUNC_VISIBILITY aclError acldvppVpcBatchCropAsync(acldvppChannelDesc* channelDesc,
                                                      acldvppBatchPicDesc* srcBatchPicDescs, uint32_t* roiNums,
                                                      uint32_t size, acldvppBatchPicDesc* dstBatchPicDescs,
                                                      acldvppRoiConfig* cropAreas[], aclrtStream stream);
/** acldvppVpcBatchCropAsync with the algorithm of resizeConfig. */
ACL_FUNC_VISIBILITY aclError acldvppVpcBatchCropResizeAsync(acldvppChannelDesc* channelDesc,
                                                            acldvppBatchPicDesc* srcBatchPicDescs, uint32_t* roiNums,
                                                            uint32_t size, acldvppBatchPicDesc* dstBatchPicDescs,
                                                            acldvppRoiConfig* cropAreas[],
                                                            acldvppResizeConfig* resizeConfig, aclrtStream stream);
/** acldvppVpcBatchCropAsync into pasteAreas[k] of picture k of dstBatchPicDescs. */
ACL_FUNC_VISIBILITY aclError acldvppVpcBatchCropAndPasteAsync(acldvppChannelDesc* channelDesc,
                                                              acldvppBatchPicDesc* srcBatchPicDescs, uint32_t* roiNums,
                                                              uint32_t size, acldvppBatchPicDesc* dstBatchPicDescs,
                                                              acldvppRoiConfig* cropAreas[],
                                                              acldvppRoiConfig* pasteAreas[], aclrtStream stream);

/* ---------------------------------------------------------------- JPEGD and JPEGE (libjpeg-turbo; nvJPEG on GPUs) */

/** A JPEG's width, height and number of components, from its header in host memory (any output pointer may be
 *  NULL). A JPEG that JPEGD does not decode: ACL_ERROR_UNSUPPORTED_JPEG naming why. */
ACL_FUNC_VISIBILITY aclError acldvppJpegGetImageInfo(const void* data, uint32_t size, uint32_t* width,
                                                     uint32_t* height, int32_t* components);
/** The bytes JPEGD's output of that JPEG (host memory) needs in `outputPixelFormat` (NV12 or NV21). */
ACL_FUNC_VISIBILITY aclError acldvppJpegPredictDecSize(const void* data, uint32_t dataSize,
                                                       acldvppPixelFormat outputPixelFormat, uint32_t* decSize);
/** Decodes the JPEG at data (acldvppMalloc memory, `size` bytes) into outputDesc, whose data, size and format the
 *  caller sets; the call writes its width, height, widthStride and heightStride. The JPEG's own YCbCr, BT.601 full
 *  range (chroma resampled when the JPEG is not 4:2:0). */
ACL_FUNC_VISIBILITY aclError acldvppJpegDecodeAsync(acldvppChannelDesc* channelDesc, const void* data, uint32_t size,
                                                    acldvppPicDesc* outputDesc, aclrtStream stream);
/** The most bytes JPEGE can make of that picture (a capacity for acldvppJpegEncodeAsync). */
ACL_FUNC_VISIBILITY aclError acldvppJpegPredictEncSize(const acldvppPicDesc* inputDesc,
                                                       const acldvppJpegeConfig* config, uint32_t* size);
/** Encodes inputDesc into data (acldvppMalloc memory of capacity *size); *size becomes the JPEG's length once the
 *  operation has run. */
ACL_FUNC_VISIBILITY aclError acldvppJpegEncodeAsync(acldvppChannelDesc* channelDesc, acldvppPicDesc* inputDesc,
                                                    const void* data, uint32_t* size, acldvppJpegeConfig* config,
                                                    aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif /* ACL_OPS_ACL_DVPP_H_ */
