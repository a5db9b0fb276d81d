// Which sanitizer this translation unit is built with: RT_CPU_ASAN_ / RT_CPU_TSAN_ (GCC's and clang's spellings).
#pragma once

#if defined(__SANITIZE_THREAD__)
#define RT_CPU_TSAN_ 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define RT_CPU_TSAN_ 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define RT_CPU_ASAN_ 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define RT_CPU_ASAN_ 1
#endif
#endif
