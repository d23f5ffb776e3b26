/* The wgmma shared-memory matrix descriptor and the 128-byte swizzle (src/ops/wgmma_desc.h),
 * which the warpgroup-MMA attention forward (attention_wgmma_cuda.cu) builds on the device:
 * checked here on the CPU (CI has no GPU) against bit patterns written out by hand from the
 * PTX ISA's descriptor format (start address >> 4 in bits 0..13, LBO >> 4 in 16..29,
 * SBO >> 4 in 32..45, base offset 49..51 = 0, swizzle mode in 62..63 with 1 = 128-byte)
 * and against the swizzle's definition (byte-address bits 4..6 xor
 * bits 7..9), so a wrong shift or mask fails here before it reaches a GPU. */
#include "ops/cuda/wgmma_desc.h"

#include "dt_test.h"

#include <stdint.h>

/* The fields, by hand: start 0x400 >> 4 = 0x40, LBO 16 >> 4 = 1 at bit 16, SBO 1024 >> 4 =
 * 0x40 at bit 32, 128B swizzle = 1 at bit 62. These are the kernel's descriptors: a K-major
 * Q or K tile (LBO "assumed 1", SBO = 8 rows of 128 bytes) and an MN-major V tile (SBO = 8
 * key rows, LBO = one 8 KB tile). */
static void test_desc_patterns(void) {
    CHECK(dt_wgmma_desc(0x400, 16, 1024, DT_WGMMA_SWIZZLE_128B) == 0x4000004000010040ull);
    CHECK(dt_wgmma_desc(0x4800, 8192, 1024, DT_WGMMA_SWIZZLE_128B) == 0x4000004002000480ull);
    CHECK(dt_wgmma_desc(0, 0, 0, DT_WGMMA_SWIZZLE_NONE) == 0);
    CHECK(dt_wgmma_desc(0, 0, 0, DT_WGMMA_SWIZZLE_64B) == 0x8000000000000000ull);
    CHECK(dt_wgmma_desc(0, 0, 0, DT_WGMMA_SWIZZLE_32B) == 0xC000000000000000ull);
    /* a 227 KB address (the top of an H200 block's shared memory) still fits 14 bits */
    CHECK(dt_wgmma_desc(227u * 1024u - 16u, 16, 1024, DT_WGMMA_SWIZZLE_128B) ==
          (0x4000004000010000ull | ((227u * 1024u - 16u) >> 4)));
}

/* Each field sits where the format says and nowhere else. */
static void test_desc_fields(void) {
    CHECK(dt_wgmma_desc(0x3FFF0, 0, 0, 0) == 0x3FFFull);
    CHECK(dt_wgmma_desc(0, 0x3FFF0, 0, 0) == 0x3FFFull << 16);
    CHECK(dt_wgmma_desc(0, 0, 0x3FFF0, 0) == 0x3FFFull << 32);
    CHECK(dt_wgmma_desc(0, 0, 0, 3) == 3ull << 62);
    /* the 4 low bits of each byte quantity and bits above 18 are dropped */
    CHECK(dt_wgmma_desc(0x4000F, 0x1F, 0x2F, 0) == ((1ull << 16) | (2ull << 32)));
    /* reserved bits (14..15, 30..31, 46..61, base offset 49..51 included) stay 0 */
    uint64_t all = dt_wgmma_desc(0xFFFFFFFFu, 0xFFFFFFFFu, 0xFFFFFFFFu, 0xFFFFFFFFu);
    uint64_t fields = 0x3FFFull | (0x3FFFull << 16) | (0x3FFFull << 32) | (3ull << 62);
    CHECKF(all == fields, "all ones gives %016llx, fields %016llx", (unsigned long long)all,
           (unsigned long long)fields);
    /* a K step of 16 bf16 (32 bytes) along a K-major row is +2 on the encoded descriptor,
     * 16 rows of 128 bytes (an MN-major K step) +128: what the kernel adds */
    for (uint32_t a = 0; a < 0x30000; a += 1024) {
        CHECK(dt_wgmma_desc(a + 32, 16, 1024, 1) == dt_wgmma_desc(a, 16, 1024, 1) + 2);
        CHECK(dt_wgmma_desc(a + 2048, 8192, 1024, 1) == dt_wgmma_desc(a, 8192, 1024, 1) + 128);
    }
}

/* The 128-byte swizzle (bits 4..6 ^= bits 7..9) on the unswizzled byte offset o = 128 r + 16 c. */
static uint32_t swizzle343(uint32_t o) { return o ^ (((o >> 7) & 7u) << 4); }

static void test_sw128(void) {
    CHECK(dt_wgmma_sw128(0, 0) == 0);
    CHECK(dt_wgmma_sw128(0, 7) == 112);
    CHECK(dt_wgmma_sw128(1, 0) == 144);      /* row 1: chunk 0 in slot 1 */
    CHECK(dt_wgmma_sw128(7, 7) == 896);      /* row 7: chunk 7 in slot 0 */
    CHECK(dt_wgmma_sw128(9, 2) == 1200);     /* row 9 = 8 + 1: 1152 + (2 ^ 1) * 16 */
    CHECK(dt_wgmma_sw128(63, 5) == 8064 + 32); /* 63 * 128 + (5 ^ 7) * 16 */
    int bad = 0;
    for (uint32_t r = 0; r < 64; r++) {
        unsigned seen = 0, banks = 0;
        for (uint32_t c = 0; c < 8; c++) {
            uint32_t off = dt_wgmma_sw128(r, c);
            if (off != swizzle343(128 * r + 16 * c)) bad++;
            if (off / 128 != r || off % 16 != 0) bad++; /* stays in its row, 16-byte aligned */
            seen |= 1u << ((off % 128) / 16);
            /* the epilogue's stores: chunk c of rows 8 (r / 8) .. + 7 on distinct bank groups */
            banks |= 1u << ((dt_wgmma_sw128((r & ~7u) + c, r & 7u) % 128) / 16);
        }
        if (seen != 0xFF || banks != 0xFF) bad++; /* a permutation of the row's 8 chunks */
    }
    CHECKF(bad == 0, "%d swizzle mismatches", bad);
}

int main(void) {
    RUN(test_desc_patterns);
    RUN(test_desc_fields);
    RUN(test_sw128);
    return dt_test_report();
}
