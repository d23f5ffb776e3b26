/* env.json records the run's communicator (src/core/fingerprint.c, dt_fingerprint_set_comm):
 * "contract" holds it under "comm" once an engine set it, and nothing once cleared. */
#include "core/fingerprint.h"
#include "core/json_read.h"
#include "dt_test.h"

static const dt_json_value *contract_of(const char *dir, dt_json_value **doc) {
    char path[512];
    snprintf(path, sizeof path, "%s/env.json", dir);
    *doc = NULL;
    if (dt_json_read_file(path, doc) != DT_OK) return NULL;
    return dt_json_get(*doc, "contract");
}

static void comm_recorded(void) {
    char dir[256];
    dt_test_scratch(dir, sizeof dir, "fp_comm");
    dt_json_value *doc = NULL;
    CHECK_OK(dt_fingerprint_write(dir, NULL));
    const dt_json_value *c = contract_of(dir, &doc);
    CHECK(c != NULL && dt_json_get(c, "comm") == NULL);
    dt_json_free(doc);
    CHECK_OK(dt_fingerprint_set_comm("{\"engine\":\"nccl\",\"world_size\":4,\"nccl_version\":\"2.21.5\"}"));
    CHECK_OK(dt_fingerprint_write(dir, "{\"gpu\":\"x\"}"));
    c = contract_of(dir, &doc);
    const dt_json_value *comm = dt_json_get(c, "comm");
    int64_t ws = 0;
    CHECK(comm != NULL && dt_json_as_i64(dt_json_get(comm, "world_size"), &ws) && ws == 4);
    const dt_json_value *v = dt_json_get(comm, "nccl_version");
    CHECK(v && v->text && !strcmp(v->text, "2.21.5"));
    CHECK(dt_json_get(c, "run") != NULL); /* the backend's description beside it */
    dt_json_free(doc);
    CHECK_OK(dt_fingerprint_set_comm(NULL));
    CHECK_OK(dt_fingerprint_write(dir, NULL));
    c = contract_of(dir, &doc);
    CHECK(c != NULL && dt_json_get(c, "comm") == NULL);
    dt_json_free(doc);
    dt_test_scratch_remove(dir);
}

int main(void) {
    RUN(comm_recorded);
    return dt_test_report();
}
