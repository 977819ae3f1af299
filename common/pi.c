/* SPDX-License-Identifier: BSD-3-Clause */
/* stabledif: protection-information formats (see pi.h for the contracts).
 *
 * The guard of the CRC-16 formats is CRC-16/T10-DIF: isa-l's crc16_t10dif
 * for one block, and crc16_t10dif_blocks (crc16.c) for the blocks of a
 * buffer, which computes the guards of up to PI_BATCH blocks in one call
 * (about 1.4x faster than one isa-l call per block at 512 bytes, 1.2x at
 * 4096; bench/bench-crc).  The guard of the CRC-64 formats is crc64_nvme
 * (crc64.c).  Buffers are verified with loops specialised per guard width,
 * so the only per-byte work is the CRC itself; the tuples are still
 * checked and reported block by block, in LBA order.
 */

#include <config.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <isa-l/crc.h>

#include "crc16.h"
#include "crc64.h"
#include "pi.h"

/* The formats (stabledif(7), PI FORMATS).  Index 0 is "none". */
static const struct pi_format pi_formats[] = {
  { "none",                PI_TYPE_NONE, PI_GUARD_NONE,  0,  0, false },
  { "T10-DIF-TYPE1-CRC",   PI_TYPE_1,    PI_GUARD_CRC16, 8,  32, false },
  { "T10-DIF-TYPE2-CRC",   PI_TYPE_2,    PI_GUARD_CRC16, 8,  32, false },
  { "T10-DIF-TYPE3-CRC",   PI_TYPE_3,    PI_GUARD_CRC16, 8,  32, false },
  { "EXT-DIF-TYPE1-CRC64", PI_TYPE_1,    PI_GUARD_CRC64, 16, 48, true },
  { "EXT-DIF-TYPE3-CRC64", PI_TYPE_3,    PI_GUARD_CRC64, 16, 48, true },
};

#define PI_NR_FORMATS (sizeof pi_formats / sizeof pi_formats[0])

/* The application tag value that marks a block as not checked. */
#define PI_APP_ESCAPE 0xffff

/* The buffer loops of the CRC-16 formats compute the guards of this many
 * blocks at a time (crc16_t10dif_blocks) into an array on the stack. */
#define PI_BATCH 16

const struct pi_format *
pi_format_lookup (const char *name)
{
  size_t i;

  if (name == NULL)
    return NULL;
  for (i = 0; i < PI_NR_FORMATS; i++)
    if (strcmp (pi_formats[i].name, name) == 0)
      return &pi_formats[i];
  return NULL;
}

const struct pi_format *
pi_format_none (void)
{
  return &pi_formats[0];
}

const struct pi_format *
pi_format_at (size_t i)
{
  return i < PI_NR_FORMATS ? &pi_formats[i] : NULL;
}

void
pi_format_names (char *buf, size_t len, const char *sep)
{
  const struct pi_format *f;
  size_t used, i;

  if (len == 0)
    return;
  used = (size_t) snprintf (buf, len, "%s", pi_format_none ()->name);
  for (i = 0; (f = pi_format_at (i)) != NULL && used < len; i++)
    if (f != pi_format_none ())
      used += (size_t) snprintf (buf + used, len - used, "%s%s", sep,
                                 f->name);
}

uint32_t
pi_default_interval (const struct pi_format *f)
{
  return f->needs_4k ? 4096 : 512;
}

bool
pi_interval_valid (const struct pi_format *f, uint32_t interval,
                   const char **why)
{
  if (interval != 512 && interval != 4096) {
    if (why)
      *why = "the protection interval must be 512 or 4096 bytes";
    return false;
  }
  if (f->needs_4k && interval != 4096) {
    if (why)
      *why = "the CRC-64 formats (EXT-DIF-TYPE1-CRC64, EXT-DIF-TYPE3-CRC64) "
        "protect 4096-byte blocks only: use interval 4096";
    return false;
  }
  return true;
}

/* Big-endian stores and loads of the tuple fields (16, 32, 48, 64 bits). */
static inline void
put_be16 (uint8_t *p, uint16_t v)
{
  p[0] = (uint8_t) (v >> 8);
  p[1] = (uint8_t) v;
}

static inline void
put_be32 (uint8_t *p, uint32_t v)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  v = __builtin_bswap32 (v);
#endif
  memcpy (p, &v, sizeof v);
}

static inline void
put_be64 (uint8_t *p, uint64_t v)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  v = __builtin_bswap64 (v);
#endif
  memcpy (p, &v, sizeof v);
}

static inline void
put_be48 (uint8_t *p, uint64_t v)
{
  put_be16 (p, (uint16_t) (v >> 32));
  put_be32 (p + 2, (uint32_t) v);
}

static inline uint16_t
get_be16 (const uint8_t *p)
{
  return (uint16_t) ((p[0] << 8) | p[1]);
}

static inline uint32_t
get_be32 (const uint8_t *p)
{
  uint32_t v;

  memcpy (&v, p, sizeof v);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  v = __builtin_bswap32 (v);
#endif
  return v;
}

static inline uint64_t
get_be64 (const uint8_t *p)
{
  uint64_t v;

  memcpy (&v, p, sizeof v);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  v = __builtin_bswap64 (v);
#endif
  return v;
}

static inline uint64_t
get_be48 (const uint8_t *p)
{
  return ((uint64_t) get_be16 (p) << 32) | get_be32 (p + 2);
}

/* All ones in the width of the format's ref tag (0 for "none"). */
static inline uint64_t
ref_mask (const struct pi_format *f)
{
  return f->ref_bits >= 64 ? UINT64_MAX
    : (UINT64_C (1) << f->ref_bits) - 1;
}

/* Write the tuple of a CRC-16 format (8 bytes, big-endian: guard, app,
 * ref) at P: the one layout pi_tuple_encode and the generate loops
 * share. */
static inline void
put_crc16_tuple (uint8_t *p, uint16_t guard, uint16_t app, uint32_t ref)
{
  put_be16 (p, guard);
  put_be16 (p + 2, app);
  put_be32 (p + 4, ref);
}

/* Whether the reference tag of format F counts the LBA (types 1 and 2;
 * type 3 leaves it to the application, and Linux writes 0). */
static inline bool
ref_counts_lba (const struct pi_format *f)
{
  return f->type == PI_TYPE_1 || f->type == PI_TYPE_2;
}

void
pi_tuple_encode (const struct pi_format *f, const struct pi_tuple *t,
                 uint8_t *p)
{
  switch (f->guard) {
  case PI_GUARD_CRC16:
    put_crc16_tuple (p, (uint16_t) t->guard, t->app, (uint32_t) t->ref);
    break;
  case PI_GUARD_CRC64:
    put_be64 (p, t->guard);
    put_be16 (p + 8, t->app);
    put_be48 (p + 10, t->ref); /* the low 48 bits */
    break;
  case PI_GUARD_NONE:
    break;
  }
}

void
pi_tuple_decode (const struct pi_format *f, const uint8_t *p,
                 struct pi_tuple *t)
{
  switch (f->guard) {
  case PI_GUARD_CRC16:
    t->guard = get_be16 (p);
    t->app = get_be16 (p + 2);
    t->ref = get_be32 (p + 4);
    return;
  case PI_GUARD_CRC64:
    t->guard = get_be64 (p);
    t->app = get_be16 (p + 8);
    t->ref = get_be48 (p + 10);
    return;
  case PI_GUARD_NONE:
    break;
  }
  t->guard = t->ref = 0;
  t->app = 0;
}

void
pi_tuple_set_escape (const struct pi_format *f, uint8_t *p)
{
  memset (p, 0xff, f->tuple_size);
}

/* The escape rule on decoded app and ref tags. */
static inline bool
escaped_tags (const struct pi_format *f, uint16_t app, uint64_t ref)
{
  if (app != PI_APP_ESCAPE)
    return false;
  if (f->type == PI_TYPE_3)
    return ref == ref_mask (f);
  return true;
}

bool
pi_tuple_escaped (const struct pi_format *f, const uint8_t *p)
{
  struct pi_tuple t;

  if (f->tuple_size == 0)
    return false;
  pi_tuple_decode (f, p, &t);
  return escaped_tags (f, t.app, t.ref);
}

uint64_t
pi_guard_compute (const struct pi_format *f, const void *data, size_t len)
{
  switch (f->guard) {
  case PI_GUARD_CRC16:
    return crc16_t10dif (0, data, len);
  case PI_GUARD_CRC64:
    return crc64_nvme (0, data, len);
  case PI_GUARD_NONE:
    break;
  }
  return 0;
}

/* Copy-then-checksum works in pieces of this size so that the checksum
 * reads the copy while it is still in cache. */
#define PI_COPY_CHUNK 4096

uint64_t
pi_guard_copy (const struct pi_format *f, void *dst, const void *src,
               size_t len)
{
  uint8_t *d = dst;
  const uint8_t *s = src;
  uint64_t crc = 0;
  size_t n;

  switch (f->guard) {
  case PI_GUARD_CRC16:
    /* Checksum the copy, not the source, so that the guard matches the
     * copy even if SRC changes meanwhile.  memcpy plus isa-l's widest
     * crc16_t10dif over the (cached) copy is faster than its fused
     * crc16_t10dif_copy, whose code is the 128-bit version only. */
    while (len > 0) {
      n = len < PI_COPY_CHUNK ? len : PI_COPY_CHUNK;
      memcpy (d, s, n);
      crc = crc16_t10dif ((uint16_t) crc, d, n);
      d += n;
      s += n;
      len -= n;
    }
    return crc;
  case PI_GUARD_CRC64:
    /* Checksum the copy, not the source, for the same reason. */
    while (len > 0) {
      n = len < PI_COPY_CHUNK ? len : PI_COPY_CHUNK;
      memcpy (d, s, n);
      crc = crc64_nvme (crc, d, n);
      d += n;
      s += n;
      len -= n;
    }
    return crc;
  case PI_GUARD_NONE:
    break;
  }
  if (len > 0)
    memcpy (dst, src, len);
  return 0;
}

uint64_t
pi_ref_for_lba (const struct pi_format *f, uint64_t lba)
{
  if (ref_counts_lba (f))
    return lba & ref_mask (f);
  return 0;
}

const char *
pi_check_name (enum pi_check c)
{
  switch (c) {
  case PI_CHECK_OK: return "ok";
  case PI_CHECK_GUARD: return "guard";
  case PI_CHECK_APP: return "app";
  case PI_CHECK_REF: return "ref";
  }
  return "unknown";
}

void
pi_generate_block (const struct pi_params *p, const void *data,
                   uint64_t lba, uint8_t *tuple)
{
  const struct pi_format *f = p->format;
  struct pi_tuple t;

  if (f->guard == PI_GUARD_NONE)
    return;
  t.guard = pi_guard_compute (f, data, p->interval);
  t.app = p->app_tag;
  t.ref = pi_ref_for_lba (f, lba);
  pi_tuple_encode (f, &t, tuple);
}

/* Verify one block; G is the format's guard, passed separately so that the
 * buffer loops below get a copy of this code specialised for each width.
 * CRC16 is the guard of DATA if the caller computed it already (CRC-16
 * formats only), else NULL.  On failure fills ERR (except its index). */
static inline __attribute__ ((always_inline)) enum pi_check
verify_one (const struct pi_params *p, enum pi_guard g,
            const uint8_t *data, const uint8_t *tuple, uint64_t lba,
            const uint16_t *crc16, bool *escaped, struct pi_error *err)
{
  const struct pi_format *f = p->format;
  uint64_t guard, want, ref;
  uint16_t app;

  if (g == PI_GUARD_CRC16) {
    guard = get_be16 (tuple);
    app = get_be16 (tuple + 2);
    ref = get_be32 (tuple + 4);
  }
  else {
    guard = get_be64 (tuple);
    app = get_be16 (tuple + 8);
    ref = get_be48 (tuple + 10);
  }

  *escaped = escaped_tags (f, app, ref);
  if (*escaped)
    return PI_CHECK_OK;

  if (g == PI_GUARD_CRC16)
    want = crc16 != NULL ? *crc16 : crc16_t10dif (0, data, p->interval);
  else
    want = crc64_nvme (0, data, p->interval);
  if (guard != want) {
    err->check = PI_CHECK_GUARD;
    err->expected = want;
    err->actual = guard;
    goto failed;
  }

  if (p->check_app && ((app ^ p->app_tag) & p->app_mask) != 0) {
    err->check = PI_CHECK_APP;
    err->expected = p->app_tag;
    err->actual = app;
    goto failed;
  }

  if (ref_counts_lba (f)) {
    want = lba & ref_mask (f);
    if (ref != want) {
      err->check = PI_CHECK_REF;
      err->expected = want;
      err->actual = ref;
      goto failed;
    }
  }
  return PI_CHECK_OK;

 failed:
  err->lba = lba;
  return err->check;
}

enum pi_check
pi_verify_block (const struct pi_params *p, const void *data,
                 const uint8_t *tuple, uint64_t lba,
                 bool *escaped, struct pi_error *err)
{
  struct pi_error e = { .lba = lba, .index = 0, .check = PI_CHECK_OK };
  bool esc = false;
  enum pi_check r = PI_CHECK_OK;

  switch (p->format->guard) {
  case PI_GUARD_CRC16:
    r = verify_one (p, PI_GUARD_CRC16, data, tuple, lba, NULL, &esc, &e);
    break;
  case PI_GUARD_CRC64:
    r = verify_one (p, PI_GUARD_CRC64, data, tuple, lba, NULL, &esc, &e);
    break;
  case PI_GUARD_NONE:
    break;
  }
  if (escaped)
    *escaped = esc;
  if (err)
    *err = e;
  return r;
}

/* Verify NBLOCKS blocks: block I's data at DATA + I * DSTRIDE, its tuple at
 * PI + I * PSTRIDE.  Shared by the extended and separate layouts.  For the
 * CRC-16 formats the guards of a batch of blocks are computed first, from
 * the first block of the batch that does not escape to the last one (so a
 * buffer of escaped blocks costs no CRC); then every block is checked on
 * its own as before. */
static inline __attribute__ ((always_inline)) uint64_t
verify_blocks (const struct pi_params *p, enum pi_guard g,
               const uint8_t *data, size_t dstride,
               const uint8_t *pi, size_t pstride, uint8_t *copy,
               uint64_t nblocks, uint64_t lba,
               struct pi_verify_stats *stats, pi_error_fn fn, void *opaque)
{
  /* A CRC-16 tuple read as one big-endian number: guard << 48 | app << 32
   * | ref.  MASK has the bits verify checks (guard; app tag bits of the
   * app mask if an app tag is configured; ref tag for types 1 and 2), APP
   * the app tag they must hold. */
  const uint64_t mask = UINT64_C (0xffff) << 48 |
    (uint64_t) (p->check_app ? p->app_mask : 0) << 32 |
    (p->format->type == PI_TYPE_3 ? 0 : UINT32_MAX);
  const uint64_t app = (uint64_t) p->app_tag << 32;
  uint64_t i, v, escaped = 0, failed = 0;
  uint16_t guards[PI_BATCH];
  size_t n, j, first = 0, last = 0;
  struct pi_error err;
  bool esc;

  for (i = 0; i < nblocks; i += n) {
    n = nblocks - i < PI_BATCH ? (size_t) (nblocks - i) : PI_BATCH;
    if (g == PI_GUARD_CRC16) {
      first = n;
      for (j = 0; j < n; j++)
        if (!escaped_tags (p->format, get_be16 (pi + j * pstride + 2),
                           get_be32 (pi + j * pstride + 4))) {
          if (first == n)
            first = j;
          last = j;
        }
      if (first < n && copy)
        crc16_t10dif_blocks_copy (copy + first * p->interval, p->interval,
                                  data + first * dstride, dstride,
                                  p->interval, last - first + 1,
                                  guards + first);
      else if (first < n)
        crc16_t10dif_blocks (data + first * dstride, dstride, p->interval,
                             last - first + 1, guards + first);
    }
    if (copy) {
      /* What the CRC pass above did not copy (all of it for CRC-64). */
      for (j = 0; j < n; j++)
        if (g != PI_GUARD_CRC16 || j < first || j > last)
          memcpy (copy + j * p->interval, data + j * dstride, p->interval);
      copy += n * p->interval;
    }
    for (j = 0; j < n; j++, data += dstride, pi += pstride) {
      if (g == PI_GUARD_CRC16 && first <= j && j <= last) {
        /* Fast path: a tuple that does not escape and matches in every
         * bit that is checked passes; any other goes to verify_one. */
        v = get_be64 (pi);
        if ((uint16_t) (v >> 32) != PI_APP_ESCAPE &&
            ((v ^ (((uint64_t) guards[j] << 48) | app |
                   (uint32_t) (lba + i + j))) & mask) == 0)
          continue;
      }
      /* A guard outside [first, last] was not computed: verify_one
       * computes it if the tuple no longer escapes. */
      if (verify_one (p, g, data, pi, lba + i + j,
                      g == PI_GUARD_CRC16 && first <= j && j <= last ?
                      &guards[j] : NULL, &esc, &err) != PI_CHECK_OK) {
        failed++;
        if (fn) {
          err.index = i + j;
          fn (opaque, &err);
        }
      }
      else if (esc)
        escaped++;
    }
  }

  if (stats) {
    stats->verified += nblocks - escaped;
    stats->escaped += escaped;
    stats->failed += failed;
  }
  return failed;
}

/* Dispatch on the guard width once per buffer.  COPY, if not NULL, gets
 * the data of every block, packed (see verify_blocks). */
static uint64_t
verify_dispatch (const struct pi_params *p,
                 const uint8_t *data, size_t dstride,
                 const uint8_t *pi, size_t pstride, uint8_t *copy,
                 uint64_t nblocks, uint64_t lba,
                 struct pi_verify_stats *stats, pi_error_fn fn, void *opaque)
{
  uint64_t i;

  switch (p->format->guard) {
  case PI_GUARD_CRC16:
    return verify_blocks (p, PI_GUARD_CRC16, data, dstride, pi, pstride,
                          copy, nblocks, lba, stats, fn, opaque);
  case PI_GUARD_CRC64:
    return verify_blocks (p, PI_GUARD_CRC64, data, dstride, pi, pstride,
                          copy, nblocks, lba, stats, fn, opaque);
  case PI_GUARD_NONE:
    break;
  }
  /* Format none: nothing to verify, only the copy. */
  for (i = 0; copy && i < nblocks; i++)
    memcpy (copy + i * p->interval, data + i * dstride, p->interval);
  return 0;
}

/* Generate the tuples of NBLOCKS blocks of a CRC-16 format: block I's
 * data at DATA + I * DSTRIDE, its tuple written at PI + I * PSTRIDE (which
 * may lie between the blocks, as in the extended layout), the guards
 * computed PI_BATCH blocks at a time.  With COPY not NULL block I is also
 * copied to COPY + I * CSTRIDE, in the same pass, and the guards are
 * those of the copies. */
static void
generate_crc16 (const struct pi_params *p, const uint8_t *data,
                size_t dstride, uint8_t *copy, size_t cstride,
                uint8_t *pi, size_t pstride, uint64_t nblocks, uint64_t lba)
{
  const bool has_ref = ref_counts_lba (p->format);
  uint16_t guards[PI_BATCH];
  size_t n, j;
  uint64_t i;

  for (i = 0; i < nblocks; i += n) {
    n = nblocks - i < PI_BATCH ? (size_t) (nblocks - i) : PI_BATCH;
    if (copy) {
      crc16_t10dif_blocks_copy (copy, cstride, data, dstride, p->interval,
                                n, guards);
      copy += n * cstride;
    }
    else
      crc16_t10dif_blocks (data, dstride, p->interval, n, guards);
    /* The tuple as pi_tuple_encode writes it (the ref tag as
     * pi_ref_for_lba has it), without a call per block. */
    for (j = 0; j < n; j++, data += dstride, pi += pstride)
      put_crc16_tuple (pi, guards[j], p->app_tag,
                       has_ref ? (uint32_t) (lba + i + j) : 0);
  }
}

void
pi_generate_ext (const struct pi_params *p, uint8_t *buf,
                 uint64_t nblocks, uint64_t lba)
{
  const size_t ext = pi_ext_size (p);
  uint64_t i;

  if (p->format->guard == PI_GUARD_NONE)
    return;
  if (p->format->guard == PI_GUARD_CRC16) {
    generate_crc16 (p, buf, ext, NULL, 0, buf + p->interval, ext, nblocks,
                    lba);
    return;
  }
  for (i = 0; i < nblocks; i++, buf += ext)
    pi_generate_block (p, buf, lba + i, buf + p->interval);
}

uint64_t
pi_verify_ext (const struct pi_params *p, const uint8_t *buf,
               uint64_t nblocks, uint64_t lba,
               struct pi_verify_stats *stats,
               pi_error_fn fn, void *opaque)
{
  const size_t ext = pi_ext_size (p);

  return verify_dispatch (p, buf, ext, buf + p->interval, ext, NULL,
                          nblocks, lba, stats, fn, opaque);
}

uint64_t
pi_verify_split_ext (const struct pi_params *p, const uint8_t *ext,
                     uint8_t *data, uint8_t *pi, uint64_t nblocks,
                     uint64_t lba, struct pi_verify_stats *stats,
                     pi_error_fn fn, void *opaque)
{
  const size_t es = pi_ext_size (p), ts = p->format->tuple_size;
  uint64_t failed, i;

  failed = verify_dispatch (p, ext, es, ext + p->interval, es, data,
                            nblocks, lba, stats, fn, opaque);
  for (i = 0; pi && ts && i < nblocks; i++)
    memcpy (pi + i * ts, ext + i * es + p->interval, ts);
  return failed;
}

void
pi_generate_sep (const struct pi_params *p, const uint8_t *data,
                 uint8_t *pi, uint64_t nblocks, uint64_t lba)
{
  const size_t ts = p->format->tuple_size;
  uint64_t i;

  if (p->format->guard == PI_GUARD_NONE)
    return;
  if (p->format->guard == PI_GUARD_CRC16) {
    generate_crc16 (p, data, p->interval, NULL, 0, pi, ts, nblocks, lba);
    return;
  }
  for (i = 0; i < nblocks; i++, data += p->interval, pi += ts)
    pi_generate_block (p, data, lba + i, pi);
}

void
pi_generate_sep_stream (const struct pi_params *p, const uint8_t *data,
                        uint8_t *pi, uint64_t nblocks, uint64_t lba)
{
  const uint32_t iv = p->interval;
  const size_t ts = p->format->tuple_size;
  uint64_t i;

  switch (p->format->guard) {
  case PI_GUARD_NONE:
    break;
  case PI_GUARD_CRC16: {
    const bool has_ref = ref_counts_lba (p->format);
    for (i = 0; i < nblocks; i++, data += iv, pi += ts)
      put_crc16_tuple (pi, crc16_t10dif (0, data, iv), p->app_tag,
                       has_ref ? (uint32_t) (lba + i) : 0);
    break;
  }
  case PI_GUARD_CRC64:
    for (i = 0; i < nblocks; i++, data += iv, pi += ts)
      pi_generate_block (p, data, lba + i, pi);
    break;
  }
}

void
pi_generate_copy (const struct pi_params *p, const uint8_t *data,
                  uint8_t *copy, size_t cstride, uint8_t *pi, size_t pstride,
                  uint64_t nblocks, uint64_t lba)
{
  const uint32_t iv = p->interval;
  uint64_t i;

  switch (p->format->guard) {
  case PI_GUARD_CRC16:
    generate_crc16 (p, data, iv, copy, cstride, pi, pstride, nblocks, lba);
    break;
  case PI_GUARD_CRC64:
    /* Copy, then the guard of the copy while it is in cache. */
    for (i = 0; i < nblocks; i++) {
      memcpy (copy + i * cstride, data + i * iv, iv);
      pi_generate_block (p, copy + i * cstride, lba + i, pi + i * pstride);
    }
    break;
  case PI_GUARD_NONE:
    if (cstride == iv) {
      if (nblocks > 0)
        memcpy (copy, data, nblocks * iv);
      break;
    }
    for (i = 0; i < nblocks; i++)
      memcpy (copy + i * cstride, data + i * iv, iv);
    break;
  }
}

void
pi_guards_copy (const struct pi_format *f, uint8_t *dst, size_t dstride,
                const uint8_t *src, size_t sstride, size_t len,
                uint64_t nblocks, uint64_t *guards)
{
  uint16_t g16[PI_BATCH];
  uint64_t i, n, j;

  if (f->guard != PI_GUARD_CRC16) {
    for (i = 0; i < nblocks; i++)
      guards[i] = pi_guard_copy (f, dst + i * dstride, src + i * sstride,
                                 len);
    return;
  }
  for (i = 0; i < nblocks; i += n) {
    n = nblocks - i < PI_BATCH ? nblocks - i : PI_BATCH;
    crc16_t10dif_blocks_copy (dst + i * dstride, dstride, src + i * sstride,
                              sstride, len, n, g16);
    for (j = 0; j < n; j++)
      guards[i + j] = g16[j];
  }
}

uint64_t
pi_verify_sep (const struct pi_params *p, const uint8_t *data,
               const uint8_t *pi, uint64_t nblocks, uint64_t lba,
               struct pi_verify_stats *stats,
               pi_error_fn fn, void *opaque)
{
  return verify_dispatch (p, data, p->interval,
                          pi, p->format->tuple_size, NULL,
                          nblocks, lba, stats, fn, opaque);
}

void
pi_split_ext (const struct pi_params *p, const uint8_t *ext,
              uint8_t *data, uint8_t *pi, uint64_t nblocks)
{
  const size_t ts = p->format->tuple_size;
  uint64_t i;

  if (ts == 0) {                /* no tuples: the layouts are the same */
    if (nblocks > 0)
      memcpy (data, ext, nblocks * p->interval);
    return;
  }
  for (i = 0; i < nblocks; i++) {
    memcpy (data, ext, p->interval);
    ext += p->interval;
    data += p->interval;
    if (pi) {
      memcpy (pi, ext, ts);
      pi += ts;
    }
    ext += ts;
  }
}

/* The join loop with the tuple size TS known at compile time: the
 * tuple is then a move, not a call. */
static inline __attribute__ ((always_inline)) void
join_blocks (uint32_t iv, size_t ts, const uint8_t *data, const uint8_t *pi,
             uint8_t *ext, uint64_t nblocks)
{
  uint64_t i;

  for (i = 0; i < nblocks; i++) {
    memcpy (ext, data, iv);
    memcpy (ext + iv, pi, ts);
    ext += iv + ts;
    data += iv;
    pi += ts;
  }
}

void
pi_join_ext (const struct pi_params *p, const uint8_t *data,
             const uint8_t *pi, uint8_t *ext, uint64_t nblocks)
{
  const size_t ts = p->format->tuple_size;

  switch (ts) {
  case 0:
    if (nblocks > 0)
      memcpy (ext, data, nblocks * p->interval);
    break;
  case 8:
    join_blocks (p->interval, 8, data, pi, ext, nblocks);
    break;
  case 16:
    join_blocks (p->interval, 16, data, pi, ext, nblocks);
    break;
  default:
    join_blocks (p->interval, ts, data, pi, ext, nblocks);
    break;
  }
}
