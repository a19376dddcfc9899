// tma_copy_probe.cu -- one TMA box copied to global memory, byte for byte as it landed in shared
// memory. Not a GEMM rung: it proves a tensor map end to end (the encoder's 128 bytes passed as a
// __grid_constant__ parameter, zero fill outside the tensor, the 128-byte swizzle pattern that
// the wgmma descriptors assume). tests/test_tensor_map.py launches it.
#include "hopper_common.cuh"

// One CTA; box_bytes <= 16384. out receives the shared-memory image of the box at (c0, c1).
extern "C" __global__ void tma_copy_probe(const __grid_constant__ hopper::TensorMap map, int c0, int c1,
                                          int box_bytes, unsigned char* __restrict__ out) {
    using namespace hopper;
    __shared__ alignas(1024) unsigned char tile[16384];
    __shared__ Barrier bar;
    if (threadIdx.x == 0) {
        barrier_init(&bar, 1);
        fence_barrier_init();
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        barrier_arrive_expect_tx(&bar, box_bytes);
        tma_load_2d(tile, &map, &bar, c0, c1);
    }
    barrier_wait(&bar, 0);
    for (int i = threadIdx.x; i < box_bytes; i += blockDim.x) out[i] = tile[i];
}
