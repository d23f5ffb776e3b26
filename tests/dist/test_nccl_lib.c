/* NCCL loaded at run time (src/dist/nccl_lib.c): a missing library and a library without
 * NCCL's functions are refused with DT_EUNSUPPORTED naming the file, what is missing and
 * how to get NCCL; where libnccl.so.2 loads (a GPU machine), its version is 2.14 or newer
 * and reads as major.minor.patch. */
#include "dist/nccl_lib.h"
#include "dt_test.h"

static void missing_library(void) {
    const dt_nccl_lib *lib = (const dt_nccl_lib *)&lib;
    dt_status st = dt_nccl_load_from("/nonexistent/dir/libnccl.so.2", &lib);
    CHECKF(st == DT_EUNSUPPORTED, "%s", dt_status_name(st));
    CHECK(lib == NULL);
    CHECKF(strstr(dt_errmsg(), "/nonexistent/dir/libnccl.so.2") && strstr(dt_errmsg(), "LD_LIBRARY_PATH") &&
           strstr(dt_errmsg(), "find_nccl.sh"), "message: %s", dt_errmsg());
}

/* A real shared library that is not NCCL: the first missing function is named. */
static void not_nccl(void) {
    const dt_nccl_lib *lib = NULL;
    dt_status st = dt_nccl_load_from("libm.so.6", &lib);
    CHECKF(st == DT_EUNSUPPORTED, "%s", dt_status_name(st));
    CHECK(lib == NULL);
    CHECKF(strstr(dt_errmsg(), "has no ncclGetVersion") && strstr(dt_errmsg(), "libm.so.6"), "message: %s",
           dt_errmsg());
}

/* libnccl.so.2 as the loader finds it: refused with the named library, or loaded whole. */
static void default_library(void) {
    const dt_nccl_lib *lib = NULL;
    dt_status st = dt_nccl_load(&lib);
    if (st != DT_OK) {
        CHECKF(st == DT_EUNSUPPORTED, "%s", dt_status_name(st));
        CHECKF(strstr(dt_errmsg(), "libnccl.so.2") && strstr(dt_errmsg(), "LD_LIBRARY_PATH"), "message: %s",
               dt_errmsg());
        fprintf(stderr, "  (no NCCL here: %s)\n", dt_errmsg());
        return;
    }
    CHECK(lib && lib->version >= DT_NCCL_MIN_VERSION);
    char want[32];
    snprintf(want, sizeof want, "%d.%d.%d", lib->version / 10000, lib->version / 100 % 100, lib->version % 100);
    CHECK(!strcmp(want, lib->version_text));
    CHECK(lib->all_reduce && lib->send && lib->recv && lib->comm_abort && lib->get_error_string);
    CHECKF(strstr(lib->get_error_string(DT_NCCL_INVALID_ARGUMENT), "argument") != NULL, "%s",
           lib->get_error_string(DT_NCCL_INVALID_ARGUMENT));
    const dt_nccl_lib *again = NULL;
    CHECK_OK(dt_nccl_load(&again));
    CHECK(again == lib); /* loaded once */
    fprintf(stderr, "  (NCCL %s from %s)\n", lib->version_text, lib->path);
}

int main(void) {
    RUN(missing_library);
    RUN(not_nccl);
    RUN(default_library);
    return dt_test_report();
}
