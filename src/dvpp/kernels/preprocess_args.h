// preprocess_args.h — the argument of the fused pre-processing kernels (preprocess.cpp): one picture's crop, its
// resampling into the paste rectangle of the output, colour conversion, normalisation and output layout.
//
// Kernel dialect source after resize_math.h and normalize_math.h (whose DvppResample and DvppNorm it holds); the
// library also includes it as plain C++: src/dvpp/preprocess.cpp fills it and passes it by value.
#ifndef DVPP_PREPROCESS_ARGS_H
#define DVPP_PREPROCESS_ARGS_H

/* The most columns one work-item covers (its taps and outputs are cached per row in arrays of this size). */
#define DVPP_PREPROCESS_TILE 64

/* The output's channels (rtDvppPreprocessParams.format), as the kernels take them. */
#define DVPP_OUT_RGB 0
#define DVPP_OUT_BGR 1
#define DVPP_OUT_GREY 2

struct DvppPreprocessArgs {
    const uint8_t* plane0;  // the crop's first pixel: packed, or its first Y sample
    const uint8_t* plane1;  // 4:2:0: the crop's first chroma sample (the interleaved plane, or the U plane)
    const uint8_t* plane2;  // YUV420P: the crop's first V sample (otherwise unused)
    void* dst;              // the output image's first element
    uint32_t pitch0, pitch1;  // bytes between rows of plane 0 and of the chroma planes
    uint32_t width, height;   // the output's
    uint32_t tile_w, tile_h;  // the output pixels of one work-item (tile_w <= DVPP_PREPROCESS_TILE)
    uint32_t tiles_x, tiles_y;  // tiles per row and per column of the output
    uint32_t paste_x, paste_y, paste_w, paste_h;  // where the resized crop lands in the output
    int32_t swapped;  // packed: channels in BGR order; NV12/NV21: 1 for NV21 (V before U)
    int32_t out;      // DVPP_OUT_*
    int32_t matrix;   // rtColorMatrix of a 4:2:0 source
    int32_t dtype;    // DVPP_DTYPE_*
    int32_t chw;      // 1: channels x height x width; 0: height x width x channels
    uint32_t fill[3];  // the output's channels outside the paste rectangle, before normalisation
    DvppNorm norm;     // per output channel
    DvppResample luma;    // plane 0: the crop to paste_w x paste_h
    DvppResample chroma;  // 4:2:0 chroma: the crop's half to paste_w / 2 x paste_h / 2
};

#endif /* DVPP_PREPROCESS_ARGS_H */
