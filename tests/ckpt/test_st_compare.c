/* Tensor-by-tensor comparison: first differing tensor and element in hex, differences
 * beyond the first 64 KiB piece, tensors present in only one file, dtype differences, and
 * a corrupt file reported as an error rather than a difference. */
#include "ckpt/safetensors.h"
#include "ckpt/st_compare.h"
#include "core/json.h"
#include "dt_test.h"

#include <stdlib.h>

static char dir[256];
static float w[6] = {1, 2, 3, 4, 5, 1.0f};
static float big[100000];
static int32_t ids[3] = {7, 8, 9};

static void write_file(const char *path, int variant) {
    dt_st_tensor t[4] = {
        {.name = "w", .dtype = DT_F32, .ndim = 2, .shape = {2, 3}, .data = w},
        {.name = "big", .dtype = DT_F32, .ndim = 1, .shape = {100000}, .data = big},
        {.name = "ids", .dtype = DT_I32, .ndim = 1, .shape = {3}, .data = ids},
        {.name = "extra", .dtype = DT_U8, .ndim = 1, .shape = {1}, .data = "x"},
    };
    int n = 3;
    if (variant == 1) n = 4;                 /* one more tensor */
    if (variant == 2) t[2].dtype = DT_U32;   /* same bytes, other dtype */
    CHECK_OK(dt_st_write(path, t, n, NULL, 0, NULL));
}

static void test_compare(void) {
    char a[300], b[300];
    snprintf(a, sizeof a, "%s/ca.safetensors", dir);
    snprintf(b, sizeof b, "%s/cb.safetensors", dir);
    dt_st_diff d;
    write_file(a, 0);
    write_file(b, 0);
    CHECK_OK(dt_st_compare(a, b, &d));
    CHECK(d.identical && d.compared == 3 && d.tensor[0] == 0);
    /* One ulp in w[1][2]. */
    w[5] = dt_f32_from_bits(0x3f800001u);
    write_file(b, 0);
    w[5] = 1.0f;
    CHECK_OK(dt_st_compare(a, b, &d));
    CHECK(!d.identical && strcmp(d.tensor, "w") == 0 && d.element == 5 && d.compared == 0);
    CHECKF(strstr(d.detail, "[1, 2]") && strstr(d.detail, "0x3f800000 (1)") && strstr(d.detail, "0x3f800001"),
           "%s", d.detail);
    /* Beyond the first 64 KiB of a tensor, in its highest byte. */
    big[70000] = -0.0f;
    write_file(b, 0);
    big[70000] = 0.0f;
    CHECK_OK(dt_st_compare(a, b, &d));
    CHECKF(!d.identical && strcmp(d.tensor, "big") == 0 && d.element == 70000 && d.compared == 1 &&
           strstr(d.detail, "0x00000000 (0) vs 0x80000000 (-0)"), "%s", d.detail);
    /* A tensor only in b; a dtype difference. */
    write_file(b, 1);
    CHECK_OK(dt_st_compare(a, b, &d));
    CHECK(!d.identical && strcmp(d.tensor, "extra") == 0 && d.element == -1 && strstr(d.detail, "only in"));
    CHECK_OK(dt_st_compare(b, a, &d));
    CHECK(!d.identical && strcmp(d.tensor, "extra") == 0 && strstr(d.detail, "only in"));
    write_file(b, 2);
    CHECK_OK(dt_st_compare(a, b, &d));
    CHECK(!d.identical && strcmp(d.tensor, "ids") == 0 && d.element == -1 && strstr(d.detail, "I32"));
    /* A corrupt file is an error, not a difference. */
    FILE *fp = fopen(b, "r+b");
    fputc(0xff, fp);
    fclose(fp);
    CHECK(dt_st_compare(a, b, &d) == DT_ECORRUPT);
}

int main(void) {
    for (int i = 0; i < 100000; i++) big[i] = (float)i * 0.001f;
    big[70000] = 0.0f;
    dt_test_scratch(dir, sizeof dir, "stc");
    RUN(test_compare);
    dt_test_scratch_remove(dir);
    return dt_test_report();
}
