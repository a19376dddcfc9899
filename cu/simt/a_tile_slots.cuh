// a_tile_slots.cuh -- the conflict-free order in which threads copy A's tile into a
// transposed, padded shared-memory tile (As[k * (BM + 4) + m]); introduced by the
// bank_conflict_free rung and kept by double_buffered.
#pragma once

// Which element(s) of A's BM x BK tile thread tid copies in its i-th slot: (row, first k).
// A warp takes 4 rows x 8 k (scalar) or 16 rows x 2 float4s (float4 path): 32-byte runs
// in global memory, and with the BM + 4 padding its transposed stores land in 32
// distinct banks for BK = 8 and 16 alike (row-major slot order would put k and k + 8 in
// one bank when BK = 16). For BK = 8 it is plain row-major order. Written in (tid, i)
// so that k is loop-invariant and the row a constant step per slot: no extra registers.
template <int BK, int NT>
__device__ __forceinline__ int2 a_scalar_slot(int tid, int i) {
    constexpr int HALVES = BK / 8, STEP = NT / 32 / HALVES * 4;
    static_assert(BK % 8 == 0 && (NT / 32) % HALVES == 0, "warps must split evenly over BK / 8");
    const int lane = tid % 32, warp = tid / 32;
    return make_int2(warp / HALVES * 4 + lane / 8 + i * STEP, warp % HALVES * 8 + lane % 8);
}
template <int BK, int NT>
__device__ __forceinline__ int2 a_vec_slot(int tid, int i) {
    constexpr int HALVES = BK / 8, STEP = NT / 32 / HALVES * 16;
    static_assert(BK % 8 == 0 && (NT / 32) % HALVES == 0, "warps must split evenly over BK / 8");
    const int lane = tid % 32, warp = tid / 32;
    return make_int2(warp / HALVES * 16 + lane / 2 + i * STEP, (warp % HALVES * 2 + lane % 2) * 4);
}
