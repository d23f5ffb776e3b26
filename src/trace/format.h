/* Trace file format, version 2 (internal to src/trace/: writer in trace.c, reader in
 * reader.c). All integers little-endian.
 *
 *   file     := preamble record*            (first record HEADER, last record END)
 *   preamble := "DTTRACE\0" u32 version u32 zero
 *   record   := u32 payload_len u32 type payload u64 checksum
 *               checksum = XXH64(the 8 head bytes and the payload, seed 0), so a flipped
 *               byte or a corrupt length is detected; a missing END record means the
 *               file was truncated (or the run died before dt_trace_close).
 *   str      := u16 len, len bytes, u8 0
 *   HEADER   := u32 rank, u32 level, str steps_spec, str ranks_spec, str digest
 *               (digest: "xxh64" or "xxh64-tree-4KiB", how tensors were digested; new in
 *               version 2)
 *   EVENT    := i64 step, i32 micro, u32 occurrence, u8 level, u8 phase,
 *               str scope, str op, str variant,
 *               u16 nin, tensor[nin], str kernel_info, u16 nout, tensor[nout]
 *   tensor   := str name, u8 dtype, u8 ndim, i64 shape[ndim], i64 numel, u64 digest,
 *               i64 rows, i64 rows_per_chunk, u32 nchunks, u64 chunk_digest[nchunks]
 *               (nchunks = 0 for tensors that are not order-sensitive)
 *   END      := u64 nevents */
#ifndef DT_TRACE_FORMAT_H
#define DT_TRACE_FORMAT_H

#include <stdint.h>

#define DT_TRACE_MAGIC "DTTRACE"   /* 8 bytes with its NUL */
#define DT_TRACE_VERSION 2u
#define DT_TRACE_PREAMBLE 16
#define DT_TRACE_REC_HEAD 8
#define DT_TRACE_REC_TAIL 8
#define DT_TRACE_MAX_RECORD (1u << 30)

enum { DT_REC_HEADER = 1, DT_REC_EVENT = 2, DT_REC_END = 3 };

static inline void dt_put_u16(unsigned char *p, uint16_t v) {
    p[0] = (unsigned char)v; p[1] = (unsigned char)(v >> 8);
}
static inline void dt_put_u32(unsigned char *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static inline void dt_put_u64(unsigned char *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static inline uint16_t dt_get_u16(const unsigned char *p) {
    return (uint16_t)(p[0] | p[1] << 8);
}
static inline uint32_t dt_get_u32(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline uint64_t dt_get_u64(const unsigned char *p) {
    return (uint64_t)dt_get_u32(p) | (uint64_t)dt_get_u32(p + 4) << 32;
}

#endif
