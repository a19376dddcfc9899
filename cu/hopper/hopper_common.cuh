// hopper_common.cuh -- the sm_90a pieces every Hopper rung shares: element types, the tensor-map
// parameter, mbarriers, TMA loads, wgmma descriptors and fences, setmaxnreg, named barriers.
//
// No CUDA header is included on purpose: the kernels never compute on 16-bit values themselves
// (the tensor cores read them from shared memory), so a 2-byte element is an `unsigned short`,
// and the tensor map is our own 128-byte struct. NVRTC then parses nothing but this tree, which
// keeps a build fast and identical under NVRTC 12.9 and 13.0.
//
// Every piece of PTX is one small function, so a kernel reads as the algorithm.
#pragma once

namespace hopper {

// ---------------------------------------------------------------- element types
// An element type fixes the wgmma instruction, the storage type and the k extent of a
// 128-byte swizzle row: 64 elements of 2 bytes, 32 tf32 values (FP32 storage), or 128 FP8 codes.
enum class ElemId { bf16, fp16, tf32, fp8 };

struct bf16_t {
    static constexpr ElemId id = ElemId::bf16;
    using storage = unsigned short;
    static constexpr int bytes = 2;
};
struct fp16_t {
    static constexpr ElemId id = ElemId::fp16;
    using storage = unsigned short;
    static constexpr int bytes = 2;
};
struct tf32_t {
    static constexpr ElemId id = ElemId::tf32;
    using storage = float;
    static constexpr int bytes = 4;
};
// FP8 codes (the fp8 precision): the same 128-byte rows hold 128 of them, and a k32 wgmma step
// reads 32 bytes of a row, as k16 does for 2-byte types, so layouts and descriptors carry over.
// Each operand is e4m3 or e5m2, which changes nothing but the type names in the wgmma instruction,
// so the pair rides on the element type: TYPES, bit 0 set where wgmma's A operand is e5m2, bit 1
// where its B is (the index in gemm_driver/problem.py's FP8_TYPES).
template <int TYPES_>
struct fp8_t {
    static constexpr ElemId id = ElemId::fp8;
    using storage = unsigned char;
    static constexpr int bytes = 1;
    static constexpr int TYPES = TYPES_;
};
using e4m3_t = fp8_t<0>;  // both e4m3
// The pair with wgmma's operands exchanged, for C^T = B^T A^T (the decode tiles: A's rows are
// wgmma's B operand there, B's its A).
template <class Fp8>
using fp8_swapped_t = fp8_t<((Fp8::TYPES & 1) << 1 | (Fp8::TYPES & 2) >> 1)>;

// A k tile is one 128-byte swizzle row of each operand row; a wgmma k step is 32 bytes of it.
template <class Elem> struct KTile {
    static constexpr int BK = 128 / Elem::bytes;         // 64 (bf16/fp16), 32 (tf32) or 128 (FP8)
    static constexpr int WGMMA_K = 32 / Elem::bytes;     // 16, 8 or 32
    static constexpr int STEPS = BK / WGMMA_K;           // 4 wgmma per k tile
};

// ---------------------------------------------------------------- tensor map
// The 128 opaque bytes cuTensorMapEncodeTiled writes, passed by value as a
// `const __grid_constant__` parameter. CUDA 12 headers align CUtensorMap to 64 bytes and
// CUDA 13 headers to 128; declaring 128 here makes the parameter offset valid for both, and the
// launcher (cuLaunchKernel with kernelParams) copies it to whatever offset the cubin declares.
struct alignas(128) TensorMap {
    unsigned long long opaque[16];
};

// ---------------------------------------------------------------- addresses
__device__ __forceinline__ unsigned smem_u32(const void* p) {
    return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// ---------------------------------------------------------------- mbarriers
// A 64-bit shared-memory barrier. `full` barriers count the producer's one arrival plus the
// bytes TMA delivers; `empty` barriers count one arrival per consumer warpgroup.
using Barrier = unsigned long long;

__device__ __forceinline__ void barrier_init(Barrier* bar, unsigned arrivals) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_u32(bar)), "r"(arrivals) : "memory");
}

// Makes the initialised barriers visible to the async proxy (TMA) and to the cluster.
__device__ __forceinline__ void fence_barrier_init() {
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

// The producer's arrival: expect `bytes` more from TMA before this phase can complete.
__device__ __forceinline__ void barrier_arrive_expect_tx(Barrier* bar, unsigned bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_u32(bar)), "r"(bytes)
                 : "memory");
}

// Expect `bytes` more from TMA in the current phase, without arriving: for loads issued before
// the arrival that counts the rest (the phase cannot complete while that arrival is pending).
__device__ __forceinline__ void barrier_expect_tx(Barrier* bar, unsigned bytes) {
    asm volatile("mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%0], %1;" ::"r"(smem_u32(bar)), "r"(bytes)
                 : "memory");
}

__device__ __forceinline__ void barrier_arrive(Barrier* bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_u32(bar)) : "memory");
}

// Arrive on the barrier at the same offset in CTA `cta` of this cluster (possibly this one).
__device__ __forceinline__ void barrier_arrive_cluster(Barrier* bar, unsigned cta) {
    asm volatile(
        "{\n.reg .b32 remote;\n"
        "mapa.shared::cluster.u32 remote, %0, %1;\n"
        "mbarrier.arrive.shared::cluster.b64 _, [remote];\n}\n" ::"r"(smem_u32(bar)),
        "r"(cta)
        : "memory");
}

// Wait until the phase of parity `parity` has completed. A fresh barrier is in phase 0, so
// waiting for parity 1 returns at once: that is how a producer sees every slot free at start.
__device__ __forceinline__ void barrier_wait(Barrier* bar, unsigned parity) {
    asm volatile(
        "{\n.reg .pred ready;\n"
        "WAIT:\n"
        "mbarrier.try_wait.parity.shared::cta.b64 ready, [%0], %1;\n"
        "@!ready bra WAIT;\n}\n" ::"r"(smem_u32(bar)),
        "r"(parity)
        : "memory");
}

// ---------------------------------------------------------------- TMA
__device__ __forceinline__ void tma_prefetch_map(const TensorMap* map) {
    asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<unsigned long long>(map)) : "memory");
}

// Copy the box at element coordinates (c0 = inner/contiguous, c1 = outer) into shared memory at
// dst, completing `bytes` of the barrier's transaction count. Out-of-bounds parts of the box
// arrive as zeros and still count: ragged M, N and K edges cost nothing here.
__device__ __forceinline__ void tma_load_2d(void* dst, const TensorMap* map, Barrier* bar, int c0, int c1) {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4}], [%2];" ::"r"(
            smem_u32(dst)),
        "l"(reinterpret_cast<unsigned long long>(map)), "r"(smem_u32(bar)), "r"(c0), "r"(c1)
        : "memory");
}

// The same box, written to the same shared-memory offset in every CTA of `cta_mask` in this
// cluster, each completing bytes on its own barrier at `bar`'s offset.
__device__ __forceinline__ void tma_load_2d_multicast(void* dst, const TensorMap* map, Barrier* bar, int c0, int c1,
                                                      unsigned short cta_mask) {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"
        " [%0], [%1, {%4, %5}], [%2], %3;" ::"r"(smem_u32(dst)),
        "l"(reinterpret_cast<unsigned long long>(map)), "r"(smem_u32(bar)), "h"(cta_mask), "r"(c0), "r"(c1)
        : "memory");
}

// ---------------------------------------------------------------- wgmma
// A shared-memory matrix descriptor for a tile written by TMA with 128-byte swizzle. Start,
// leading and stride byte offsets are stored >> 4 in 14-bit fields; bits 62-63 = 1 select the
// 128-byte swizzle. Buffers are 1024-byte aligned, so the base-offset field stays 0.
//   K-major (A, and B for tf32): rows of 128 bytes along k; SBO = 1024 (8 rows to the next 8);
//     LBO unused (1). A k step advances the start address by 32 bytes inside the row.
//   N-major (B for bf16/fp16): rows of 128 bytes = 64 n along n, one row per k; SBO = 1024
//     (8 k rows to the next 8), LBO = the distance to the next 64-wide n block.
__device__ __forceinline__ unsigned long long smem_desc(unsigned addr, unsigned lbo, unsigned sbo) {
    return static_cast<unsigned long long>((addr & 0x3FFFF) >> 4) |
           static_cast<unsigned long long>((lbo & 0x3FFFF) >> 4) << 16 |
           static_cast<unsigned long long>((sbo & 0x3FFFF) >> 4) << 32 | 1ull << 62;
}

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int PENDING>
__device__ __forceinline__ void wgmma_wait() {
    asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(PENDING) : "memory");
}

// The accumulators are written asynchronously; the compiler does not know. An empty asm that
// "modifies" each register pins every later read after the wait that precedes it.
template <int R>
__device__ __forceinline__ void fence_accumulators(float (&d)[R]) {
#pragma unroll
    for (int i = 0; i < R; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// ---------------------------------------------------------------- programmatic dependent launch
// A grid launched with programmatic stream serialization (the PDL tunable) may start while the
// grid before it in the stream is still running. wait_for_previous_grid blocks until that grid
// has completed and its memory is visible: nothing global may be read or written before it.
// allow_next_grid lets the next such launch start once every CTA of this grid has got here or
// exited. Both are no-ops for an ordinary launch.
__device__ __forceinline__ void wait_for_previous_grid() { asm volatile("griddepcontrol.wait;" ::: "memory"); }
__device__ __forceinline__ void allow_next_grid() { asm volatile("griddepcontrol.launch_dependents;" ::: "memory"); }
// The persistent kernels' hand-over, called by every thread once the prologue (barriers,
// setmaxnreg, tensor-map prefetch: no global memory) is done, so with PDL the prologue overlaps
// the previous grid's tail. Every CTA is resident once it gets here, so the next grid, free to
// start after this, cannot hold back a split-K peer of ours.
__device__ __forceinline__ void take_over_from_previous_grid() {
    wait_for_previous_grid();
    allow_next_grid();
}

// ---------------------------------------------------------------- warpgroups
// setmaxnreg hands registers between warpgroups; it needs a register cap at entry
// (__launch_bounds__(threads, 1)) to take effect.
template <int REGS>
__device__ __forceinline__ void shrink_registers() {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(REGS));
}
template <int REGS>
__device__ __forceinline__ void grow_registers() {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(REGS));
}

// A barrier among `threads` threads (a multiple of 32) using hardware barrier `id` (1..15;
// 0 is __syncthreads).
__device__ __forceinline__ void named_barrier(int id, int threads) {
    asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

// The same among warps that reach it from different places in the code (the producer's loop and
// the consumers' epilogue): bar.sync is the .aligned form, which needs one instruction for all.
__device__ __forceinline__ void named_barrier_across_roles(int id, int threads) {
    asm volatile("barrier.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

__device__ __forceinline__ unsigned cluster_cta_rank() {
    unsigned rank;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
    return rank;
}

__device__ __forceinline__ void cluster_sync() {
    asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}

// ---------------------------------------------------------------- global flags (split-K's hand-over)
__device__ __forceinline__ int load_relaxed_gpu(const int* p) {
    int v;
    asm volatile("ld.relaxed.gpu.global.s32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}
__device__ __forceinline__ int load_acquire_gpu(const int* p) {
    int v;
    asm volatile("ld.acquire.gpu.global.s32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}
__device__ __forceinline__ void store_relaxed_gpu(int* p, int v) {
    asm volatile("st.relaxed.gpu.global.s32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ int atomic_add_acq_rel_gpu(int* p, int v) {
    int old;
    asm volatile("atom.acq_rel.gpu.global.add.s32 %0, [%1], %2;" : "=r"(old) : "l"(p), "r"(v) : "memory");
    return old;
}
__device__ __forceinline__ void add_release_gpu(int* p, int v) {
    asm volatile("red.release.gpu.global.add.s32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

// Dynamic shared memory rounded up to 1024 bytes: the 128-byte swizzle pattern repeats every
// 1024 bytes, and TMA and wgmma must agree on where it starts.
__device__ __forceinline__ unsigned char* aligned_dynamic_smem() {
    extern __shared__ unsigned char smem_raw[];
    const unsigned base = smem_u32(smem_raw);
    return smem_raw + (((base + 1023u) & ~1023u) - base);
}

__host__ __device__ constexpr int ceil_div(int a, int b) { return (a + b - 1) / b; }

}  // namespace hopper
