// test_version.cpp — rtGetVersion and the header's version macros, seen from C++ and from C (abi_from_c.c), and
// RT_LAUNCH_CONFIG_INIT built by a C compiler.
#include "abi_from_c.h"
#include "test_util.hpp"

namespace {

using rt_test::contains;
using rt_test::last_message;

TEST(Version, ReportsTheLoadedLibrarysVersionInTheDocumentedEncoding) {
    int v = -1;
    ASSERT_RT_OK(rtGetVersion(&v));
    EXPECT_EQ(v, RUNTIME_VERSION_MAJOR * 10000 + RUNTIME_VERSION_MINOR * 100 + RUNTIME_VERSION_PATCH);
    EXPECT_EQ(v, RUNTIME_VERSION) << "this test is built with the library's own header";
    EXPECT_EQ(v / 10000, RUNTIME_VERSION_MAJOR);
    EXPECT_EQ(v / 100 % 100, RUNTIME_VERSION_MINOR);
    EXPECT_EQ(v % 100, RUNTIME_VERSION_PATCH);
    static_assert(RUNTIME_VERSION_MINOR < 100 && RUNTIME_VERSION_PATCH < 100, "the encoding holds two digits each");
}

TEST(Version, NullIsInvalidValue) {
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtGetVersion(nullptr));
    EXPECT_TRUE(contains(last_message(), "rtGetVersion")) << last_message();
    EXPECT_TRUE(contains(last_message(), "version is NULL")) << last_message();
}

TEST(Version, NeedsNoInitialisedRuntime) {
    ASSERT_RT_OK(rtFinalize());
    int v = -1;
    ASSERT_RT_OK(rtGetVersion(&v));
    EXPECT_EQ(v, RUNTIME_VERSION);
    // And works next to a failed initialisation.
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtInit("no_such_option=1"));
    v = -1;
    ASSERT_RT_OK(rtGetVersion(&v));
    EXPECT_EQ(v, RUNTIME_VERSION);
}

TEST(Version, CCallersSeeTheSameVersionAndStruct) {
    int v = -1;
    ASSERT_RT_OK(abi_c_get_version(&v));
    EXPECT_EQ(v, abi_c_header_version());
    EXPECT_EQ(abi_c_header_version(), RUNTIME_VERSION);
    EXPECT_EQ(abi_c_config_size(), sizeof(rtLaunchConfig)) << "C and C++ lay the struct out alike";
    EXPECT_EQ(abi_c_get_version(nullptr), RT_ERROR_INVALID_VALUE);
}

TEST(Version, LaunchConfigInitFromCSetsTheSizeAndZeroesTheRest) {
    for (const rtLaunchConfig& c : {abi_c_static_config(), abi_c_automatic_config(), abi_c_default_config()}) {
        EXPECT_EQ(c.size, sizeof(rtLaunchConfig));
        EXPECT_EQ(c.grid.y | c.grid.z | c.block.x | c.block.y | c.block.z, 0u);
        EXPECT_EQ(c.shared_bytes, 0u);
        EXPECT_EQ(c.stream, nullptr);
        EXPECT_EQ(c.num_args, 0);
        EXPECT_EQ(c.arg_sizes, nullptr);
        EXPECT_EQ(c.global[0] | c.global[1] | c.global[2], 0ull);
    }
    EXPECT_EQ(abi_c_static_config().grid.x, 0u);
    EXPECT_EQ(abi_c_automatic_config().grid.x, 4u) << "fields set by name after the initialiser";
    const rtLaunchConfig cpp = RT_LAUNCH_CONFIG_INIT;
    EXPECT_EQ(cpp.size, sizeof(rtLaunchConfig));
}

}  // namespace
