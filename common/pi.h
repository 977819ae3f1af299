/* SPDX-License-Identifier: BSD-3-Clause */
/* stabledif: protection-information formats (T10 DIF/DIX, NVMe PI).
 *
 * This file knows the PI formats (stabledif(7), PI FORMATS): how a tuple
 * is laid out, how the guard is computed, which blocks escape checking,
 * and how to generate and verify one block or a buffer of blocks.  It
 * does no I/O and keeps no state: every function is a pure function of
 * its arguments.
 *
 * Two buffer layouts are supported, named as in the kernel:
 *  - extended ("DIF"): each interval of data is followed by its tuple;
 *  - separate ("DIX"): data in one buffer, the tuples packed in another.
 *
 * LBAs are counted in protection intervals, not 512-byte sectors.
 */
#ifndef STABLEDIF_PI_H
#define STABLEDIF_PI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The largest tuple of any format, in bytes. */
#define PI_TUPLE_MAX 16

/* The protection type (T10 terms). */
enum pi_type {
  PI_TYPE_NONE = 0,             /* no protection information */
  PI_TYPE_1 = 1,                /* ref tag = LBA, checked */
  PI_TYPE_2 = 2,                /* as type 1 (NBD has no CDB seed) */
  PI_TYPE_3 = 3,                /* ref tag not checked */
};

/* The guard function. */
enum pi_guard {
  PI_GUARD_NONE = 0,            /* format "none" */
  PI_GUARD_CRC16,               /* CRC-16/T10-DIF, 16-bit guard */
  PI_GUARD_CRC64,               /* CRC-64/NVME, 64-bit guard */
};

/* One PI format.  The table of formats is constant; compare by pointer. */
struct pi_format {
  const char *name;             /* Linux integrity name, or "none" */
  enum pi_type type;            /* protection type */
  enum pi_guard guard;          /* guard function */
  unsigned tuple_size;          /* bytes per tuple: 0, 8 or 16 */
  unsigned ref_bits;            /* width of the ref tag: 0, 32 or 48 */
  bool needs_4k;                /* only valid with interval 4096 */
};

/* Look a format up by name (case-sensitive, as Linux spells it).
 * Returns NULL if there is no such format. */
const struct pi_format *pi_format_lookup (const char *name);

/* The format "none" (never NULL). */
const struct pi_format *pi_format_none (void);

/* Iterate the known formats: returns the i'th, or NULL past the end. */
const struct pi_format *pi_format_at (size_t i);

/* The names of every format, "none" first, separated by SEP, into BUF
 * (LEN bytes, always terminated; cut short if too small).  For
 * --dump-plugin and for messages naming the known formats. */
void pi_format_names (char *buf, size_t len, const char *sep);

/* The protection interval a device of format F has when none is given:
 * 4096 for the formats that need it, else 512. */
uint32_t pi_default_interval (const struct pi_format *f);

/* Whether INTERVAL (bytes) is valid for format F.  On failure returns false
 * and, if WHY is not NULL, points it at a static explanation. */
bool pi_interval_valid (const struct pi_format *f, uint32_t interval,
                        const char **why);

/* A decoded tuple.  Fields wider than the format allows are never
 * produced by decode; encode uses only the format's width of each. */
struct pi_tuple {
  uint64_t guard;               /* 16- or 64-bit guard */
  uint16_t app;                 /* application tag */
  uint64_t ref;                 /* 32- or 48-bit reference tag */
};

/* Encode/decode one tuple (big-endian: guard, app tag, ref tag) at P,
 * which holds f->tuple_size bytes. */
void pi_tuple_encode (const struct pi_format *f, const struct pi_tuple *t,
                      uint8_t *p);
void pi_tuple_decode (const struct pi_format *f, const uint8_t *p,
                      struct pi_tuple *t);

/* Fill the tuple at P with all ones: the PI of a block never written,
 * trimmed or zeroed. */
void pi_tuple_set_escape (const struct pi_format *f, uint8_t *p);

/* Whether the tuple at P escapes checking: app tag all ones (types 1, 2);
 * app tag and ref tag all ones (type 3). */
bool pi_tuple_escaped (const struct pi_format *f, const uint8_t *p);

/* The guard of LEN bytes of data at DATA. */
uint64_t pi_guard_compute (const struct pi_format *f, const void *data,
                           size_t len);

/* Copy LEN bytes from SRC to DST and return the guard of the copy (what
 * DST holds, even if SRC changes meanwhile): memcpy then the guard over
 * DST, in 4 KiB pieces so the checksum reads the copy from cache. */
uint64_t pi_guard_copy (const struct pi_format *f, void *dst,
                        const void *src, size_t len);

/* pi_guard_copy of NBLOCKS blocks of LEN bytes, SRC + i * SSTRIDE to DST
 * + i * DSTRIDE, into GUARDS[i]: one pass over each block for the CRC-16
 * formats (crc16_t10dif_blocks_copy).  Blocks must not overlap. */
void pi_guards_copy (const struct pi_format *f, uint8_t *dst,
                     size_t dstride, const uint8_t *src, size_t sstride,
                     size_t len, uint64_t nblocks, uint64_t *guards);

/* The reference tag a block at LBA must carry (truncated to the format's
 * width); 0 for type 3, whose ref tag is not checked. */
uint64_t pi_ref_for_lba (const struct pi_format *f, uint64_t lba);

/* Which check failed. */
enum pi_check {
  PI_CHECK_OK = 0,              /* no failure */
  PI_CHECK_GUARD,               /* guard does not match the data */
  PI_CHECK_APP,                 /* app tag does not match tag/mask */
  PI_CHECK_REF,                 /* ref tag does not match the LBA */
};

/* "guard", "app", "ref" or "ok". */
const char *pi_check_name (enum pi_check c);

/* Everything generate and verify need to know about a device. */
struct pi_params {
  const struct pi_format *format; /* never NULL; may be pi_format_none() */
  uint32_t interval;            /* protection interval, bytes: 512 or 4096 */
  bool check_app;               /* whether an app tag/mask is configured */
  uint16_t app_tag;             /* app tag to check/generate (0 if none) */
  uint16_t app_mask;            /* bits of app_tag that are checked */
};

/* Bytes of one extended block: interval + tuple size. */
static inline uint32_t
pi_ext_size (const struct pi_params *p)
{
  return p->interval + p->format->tuple_size;
}

/* One failed block. */
struct pi_error {
  uint64_t lba;                 /* the block that failed */
  uint64_t index;               /* its position in the buffer, from 0 */
  enum pi_check check;          /* which check failed first */
  uint64_t expected;            /* what the check wanted */
  uint64_t actual;              /* what the tuple held */
};

/* What a buffer verify saw. */
struct pi_verify_stats {
  uint64_t verified;            /* blocks checked (passed or failed) */
  uint64_t escaped;             /* blocks skipped by the escape rule */
  uint64_t failed;              /* blocks that failed a check */
};

/* Called once per failed block, in LBA order. */
typedef void (*pi_error_fn) (void *opaque, const struct pi_error *err);

/* Generate the tuple of one block: guard of DATA (p->interval bytes),
 * app = p->app_tag, ref = pi_ref_for_lba(LBA).  No-op for format none. */
void pi_generate_block (const struct pi_params *p, const void *data,
                        uint64_t lba, uint8_t *tuple);

/* Verify one block against its tuple.  Returns PI_CHECK_OK if the block
 * passes or escapes (*ESCAPED tells which, if not NULL), else the first
 * failing check in the order guard, app, ref, with ERR filled in (its
 * index is 0). */
enum pi_check pi_verify_block (const struct pi_params *p, const void *data,
                               const uint8_t *tuple, uint64_t lba,
                               bool *escaped, struct pi_error *err);

/* Extended layout: NBLOCKS blocks of pi_ext_size() bytes at BUF, the first
 * at LBA.  Generate writes every tuple in place. */
void pi_generate_ext (const struct pi_params *p, uint8_t *buf,
                      uint64_t nblocks, uint64_t lba);

/* Verify every block (it does not stop at the first failure), calling FN
 * (if not NULL) for each failure and adding to *STATS (if not NULL).
 * Returns the number of failed blocks. */
uint64_t pi_verify_ext (const struct pi_params *p, const uint8_t *buf,
                        uint64_t nblocks, uint64_t lba,
                        struct pi_verify_stats *stats,
                        pi_error_fn fn, void *opaque);

/* Separate layout: NBLOCKS intervals of data at DATA, their tuples packed
 * at PI.  Same contracts as the extended versions. */
void pi_generate_sep (const struct pi_params *p, const uint8_t *data,
                      uint8_t *pi, uint64_t nblocks, uint64_t lba);
/* pi_generate_sep for data that may come from memory rather than cache
 * (a caller's buffer): one CRC call per interval, which streams from
 * memory faster than the batched guards of pi_generate_sep, which are
 * faster on data in cache (bench/README.md, bench-crc --bytes 64M). */
void pi_generate_sep_stream (const struct pi_params *p, const uint8_t *data,
                             uint8_t *pi, uint64_t nblocks, uint64_t lba);
/* Copy NBLOCKS intervals from DATA (packed) to COPY + i * CSTRIDE and
 * generate their tuples at PI + i * PSTRIDE (which may lie in the copy,
 * as in the extended layout: CSTRIDE = PSTRIDE = pi_ext_size(), PI = COPY
 * + interval).  The guards are those of the bytes copied, so they
 * describe the copy even if DATA changes meanwhile; for the CRC-16
 * formats copy and guards take one pass (crc16_t10dif_blocks_copy).  For
 * format none only the data is copied.  DATA and the copy must not
 * overlap. */
void pi_generate_copy (const struct pi_params *p, const uint8_t *data,
                       uint8_t *copy, size_t cstride, uint8_t *pi,
                       size_t pstride, uint64_t nblocks, uint64_t lba);
uint64_t pi_verify_sep (const struct pi_params *p, const uint8_t *data,
                        const uint8_t *pi, uint64_t nblocks, uint64_t lba,
                        struct pi_verify_stats *stats,
                        pi_error_fn fn, void *opaque);

/* pi_verify_ext and pi_split_ext in one pass over EXT: every block is
 * verified as pi_verify_ext does (same return, callbacks and stats) and
 * its data copied to DATA (packed) whether it passes or not, for the
 * CRC-16 formats while its guard is computed; its tuple goes to PI
 * (packed) unless PI is NULL.  EXT and DATA must not overlap. */
uint64_t pi_verify_split_ext (const struct pi_params *p, const uint8_t *ext,
                              uint8_t *data, uint8_t *pi, uint64_t nblocks,
                              uint64_t lba, struct pi_verify_stats *stats,
                              pi_error_fn fn, void *opaque);

/* Layout conversion without checking: split an extended buffer into data
 * and packed tuples, or join them (the "DMA").  PI may be NULL in split
 * (tuples dropped). */
void pi_split_ext (const struct pi_params *p, const uint8_t *ext,
                   uint8_t *data, uint8_t *pi, uint64_t nblocks);
void pi_join_ext (const struct pi_params *p, const uint8_t *data,
                  const uint8_t *pi, uint8_t *ext, uint64_t nblocks);

#endif /* STABLEDIF_PI_H */
