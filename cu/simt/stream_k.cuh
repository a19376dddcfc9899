// stream_k.cuh -- the stream-K schedule of the warptiled kernel (STREAMK = 1) and its fix-up.
//
// Stream-K (Osama et al., "Stream-K: Work-centric Parallel Decomposition for Dense Matrix-Matrix
// Multiplication on the GPU", 2023) launches a persistent grid of about one CTA per resident
// slot and gives every CTA an equal share of all the MAC-loop iterations (BK steps), crossing
// tile boundaries. A CTA therefore works on at most three kinds of unit, in this order:
//  * the END of a tile that a lower CTA started (k0 > 0): a "contributor"; it stores its
//    partial sums into its own workspace slot and raises its own flag;
//  * whole tiles (k0 == 0 and k1 == iters): stored straight to C;
//  * the START of a tile that higher CTAs finish (k0 == 0, k1 < iters): the "finisher"; it
//    waits for each higher peer's flag, adds the peers' partials to its own sums in CTA order
//    and stores the tile.
// Only a CTA's first unit can be a contributor and only its last a finisher, so a CTA stores at
// most one partial (the workspace is one BM x BN slot per CTA) and a finisher waits on peers
// that raised their flag right at their start: by the time it has done its own share, they
// normally have. Contributors never wait, so the wait graph has no cycle; but a finisher does
// wait, so every CTA of the grid must be resident at once (the launch side sizes the grid from
// the occupancy; a larger grid could deadlock).
//
// Hybrid ("data-parallel + one stream-K wave"): with T tiles and G CTAs, T <= G puts every
// tile in the stream-K share. Otherwise T % G + G tiles (one to two tiles' worth of steps per
// CTA) are shared out by k step, and the other T - (T % G + G), a multiple of G, are whole tiles
// in full data-parallel waves; when G divides T there is nothing to balance and every tile is
// whole. The stream-K share comes first, the whole tiles after it.
//
// Deterministic: the split depends only on (M, N, K, tile, G); the finisher adds its peers'
// partials in increasing CTA order (its own k range first, then the later ones), never with
// float atomics, so every launch gives the same bits. The finisher resets each peer's flag
// after waiting on it, so the flags are zero again when the kernel ends: back-to-back launches
// need no re-zeroing (and other launches that share the Session's buffer find it zeroed).
//
// The same arithmetic is written in Python in gemm_driver/kernels/simt/stream_k.py, where
// tests check that every (tile, k step) is covered exactly once for many shapes and grids.
#pragma once

namespace stream_k {

// The grid and this CTA's index, read with volatile asm so that the compiler cannot keep them
// (and all that is derived from them) in registers across a unit: see unit_of below.
// `fresh` does the same for a kernel argument (M, N, K): its value, as an asm output that is
// recomputed where it is written, never hoisted out of a loop.
__device__ __forceinline__ int fresh(int value) {
    int out;
    asm volatile("mov.b32 %0, %1;" : "=r"(out) : "r"(value));
    return out;
}
__device__ __forceinline__ int grid_ctas() {
    unsigned g;
    asm volatile("mov.u32 %0, %%nctaid.x;" : "=r"(g));
    return static_cast<int>(g);
}
__device__ __forceinline__ int cta_index() {
    unsigned c;
    asm volatile("mov.u32 %0, %%ctaid.x;" : "=r"(c));
    return static_cast<int>(c);
}

struct Unit {
    int tile, k0, k1;  // k steps [k0, k1) of C tile `tile`; k1 == 0: no unit (the CTA is done)
    int tiles_n, iters;
};

struct Schedule {
    int grid;         // CTAs (gridDim.x)
    int tiles_n;      // C tiles along n (tile t is row t / tiles_n, column t % tiles_n)
    int tiles;        // C tiles in all
    int iters;        // k steps per tile: ceil(K / BK), at least 1 (K = 0 is one empty step)
    int sk_tiles;     // tiles [0, sk_tiles) are shared out by k step; [sk_tiles, tiles) are whole
    long long base;   // stream-K steps per CTA: base, plus one for the CTAs below `extra`
    int extra;

    __device__ __forceinline__ Schedule(int M, int N, int K, int BM, int BN, int BK, int grid_) : grid(grid_) {
        tiles_n = (N + BN - 1) / BN;
        tiles = (M + BM - 1) / BM * tiles_n;
        iters = max(1, (K + BK - 1) / BK);
        const int rem = tiles % grid;
        sk_tiles = tiles <= grid ? tiles : (rem == 0 ? 0 : rem + grid);
        const long long total = static_cast<long long>(sk_tiles) * iters;
        base = total / grid;
        extra = static_cast<int>(total % grid);
    }

    // First stream-K step of CTA `cta` (begin(cta + 1) is one past its last).
    __device__ __forceinline__ long long begin(int cta) const { return cta * base + min(cta, extra); }

    // Unit u of CTA `cta`: first the tiles its stream-K steps touch (the first and last
    // possibly in part), then its whole tiles sk_tiles + cta, + grid, ...
    __device__ __forceinline__ Unit unit(int cta, int u) const {
        const long long first = begin(cta), end = begin(cta + 1);
        if (first < end) {
            const int first_tile = static_cast<int>(first / iters);
            const int touched = static_cast<int>((end - 1) / iters) - first_tile + 1;
            if (u < touched) {
                const int tile = first_tile + u;
                const long long tile_step = static_cast<long long>(tile) * iters;
                const int k0 = static_cast<int>(max(first - tile_step, 0ll));
                const int k1 = static_cast<int>(min(end - tile_step, static_cast<long long>(iters)));
                return {tile, k0, k1, tiles_n, iters};
            }
            u -= touched;
        }
        const int tile = sk_tiles + cta + u * grid;
        return tile < tiles ? Unit{tile, 0, iters, tiles_n, iters} : Unit{0, 0, 0, tiles_n, iters};
    }

    // One past the last peer whose partial the finisher `cta` of `tile` adds (peers: cta + 1, ...).
    __device__ __forceinline__ int peers_end(int cta, int tile) const {
        const long long tile_end = static_cast<long long>(tile + 1) * iters;
        int last = cta + 1;
        while (last < grid && begin(last) < tile_end) ++last;
        return last;
    }
};

// Unit u of this CTA, computed from the kernel's arguments and the (volatile) grid registers
// every time it is asked for. The kernel asks twice per unit, before and after the k loop, so
// that nothing of the schedule is live across the k loop but u: the 8x8-lane tilings already
// use all their 128 registers there, and carried schedule state spilled.
template <int BM, int BN, int BK>
__device__ __forceinline__ Schedule schedule_of(int M, int N, int K) {
    return Schedule(fresh(M), fresh(N), fresh(K), BM, BN, BK, grid_ctas());
}
template <int BM, int BN, int BK>
__device__ __forceinline__ Unit unit_of(int M, int N, int K, int u) {
    return schedule_of<BM, BN, BK>(M, N, K).unit(cta_index(), u);
}

__device__ __forceinline__ void store_release(unsigned* flag, unsigned value) {
    asm volatile("st.release.gpu.global.u32 [%0], %1;" ::"l"(flag), "r"(value) : "memory");
}

__device__ __forceinline__ unsigned load_acquire(const unsigned* flag) {
    unsigned value;
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(value) : "l"(flag) : "memory");
    return value;
}

// Contributor: this CTA's partial sums into its slot (float4 q of thread t at q * THREADS + t,
// so a warp stores 512 contiguous bytes), then the flag. Order: every thread's stores, the
// barrier, then thread 0's fence and release store of the flag: the fence is cumulative, so it
// covers the stores the barrier ordered before it (CUTLASS's semaphores do the same). A fence in
// every thread, as before, cost each contributor and finisher a GPU-wide round trip per thread.
template <int THREADS, int TM, int TN>
__device__ __forceinline__ void store_partial(const float (&acc)[TM][TN], float* slot, unsigned* flag) {
    float4* out = reinterpret_cast<float4*>(slot) + threadIdx.x;
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int g = 0; g < TN / 4; ++g)
            __stcg(out + (i * (TN / 4) + g) * THREADS,
                   make_float4(acc[i][4 * g], acc[i][4 * g + 1], acc[i][4 * g + 2], acc[i][4 * g + 3]));
    __syncthreads();
    if (threadIdx.x == 0) {
        __threadfence();
        store_release(flag, 1u);
    }
}

// Finisher, step 1: thread 0 waits for the flag of every peer in [first, last) and resets it
// (the slot is not written again in this launch, and the next launch starts after this one
// ends); the barrier then passes the acquired view to the whole CTA (no fence needed after it).
__device__ __forceinline__ void wait_for_peers(unsigned* flags, int first, int last) {
    if (threadIdx.x == 0) {
        for (int p = first; p < last; ++p) {
            while (load_acquire(flags + p) == 0u) __nanosleep(40);
            flags[p] = 0u;
        }
    }
    __syncthreads();
}

// Finisher, step 2: acc += the partial of one peer (read through L2: written by another SM).
// Eight float4 loads at a time: all of them at once beside 128 accumulators would spill.
template <int THREADS, int TM, int TN>
__device__ __forceinline__ void add_partial(float (&acc)[TM][TN], const float* slot) {
    constexpr int QUADS = TM * TN / 4;
    const float4* in = reinterpret_cast<const float4*>(slot) + threadIdx.x;
#pragma unroll
    for (int q0 = 0; q0 < QUADS; q0 += 8) {
#pragma unroll
        for (int q = q0; q < q0 + 8 && q < QUADS; ++q) {
            const float4 p = __ldcg(in + q * THREADS);
            float* a = &acc[q / (TN / 4)][4 * (q % (TN / 4))];
            a[0] += p.x, a[1] += p.y, a[2] += p.z, a[3] += p.w;
        }
        asm volatile("" ::: "memory");
    }
}

}  // namespace stream_k
