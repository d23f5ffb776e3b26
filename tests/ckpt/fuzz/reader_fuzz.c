/* Seeded mutation fuzz of the readers not covered by st_fuzz.c (safetensors, JSON) and
 * test_ckpt_state_fuzz.c (checkpoint state files): token shards and the dataset over them,
 * trace files, metrics logs and their comparison, env.json fingerprints, the checkpoint
 * tracker. Linked with the sanitized library by tests/sanitize/test_fuzz.sh.
 *
 * usage: reader_fuzz KIND ITERATIONS SEED SEEDFILE WORKDIR
 *   KIND: shard | trace | metrics | env | tracker. SEEDFILE is a valid file of that kind
 *   (the shell test makes them with detrain); each iteration writes 1-4 mutations of it
 *   (bit flips, structural bytes, truncation, insertions, deletions, duplicated chunks,
 *   edge-case numbers) to WORKDIR and reads it back. For traces half of the mutants get
 *   every record's checksum recomputed (resealed), so the field checks behind the
 *   checksum are reached.
 * A reader must return DT_OK or a status that names bad input (ECORRUPT, EMISMATCH,
 * EINVAL, EUNSUPPORTED; EIO only for the tracker's "not a regular file" path, never
 * here); anything else, or any sanitizer report, fails the run. */
#include "core/digest.h"
#include "ckpt/tracker.h"
#include "data/dataset.h"
#include "data/shard.h"
#include "metrics/compare.h"
#include "metrics/metrics.h"
#include "trace/format.h"
#include "trace/reader.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz_rng.h"

static const char STRUCT[] = "{}[]\":,0123456789-.eE \\\n\x01\xff";
static const char *const NUMBERS[] = {"-1", "0", "1e400", "18446744073709551616", "9223372036854775808",
                                      "0.5", "-0", "00", "4294967296", "2147483648", "nan", "\"0x\""};

/* Applies one mutation to buf (length *n, capacity cap). */
static void mutate(uint8_t *buf, size_t *n, size_t cap) {
    size_t len = *n, i = below(len ? len : 1);
    switch (below(8)) {
    case 0: if (len) buf[i] ^= (uint8_t)(1u << below(8)); break;
    case 1: if (len) buf[i] = (uint8_t)STRUCT[below(sizeof STRUCT - 1)]; break;
    case 2: if (len) buf[i] = (uint8_t)rnd(); break;
    case 3: *n = below(len + 1); break;
    case 4: { /* insert 1-8 bytes */
        size_t k = 1 + below(8);
        if (len + k > cap || i > len) break;
        memmove(buf + i + k, buf + i, len - i);
        for (size_t j = 0; j < k; j++) buf[i + j] = (rnd() & 1) ? (uint8_t)rnd() : (uint8_t)STRUCT[below(sizeof STRUCT - 1)];
        *n = len + k;
        break;
    }
    case 5: { /* delete 1-16 bytes */
        size_t k = 1 + below(16);
        if (i >= len) break;
        if (k > len - i) k = len - i;
        memmove(buf + i, buf + i + k, len - i - k);
        *n = len - k;
        break;
    }
    case 6: { /* duplicate a chunk */
        size_t k = 1 + below(64), from = below(len ? len : 1);
        if (from + k > len || len + k > cap || i > len) break;
        memmove(buf + i + k, buf + i, len - i);
        memmove(buf + i, buf + (from >= i ? from + k : from), k);
        *n = len + k;
        break;
    }
    default: { /* a run of digits becomes an edge-case number */
        while (i < len && (buf[i] < '0' || buf[i] > '9')) i++;
        size_t e = i;
        while (e < len && buf[e] >= '0' && buf[e] <= '9') e++;
        const char *r = NUMBERS[below(sizeof NUMBERS / sizeof NUMBERS[0])];
        size_t rl = strlen(r);
        if (e == i || len - (e - i) + rl > cap) break;
        memmove(buf + i + rl, buf + e, len - e);
        memcpy(buf + i, r, rl);
        *n = len - (e - i) + rl;
    }
    }
}

/* Recomputes the checksum of every record of a trace whose framing still fits. */
static void reseal(uint8_t *b, size_t n) {
    size_t off = DT_TRACE_PREAMBLE;
    while (off + DT_TRACE_REC_HEAD <= n) {
        uint32_t len = dt_get_u32(b + off);
        if (len > DT_TRACE_MAX_RECORD || n - off < DT_TRACE_REC_HEAD + (size_t)len + DT_TRACE_REC_TAIL) break;
        uint64_t h = dt_xxh64(b + off, DT_TRACE_REC_HEAD + (size_t)len, 0);
        for (int k = 0; k < 8; k++) b[off + DT_TRACE_REC_HEAD + len + (size_t)k] = (uint8_t)(h >> (8 * k));
        off += DT_TRACE_REC_HEAD + (size_t)len + DT_TRACE_REC_TAIL;
    }
}

static uint8_t *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc(sz > 0 ? (size_t)sz : 1);
    *n = b ? fread(b, 1, (size_t)sz, f) : 0;
    fclose(f);
    return b;
}

/* Writes a mutant as a new file: replacing the old one's inode (not truncating it) keeps
 * ext4 from flushing it to disk on close (auto_da_alloc), which is most of the time
 * otherwise. */
static int spill(const char *path, const uint8_t *b, size_t n) {
    unlink(path);
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    size_t w = fwrite(b, 1, n, f);
    return fclose(f) == 0 && w == n ? 0 : -1;
}

static int bad_input(dt_status st) {
    return st == DT_ECORRUPT || st == DT_EMISMATCH || st == DT_EINVAL || st == DT_EUNSUPPORTED;
}

/* Reads the mutant at path as KIND. 0: fine; 1: an unexpected status (printed). */
static int read_one(const char *kind, const char *path, const char *seedfile, const char *dir) {
    dt_status st = DT_OK;
    if (!strcmp(kind, "shard")) {
        dt_shard_header h;
        dt_shard *s = NULL;
        dt_dataset *ds = NULL;
        st = dt_shard_read_header(path, &h);
        if (st == DT_OK || bad_input(st)) st = dt_shard_open(&s, path, 256);
        dt_shard_close(s);
        if (st == DT_OK) {
            st = dt_dataset_open(&ds, path, 256, 7, 0.25f, 1, 8);
            int in[8], tg[8];
            for (int k = 0; st == DT_OK && k < 5; k++) st = dt_dataset_next_train(ds, in, tg);
            if (st == DT_OK && dt_dataset_val_windows(ds)) {
                dt_dataset_val_reset(ds);
                st = dt_dataset_next_val(ds, in, tg);
            }
            dt_dataset_free(ds);
        }
    } else if (!strcmp(kind, "trace")) {
        dt_trace_file f;
        st = dt_trace_file_load(path, (int)(rnd() & 1), &f);
        if (st == DT_OK) {
            uint64_t acc = 0;
            for (size_t e = 0; e < f.nevents; e++) {
                const dt_trace_rec *r = &f.events[e];
                acc += strlen(r->scope) + strlen(r->op) + strlen(r->variant) + strlen(r->kernel);
                for (int t = 0; t < r->nin + r->nout; t++) {
                    const dt_trace_rec_tensor *x = &f.tensors[r->tensor0 + (size_t)t];
                    acc += strlen(x->name) + x->digest;
                    for (uint32_t c = 0; c < x->nchunks; c++) acc += dt_trace_chunk_digest(x, c);
                }
            }
            if (acc == 1) fprintf(stderr, "(unlikely)\n");
            dt_trace_file_free(&f);
        }
    } else if (!strcmp(kind, "metrics")) {
        dt_metrics_series s;
        st = dt_metrics_read(path, &s);
        if (st == DT_OK) dt_metrics_series_free(&s);
        dt_compare_report r;
        dt_status c = dt_compare_metrics(seedfile, path, &r);
        if (st == DT_OK && c != DT_OK && !bad_input(c)) st = c;
    } else if (!strcmp(kind, "env")) {
        char keys[256];
        int nd;
        st = dt_compare_fingerprints(seedfile, path, keys, sizeof keys, &nd);
    } else if (!strcmp(kind, "tracker")) {
        int64_t it;
        int found;
        st = dt_ckpt_tracker_read(dir, &it, &found);
        if (st == DT_OK && (!found || it < 0)) { fprintf(stderr, "tracker: accepted without a step\n"); return 1; }
    } else {
        fprintf(stderr, "unknown kind %s\n", kind);
        return 1;
    }
    if (st == DT_OK || bad_input(st)) return 0;
    fprintf(stderr, "%s: unexpected %s: %s\n", kind, dt_status_name(st), dt_errmsg());
    return 1;
}

int main(int argc, char **argv) {
    if (argc != 6) {
        fprintf(stderr, "usage: reader_fuzz KIND ITERATIONS SEED SEEDFILE WORKDIR\n");
        return 2;
    }
    const char *kind = argv[1], *seedfile = argv[4], *dir = argv[5];
    long iters = atol(argv[2]);
    rng_state = strtoull(argv[3], NULL, 10) * 0x9E3779B97F4A7C15ULL + 1;
    size_t n0;
    uint8_t *orig = slurp(seedfile, &n0);
    if (!orig || n0 == 0) { fprintf(stderr, "cannot read seed %s\n", seedfile); return 2; }
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, !strcmp(kind, "tracker") ? DT_TRACKER_NAME : "mutant");
    size_t cap = 2 * n0 + 4096;
    uint8_t *buf = malloc(cap);
    long accepted = 0;
    int failures = 0;
    for (long it = 0; it < iters && !failures; it++) {
        size_t n = n0;
        memcpy(buf, orig, n0);
        for (int k = 1 + (int)below(4); k > 0; k--) mutate(buf, &n, cap);
        if (!strcmp(kind, "trace") && (rnd() & 1)) reseal(buf, n);
        if (spill(path, buf, n) != 0) { fprintf(stderr, "cannot write %s\n", path); failures++; break; }
        int f = read_one(kind, path, seedfile, dir);
        if (f) fprintf(stderr, "  at iteration %ld (seed %s); the mutant is kept in %s\n", it, argv[3], path);
        failures += f;
        accepted += !f;
    }
    printf("reader_fuzz %s: %ld iterations, seed %s, %d failure(s)\n", kind, iters, argv[3], failures);
    free(buf);
    free(orig);
    return failures ? 1 : 0;
}
