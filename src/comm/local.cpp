// The in-process transport's collectives over Workers::parallel_for (see local.hpp).
#include "comm/local.hpp"

#include <algorithm>
#include <cstring>

#include "comm/reduce.hpp"

namespace rt::comm {

namespace {
/// Elements per piece: large enough that a piece's start-up is noise, small enough that both cores share the work.
size_t grain_for(size_t element_bytes, int ranks) {
    const size_t bytes = 256 * 1024 / static_cast<size_t>(ranks > 0 ? ranks : 1);
    const size_t g = bytes / element_bytes;
    return g ? g : 1;
}

/// Outputs past this many bytes in all (every rank's) are written past the cache: they would not fit it anyway.
constexpr size_t kLargeOutput = size_t{16} << 20;

/// reduce_range's store through the backend's large copy.
void store_large(void* workers, void* dst, const void* src, size_t bytes) {
    static_cast<backend::Workers*>(workers)->copy(dst, src, bytes, true);
}

/// Copies `bytes` from src to dst (distinct, or equal: skipped) in pieces.
void parallel_copy(void* dst, const void* src, size_t bytes, backend::Workers& workers) {
    if (dst == src || bytes == 0) return;
    workers.parallel_for(bytes, 512 * 1024, [&](size_t b, size_t e) {
        std::memcpy(static_cast<char*>(dst) + b, static_cast<const char*>(src) + b, e - b);
    });
}
}  // namespace

void run_local(const Matched& m, backend::Workers& workers) {
    const int n = static_cast<int>(m.send.size());
    const size_t es = element_size(m.type);
    const size_t bytes = m.count * es;
    if (m.count == 0) return;
    switch (m.kind) {
        case Kind::all_reduce: {
            const bool large = bytes * static_cast<size_t>(n) >= kLargeOutput;
            workers.parallel_for(m.count, grain_for(es, n), [&](size_t b, size_t e) {
                reduce_range(m.type, m.op, m.send.data(), n, m.recv.data(), n, b, e, n, large ? store_large : nullptr,
                             &workers);
            });
            break;
        }
        case Kind::reduce: {
            void* out = m.recv[static_cast<size_t>(m.root)];
            workers.parallel_for(m.count, grain_for(es, n), [&](size_t b, size_t e) {
                reduce_range(m.type, m.op, m.send.data(), n, &out, 1, b, e, n);
            });
            break;
        }
        case Kind::reduce_scatter:
            // Output r's element i reduces send_k[r * count + i]: one range of [0, n * count) at a time per output.
            workers.parallel_for(static_cast<size_t>(n) * m.count, grain_for(es, n), [&](size_t b, size_t e) {
                std::vector<const void*> src(static_cast<size_t>(n));
                while (b < e) {
                    const size_t r = b / m.count, i = b % m.count;
                    const size_t len = std::min(e - b, m.count - i);
                    for (int k = 0; k < n; ++k)
                        src[static_cast<size_t>(k)] = static_cast<const char*>(m.send[static_cast<size_t>(k)]) + r * bytes;
                    void* out = m.recv[r];  // sources start at block r: index i is element i of both
                    reduce_range(m.type, m.op, src.data(), n, &out, 1, i, i + len, n);
                    b += len;
                }
            });
            break;
        case Kind::broadcast: {
            const void* from = m.send[static_cast<size_t>(m.root)];
            workers.parallel_for(bytes, 512 * 1024, [&](size_t b, size_t e) {
                for (int r = 0; r < n; ++r) {
                    char* to = static_cast<char*>(m.recv[static_cast<size_t>(r)]);
                    if (to != from) std::memcpy(to + b, static_cast<const char*>(from) + b, e - b);
                }
            });
            break;
        }
        case Kind::all_gather:
            // recv_r[k * bytes ..] = send_k; in place (send_k == recv_k + k * bytes) the copy onto itself is skipped.
            workers.parallel_for(static_cast<size_t>(n) * bytes, 512 * 1024, [&](size_t b, size_t e) {
                while (b < e) {
                    const size_t k = b / bytes, off = b % bytes, len = std::min(e - b, bytes - off);
                    const char* from = static_cast<const char*>(m.send[k]) + off;
                    for (int r = 0; r < n; ++r) {
                        char* to = static_cast<char*>(m.recv[static_cast<size_t>(r)]) + k * bytes + off;
                        if (to != from) std::memcpy(to, from, len);
                    }
                    b += len;
                }
            });
            break;
        case Kind::all_to_all: {
            // recv_r[k * bytes + i] = send_k[r * bytes + i]. A piece covers bytes [b, e) of every block of every rank:
            // it reads all of them into a staging buffer before writing any (send may be recv).
            workers.parallel_for(bytes, 64 * 1024, [&](size_t b, size_t e) {
                const size_t len = e - b;
                std::vector<char> stage(static_cast<size_t>(n) * static_cast<size_t>(n) * len);
                for (int k = 0; k < n; ++k)
                    for (int r = 0; r < n; ++r)
                        std::memcpy(&stage[(static_cast<size_t>(k) * n + r) * len],
                                    static_cast<const char*>(m.send[static_cast<size_t>(k)]) + r * bytes + b, len);
                for (int r = 0; r < n; ++r)
                    for (int k = 0; k < n; ++k)
                        std::memcpy(static_cast<char*>(m.recv[static_cast<size_t>(r)]) + k * bytes + b,
                                    &stage[(static_cast<size_t>(k) * n + r) * len], len);
            });
            break;
        }
        case Kind::send:
        case Kind::recv:
            parallel_copy(m.recv[1], m.send[0], bytes, workers);  // participant 0 sends, 1 receives
            break;
        case Kind::barrier:
            break;
    }
}

}  // namespace rt::comm
