/* Reading, checking and atomically writing llm.c-format token shards (see shard.h). */
#include "data/shard.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* Tokens are used straight from the mapping, which holds little-endian uint16. */
#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "detrain's shard reader maps little-endian tokens directly; port it for this host"
#endif

static int32_t le32(const unsigned char *p) {
    return (int32_t)((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
                     (uint32_t)p[3] << 24);
}

static void put_le32(unsigned char *p, int32_t v) {
    uint32_t u = (uint32_t)v;
    p[0] = (unsigned char)u;
    p[1] = (unsigned char)(u >> 8);
    p[2] = (unsigned char)(u >> 16);
    p[3] = (unsigned char)(u >> 24);
}

/* Reads exactly n bytes at offset off; returns bytes read (short on EOF), -1 on error. */
static ssize_t read_at(int fd, void *buf, size_t n, off_t off) {
    size_t got = 0;
    while (got < n) {
        ssize_t r = pread(fd, (char *)buf + got, n - got, off + (off_t)got);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) return -1;
        if (r == 0) break;
        got += (size_t)r;
    }
    return (ssize_t)got;
}

/* Header checks on an open descriptor; see dt_shard_read_header. */
static dt_status check_header(int fd, const char *path, dt_shard_header *h) {
    struct stat st;
    if (fstat(fd, &st) != 0)
        return dt_fail(DT_EIO, "shard %s: cannot stat: %s", path, strerror(errno));
    if (!S_ISREG(st.st_mode))
        return dt_fail(DT_EINVAL, "shard %s: not a regular file", path);
    h->file_bytes = (uint64_t)st.st_size;
    if (h->file_bytes < DT_SHARD_HEADER_BYTES)
        return dt_fail(DT_ECORRUPT,
                       "shard %s: truncated: %llu bytes, shorter than the %d-byte header",
                       path, (unsigned long long)h->file_bytes, DT_SHARD_HEADER_BYTES);
    unsigned char hdr[12];
    ssize_t r = read_at(fd, hdr, sizeof hdr, 0);
    if (r != (ssize_t)sizeof hdr)
        return dt_fail(DT_EIO, "shard %s: cannot read header: %s", path,
                       r < 0 ? strerror(errno) : "short read");
    h->magic = le32(hdr);
    h->version = le32(hdr + 4);
    h->ntokens = le32(hdr + 8);
    if (h->magic != DT_SHARD_MAGIC)
        return dt_fail(DT_ECORRUPT,
                       "shard %s: bad magic %d (expected %d): not an llm.c token shard; "
                       "make one with `detrain data tokenize`",
                       path, h->magic, DT_SHARD_MAGIC);
    if (h->version != DT_SHARD_VERSION)
        return dt_fail(DT_ECORRUPT,
                       "shard %s: unsupported version %d (expected %d, uint16 tokens)%s", path,
                       h->version, DT_SHARD_VERSION,
                       h->version == 2 ? "; version 2 (uint32 tokens) is not supported" : "");
    if (h->ntokens < 0)
        return dt_fail(DT_ECORRUPT, "shard %s: negative token count %d in header", path,
                       h->ntokens);
    uint64_t want = DT_SHARD_HEADER_BYTES + 2ull * (uint64_t)h->ntokens;
    if (h->file_bytes < want)
        return dt_fail(DT_ECORRUPT,
                       "shard %s: truncated: header declares %d tokens (%llu bytes) but the "
                       "file has %llu bytes",
                       path, h->ntokens, (unsigned long long)want,
                       (unsigned long long)h->file_bytes);
    if (h->file_bytes > want)
        return dt_fail(DT_ECORRUPT,
                       "shard %s: size mismatch: header declares %d tokens (%llu bytes) but "
                       "the file has %llu bytes",
                       path, h->ntokens, (unsigned long long)want,
                       (unsigned long long)h->file_bytes);
    return DT_OK;
}

dt_status dt_shard_read_header(const char *path, dt_shard_header *h) {
    memset(h, 0, sizeof *h);
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC); /* a fifo must not block: check_header refuses it */
    if (fd < 0) return dt_fail(DT_EIO, "shard %s: cannot open: %s", path, strerror(errno));
    dt_status st = check_header(fd, path, h);
    close(fd);
    return st;
}

void dt_shard_close(dt_shard *s) {
    if (!s) return;
    if (s->map) munmap(s->map, s->map_bytes);
    free(s->path);
    free(s);
}

dt_status dt_shard_open(dt_shard **out, const char *path, int vocab_size) {
    *out = NULL;
    if (vocab_size < 1 || vocab_size > 65536)
        return dt_fail(DT_EINVAL, "shard %s: vocab_size %d out of range [1, 65536]", path,
                       vocab_size);
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC); /* a fifo must not block: check_header refuses it */
    if (fd < 0) return dt_fail(DT_EIO, "shard %s: cannot open: %s", path, strerror(errno));
    dt_shard_header h;
    dt_status st = check_header(fd, path, &h);
    if (st != DT_OK) {
        close(fd);
        return st;
    }
    dt_shard *s = calloc(1, sizeof *s);
    size_t plen = strlen(path) + 1;
    char *pcopy = malloc(plen);
    if (!s || !pcopy) {
        free(s);
        free(pcopy);
        close(fd);
        return dt_fail(DT_ENOMEM, "shard %s: out of memory", path);
    }
    memcpy(pcopy, path, plen);
    s->path = pcopy;
    s->ntokens = (uint64_t)h.ntokens;
    static const uint16_t none[1] = {0};
    s->tokens = none;
    if (s->ntokens > 0) {
        s->map_bytes = (size_t)h.file_bytes;
        void *m = mmap(NULL, s->map_bytes, PROT_READ, MAP_PRIVATE, fd, 0);
        if (m == MAP_FAILED) {
            close(fd);
            dt_shard_close(s);
            return dt_fail(DT_EIO, "shard %s: cannot map: %s", path, strerror(errno));
        }
        s->map = m;
        s->tokens = (const uint16_t *)((const char *)m + DT_SHARD_HEADER_BYTES);
    }
    close(fd);
    /* One pass over every token: the loader may then index without checks. */
    uint16_t mx = 0;
    for (uint64_t i = 0; i < s->ntokens; i++) {
        uint16_t t = s->tokens[i];
        if (t > mx) mx = t;
        if ((int)t >= vocab_size) {
            st = dt_fail(DT_ECORRUPT,
                         "shard %s: token %u at index %llu is >= vocab size %d; was it "
                         "tokenized for a different vocabulary?",
                         path, (unsigned)t, (unsigned long long)i, vocab_size);
            dt_shard_close(s);
            return st;
        }
    }
    s->max_token = mx;
    *out = s;
    return DT_OK;
}

static dt_status write_all(int fd, const void *buf, size_t n, const char *path) {
    const char *p = buf;
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0) return dt_fail(DT_EIO, "writing %s: %s", path, strerror(errno));
        p += w;
        n -= (size_t)w;
    }
    return DT_OK;
}

/* fsyncs the directory holding `path` so the rename itself is durable. */
static void sync_parent_dir(const char *path) {
    size_t n = strlen(path);
    char *dir = malloc(n + 2);
    if (!dir) return;
    memcpy(dir, path, n + 1);
    char *slash = strrchr(dir, '/');
    if (!slash) strcpy(dir, ".");
    else if (slash == dir) dir[1] = 0;
    else *slash = 0;
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        fsync(fd); /* best effort: some file systems refuse fsync on directories */
        close(fd);
    }
    free(dir);
}

dt_status dt_shard_write(const char *path, const uint16_t *tokens, uint64_t n) {
    if (n > DT_SHARD_MAX_TOKENS)
        return dt_fail(DT_EINVAL,
                       "shard %s: %llu tokens exceed the format's limit of %llu per shard; "
                       "split into several shards",
                       path, (unsigned long long)n, DT_SHARD_MAX_TOKENS);
    size_t plen = strlen(path);
    char *tmp = malloc(plen + 32);
    if (!tmp) return dt_fail(DT_ENOMEM, "shard %s: out of memory", path);
    snprintf(tmp, plen + 32, "%s.tmp.%ld", path, (long)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        dt_status st = dt_fail(DT_EIO, "shard %s: cannot create %s: %s", path, tmp,
                               strerror(errno));
        free(tmp);
        return st;
    }
    unsigned char hdr[DT_SHARD_HEADER_BYTES];
    memset(hdr, 0, sizeof hdr);
    put_le32(hdr, DT_SHARD_MAGIC);
    put_le32(hdr + 4, DT_SHARD_VERSION);
    put_le32(hdr + 8, (int32_t)n);
    dt_status st = write_all(fd, hdr, sizeof hdr, tmp);
    if (st == DT_OK && n > 0) st = write_all(fd, tokens, (size_t)n * 2, tmp);
    if (st == DT_OK && fsync(fd) != 0)
        st = dt_fail(DT_EIO, "shard %s: fsync %s: %s", path, tmp, strerror(errno));
    if (close(fd) != 0 && st == DT_OK)
        st = dt_fail(DT_EIO, "shard %s: close %s: %s", path, tmp, strerror(errno));
    if (st == DT_OK && rename(tmp, path) != 0)
        st = dt_fail(DT_EIO, "shard %s: rename from %s: %s", path, tmp, strerror(errno));
    if (st != DT_OK) unlink(tmp);
    else sync_parent_dir(path);
    free(tmp);
    return st;
}
