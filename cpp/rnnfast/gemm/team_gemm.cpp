#include "team_gemm.hpp"

#include <algorithm>

namespace rnnfast {

Range team_range(const Team& team, index n, index granule) {
    const index units = (n + granule - 1) / granule;
    return {std::min(n, units * team.me / team.size * granule),
            std::min(n, units * (team.me + 1) / team.size * granule)};
}

template <class T>
void team_pack(const KernelTable<T>& kt, const Team& team, MatView<T> B, index K, index N, T* dst) {
    const Range mine = team_range(team, panel_count(N, kt.nr));
    kt.pack_b(B, K, N, mine.begin, mine.end, dst);
}

template <class T>
void team_gemm(const KernelTable<T>& kt, const Team& team, index M, index N, index K, MatView<T> A,
               MatView<T> B, T* C, index ldc, bool accumulate, T* packed, index packed_rows) {
    if (M == 0 || N == 0) return;
    const index panels = panel_count(N, kt.nr);
    const Share s = share_of(M, panels, kt.mr, team.me, team.size);
    // share_of splits panels as team_range does when there are enough of them: then what a
    // member packs is exactly what it reads.
    const bool own_panels = panels >= team.size;
    index k0 = 0;
    do {  // at least once: K == 0 still writes C = 0 (or leaves it, accumulating)
        const index kc = std::min(K - k0, kTeamPackRows);
        const MatView<T> Bk{B.p + k0 * B.rs, B.rs, B.cs};
        // Panel p of a K-block of kc rows lies at p * kc * nr. A member packing its own panels
        // shifts the block so that they stay inside [p0, p1) * packed_rows * nr whatever kc
        // is: a shorter block never reaches into panels another member may still be reading.
        T* const block = own_panels ? packed + s.p0 * (packed_rows - kc) * kt.nr : packed;
        if (own_panels) {
            kt.pack_b(Bk, kc, N, s.p0, s.p1, block);
        } else {
            team_pack(kt, team, Bk, kc, N, block);
            team.barrier->wait();
        }
        GemmTask<T> task;
        task.M = M;
        task.N = N;
        task.K = kc;
        task.A = {A.p + k0 * A.cs, A.rs, A.cs};
        task.packed_b = block;
        task.C = C;
        task.ldc = ldc;
        task.accumulate = accumulate || k0 > 0;
        kt.gemm_block(task, s.m0, s.m1, s.p0, s.p1);
        if (!own_panels) team.barrier->wait();  // before the next pack overwrites the panels
        k0 += kc;
    } while (k0 < K);
}

template <class T>
void team_task(const KernelTable<T>& kt, const Team& team, const GemmTask<T>& task) {
    const index panels = panel_count(task.N, kt.nr);
    if (task.M == 0 || panels == 0) return;
    const Share s = share_of(task.M, panels, kt.mr, team.me, team.size);
    kt.gemm_block(task, s.m0, s.m1, s.p0, s.p1);
}

#define RNNFAST_INSTANTIATE(T)                                                                   \
    template void team_pack(const KernelTable<T>&, const Team&, MatView<T>, index, index, T*);   \
    template void team_gemm(const KernelTable<T>&, const Team&, index, index, index, MatView<T>, \
                            MatView<T>, T*, index, bool, T*, index);                             \
    template void team_task(const KernelTable<T>&, const Team&, const GemmTask<T>&);
RNNFAST_INSTANTIATE(float)
RNNFAST_INSTANTIATE(double)
#undef RNNFAST_INSTANTIATE

}  // namespace rnnfast
