/* dvpp.h — DVPP, the runtime's vision pre-processing: JPEG and PNG decode and JPEG encode, resize, crop, letterbox,
 * colour conversion and normalisation, and the fused pre-processing of an inference service, all as operations of a
 * stream. Include it after (or instead of) runtime.h.
 *
 * Pictures. An rtPicture describes an image in memory of one device (host memory for the encoded input of a decode
 * and the encoded output of an encode). Strides are in pixels: a row of plane 0 occupies width_stride pixels, plane 0
 * has height_stride rows. Layouts, with B = bytes per pixel (GRAY8 1, RGB888/BGR888 3, RGBA8888/BGRA8888 4):
 *   packed formats:  width_stride * B bytes per row, height_stride rows;
 *   NV12 / NV21:     a Y plane of width_stride x height_stride bytes, then height_stride / 2 rows of width_stride
 *                    bytes of interleaved chroma (NV12: U then V; NV21: V then U), one pair per 2x2 Y pixels;
 *   YUV420P (I420):  the Y plane, then U and V planes of (width_stride / 2) x (height_stride / 2) bytes each.
 * Rules checked by every operation, each refusal naming the field (RT_ERROR_INVALID_VALUE):
 *   - data not NULL, width and height >= 1, format one of rtPixelFormat;
 *   - width_stride 0 means width, height_stride 0 means height; otherwise width_stride >= width and
 *     height_stride >= height; no other alignment is required (CANN's VPC wants multiples of 16 and 2: not here);
 *   - the 4:2:0 formats (NV12, NV21, YUV420P): width, height, width_stride and height_stride even;
 *   - size >= the bytes the layout above needs (rtDvppPictureSize), and that many bytes from data inside one live
 *     allocation of the stream's device (device memory, or host memory the device can use).
 * An output picture's data is written only inside its width x height pixels (and for decode, its strides' padding
 * may be written too).
 *
 * Exactness, the same on every backend (the pixel operations are kernels of the runtime's dialect written in
 * integer arithmetic, compiled for the device: cpu and cuda results are identical bit for bit):
 *   - RT_INTERP_BILINEAR on 8-bit pictures equals OpenCV's cv2.resize(..., INTER_LINEAR_EXACT) exactly (pixel
 *     centres aligned, (x + 0.5) * scale - 0.5, edges replicated, fixed-point weights);
 *   - RT_INTERP_NEAREST equals cv2.INTER_NEAREST (source index floor(x * src / dst));
 *   - RT_INTERP_AREA is within 1 of cv2.INTER_AREA (pixel-area averaging when shrinking, bilinear when growing);
 *   - YUV -> RGB with RT_COLOR_BT601_LIMITED is within 1 of cv2.cvtColor(COLOR_YUV2RGB_NV12 and friends).
 *
 * Asynchrony. Every operation is queued on `stream` (NULL: the current device's default stream) and returns at
 * once; validation happens in the call, so a refused call queues nothing. Descriptors, rectangles, fill values,
 * means and deviations are read during the call; encoded input bytes of a decode are copied during the call (the
 * caller may free them at once). Pixel memory must stay allocated until the operation has run. A corrupt or truncated
 * image found while decoding fails the operation on the stream: its next synchronize returns RT_ERROR_INVALID_IMAGE
 * with the decoder's message and the image's number in the call ("image 3 of the batch"), and the stream stays usable;
 * the output picture of a failed image holds undefined bytes.
 * Streams being captured record the operations into the graph (stream capture, graph.h). */
#ifndef RUNTIME_DVPP_H
#define RUNTIME_DVPP_H

#include "runtime/runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Pixel formats. Values follow CANN's acldvppPixelFormat where it has the format. */
typedef enum rtPixelFormat {
    RT_PIXEL_FORMAT_GRAY8 = 0,          /* one 8-bit channel (CANN: YUV_400) */
    RT_PIXEL_FORMAT_YUV420SP_NV12 = 1,  /* Y plane, then interleaved U,V at half resolution */
    RT_PIXEL_FORMAT_YUV420SP_NV21 = 2,  /* Y plane, then interleaved V,U at half resolution */
    RT_PIXEL_FORMAT_RGB888 = 12,
    RT_PIXEL_FORMAT_BGR888 = 13,
    RT_PIXEL_FORMAT_RGBA8888 = 16,
    RT_PIXEL_FORMAT_BGRA8888 = 17,
    RT_PIXEL_FORMAT_YUV420P = 1000      /* I420: Y, U and V planes, U and V at half resolution */
} rtPixelFormat;

/** A picture in memory (see the layouts at the top). */
typedef struct rtPicture {
    void* data;
    size_t size;           /* bytes available from data (an output: capacity; decode writes back what it used) */
    rtPixelFormat format;
    uint32_t width, height;
    uint32_t width_stride, height_stride;  /* pixels; 0: width, height */
} rtPicture;

/** A rectangle of a picture, in pixels; it must lie inside the picture (x + width <= picture width, ...), with
 *  width, height >= 1, and for 4:2:0 pictures x, y, width and height even. */
typedef struct rtRect {
    uint32_t x, y, width, height;
} rtRect;

typedef enum rtInterpolation {
    RT_INTERP_NEAREST = 0,
    RT_INTERP_BILINEAR = 1,
    RT_INTERP_AREA = 2
} rtInterpolation;

/** YUV <-> RGB matrices: BT.601 (SD, and JPEG's YCbCr) or BT.709 (HD); full range (Y, U, V in 0..255) or limited
 *  (Y in 16..235, U, V in 16..240). A JPEG's YCbCr is RT_COLOR_BT601_FULL. */
typedef enum rtColorMatrix {
    RT_COLOR_BT601_FULL = 0,
    RT_COLOR_BT601_LIMITED = 1,
    RT_COLOR_BT709_FULL = 2,
    RT_COLOR_BT709_LIMITED = 3
} rtColorMatrix;

/** Bytes a picture of that format, size and strides occupies (the layout at the top): the least valid `size`.
 *  Strides 0 mean width and height. A format that does not exist or a 4:2:0 picture of odd sizes: INVALID_VALUE. */
RT_API rtError_t rtDvppPictureSize(rtPixelFormat format, uint32_t width, uint32_t height, uint32_t width_stride,
                                   uint32_t height_stride, size_t* bytes);

/* ---------------------------------------------------------------- codecs (libjpeg-turbo, libpng; nvJPEG on cuda) */

/** Reads a JPEG's header (synchronously, host memory): its size and number of components (1 grey, 3 colour, 4 CMYK).
 *  Not a JPEG, a header cut short, or sampling factors libjpeg-turbo 2.1 cannot classify as one of its subsamplings
 *  (grey, 4:4:4, 4:2:2, 4:2:0, 4:4:0, 4:1:1): RT_ERROR_INVALID_IMAGE naming what was found (the decodes refuse these
 *  in the call too). Any pointer but data may be NULL.
 *  JPEG decoding is strict: any warning of libjpeg (premature end of data, corrupt entropy-coded data) fails the
 *  decode, and a progressive JPEG of more than 500 scans is refused when decoded (it fails the stream). */
RT_API rtError_t rtDvppJpegGetInfo(const void* data, size_t size, uint32_t* width, uint32_t* height, int* components);
/** The same for a PNG (components: 1 grey, 2 grey + alpha, 3 RGB, 4 RGBA; palettes count as 3, or 4 with alpha). */
RT_API rtError_t rtDvppPngGetInfo(const void* data, size_t size, uint32_t* width, uint32_t* height, int* components);

/** Decodes a JPEG (host memory, copied during the call) into out->data on the stream. The caller sets out->data,
 *  out->size (capacity) and out->format (GRAY8, RGB888, BGR888, RGBA8888, BGRA8888 — alpha 255 — or a 4:2:0 format:
 *  the JPEG's own YCbCr, BT.601 full range, chroma resampled when the JPEG is not 4:2:0; odd sizes are refused for
 *  these), and optionally the strides; the call writes back width, height, the strides used (0 became width and
 *  height) and size (the bytes the picture occupies). Too small a capacity: INVALID_VALUE naming both sizes; rows of
 *  more than INT_MAX bytes (TurboJPEG's limit): INVALID_VALUE naming out->width_stride.
 *  CMYK JPEGs are converted to RGB. A JPEG stored as RGB or CMYK (not YCbCr) decoded to GRAY8 or a 4:2:0 format, and
 *  a 4:1:1 JPEG decoded to a 4:2:0 format, equal its decode to RGB888 followed by rtDvppConvertColor (with
 *  RT_COLOR_BT601_FULL) bit for bit; GRAY8 of a YCbCr JPEG is its own luma. */
RT_API rtError_t rtDvppDecodeJpeg(const void* data, size_t size, rtPicture* out, rtStream_t stream);
/** rtDvppDecodeJpeg with DCT-domain down-scaling: the JPEG is decoded at the smallest of libjpeg's scales
 *  (1/8, 2/8, ..., 8/8) whose result is at least min_width x min_height (0: no minimum on that side), which costs
 *  a fraction of a full decode when the image is to be shrunk anyway. min 0 x 0 is rtDvppDecodeJpeg. */
RT_API rtError_t rtDvppDecodeJpegScaled(const void* data, size_t size, uint32_t min_width, uint32_t min_height,
                                        rtPicture* out, rtStream_t stream);
/** Decodes n JPEGs at once, image i into outs[i] (as rtDvppDecodeJpegScaled with min_widths[i] x min_heights[i];
 *  both arrays NULL: full size), the images spread over the device's worker threads (on cpu: all its executors; the
 *  work forks from `stream` and joins back to it, so it is still one stream operation as far as ordering goes).
 *  Every descriptor is checked before anything is queued. A corrupt image fails the stream naming its index; the
 *  other images are decoded. */
RT_API rtError_t rtDvppDecodeJpegBatch(const void* const* datas, const size_t* sizes, uint32_t n,
                                       const uint32_t* min_widths, const uint32_t* min_heights, rtPicture* outs,
                                       rtStream_t stream);
/** Decodes a PNG as rtDvppDecodeJpeg does a JPEG (out->format: GRAY8, RGB888, BGR888, RGBA8888, BGRA8888; 16-bit
 *  PNGs are reduced to 8 bits, palettes expanded, alpha dropped or added as 255 as the format asks; GRAY8 of a colour
 *  PNG is rtDvppConvertColor's grey of its RGB). */
RT_API rtError_t rtDvppDecodePng(const void* data, size_t size, rtPicture* out, rtStream_t stream);

/** The most bytes rtDvppEncodeJpeg can produce for that picture (libjpeg-turbo's tjBufSize bound). */
RT_API rtError_t rtDvppEncodeJpegBound(const rtPicture* picture, size_t* bytes);
/** Encodes a picture (GRAY8, RGB888, BGR888, RGBA8888, BGRA8888 — alpha ignored — or a 4:2:0 format taken as JPEG
 *  YCbCr, BT.601 full range) at `quality` 1..100 (4:2:0 chroma) into host memory `out` of capacity *out_size, on the
 *  stream; when the operation has run, *out_size holds the JPEG's length (read it after synchronizing; out and
 *  out_size must stay valid until then). A capacity below rtDvppEncodeJpegBound: INVALID_VALUE. Both calls refuse
 *  pictures larger than 65535 x 65535 and rows of more than INT_MAX bytes (TurboJPEG's limits). */
RT_API rtError_t rtDvppEncodeJpeg(const rtPicture* picture, int quality, void* out, size_t* out_size,
                                  rtStream_t stream);

/* ---------------------------------------------------------------- pixel operations (dialect kernels) */

/** Resizes src to dst's width x height. src and dst have the same format (any of rtPixelFormat; 4:2:0 pictures are
 *  resized plane by plane, the chroma plane as an image of half the size). */
RT_API rtError_t rtDvppResize(const rtPicture* src, rtPicture* dst, rtInterpolation interpolation, rtStream_t stream);
/** Resizes the rectangle `crop` of src (NULL: all of it) to dst's size. */
RT_API rtError_t rtDvppCropResize(const rtPicture* src, const rtRect* crop, rtPicture* dst,
                                  rtInterpolation interpolation, rtStream_t stream);
/** Letterbox: resizes `crop` of src (NULL: all of it) into the rectangle `paste` of dst (NULL: all of dst) and fills
 *  the rest of dst with `fill` (one value per channel of dst's format in its channel order; a 4:2:0 dst takes
 *  fill[0..2] as Y, U, V; NULL: zeros). */
RT_API rtError_t rtDvppCropResizePaste(const rtPicture* src, const rtRect* crop, rtPicture* dst, const rtRect* paste,
                                       const uint8_t fill[4], rtInterpolation interpolation, rtStream_t stream);
/** Many crops of many pictures in one call: picture i gives crops_per_src[i] crops (NULL: one each), taken in order
 *  from `crops` (NULL: each picture whole), the k-th crop overall going to dsts[k]; sizes may all differ. */
RT_API rtError_t rtDvppBatchCropResize(const rtPicture* srcs, uint32_t nsrc, const uint32_t* crops_per_src,
                                       const rtRect* crops, rtPicture* dsts, rtInterpolation interpolation,
                                       rtStream_t stream);
/** Converts src to dst's format (same width and height): 4:2:0 (NV12, NV21, YUV420P) <-> packed (RGB888, BGR888,
 *  RGBA8888, BGRA8888 — alpha 255 — and GRAY8: the Y plane itself), packed <-> packed (channel order, alpha added or
 *  dropped, grey as BT.601 luma 0.299 R + 0.587 G + 0.114 B, as OpenCV), 4:2:0 <-> 4:2:0 (chroma re-arranged).
 *  `matrix` is used where YUV meets RGB. */
RT_API rtError_t rtDvppConvertColor(const rtPicture* src, rtPicture* dst, rtColorMatrix matrix, rtStream_t stream);
/** out = (pixel - mean[c]) / std[c] per channel c of a packed src (GRAY8: 1 channel, RGB888/BGR888: 3, RGBA8888/
 *  BGRA8888: 4, in the format's channel order), written densely to dst as `dtype` (RT_FLOAT32, RT_FLOAT16,
 *  RT_BFLOAT16: rounded to nearest even; RT_UINT8, RT_INT8: rounded and saturated) in CHW (`chw` != 0: channels x
 *  height x width) or HWC order. dst must hold channels * width * height elements; mean and std NULL: 0 and 1;
 *  every mean[c] must be finite, every std[c] finite and non-zero, and 1/std[c], mean[c]/std[c] and every output
 *  (255 / |std[c]| + |mean[c] / std[c]| at most) must be finite floats (INVALID_VALUE naming the channel).
 *  Computed as fma(pixel, 1/std, -mean/std) in float on every backend. */
RT_API rtError_t rtDvppNormalize(const rtPicture* src, void* dst, rtDataType dtype, int chw, const float* mean,
                                 const float* std, rtStream_t stream);

/** What rtDvppPreprocess does after cropping. Set `size` to sizeof(rtDvppPreprocessParams) (RT_DVPP_PREPROCESS_INIT
 *  does, with the defaults below): the struct can grow, and the library reads only the fields the caller knows (the
 *  others take their defaults). A size below the end of `height`, or above the library's own
 *  sizeof(rtDvppPreprocessParams) (a caller built against a newer header), is refused: INVALID_VALUE. */
typedef struct rtDvppPreprocessParams {
    size_t size;
    uint32_t width, height;         /* the output's size (required) */
    rtInterpolation interpolation;  /* default RT_INTERP_BILINEAR */
    rtPixelFormat format;           /* the output's channels: RGB888 (default), BGR888 or GRAY8 */
    rtColorMatrix matrix;           /* for 4:2:0 sources; default RT_COLOR_BT601_LIMITED */
    rtDataType dtype;               /* default RT_FLOAT32 */
    int chw;                        /* default 1: channels x height x width; 0: height x width x channels */
    float mean[4], std[4];          /* per output channel; defaults 0 and 1 */
    rtRect paste;                   /* where the resized crop goes in the output; width 0 (default): all of it */
    uint8_t fill[4];                /* the output's pixels outside `paste`, before normalisation, in the output's
                                       channels (RGB, BGR or grey; default 0) */
} rtDvppPreprocessParams;
static inline rtDvppPreprocessParams rtDvppPreprocessParamsDefault(void) {
    rtDvppPreprocessParams p;
    unsigned i;
    p.size = sizeof(rtDvppPreprocessParams);
    p.width = p.height = 0;
    p.interpolation = RT_INTERP_BILINEAR;
    p.format = RT_PIXEL_FORMAT_RGB888;
    p.matrix = RT_COLOR_BT601_LIMITED;
    p.dtype = RT_FLOAT32;
    p.chw = 1;
    for (i = 0; i < 4; ++i) { p.mean[i] = 0.0f; p.std[i] = 1.0f; p.fill[i] = 0; }
    p.paste.x = p.paste.y = p.paste.width = p.paste.height = 0;
    return p;
}
#define RT_DVPP_PREPROCESS_INIT (rtDvppPreprocessParamsDefault())

/** The fused pre-processing of `n` pictures in one pass over each source, with no intermediate image: crop
 *  (crops[i], or all of picture i when crops is NULL) -> resize to the paste rectangle -> colour conversion to
 *  params->format (with params->matrix from a 4:2:0 source) -> normalisation -> layout and dtype, image i written to
 *  dst + i * (channels * width * height * element size). The result equals rtDvppCropResizePaste, then
 *  rtDvppConvertColor, then rtDvppNormalize applied one after the other, bit for bit (a 4:2:0 source is resized plane
 *  by plane, as rtDvppCropResize does, before conversion; its paste rectangle must then have even x, y, width and
 *  height: INVALID_VALUE otherwise). params->fill is written as the output's channels (after the conversion), so for
 *  a 4:2:0 source the equivalence holds with an rtDvppCropResizePaste fill of Y, U, V that params->matrix converts
 *  to params->fill (inside `paste` it holds always). */
RT_API rtError_t rtDvppPreprocess(const rtPicture* srcs, uint32_t n, const rtRect* crops,
                                  const rtDvppPreprocessParams* params, void* dst, rtStream_t stream);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* RUNTIME_DVPP_H */
