/* The built-in corpus: pinned (length and FNV-1a digest, so an accidental change to the
 * grammar, the word lists or the RNG is caught), a prefix of itself when generated
 * shorter, English-like (printable ASCII, sentences and paragraphs, common words) and
 * learnable (a bigram model already beats the uniform loss by far). */
#include "data/corpus.h"
#include "dt_test.h"

#include <ctype.h>

static uint64_t fnv1a(const uint8_t *p, size_t n) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

static uint8_t *corpus(size_t n) {
    uint8_t *b = malloc(n);
    if (b) dt_corpus_fill(b, n);
    return b;
}

static void test_pinned(void) {
    uint8_t *b = corpus(DT_CORPUS_BYTES);
    CHECK(b != NULL);
    if (!b) return;
    CHECK(DT_CORPUS_BYTES == 1048576u);
    CHECK(!memcmp(b, "Does this small girl run? When did Ben wait in the hill? There w", 64));
    uint64_t h = fnv1a(b, DT_CORPUS_BYTES);
    CHECKF(h == 0x1e4924af09521e29ull, "digest %016llx", (unsigned long long)h);
    h = fnv1a(b, 4096);
    CHECKF(h == 0xac5c7a9ecdde5c26ull, "digest of first 4096 bytes %016llx",
           (unsigned long long)h);
    /* dt_corpus_tokens is the same text as uint16 */
    uint16_t *tok = NULL;
    uint64_t n = 0;
    CHECK_OK(dt_corpus_tokens(&tok, &n));
    CHECK(n == DT_CORPUS_BYTES);
    int same = tok != NULL;
    for (uint64_t i = 0; same && i < n; i++) same = tok[i] == b[i];
    CHECK(same);
    free(tok);
    /* generated twice: identical */
    uint8_t *again = corpus(DT_CORPUS_BYTES);
    CHECK(again && !memcmp(again, b, DT_CORPUS_BYTES));
    free(again);
    /* a shorter request is a prefix */
    uint8_t *shorter = corpus(1000);
    CHECK(shorter && !memcmp(shorter, b, 1000));
    free(shorter);
    free(b);
}

static void test_english_like(void) {
    size_t n = DT_CORPUS_BYTES;
    uint8_t *b = corpus(n);
    if (!b) return;
    size_t printable = 0, letters = 0, spaces = 0, sentences = 0, paragraphs = 0;
    int distinct[256] = {0};
    for (size_t i = 0; i < n; i++) {
        distinct[b[i]] = 1;
        printable += (b[i] >= 32 && b[i] < 127) || b[i] == '\n';
        letters += isalpha(b[i]) != 0;
        spaces += b[i] == ' ';
        sentences += b[i] == '.' || b[i] == '?';
        paragraphs += i > 0 && b[i] == '\n' && b[i - 1] == '\n';
    }
    int nd = 0;
    for (int i = 0; i < 256; i++) nd += distinct[i];
    CHECK(printable == n);                 /* only printable ASCII and newlines */
    CHECKF(letters > n * 3 / 4, "letters %zu", letters);
    /* English averages 4-6 letters a word */
    CHECKF(spaces > n / 8 && spaces < n / 4, "spaces %zu", spaces);
    CHECKF(sentences > n / 80 && sentences < n / 20, "sentences %zu", sentences);
    CHECKF(paragraphs > n / 1000, "paragraphs %zu", paragraphs);
    CHECKF(nd >= 30 && nd <= 80, "distinct bytes %d", nd);
    /* a few frequent words and grammar (agreement) */
    char *s = malloc(n + 1);
    if (s) {
        memcpy(s, b, n);
        s[n] = 0;
        CHECK(strstr(s, " the ") && strstr(s, " and ") && strstr(s, "\" asked "));
        CHECK(strstr(s, "They ") && strstr(s, " an ") && strstr(s, "There were "));
        CHECK(!strstr(s, " a apple") && !strstr(s, "They is ") && !strstr(s, "  "));
        free(s);
    }
    free(b);
}

/* Learnable: a byte-bigram model fitted on the first 90% predicts the last 10% at about
 * 2.2 nats per byte (uniform: ln 256 = 5.55), so a small transformer, which sees far more
 * context, will visibly learn it. */
static void test_learnable(void) {
    size_t n = DT_CORPUS_BYTES, cut = n / 10 * 9;
    uint8_t *b = corpus(n);
    uint32_t *cnt = calloc(256 * 256, sizeof *cnt), ctx[256] = {0};
    if (!b || !cnt) {
        free(b);
        free(cnt);
        CHECK(0);
        return;
    }
    for (size_t i = 1; i < cut; i++) {
        cnt[b[i - 1] * 256 + b[i]]++;
        ctx[b[i - 1]]++;
    }
    double nats = 0;
    for (size_t i = cut + 1; i < n; i++)
        nats -= log((cnt[b[i - 1] * 256 + b[i]] + 0.01) / (ctx[b[i - 1]] + 2.56));
    nats /= (double)(n - cut - 1);
    CHECKF(nats < 2.5 && nats > 1.0, "bigram held-out loss %.3f nats/byte", nats);
    free(cnt);
    free(b);
}

int main(void) {
    RUN(test_pinned);
    RUN(test_english_like);
    RUN(test_learnable);
    return dt_test_report();
}
