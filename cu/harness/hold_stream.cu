// hold_stream.cu -- not a GEMM: the timing harness's stream blocker.
//
// One thread spins until the host sets *release (a pinned, device-mapped word). The
// timer launches it first, queues the start event, the timed launches and the end event
// behind it, then releases it: the GPU runs the batch back to back, so host launch
// overhead never shows up between the events. If the host never releases, the kernel
// gives up after timeout_ns and sets *expired, so a bug costs one bad sample, not a hang.
extern "C" __global__ void hold_stream(const volatile int* release, volatile int* expired,
                                       unsigned long long timeout_ns) {
    unsigned long long start, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    while (*release == 0) {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
        if (now - start > timeout_ns) {
            *expired = 1;
            return;
        }
        __nanosleep(1000);
    }
}
