// Collectives of a cross-process communicator with several ranks in one process: what each process sends the others
// (its local ranks' contributions, gathered by the leader) and how the blocks received become every local rank's
// result (mpi_transport.hpp, Plan).
//
// Why not "reduce locally, then across processes, then broadcast": floating-point reduction is not associative, and
// the contract is the in-process result bit for bit — every element reduced over ranks 0..n-1 in that order, whatever
// process holds which rank. So the leader packs its local ranks' contributions, the processes exchange them (MPI
// messages or the shared segment), and each process reduces per element over all n contributions in global rank
// order, straight into its local ranks' buffers. The cost is traffic: an all-reduce moves every contribution to every
// process (n x the buffer) instead of a reduce-scatter's share.
#include <algorithm>
#include <cstring>

#include "comm/mpi_transport.hpp"
#include "comm/reduce.hpp"

namespace rt::comm::mpi {

std::unique_ptr<Plan> make_plan(const Group& g, const Op& op) {
    auto plan = std::make_unique<Plan>();
    Plan& p = *plan;
    const Call& c = op.call;
    const int P = g.size(), me = g.rank(), n = g.nranks();
    const size_t es = element_size(c.type), B = c.count * es;
    const std::vector<int>& mine = g.member(me).ranks;
    const size_t L = mine.size();
    auto locals_of = [&](int q) { return g.member(q).ranks.size(); };
    const int root_at = c.kind == Kind::broadcast || c.kind == Kind::reduce ? g.participant_of(c.root) : -1;
    // The bytes process a sends process b.
    auto block = [&](int a, int b) -> size_t {
        switch (c.kind) {
            case Kind::all_reduce:
            case Kind::all_gather: return locals_of(a) * B;
            case Kind::reduce: return b == root_at ? locals_of(a) * B : 0;
            case Kind::broadcast: return a == root_at ? B : 0;
            case Kind::reduce_scatter:
            case Kind::all_to_all: return locals_of(a) * locals_of(b) * B;
            default: return 0;
        }
    };
    for (int a = 0; a < P; ++a)
        for (int b = 0; b < P; ++b)
            if (a != b) p.max_block = std::max(p.max_block, block(a, b));
    p.to.assign(static_cast<size_t>(P), nullptr);
    p.to_bytes.assign(static_cast<size_t>(P), 0);
    p.from.assign(static_cast<size_t>(P), nullptr);
    p.from_bytes.assign(static_cast<size_t>(P), 0);

    // Pack. reduce_scatter / all_to_all: for each participant q, pieces [local sender i][q's rank j] = send_i's block
    // for rank ranks(q)[j]; this process' own pieces too (a copy taken before any result is written: in place is then
    // safe).
    std::vector<size_t> packed_at(static_cast<size_t>(P), 0);
    switch (c.kind) {
        case Kind::all_reduce:
        case Kind::all_gather:
        case Kind::reduce:
            // A copy also for this process' own contributions: its results may overwrite them (in place).
            p.packed.resize(L * B);
            for (size_t i = 0; i < L && B; ++i) std::memcpy(p.packed.data() + i * B, op.locals[i].send, B);
            break;
        case Kind::reduce_scatter:
        case Kind::all_to_all: {
            size_t total = 0;
            for (int q = 0; q < P; ++q) packed_at[static_cast<size_t>(q)] = total, total += L * locals_of(q) * B;
            p.packed.resize(total);
            for (int q = 0; q < P; ++q) {
                const std::vector<int>& theirs = g.member(q).ranks;
                char* at = p.packed.data() + packed_at[static_cast<size_t>(q)];
                for (size_t i = 0; i < L; ++i)
                    for (size_t j = 0; j < theirs.size(); ++j, at += B)
                        if (B)
                            std::memcpy(at, static_cast<const char*>(op.locals[i].send) +
                                                static_cast<size_t>(theirs[j]) * B, B);
            }
            break;
        }
        default: break;
    }
    size_t staged = 0;
    std::vector<size_t> staged_at(static_cast<size_t>(P), 0);
    for (int q = 0; q < P; ++q) {
        if (q == me) continue;
        const size_t out = block(me, q), in = block(q, me);
        p.to_bytes[static_cast<size_t>(q)] = out;
        if (out) {
            if (c.kind == Kind::broadcast) p.to[static_cast<size_t>(q)] = static_cast<const char*>(op.locals[static_cast<size_t>(g.local_index(c.root))].send);
            else if (c.kind == Kind::reduce_scatter || c.kind == Kind::all_to_all) p.to[static_cast<size_t>(q)] = p.packed.data() + packed_at[static_cast<size_t>(q)];
            else p.to[static_cast<size_t>(q)] = p.packed.data();
        }
        p.from_bytes[static_cast<size_t>(q)] = in;
        staged_at[static_cast<size_t>(q)] = staged;
        staged += in;
    }
    p.staged.resize(staged);
    for (int q = 0; q < P; ++q)
        if (q != me && p.from_bytes[static_cast<size_t>(q)]) p.from[static_cast<size_t>(q)] = p.staged.data() + staged_at[static_cast<size_t>(q)];

    // Rank s's contribution as this process sees it: its packed copy here, or its place in its process' block.
    Plan* self = plan.get();
    auto contribution = [self, &g, me, B](int s) -> const char* {
        const int q = g.participant_of(s);
        const size_t i = static_cast<size_t>(g.local_index(s));
        return (q == me ? self->packed.data() : self->from[static_cast<size_t>(q)]) + i * B;
    };
    // reduce_scatter / all_to_all: rank s's block for local rank j (index in this process).
    auto piece = [self, &g, me, L, B, packed_at](int s, size_t j) -> const char* {
        const int q = g.participant_of(s);
        const size_t i = static_cast<size_t>(g.local_index(s));
        const char* base = q == me ? self->packed.data() + packed_at[static_cast<size_t>(me)] : self->from[static_cast<size_t>(q)];
        return base + (i * L + j) * B;
    };
    std::vector<Call> locals = op.locals;
    const rtDataType type = c.type;
    const rtReduceOp rop = c.op;
    const size_t count = c.count;
    switch (c.kind) {
        case Kind::all_reduce:
        case Kind::reduce: {
            if (c.kind == Kind::reduce && root_at != me) break;
            std::vector<const void*> src(static_cast<size_t>(n));
            for (int s = 0; s < n; ++s) src[static_cast<size_t>(s)] = contribution(s);
            std::vector<void*> dst;
            if (c.kind == Kind::all_reduce)
                for (const Call& l : locals) dst.push_back(l.recv);
            else
                dst.push_back(locals[static_cast<size_t>(g.local_index(c.root))].recv);
            p.finish = [type, rop, count, n, src = std::move(src), dst = std::move(dst)] {
                reduce_range(type, rop, src.data(), n, dst.data(), static_cast<int>(dst.size()), 0, count, n);
            };
            break;
        }
        case Kind::broadcast: {
            const char* src = root_at == me ? static_cast<const char*>(locals[static_cast<size_t>(g.local_index(c.root))].send)
                                            : p.from[static_cast<size_t>(root_at)];
            p.finish = [locals, src, B] {
                for (const Call& l : locals)
                    if (B && l.recv != src) std::memcpy(l.recv, src, B);
            };
            break;
        }
        case Kind::all_gather: {
            std::vector<const char*> src(static_cast<size_t>(n));
            for (int s = 0; s < n; ++s) src[static_cast<size_t>(s)] = contribution(s);
            p.finish = [locals, src = std::move(src), B, n] {
                for (const Call& l : locals)
                    for (int s = 0; s < n && B; ++s) std::memcpy(static_cast<char*>(l.recv) + static_cast<size_t>(s) * B, src[static_cast<size_t>(s)], B);
            };
            break;
        }
        case Kind::reduce_scatter: {
            std::vector<std::vector<const void*>> src(L, std::vector<const void*>(static_cast<size_t>(n)));
            for (size_t j = 0; j < L; ++j)
                for (int s = 0; s < n; ++s) src[j][static_cast<size_t>(s)] = piece(s, j);
            p.finish = [locals, src = std::move(src), type, rop, count, n] {
                for (size_t j = 0; j < locals.size(); ++j) {
                    void* dst = locals[j].recv;
                    reduce_range(type, rop, src[j].data(), n, &dst, 1, 0, count, n);
                }
            };
            break;
        }
        case Kind::all_to_all: {
            std::vector<std::vector<const char*>> src(L, std::vector<const char*>(static_cast<size_t>(n)));
            for (size_t j = 0; j < L; ++j)
                for (int s = 0; s < n; ++s) src[j][static_cast<size_t>(s)] = piece(s, j);
            p.finish = [locals, src = std::move(src), B, n] {
                for (size_t j = 0; j < locals.size(); ++j)
                    for (int s = 0; s < n && B; ++s)
                        std::memcpy(static_cast<char*>(locals[j].recv) + static_cast<size_t>(s) * B, src[j][static_cast<size_t>(s)], B);
            };
            break;
        }
        default: p.finish = [] {}; break;
    }
    if (!p.finish) p.finish = [] {};
    return plan;
}

}  // namespace rt::comm::mpi
