/* Token shards: write/read round trip (and the atomic write leaves no temporary), and
 * every malformed case gives its own error naming the file: bad magic, bad version,
 * truncated header, truncated tokens, extra bytes, negative count, token >= vocab. */
#include "data/shard.h"
#include "dt_test.h"

#include <dirent.h>
#include <stdint.h>
#include <unistd.h>

static char dir[64];

static const char *tmp_path(const char *name) {
    static char p[256];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return p;
}

/* Writes a file: a header with the given fields (padded to 1024 bytes unless hdr_bytes
 * is smaller), then n tokens. */
static void write_raw(const char *path, int32_t magic, int32_t version, int32_t count,
                      size_t hdr_bytes, const uint16_t *tok, size_t n) {
    int32_t hdr[256] = {0};
    hdr[0] = magic;
    hdr[1] = version;
    hdr[2] = count;
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    if (!f) return;
    fwrite(hdr, 1, hdr_bytes, f);
    if (n) fwrite(tok, 2, n, f);
    fclose(f);
}

static void test_round_trip(void) {
    uint16_t tok[1000];
    for (int i = 0; i < 1000; i++) tok[i] = (uint16_t)((i * 37) % 256);
    const char *p = tmp_path("rt.bin");
    CHECK_OK(dt_shard_write(p, tok, 1000));
    dt_shard_header h;
    CHECK_OK(dt_shard_read_header(p, &h));
    CHECK(h.magic == 20240520 && h.version == 1 && h.ntokens == 1000);
    CHECK(h.file_bytes == 1024 + 2000);
    dt_shard *s = NULL;
    CHECK_OK(dt_shard_open(&s, p, 256));
    if (s) {
        CHECK(s->ntokens == 1000);
        CHECK(!memcmp(s->tokens, tok, sizeof tok));
        CHECK(s->max_token == 255);
        dt_shard_close(s);
    }
    /* the file is byte-exact llm.c layout: header words little-endian, zero padding */
    FILE *f = fopen(p, "rb");
    unsigned char raw[1024 + 4];
    CHECK(f && fread(raw, 1, sizeof raw, f) == sizeof raw);
    if (f) fclose(f);
    CHECK(raw[0] == 0x88 && raw[1] == 0xd8 && raw[2] == 0x34 && raw[3] == 0x01); /* 20240520 */
    CHECK(raw[4] == 1 && raw[8] == 0xe8 && raw[9] == 0x03);
    int zeros = 1;
    for (int i = 12; i < 1024; i++) zeros &= raw[i] == 0;
    CHECK(zeros);
    CHECK(raw[1024] == 0 && raw[1026] == 37);
    /* overwrite in place, and no temporary left behind */
    CHECK_OK(dt_shard_write(p, tok, 10));
    CHECK_OK(dt_shard_read_header(p, &h));
    CHECK(h.ntokens == 10);
    DIR *d = opendir(dir);
    int others = 0;
    for (struct dirent *e; d && (e = readdir(d));)
        others += strstr(e->d_name, ".tmp") != NULL;
    if (d) closedir(d);
    CHECK(others == 0);
    /* an empty shard is valid */
    CHECK_OK(dt_shard_write(tmp_path("empty.bin"), NULL, 0));
    CHECK_OK(dt_shard_open(&s, tmp_path("empty.bin"), 256));
    if (s) {
        CHECK(s->ntokens == 0);
        dt_shard_close(s);
    }
    /* over the format's int32 count */
    CHECK(dt_shard_write(tmp_path("big.bin"), NULL, 1ull << 31) == DT_EINVAL);
    CHECK(dt_shard_write("/nonexistent-dir/x.bin", tok, 3) == DT_EIO);
}

static void test_malformed(void) {
    uint16_t tok[64];
    for (int i = 0; i < 64; i++) tok[i] = (uint16_t)i;
    uint16_t bad_tok[64];
    memcpy(bad_tok, tok, sizeof tok);
    bad_tok[40] = 300;
    static const struct {
        const char *name;
        int32_t magic, version, count;
        size_t hdr_bytes, n;
        int bad_token;
        const char *want; /* substring of the error */
    } cases[] = {
        {"magic.bin", 20240521, 1, 64, 1024, 64, 0, "bad magic 20240521"},
        {"version.bin", 20240520, 2, 64, 1024, 64, 0, "unsupported version 2"},
        {"version7.bin", 20240520, 7, 64, 1024, 64, 0, "unsupported version 7"},
        {"short_header.bin", 20240520, 1, 64, 100, 0, 0, "shorter than the 1024-byte header"},
        {"truncated.bin", 20240520, 1, 64, 1024, 50, 0, "truncated: header declares 64 tokens"},
        {"extra.bin", 20240520, 1, 60, 1024, 64, 0, "size mismatch: header declares 60"},
        {"negative.bin", 20240520, 1, -5, 1024, 0, 0, "negative token count -5"},
        {"token.bin", 20240520, 1, 64, 1024, 64, 1, "token 300 at index 40 is >= vocab size 256"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *p = tmp_path(cases[i].name);
        write_raw(p, cases[i].magic, cases[i].version, cases[i].count, cases[i].hdr_bytes,
                  cases[i].bad_token ? bad_tok : tok, cases[i].n);
        dt_shard *s = (dt_shard *)1;
        dt_status st = dt_shard_open(&s, p, 256);
        CHECKF(st == DT_ECORRUPT, "%s: status %s", cases[i].name, dt_status_name(st));
        CHECK(s == NULL);
        CHECKF(strstr(dt_errmsg(), cases[i].want) != NULL, "%s: message '%s'", cases[i].name,
               dt_errmsg());
        CHECKF(strstr(dt_errmsg(), p) != NULL, "%s: message does not name the file: '%s'",
               cases[i].name, dt_errmsg());
        if (st == DT_OK) dt_shard_close(s);
    }
    /* the bad token passes with a vocabulary that holds it */
    dt_shard *s = NULL;
    CHECK_OK(dt_shard_open(&s, tmp_path("token.bin"), 301));
    dt_shard_close(s);
    CHECK(dt_shard_open(&s, tmp_path("missing.bin"), 256) == DT_EIO);
    CHECK(strstr(dt_errmsg(), "missing.bin") != NULL);
    CHECK(dt_shard_open(&s, tmp_path("token.bin"), 0) == DT_EINVAL);
    CHECK(dt_shard_open(&s, tmp_path("token.bin"), 65537) == DT_EINVAL);
}

int main(void) {
    dt_test_scratch(dir, sizeof dir, "test_shard");
    RUN(test_round_trip);
    RUN(test_malformed);
    dt_test_scratch_remove(dir);
    return dt_test_report();
}
