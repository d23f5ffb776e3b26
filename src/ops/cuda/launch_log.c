/* The launch log of kernel-level tracing (see launch_log.h). */
#include "ops/cuda/launch_log.h"

#include <stdio.h>

#define LAUNCH_NOTES 32
static struct {
    int on, n; /* n: launches noted since the last take (may exceed LAUNCH_NOTES) */
    struct { const char *kernel; unsigned g[3], b[3]; size_t smem; } note[LAUNCH_NOTES];
} L;

void dt_cu_launch_log(int on) { L.on = on; }

void dt_cu_launch_note(const char *kernel, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                       unsigned by, unsigned bz, size_t smem) {
    if (!L.on) return;
    if (L.n < LAUNCH_NOTES) {
        L.note[L.n].kernel = kernel;
        L.note[L.n].g[0] = gx; L.note[L.n].g[1] = gy; L.note[L.n].g[2] = gz;
        L.note[L.n].b[0] = bx; L.note[L.n].b[1] = by; L.note[L.n].b[2] = bz;
        L.note[L.n].smem = smem;
    }
    L.n++;
}

int dt_cu_launch_take(char *buf, size_t cap) {
    int n = L.n;
    L.n = 0;
    if (!buf || cap == 0) return n;
    size_t used = 0;
    buf[0] = 0;
    int kept = n < LAUNCH_NOTES ? n : LAUNCH_NOTES;
    for (int i = 0; i < kept && used + 1 < cap; i++) {
        int w = snprintf(buf + used, cap - used, "%s%s<<<(%u,%u,%u),(%u,%u,%u),%zu>>>", i ? "; " : "",
                         L.note[i].kernel, L.note[i].g[0], L.note[i].g[1], L.note[i].g[2],
                         L.note[i].b[0], L.note[i].b[1], L.note[i].b[2], L.note[i].smem);
        used = w < 0 ? cap : used + (size_t)w;
    }
    if (n > kept && used + 1 < cap) snprintf(buf + used, cap - used, "; +%d more", n - kept);
    return n;
}
