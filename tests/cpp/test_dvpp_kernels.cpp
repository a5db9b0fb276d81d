// test_dvpp_kernels.cpp — DVPP's kernel families exactly as the library embeds them: what each module is made of,
// and that every family builds for the cpu target (test_cuda_compiler builds them for sm_90 with NVRTC). A family
// that fails to build is a defect every user of its operations would meet on first use.
#include <gtest/gtest.h>

#include <string>

#include "backends/cpu/cpu_target.hpp"
#include "core/error.hpp"
#include "dvpp/kernel_library.hpp"
#include "kernels/dialect.hpp"
#include "kernels/target.hpp"

namespace {

using rt::dvpp::Family;
constexpr Family kFamilies[] = {Family::resize, Family::color, Family::normalize, Family::preprocess};

/// Where `file`'s text starts in a family's source (the embedding marks each file), or npos.
size_t file_at(const std::string& source, const std::string& file) {
    return source.find("// ---- src/dvpp/kernels/" + file + "\n");
}

TEST(DvppKernels, EachFamilyIsTheSharedHeadersThenItsOwnFile) {
    for (Family f : kFamilies) {
        const std::string name = rt::dvpp::family_name(f), source = rt::dvpp::family_source(f);
        SCOPED_TRACE(name);
        EXPECT_EQ(file_at(source, "common.h"), 0u) << "common.h comes first";
        const size_t own = file_at(source, name + ".cpp");
        ASSERT_NE(own, std::string::npos);
        EXPECT_EQ(source.find("// ---- src/dvpp/kernels/", own + 1), std::string::npos) << "its own file comes last";
        EXPECT_NE(source.find("RT_KERNEL", own), std::string::npos) << "its file defines kernels";
    }
    // The fused pre-processing uses the very maths of the separate operations; the others take only their own.
    const std::string pre = rt::dvpp::family_source(Family::preprocess);
    for (const char* h : {"resize_math.h", "color_math.h", "normalize_math.h"})
        EXPECT_NE(file_at(pre, h), std::string::npos) << h;
    EXPECT_NE(file_at(rt::dvpp::family_source(Family::resize), "resize_math.h"), std::string::npos);
    EXPECT_EQ(file_at(rt::dvpp::family_source(Family::resize), "color_math.h"), std::string::npos);
    EXPECT_NE(file_at(rt::dvpp::family_source(Family::color), "color_math.h"), std::string::npos);
    EXPECT_EQ(file_at(rt::dvpp::family_source(Family::color), "resize_math.h"), std::string::npos);
    EXPECT_NE(file_at(rt::dvpp::family_source(Family::normalize), "normalize_math.h"), std::string::npos);
}

TEST(DvppKernels, EveryFamilyBuildsForTheCpu) {
    for (Family f : kFamilies) {
        const std::string name = std::string("dvpp ") + rt::dvpp::family_name(f);
        SCOPED_TRACE(name);
        try {
            rt::kernels::Image image = rt::kernels::compile(
                rt::cpu::cpu_target(), rt::kernels::read_program(rt::dvpp::family_source(f), "", name));
            EXPECT_FALSE(image.kernels.empty());
        } catch (const rt::Error& e) {
            ADD_FAILURE() << "code " << rtGetErrorName(e.code()) << ": " << e.what();
        }
    }
}

}  // namespace
