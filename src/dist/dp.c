/* Data parallel in the training loop (see dp.h). */
#include "dist/dp.h"

#include "data/dataset.h"

#include <stdlib.h>
#include <string.h>

dt_status dt_dp_accum(int global_batch, int micro_batch, int size, int *accum) {
    int64_t per_step = (int64_t)micro_batch * size;
    if (micro_batch < 1 || size < 1 || global_batch % per_step)
        return dt_fail(DT_EINVAL, "--global-batch-size %d is not a multiple of --micro-batch-size %d x %d "
                       "data-parallel rank%s (= %lld): the global batch is micro-batch x accumulation steps x "
                       "ranks; choose a global batch that is a multiple of %lld", global_batch, micro_batch, size,
                       size == 1 ? "" : "s", (long long)per_step, (long long)per_step);
    *accum = (int)(global_batch / per_step);
    return DT_OK;
}

dt_status dt_dp_next_micro(dt_dataset *ds, int B, int rank, int size, int *inputs, int *targets) {
    dt_dataset_skip_train(ds, (uint64_t)rank * (uint64_t)B);
    dt_status st = dt_dataset_next_train(ds, inputs, targets);
    dt_dataset_skip_train(ds, (uint64_t)(size - 1 - rank) * (uint64_t)B);
    return st;
}

/* Rounded up to whole DT_COMM_ALIGN units: with n = size K, chunk j of dt_comm_chunk is
 * exactly [j K, j K + K), so an all-gather moves rank j's K values into place. */
static int stride_of(int k) { return (k + DT_COMM_ALIGN - 1) / DT_COMM_ALIGN * DT_COMM_ALIGN; }

dt_status dt_dp_gather_f64(dt_comm *c, const double *mine, int k, double *all) {
    int n = dt_comm_size(c), r = dt_comm_rank(c);
    if (k < 1 || k > DT_DP_MAX_VALUES)
        return dt_fail(DT_EINVAL, "data parallel: %d values a rank to gather (1..%d)", k, DT_DP_MAX_VALUES);
    if (n == 1) {
        memcpy(all, mine, sizeof(double) * (size_t)k);
        return DT_OK;
    }
    int K = stride_of(k);
    double *buf = calloc((size_t)n * (size_t)K, sizeof *buf);
    if (!buf) return dt_fail(DT_ENOMEM, "data parallel: out of memory gathering %d values from %d ranks", k, n);
    memcpy(buf + (size_t)r * K, mine, sizeof(double) * (size_t)k);
    dt_status st = dt_comm_allgather(c, buf, (size_t)n * (size_t)K, DT_COMM_F64, NULL);
    if (st == DT_OK)
        for (int j = 0; j < n; j++) memcpy(all + (size_t)j * k, buf + (size_t)j * K, sizeof(double) * (size_t)k);
    free(buf);
    return st;
}

dt_status dt_dp_mean_loss(dt_comm *c, const double *micro_losses, int accum, double *mean) {
    int n = dt_comm_size(c);
    double *all = malloc(sizeof *all * (size_t)n * (size_t)accum);
    if (!all) return dt_fail(DT_ENOMEM, "data parallel: out of memory for %d x %d losses", n, accum);
    dt_status st = dt_dp_gather_f64(c, micro_losses, accum, all);
    if (st == DT_OK) {
        /* global micro-batch order k = m N + r: rank r's micro-batch m is all[r A + m] */
        double sum = 0.0;
        for (int m = 0; m < accum; m++)
            for (int r = 0; r < n; r++) sum += all[(size_t)r * accum + m];
        *mean = sum / ((double)accum * n);
    }
    free(all);
    return st;
}

dt_status dt_dp_mean_eval(dt_comm *c, const double *losses, int count, double *mean) {
    int n = dt_comm_size(c), r = dt_comm_rank(c), per = (count + n - 1) / n;
    double *mine = calloc((size_t)per, sizeof *mine), *all = malloc(sizeof *all * (size_t)n * (size_t)per);
    dt_status st = mine && all ? DT_OK : dt_fail(DT_ENOMEM, "data parallel: out of memory for %d eval losses", count);
    /* rank r's j-th value is batch j N + r */
    for (int j = 0; st == DT_OK && j < per && j * n + r < count; j++) mine[j] = losses[j * n + r];
    if (st == DT_OK) st = dt_dp_gather_f64(c, mine, per, all);
    if (st == DT_OK) {
        double sum = 0.0;
        for (int i = 0; i < count; i++) sum += all[(size_t)(i % n) * per + (size_t)(i / n)]; /* batch order */
        *mean = sum / count;
    }
    free(mine);
    free(all);
    return st;
}

dt_status dt_dp_grad_stats(dt_comm *c, const dt_gpt *m, int sharded, dt_grad_stats *gs) {
    int n = dt_comm_size(c), r = dt_comm_rank(c);
    dt_grad_partial *parts = calloc((size_t)n, sizeof *parts);
    if (!parts) return dt_fail(DT_ENOMEM, "data parallel: out of memory for %d gradient partials", n);
    dt_status st = DT_OK;
    for (int j = 0; j < n; j++) {
        if (sharded && j != r) continue;
        size_t off, len;
        dt_comm_chunk(m->num_params, n, j, DT_COMM_ALIGN, &off, &len);
        dt_grad_stats_partial(m, off, len, &parts[j]);
    }
    if (sharded && n > 1) {
        /* the zero count travels as a double: exact below 2^53 */
        double mine[3] = {parts[r].g2, parts[r].p2, (double)parts[r].zeros}, *all = malloc(sizeof *all * 3 * (size_t)n);
        st = all ? dt_dp_gather_f64(c, mine, 3, all) : dt_fail(DT_ENOMEM, "data parallel: out of memory");
        for (int j = 0; st == DT_OK && j < n; j++)
            parts[j] = (dt_grad_partial){all[3 * j], all[3 * j + 1], (int64_t)all[3 * j + 2]};
        free(all);
    }
    if (st == DT_OK) dt_grad_stats_finish(parts, n, gs);
    free(parts);
    return st;
}

dt_status dt_dp_mean_and_total(dt_comm *c, double mean_mine, int64_t count_mine, double *mean, int64_t *total) {
    int n = dt_comm_size(c);
    if (n == 1) {
        *mean = mean_mine;
        *total = count_mine;
        return DT_OK;
    }
    /* the count travels as a double: exact below 2^53 */
    double mine[2] = {mean_mine, (double)count_mine}, *all = malloc(sizeof *all * 2 * (size_t)n);
    dt_status st = all ? dt_dp_gather_f64(c, mine, 2, all) : dt_fail(DT_ENOMEM, "data parallel: out of memory");
    if (st == DT_OK) {
        double s = 0.0;
        int64_t z = 0;
        for (int r = 0; r < n; r++) { /* rank order */
            s += all[2 * r];
            z += (int64_t)all[2 * r + 1];
        }
        *mean = s / n;
        *total = z;
    }
    free(all);
    return st;
}

dt_status dt_dp_agree(dt_comm *c, int mine, int *agreed) {
    int n = dt_comm_size(c);
    if (n == 1) {
        *agreed = mine;
        return DT_OK;
    }
    double v = mine, *all = malloc(sizeof *all * (size_t)n);
    dt_status st = all ? dt_dp_gather_f64(c, &v, 1, all) : dt_fail(DT_ENOMEM, "data parallel: out of memory");
    *agreed = 0;
    for (int j = 0; st == DT_OK && j < n && !*agreed; j++) *agreed = (int)all[j];
    free(all);
    return st;
}
