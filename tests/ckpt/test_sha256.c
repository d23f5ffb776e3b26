/* SHA-256 against the FIPS 180-4 example vectors (NIST CSRC "SHA256.pdf" examples and the
 * one-million-'a' vector), plus streaming in odd-sized pieces and the empty message. */
#include "ckpt/sha256.h"
#include "dt_test.h"

static void check_hex(const void *msg, size_t n, const char *want) {
    uint8_t d[DT_SHA256_LEN];
    char hex[65];
    dt_sha256_buf(msg, n, d);
    dt_sha256_hex(d, hex);
    CHECKF(strcmp(hex, want) == 0, "len %zu: got %s want %s", n, hex, want);
}

static void test_vectors(void) {
    check_hex("abc", 3, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    const char *m448 = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    check_hex(m448, strlen(m448),
              "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    check_hex("", 0, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    const char *m896 = "abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnop"
                       "jklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu";
    check_hex(m896, strlen(m896),
              "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
}

static void test_million_a_streaming(void) {
    /* Fed in 997-byte pieces so partial-block handling is exercised. */
    char chunk[997];
    memset(chunk, 'a', sizeof chunk);
    dt_sha256 s;
    dt_sha256_init(&s);
    size_t left = 1000000;
    while (left) {
        size_t k = left < sizeof chunk ? left : sizeof chunk;
        dt_sha256_update(&s, chunk, k);
        left -= k;
    }
    uint8_t d[DT_SHA256_LEN];
    char hex[65];
    dt_sha256_final(&s, d);
    dt_sha256_hex(d, hex);
    CHECKF(strcmp(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0") == 0,
           "got %s", hex);
}

static void test_split_equals_oneshot(void) {
    /* Every split point of a 130-byte message (crosses two block boundaries). */
    uint8_t msg[130], want[DT_SHA256_LEN], got[DT_SHA256_LEN];
    for (int i = 0; i < 130; i++) msg[i] = (uint8_t)(i * 37 + 11);
    dt_sha256_buf(msg, sizeof msg, want);
    int bad = 0;
    for (size_t cut = 0; cut <= sizeof msg; cut++) {
        dt_sha256 s;
        dt_sha256_init(&s);
        dt_sha256_update(&s, msg, cut);
        dt_sha256_update(&s, msg + cut, sizeof msg - cut);
        dt_sha256_final(&s, got);
        bad += memcmp(got, want, sizeof want) != 0;
    }
    CHECKF(bad == 0, "%d split points differ from the one-shot digest", bad);
}

int main(void) {
    RUN(test_vectors);
    RUN(test_million_a_streaming);
    RUN(test_split_equals_oneshot);
    return dt_test_report();
}
