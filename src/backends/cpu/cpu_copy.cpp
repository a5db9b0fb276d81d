// Bulk byte movement for the cpu device: SSE2 streaming stores (baseline x86-64), memcpy elsewhere.
#include "backends/cpu/cpu_copy.hpp"

#include <cstring>

#include "backends/cpu/cpu_executor.hpp"

#if defined(__x86_64__) || defined(__SSE2__)
#include <emmintrin.h>
#define RT_HAVE_SSE2 1
#endif

namespace rt::cpu {

namespace {
/// Copies and fills at least this large are split across the executors (below, one thread is faster
/// than waking another).
constexpr size_t kSplitBytes = size_t{2} << 20;
/// Each piece of a split copy: large enough to amortise taking it, small enough to balance two threads.
constexpr size_t kPieceBytes = size_t{4} << 20;
}  // namespace

void copy_bytes(void* dst, const void* src, size_t bytes, bool streaming) {
#ifdef RT_HAVE_SSE2
    if (streaming && bytes >= 256) {
        auto* d = static_cast<char*>(dst);
        auto* s = static_cast<const char*>(src);
        size_t head = (64 - (reinterpret_cast<uintptr_t>(d) & 63)) & 63;  // align stores to cache lines
        std::memcpy(d, s, head);
        d += head, s += head, bytes -= head;
        size_t body = bytes & ~size_t{63};
        for (size_t i = 0; i < body; i += 64) {
            __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i));
            __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 16));
            __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 32));
            __m128i e = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 48));
            _mm_stream_si128(reinterpret_cast<__m128i*>(d + i), a);
            _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 16), b);
            _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 32), c);
            _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 48), e);
        }
        std::memcpy(d + body, s + body, bytes - body);
        return;
    }
#endif
    (void)streaming;
    std::memcpy(dst, src, bytes);
}

void fill_bytes(void* dst, uint8_t value, size_t bytes, bool streaming) {
#ifdef RT_HAVE_SSE2
    if (streaming && bytes >= 256) {
        auto* d = static_cast<char*>(dst);
        size_t head = (64 - (reinterpret_cast<uintptr_t>(d) & 63)) & 63;
        std::memset(d, value, head);
        d += head, bytes -= head;
        size_t body = bytes & ~size_t{63};
        __m128i v = _mm_set1_epi8(static_cast<char>(value));
        for (size_t i = 0; i < body; i += 64) {
            _mm_stream_si128(reinterpret_cast<__m128i*>(d + i), v);
            _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 16), v);
            _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 32), v);
            _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 48), v);
        }
        std::memset(d + body, value, bytes - body);
        return;
    }
#endif
    (void)streaming;
    std::memset(dst, value, bytes);
}

void streaming_fence() {
#ifdef RT_HAVE_SSE2
    _mm_sfence();
#endif
}

void run_copy(Executor& executor, void* dst, const void* src, size_t bytes) {
    auto* d = static_cast<char*>(dst);
    auto* s = static_cast<const char*>(src);
    const bool overlap = d < s + bytes && s < d + bytes;
    const bool streaming = bytes >= kStreamingBytes;
    if (overlap) {
        std::memmove(d, s, bytes);
    } else if (bytes < kSplitBytes) {
        std::memcpy(d, s, bytes);
    } else {
        auto piece = [&](size_t b, size_t e) {
            copy_bytes(d + b, s + b, e - b, streaming);
            streaming_fence();  // before parallel_for publishes the piece as done
        };
        executor.parallel_for(bytes, kPieceBytes, piece);
    }
}

void run_fill(Executor& executor, void* dst, uint8_t value, size_t bytes) {
    auto* d = static_cast<char*>(dst);
    const bool streaming = bytes >= kStreamingBytes;
    if (bytes < kSplitBytes) {
        std::memset(d, value, bytes);
    } else {
        auto piece = [&](size_t b, size_t e) {
            fill_bytes(d + b, value, e - b, streaming);
            streaming_fence();
        };
        executor.parallel_for(bytes, kPieceBytes, piece);
    }
}

}  // namespace rt::cpu
