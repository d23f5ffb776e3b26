/* Where the device sits idle inside a training step: a CUPTI activity tracer loaded into any
 * CUDA program through the driver's injection hook (CUDA_INJECTION64_PATH), so detrain
 * itself carries no profiling code. It records every kernel, memset and memcpy with its
 * device start and end, and at exit splits the timeline into segments at idle gaps longer
 * than GAPS_SPLIT_US (default 150 us: the host synchronises at the end of every step) and
 * prints, per segment: its span, the busy time (the union of the records' intervals over
 * every stream), the idle time, the record count, a histogram of the idle gaps and the
 * largest gaps with the records on either side.
 *
 * Build and use on the GPU machine (bench/gpu_gaps.sh does both):
 *   gcc -O2 -shared -fPIC -I$CUDA/include -I$CUPTI/include tools/gpu_gaps/gpu_gaps.c \
 *       -L$CUPTI/lib64 -lcupti -o libgpu_gaps.so
 *   CUDA_INJECTION64_PATH=$PWD/libgpu_gaps.so GAPS_OUT=gaps.txt detrain-cuda bench ...
 * A diagnostic for developers, not part of the product's build (not among the tools make builds). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <cupti.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef GAPS_KERNEL_RECORD
#define GAPS_KERNEL_RECORD CUpti_ActivityKernel9
#endif
#ifndef GAPS_MEMCPY_RECORD
#define GAPS_MEMCPY_RECORD CUpti_ActivityMemcpy5
#endif
#ifndef GAPS_MEMSET_RECORD
#define GAPS_MEMSET_RECORD CUpti_ActivityMemset4
#endif

typedef struct rec {
    uint64_t start, end;
    uint32_t stream, corr;
    const char *name; /* a copy: CUPTI may reuse its own */
} rec;

static rec *g_rec;
static size_t g_n, g_cap;
/* host start of the runtime/driver call of each correlation id (0: not seen) */
static uint64_t *g_issue;
static size_t g_ncorr;

static void issued(uint32_t corr, uint64_t start) {
    if (corr >= g_ncorr) {
        size_t n = g_ncorr ? g_ncorr : 1 << 16;
        while (n <= corr) n *= 2;
        uint64_t *p = (uint64_t *)realloc(g_issue, n * sizeof *p);
        if (!p) return;
        memset(p + g_ncorr, 0, (n - g_ncorr) * sizeof *p);
        g_issue = p;
        g_ncorr = n;
    }
    g_issue[corr] = start;
}

static uint64_t issue_of(uint32_t corr) { return corr < g_ncorr ? g_issue[corr] : 0; }

static void add(uint64_t start, uint64_t end, uint32_t stream, uint32_t corr, const char *name) {
    if (g_n == g_cap) {
        size_t cap = g_cap ? 2 * g_cap : 1 << 16;
        rec *r = (rec *)realloc(g_rec, cap * sizeof *r);
        if (!r) return; /* out of memory: the report covers what was kept */
        g_rec = r;
        g_cap = cap;
    }
    g_rec[g_n++] = (rec){start, end, stream, corr, name ? strdup(name) : "?"};
}

static void CUPTIAPI buf_request(uint8_t **buf, size_t *size, size_t *maxrec) {
    *size = (size_t)8 << 20;
    *buf = (uint8_t *)aligned_alloc(8, *size);
    *maxrec = 0;
}

static void CUPTIAPI buf_complete(CUcontext ctx, uint32_t sid, uint8_t *buf, size_t size, size_t valid) {
    (void)ctx;
    (void)sid;
    (void)size;
    CUpti_Activity *r = NULL;
    while (cuptiActivityGetNextRecord(buf, valid, &r) == CUPTI_SUCCESS) {
        if (r->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || r->kind == CUPTI_ACTIVITY_KIND_KERNEL) {
            const GAPS_KERNEL_RECORD *k = (const GAPS_KERNEL_RECORD *)r;
            add(k->start, k->end, k->streamId, k->correlationId, k->name);
        } else if (r->kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
            const GAPS_MEMCPY_RECORD *k = (const GAPS_MEMCPY_RECORD *)r;
            add(k->start, k->end, k->streamId, k->correlationId, "[memcpy]");
        } else if (r->kind == CUPTI_ACTIVITY_KIND_MEMSET) {
            const GAPS_MEMSET_RECORD *k = (const GAPS_MEMSET_RECORD *)r;
            add(k->start, k->end, k->streamId, k->correlationId, "[memset]");
        } else if (r->kind == CUPTI_ACTIVITY_KIND_RUNTIME || r->kind == CUPTI_ACTIVITY_KIND_DRIVER) {
            const CUpti_ActivityAPI *k = (const CUpti_ActivityAPI *)r;
            issued(k->correlationId, k->start);
        }
    }
    free(buf);
}

static int by_start(const void *a, const void *b) {
    const rec *x = (const rec *)a, *y = (const rec *)b;
    return x->start < y->start ? -1 : x->start > y->start ? 1 : 0;
}

static double env_num(const char *k, double dflt) {
    const char *v = getenv(k);
    return v && *v ? atof(v) : dflt;
}

/* One segment [a, b) of the sorted records: busy union, idle gaps, the largest gaps. */
static void segment(FILE *f, int idx, size_t a, size_t b) {
    enum { TOP = 8, NB = 6 };
    static const double edge[NB] = {1, 2, 4, 8, 16, 1e30}; /* us */
    double hist_us[NB] = {0};
    int hist_n[NB] = {0};
    size_t top_at[TOP] = {0};
    double top_us[TOP] = {0};
    uint64_t busy = 0, cover_end = g_rec[a].end, cover_start = g_rec[a].start, sum = 0;
    double starved_us = 0; /* gaps whose record the host issued after the device went idle */
    int starved_n = 0;
    FILE *dump = NULL;
    const char *dp = getenv("GAPS_DUMP"); /* a file for this segment's records, one a line */
    if (dp && *dp && idx == (int)env_num("GAPS_DUMP_SEGMENT", 12)) dump = fopen(dp, "w");
    if (dump) fprintf(dump, "start_us dur_us gap_us issue_lead_us stream name\n");
    for (size_t i = a; i < b; i++) {
        const rec *r = &g_rec[i];
        sum += r->end - r->start;
        uint64_t iss = issue_of(r->corr);
        if (dump)
            fprintf(dump, "%.3f %.3f %.3f %.3f %u %.90s\n", (r->start - g_rec[a].start) / 1e3,
                    (r->end - r->start) / 1e3, i > a && r->start > cover_end ? (r->start - cover_end) / 1e3 : 0.0,
                    iss ? ((double)r->start - (double)iss) / 1e3 : -1.0, r->stream, r->name);
        if (i > a && r->start > cover_end) { /* an idle gap before record i */
            double g = (r->start - cover_end) / 1e3;
            if (iss > cover_end) {
                starved_us += g;
                starved_n++;
            }
            int k = 0;
            while (g > edge[k]) k++;
            hist_us[k] += g;
            hist_n[k]++;
            for (int t = 0; t < TOP; t++)
                if (g > top_us[t]) {
                    memmove(top_us + t + 1, top_us + t, (TOP - 1 - t) * sizeof *top_us);
                    memmove(top_at + t + 1, top_at + t, (TOP - 1 - t) * sizeof *top_at);
                    top_us[t] = g;
                    top_at[t] = i;
                    break;
                }
            busy += cover_end - cover_start;
            cover_start = r->start;
        }
        if (r->end > cover_end) cover_end = r->end;
    }
    busy += cover_end - cover_start;
    uint64_t span = cover_end - g_rec[a].start;
    fprintf(f, "segment %d: %zu records, span %.3f ms, busy %.3f ms, idle %.3f ms (%.2f%%), "
               "sum of record times %.3f ms\n",
            idx, b - a, span / 1e6, busy / 1e6, (span - busy) / 1e6, 100.0 * (span - busy) / span, sum / 1e6);
    fprintf(f, "  host-starved gaps (issued after the device went idle): %d, %.1f us\n", starved_n, starved_us);
    if (dump) fclose(dump);
    fprintf(f, "  idle gaps (count, total us):");
    for (int k = 0; k < NB; k++)
        fprintf(f, "  <=%g: %d, %.1f", k == NB - 1 ? 1e9 : edge[k], hist_n[k], hist_us[k]);
    fprintf(f, "\n");
    for (int t = 0; t < TOP && top_us[t] > 0; t++) {
        size_t i = top_at[t];
        uint64_t iss = issue_of(g_rec[i].corr);
        fprintf(f, "  gap %.2f us before %.60s (stream %u, issued %.1f us before it ran), after %.60s\n",
                top_us[t], g_rec[i].name, g_rec[i].stream, iss ? ((double)g_rec[i].start - (double)iss) / 1e3 : -1.0,
                g_rec[i - 1].name);
    }
}

static void report(void) {
    cuptiActivityFlushAll(1);
    if (!g_n) return;
    qsort(g_rec, g_n, sizeof *g_rec, by_start);
    const char *path = getenv("GAPS_OUT");
    char buf[512];
    if (path && *path) {
        snprintf(buf, sizeof buf, "%s.%d", path, (int)getpid());
        path = buf;
    }
    FILE *f = path ? fopen(path, "w") : stderr;
    if (!f) f = stderr;
    uint64_t split = (uint64_t)(env_num("GAPS_SPLIT_US", 150) * 1e3);
    size_t min_records = (size_t)env_num("GAPS_MIN_RECORDS", 50);
    size_t a = 0;
    uint64_t cover_end = g_rec[0].end;
    int idx = 0;
    for (size_t i = 1; i <= g_n; i++) {
        if (i == g_n || g_rec[i].start > cover_end + split) {
            if (i - a >= min_records) segment(f, idx++, a, i);
            a = i;
        }
        if (i < g_n && g_rec[i].end > cover_end) cover_end = g_rec[i].end;
    }
    fprintf(f, "%zu records, %d segments of >= %zu records\n", g_n, idx, min_records);
    if (f != stderr) fclose(f);
}

/* Called by the CUDA driver when CUDA_INJECTION64_PATH names this library. */
int InitializeInjection(void);
int InitializeInjection(void) {
    if (cuptiActivityRegisterCallbacks(buf_request, buf_complete) != CUPTI_SUCCESS) return 0;
    cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY);
    cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMSET);
    cuptiActivityEnable(CUPTI_ACTIVITY_KIND_RUNTIME);
    cuptiActivityEnable(CUPTI_ACTIVITY_KIND_DRIVER);
    atexit(report);
    return 1;
}
