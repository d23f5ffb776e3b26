/* The reference-dump writer (refdump.h): flags, files and index of a dump that
 * tools/torch_reference.py replays in PyTorch (docs/torch-reference.md).
 *
 * Output directory (all binary files little-endian, no header):
 *   index.json     config, optimizer settings, where the numbers were computed (device
 *                  "cpu" | "cuda", precision "fp32" | "bf16", and for cuda a device_info
 *                  object), the parameter table and the per-step log (lr, loss, grad norm,
 *                  param norm, zero count; floats also as hex bits)
 *   params_0.bin   initial parameters: fp32, the whole slab in table order; tensor i is
 *                  floats [offset, offset + numel) with the shape given in the index
 *   tokens_K.bin   step K's batch: int32 inputs[B*T] then int32 targets[B*T] (row-major B,T)
 *   grads_K.bin    step K's gradient after backward, before clipping (fp32, slab layout)
 *   params_K.bin   parameters after step K's update (fp32, slab layout) */
#include "refdump.h"

#include "core/json.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static void usage(FILE *f, const char *tool, const char *what) {
    fprintf(f,
        "usage: %s --out DIR [flags]\n"
        "Writes the initial parameters, and for each of the first steps the batch, loss,\n"
        "gradients, grad norm and updated parameters, of %s\n"
        "(see docs/torch-reference.md).\n"
        "  --out DIR                    output directory (created; files overwritten)\n"
        "  --model NAME                 preset: tiny | small | gpt2-124m ... (default small:\n"
        "                               L4 C256 NH4 V512 T256)\n"
        "  --num-layers N  --hidden-size N  --num-attention-heads N\n"
        "  --vocab-size N               >= 256 (the built-in corpus is byte-level)\n"
        "  --max-position-embeddings N  --seq-length N    override the preset\n"
        "  --micro-batch-size N         batch B (default 8)\n"
        "  --steps N                    optimizer steps (default 3)\n"
        "  --seed N                     init and data-shuffle seed (default 1234)\n"
        "  --lr F (1e-3)  --min-lr F (1e-4)  --lr-warmup-iters N (2)  --lr-decay-iters N (10)\n"
        "  --weight-decay F (0.1)  --clip-grad F (1.0; 0 = off)\n"
        "  --adam-beta1 F (0.9)  --adam-beta2 F (0.95)  --adam-eps F (1e-8)\n", tool, what);
}

/* Parses a whole decimal integer in [lo, hi]; 0 on success. */
static int parse_i64(const char *tool, const char *flag, const char *s, int64_t lo, int64_t hi,
                     int64_t *out) {
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) {
        fprintf(stderr, "%s: %s '%s': expected an integer in %" PRId64 "..%" PRId64 "\n", tool,
                flag, s, lo, hi);
        return -1;
    }
    *out = v;
    return 0;
}

static int parse_f32(const char *tool, const char *flag, const char *s, float lo, float hi,
                     float *out) {
    char *end;
    errno = 0;
    float v = strtof(s, &end);
    if (errno || end == s || *end || !(v >= lo && v <= hi)) {
        fprintf(stderr, "%s: %s '%s': expected a number in [%g, %g]\n", tool, flag, s,
                (double)lo, (double)hi);
        return -1;
    }
    *out = v;
    return 0;
}

int dt_refdump_parse_args(int argc, char **argv, const char *tool, const char *what,
                          dt_refdump_args *a) {
    memset(a, 0, sizeof *a);
    a->tool = tool;
    a->model = "small";
    a->batch = 8;
    a->steps = 3;
    a->seed = 1234;
    a->lr = 1e-3f;
    a->min_lr = 1e-4f;
    a->warmup = 2;
    a->decay = 10;
    a->weight_decay = 0.1f;
    a->clip_grad = 1.0f;
    a->beta1 = 0.9f;
    a->beta2 = 0.95f;
    a->eps = 1e-8f;
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i];
        if (!strcmp(f, "--help") || !strcmp(f, "-h")) { usage(stdout, tool, what); return 1; }
        if (i + 1 >= argc) {
            fprintf(stderr, "%s: %s needs a value (or is unknown; see --help)\n", tool, f);
            return -1;
        }
        const char *v = argv[++i];
        int64_t n = 0;
        int rc = 0;
        const int64_t big = 1 << 24;
        if (!strcmp(f, "--out")) a->out = v;
        else if (!strcmp(f, "--model")) a->model = v;
        else if (!strcmp(f, "--num-layers")) { rc = parse_i64(tool, f, v, 1, 1024, &n); a->num_layers = (int)n; }
        else if (!strcmp(f, "--hidden-size")) { rc = parse_i64(tool, f, v, 1, 65536, &n); a->hidden_size = (int)n; }
        else if (!strcmp(f, "--num-attention-heads")) { rc = parse_i64(tool, f, v, 1, 65536, &n); a->num_heads = (int)n; }
        else if (!strcmp(f, "--vocab-size")) { rc = parse_i64(tool, f, v, 256, 65536, &n); a->vocab_size = (int)n; }
        else if (!strcmp(f, "--max-position-embeddings")) { rc = parse_i64(tool, f, v, 1, big, &n); a->max_pos = (int)n; }
        else if (!strcmp(f, "--seq-length")) { rc = parse_i64(tool, f, v, 1, big, &n); a->seq_len = (int)n; }
        else if (!strcmp(f, "--micro-batch-size")) { rc = parse_i64(tool, f, v, 1, 65536, &n); a->batch = (int)n; }
        else if (!strcmp(f, "--steps")) { rc = parse_i64(tool, f, v, 1, 1000, &n); a->steps = (int)n; }
        else if (!strcmp(f, "--seed")) { rc = parse_i64(tool, f, v, 0, INT64_MAX, &n); a->seed = (uint64_t)n; }
        else if (!strcmp(f, "--lr-warmup-iters")) rc = parse_i64(tool, f, v, 0, big, &a->warmup);
        else if (!strcmp(f, "--lr-decay-iters")) rc = parse_i64(tool, f, v, 1, big, &a->decay);
        else if (!strcmp(f, "--lr")) rc = parse_f32(tool, f, v, 0.0f, 10.0f, &a->lr);
        else if (!strcmp(f, "--min-lr")) rc = parse_f32(tool, f, v, 0.0f, 10.0f, &a->min_lr);
        else if (!strcmp(f, "--weight-decay")) rc = parse_f32(tool, f, v, 0.0f, 10.0f, &a->weight_decay);
        else if (!strcmp(f, "--clip-grad")) rc = parse_f32(tool, f, v, 0.0f, 1e30f, &a->clip_grad);
        else if (!strcmp(f, "--adam-beta1")) rc = parse_f32(tool, f, v, 0.0f, 0.999999f, &a->beta1);
        else if (!strcmp(f, "--adam-beta2")) rc = parse_f32(tool, f, v, 0.0f, 0.999999f, &a->beta2);
        else if (!strcmp(f, "--adam-eps")) rc = parse_f32(tool, f, v, 1e-30f, 1.0f, &a->eps);
        else {
            fprintf(stderr, "%s: unknown flag %s (see --help)\n", tool, f);
            return -1;
        }
        if (rc) return -1;
    }
    if (!a->out) {
        fprintf(stderr, "%s: --out DIR is required (see --help)\n", tool);
        return -1;
    }
    if (a->min_lr > a->lr) {
        fprintf(stderr, "%s: --min-lr %g exceeds --lr %g\n", tool, (double)a->min_lr, (double)a->lr);
        return -1;
    }
    return 0;
}

int dt_refdump_prepare(const dt_refdump_args *a, dt_gpt_config *cfg, int *T) {
    if (dt_gpt_preset(a->model, cfg) != DT_OK) goto fail;
    if (a->num_layers) cfg->num_layers = a->num_layers;
    if (a->hidden_size) cfg->channels = a->hidden_size;
    if (a->num_heads) cfg->num_heads = a->num_heads;
    if (a->vocab_size) cfg->vocab_size = a->vocab_size;
    if (a->max_pos) cfg->max_seq_len = a->max_pos;
    if (a->seq_len && !a->max_pos && a->seq_len > cfg->max_seq_len) cfg->max_seq_len = a->seq_len;
    if (dt_gpt_config_finish(cfg) != DT_OK) goto fail;
    *T = a->seq_len ? a->seq_len : cfg->max_seq_len;
    if (mkdir(a->out, 0777) && errno != EEXIST) {
        fprintf(stderr, "%s: cannot create %s: %s\n", a->tool, a->out, strerror(errno));
        return -1;
    }
    return 0;
fail:
    fprintf(stderr, "%s: %s\n", a->tool, dt_errmsg());
    return -1;
}

/* Writes n 32-bit words little-endian whatever the host order. 0 on success. */
static int write_le32(FILE *f, const void *data, size_t n) {
    const uint32_t one = 1;
    if (*(const unsigned char *)&one == 1) return fwrite(data, 4, n, f) == n ? 0 : -1;
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++, p += 4) {
        unsigned char b[4] = {p[3], p[2], p[1], p[0]};
        if (fwrite(b, 1, 4, f) != 4) return -1;
    }
    return 0;
}

int dt_refdump_write(const dt_refdump_args *a, const char *kind, int k, const void *words_a,
                     size_t na, const void *words_b, size_t nb) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s_%d.bin", a->out, kind, k);
    FILE *f = fopen(path, "wb");
    int bad = !f || write_le32(f, words_a, na) || (words_b && write_le32(f, words_b, nb));
    if (f && fclose(f)) bad = 1;
    if (bad) fprintf(stderr, "%s: cannot write %s: %s\n", a->tool, path, strerror(errno));
    return bad ? -1 : 0;
}

int dt_refdump_write_index(const dt_refdump_args *a, const dt_gpt *m, const dt_refdump_origin *o,
                           const dt_refdump_step *log) {
    char path[4096];
    snprintf(path, sizeof path, "%s/index.json", a->out);
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "%s: cannot write %s: %s\n", a->tool, path, strerror(errno));
        return -1;
    }
    const dt_gpt_config *c = &m->cfg;
    fprintf(f, "{\"format\":\"detrain-torch-reference\",\"version\":1,\"deterministic_mode\":true,\n");
    fprintf(f, "\"device\":");
    dt_json_write_string(f, o->device);
    fprintf(f, ",\"precision\":");
    dt_json_write_string(f, o->precision);
    if (o->device_info) fprintf(f, ",\n\"device_info\":%s", o->device_info);
    fprintf(f, ",\n\"model\":{\"preset\":");
    dt_json_write_string(f, a->model);
    fprintf(f, ",\"num_layers\":%d,\"channels\":%d,\"num_heads\":%d,\"vocab_size\":%d,"
            "\"padded_vocab\":%d,\"max_seq_len\":%d,\"layernorm_eps\":1e-5},\n",
            c->num_layers, c->channels, c->num_heads, c->vocab_size, c->padded_vocab, c->max_seq_len);
    fprintf(f, "\"batch\":%d,\"seq_len\":%d,\"seed\":%" PRIu64 ",\"steps\":%d,\n", m->B, m->T,
            a->seed, a->steps);
    fprintf(f, "\"optimizer\":{");
    dt_json_f32(f, "lr", a->lr); fputc(',', f);
    dt_json_f32(f, "min_lr", a->min_lr); fputc(',', f);
    fprintf(f, "\"warmup_iters\":%" PRId64 ",\"decay_iters\":%" PRId64 ",", a->warmup, a->decay);
    dt_json_f32(f, "beta1", a->beta1); fputc(',', f);
    dt_json_f32(f, "beta2", a->beta2); fputc(',', f);
    dt_json_f32(f, "eps", a->eps); fputc(',', f);
    dt_json_f32(f, "weight_decay", a->weight_decay); fputc(',', f);
    dt_json_f32(f, "clip_grad", a->clip_grad);
    fprintf(f, "},\n\"num_floats\":%zu,\n\"files\":{\"params_init\":\"params_0.bin\","
            "\"tokens\":\"tokens_%%d.bin\",\"grads\":\"grads_%%d.bin\",\"params\":\"params_%%d.bin\"},\n",
            m->num_params);
    fprintf(f, "\"tensors\":[\n");
    /* the tensors that hold parameters (a dense model's MoE tensors are empty) */
    for (int i = 0, first = 1; i < DT_NUM_PARAM_TENSORS; i++) {
        const dt_param_desc *d = &m->params[i];
        if (d->numel == 0) continue;
        fprintf(f, "%s {\"name\":\"%s\",\"shape\":[", first ? "" : ",\n", d->name);
        for (int k = 0; k < d->ndim; k++) fprintf(f, "%s%" PRId64, k ? "," : "", d->shape[k]);
        fprintf(f, "],\"offset\":%zu,\"numel\":%zu,\"decay\":%s}", d->offset, d->numel, d->decay ? "true" : "false");
        first = 0;
    }
    fprintf(f, "\n");
    fprintf(f, "],\n\"step_log\":[\n");
    for (int k = 0; k < a->steps; k++) {
        fprintf(f, " {\"step\":%d,", k + 1);
        dt_json_f32(f, "lr", log[k].lr); fputc(',', f);
        dt_json_f64(f, "loss", log[k].loss); fputc(',', f);
        dt_json_f64(f, "grad_norm", log[k].grad_norm); fputc(',', f);
        dt_json_f64(f, "param_norm", log[k].param_norm);
        fprintf(f, ",\"num_zeros\":%" PRId64 "}%s\n", log[k].num_zeros, k + 1 < a->steps ? "," : "");
    }
    fprintf(f, "]}\n");
    if (fclose(f)) {
        fprintf(stderr, "%s: cannot write %s: %s\n", a->tool, path, strerror(errno));
        return -1;
    }
    return 0;
}
