"""The CUDA layer: driver API objects, NVRTC, the cubin cache and cuBLAS.

Nothing in here knows about GEMM; the layers above build on these pieces.
"""
