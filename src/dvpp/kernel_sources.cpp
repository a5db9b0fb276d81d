// The DVPP kernel families' embedded sources (generated from src/dvpp/kernels/ by cmake/embed_dvpp_kernels.cmake)
// and names. Apart from kernel_library.cpp so the toolchain tests can link it without the core.
#include "dvpp/kernel_library.hpp"

namespace rt::dvpp {

namespace generated {
extern const char* const family_sources[];  // in rt::dvpp::Family's order
}

const char* family_source(Family family) noexcept { return generated::family_sources[static_cast<int>(family)]; }

const char* family_name(Family family) noexcept {
    switch (family) {
        case Family::resize: return "resize";
        case Family::color: return "color";
        case Family::normalize: return "normalize";
        case Family::preprocess: return "preprocess";
    }
    return "?";
}

}  // namespace rt::dvpp
