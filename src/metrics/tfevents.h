/* TensorBoard event files, written and read back without TensorFlow or protobuf.
 *
 * File: a sequence of TFRecords. Each record is
 *     uint64 length (little-endian) | uint32 masked_crc32c(length bytes)
 *     | payload (length bytes)      | uint32 masked_crc32c(payload)
 * with masked(c) = ((c >> 15) | (c << 17)) + 0xa282ead8. Each payload is a serialized
 * tensorboard `Event` message, hand-encoded here. Field numbers (tensorboard/compat/proto):
 *   Event:            wall_time=1 (double), step=2 (int64), file_version=3 (string),
 *                     summary=5 (Summary)
 *                     session_log=7 (SessionLog: status=1, START = 1)
 *   Summary:          value=1 (repeated Summary.Value)
 *   Summary.Value:    tag=1 (string), simple_value=2 (float), tensor=8 (TensorProto),
 *                     metadata=9 (SummaryMetadata)
 *   SummaryMetadata:  plugin_data=1 (PluginData: plugin_name=1, content=2), data_class=4
 *                     (DATA_CLASS_SCALAR = 1)
 *   TensorProto:      dtype=1 (DT_FLOAT=1, DT_DOUBLE=2), tensor_shape=2, tensor_content=4,
 *                     float_val=5 (packed), double_val=6 (packed)
 *   TensorShapeProto: dim=2 (none for a scalar)
 *
 * The first record holds file_version "brain.Event:2". Each step is one Event with one
 * Summary holding, per metric, two values:
 *   tag "<name>":     simple_value = (float)value, what the scalar dashboard plots;
 *   tag "<name>/f64": a rank-0 DT_DOUBLE tensor holding the exact double, with scalars-
 *                     plugin metadata (on the first value of each tag in a file), so full precision
 *                     survives in the file and stays visible to TensorBoard.
 * A resumed run first writes a SessionLog START event at its first step: for files of
 * version 2 that is what makes TensorBoard purge the steps >= it that an earlier file
 * holds (the same resume rule as metrics.jsonl, see metrics.h). */
#ifndef DT_METRICS_TFEVENTS_H
#define DT_METRICS_TFEVENTS_H

#include "detrain/detrain.h"

#include <stddef.h>
#include <stdint.h>

/* CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), the TFRecord checksum.
 * Start with crc = 0; chain calls over consecutive pieces. Check value: "123456789" ->
 * 0xE3069283. */
uint32_t dt_crc32c(uint32_t crc, const void *data, size_t n);
/* The TFRecord mask applied to a CRC before it is stored. */
uint32_t dt_crc32c_mask(uint32_t crc);

typedef struct dt_tfevents dt_tfevents;

/* One metric for dt_tfevents_write_step. The tag is also the name of the f64 copy
 * ("<tag>/f64"), at most 100 bytes. */
typedef struct dt_tf_scalar {
    const char *tag;
    double value;
} dt_tf_scalar;

/* Creates `events.out.tfevents.<unix seconds>.<host>.<pid>.<n>` in log_dir (which must
 * exist; n makes the name unique within the process) and writes the file_version record.
 * The caller closes with dt_tfevents_close. */
dt_status dt_tfevents_open(dt_tfevents **out, const char *log_dir, double wall_time);
/* Appends one Event for `step` holding every scalar twice (float32 simple_value and the
 * exact float64 tensor). The record is flushed to the OS before returning. */
dt_status dt_tfevents_write_step(dt_tfevents *w, int64_t step, double wall_time,
                                 const dt_tf_scalar *vals, int n);
/* Appends a SessionLog START event at `step`: TensorBoard then discards every value with
 * step >= `step` read before it (from this or earlier files in the directory). Written by a
 * resumed run before its first step. */
dt_status dt_tfevents_write_restart(dt_tfevents *w, int64_t step, double wall_time);
/* Path of the file being written. */
const char *dt_tfevents_path(const dt_tfevents *w);
/* Flushes, fsyncs and frees (NULL is fine). Returns the first write error, if any. */
dt_status dt_tfevents_close(dt_tfevents *w);

/* ---- reading back (tests, tools) ---- */

enum { DT_TF_SIMPLE = 1, DT_TF_F64 = 2 };

typedef struct dt_tf_record {
    char tag[128];
    int64_t step;
    double wall_time;
    int kind;     /* DT_TF_SIMPLE: value is the float32 simple_value widened (exact);
                     DT_TF_F64: value is the DT_DOUBLE tensor's value, bit for bit */
    double value;
} dt_tf_record;

typedef struct dt_tf_file {
    char file_version[64]; /* from the first event, "" if none */
    size_t nevents;        /* records (events) in the file */
    size_t nrestarts;      /* SessionLog events among them */
    size_t n;              /* summary values found */
    dt_tf_record *rec;     /* n records in file order */
} dt_tf_file;

/* Reads an event file, checking both CRCs of every record. Fails closed (DT_ECORRUPT,
 * naming the path and the byte offset of the record) on a bad CRC, a truncated record or
 * an undecodable message. Summary values that are neither a simple_value nor a scalar
 * DT_FLOAT/DT_DOUBLE tensor are skipped. Free with dt_tf_file_free. */
dt_status dt_tfevents_read(const char *path, dt_tf_file *out);
void dt_tf_file_free(dt_tf_file *f);

#endif
