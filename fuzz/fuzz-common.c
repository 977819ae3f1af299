/* SPDX-License-Identifier: BSD-3-Clause */
/* stabledif fuzz targets: shared helpers (see fuzz-common.h). */
#include <config.h>

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz-common.h"

void
fuzz_fail (const char *file, int line, const char *fmt, ...)
{
  va_list ap;

  fprintf (stderr, "fuzz: %s:%d: ", file, line);
  va_start (ap, fmt);
  vfprintf (stderr, fmt, ap);
  va_end (ap);
  fputc ('\n', stderr);
  abort ();
}

uint8_t
fuzz_u8 (struct fuzz_input *in)
{
  if (in->len == 0)
    return 0;
  in->len--;
  return *in->p++;
}

uint16_t
fuzz_u16 (struct fuzz_input *in)
{
  uint16_t v = fuzz_u8 (in);

  return (uint16_t) (v | (uint16_t) fuzz_u8 (in) << 8);
}

uint32_t
fuzz_u32 (struct fuzz_input *in)
{
  uint32_t v = fuzz_u16 (in);

  return v | (uint32_t) fuzz_u16 (in) << 16;
}

uint64_t
fuzz_u64 (struct fuzz_input *in)
{
  uint64_t v = fuzz_u32 (in);

  return v | (uint64_t) fuzz_u32 (in) << 32;
}

/* The configurations, in the order the selector byte picks them. */
static const struct fuzz_config fuzz_configs[] = {
  { "none",                512,  false, 0,      0 },
  { "none",                4096, false, 0,      0 },
  { "T10-DIF-TYPE1-CRC",   512,  false, 0,      0 },
  { "T10-DIF-TYPE2-CRC",   512,  false, 0,      0 },
  { "T10-DIF-TYPE3-CRC",   512,  false, 0,      0 },
  { "T10-DIF-TYPE1-CRC",   4096, false, 0,      0 },
  { "T10-DIF-TYPE1-CRC",   512,  true,  0x1234, 0xffff },
  { "T10-DIF-TYPE3-CRC",   512,  true,  0x00f0, 0x00f0 },
  { "EXT-DIF-TYPE1-CRC64", 4096, false, 0,      0 },
  { "EXT-DIF-TYPE3-CRC64", 4096, false, 0,      0 },
  { "EXT-DIF-TYPE1-CRC64", 4096, true,  0xbeef, 0xff00 },
};
#define FUZZ_NR_CONFIGS (sizeof fuzz_configs / sizeof fuzz_configs[0])

const struct fuzz_config *
fuzz_config_pick (uint8_t b)
{
  return &fuzz_configs[b % FUZZ_NR_CONFIGS];
}

void
fuzz_config_params (const struct fuzz_config *c, struct pi_params *p)
{
  memset (p, 0, sizeof *p);
  p->format = pi_format_lookup (c->format);
  FUZZ_ASSERT (p->format != NULL, "unknown format %s", c->format);
  p->interval = c->interval;
  p->check_app = c->has_app;
  p->app_tag = c->has_app ? c->app_tag : 0;
  p->app_mask = c->has_app ? c->app_mask : 0;
}

/* Big-endian fields, written out here rather than borrowed from pi.c. */
static uint64_t
get_be (const uint8_t *p, unsigned bytes)
{
  uint64_t v = 0;
  unsigned i;

  for (i = 0; i < bytes; i++)
    v = v << 8 | p[i];
  return v;
}

static void
put_be (uint8_t *p, unsigned bytes, uint64_t v)
{
  while (bytes-- > 0) {
    p[bytes] = (uint8_t) v;
    v >>= 8;
  }
}

/* Where the fields of a tuple are (stabledif(7), PI FORMATS). */
struct fuzz_layout {
  unsigned guard_at;            /* offset of the guard */
  unsigned guard_len;           /* its bytes: 2 or 8 */
  unsigned app_at;              /* offset of the 2-byte app tag */
  unsigned ref_at;              /* offset of the ref tag */
  unsigned ref_len;             /* its bytes: 4 or 6 */
};

/* The layout of format F's tuple (CRC-16 or CRC-64 family). */
static void
fuzz_layout_of (const struct pi_format *f, struct fuzz_layout *l)
{
  if (f->guard == PI_GUARD_CRC64)
    *l = (struct fuzz_layout) { 0, 8, 8, 10, 6 };
  else
    *l = (struct fuzz_layout) { 0, 2, 2, 4, 4 };
}

/* Fill LEN bytes at BUF from a xorshift generator seeded with SEED. */
static void
fuzz_fill (uint8_t *buf, size_t len, uint32_t seed)
{
  uint32_t x = seed | 1;
  size_t i;

  for (i = 0; i < len; i++) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    buf[i] = (uint8_t) x;
  }
}

void
fuzz_build_ext (const struct pi_params *p, struct fuzz_input *in,
                uint8_t *ext, uint64_t nblocks, uint64_t lba)
{
  const struct pi_format *f = p->format;
  const unsigned ts = f->tuple_size;
  const size_t es = pi_ext_size (p);
  struct fuzz_layout l;
  uint64_t i;
  unsigned k;

  fuzz_layout_of (f, &l);
  for (i = 0; i < nblocks; i++) {
    uint8_t *d = ext + i * es, *t = d + p->interval;
    uint8_t mode = fuzz_u8 (in), what;
    uint32_t seed = fuzz_u32 (in);

    /* Seed 0 gives all-zero data, a common real-world block. */
    if (seed == 0)
      memset (d, 0, p->interval);
    else
      fuzz_fill (d, p->interval, seed);
    if (ts == 0)
      continue;

    switch (mode & 3) {
    case 0:                     /* valid */
      pi_generate_block (p, d, lba + i, t);
      break;
    case 1:                     /* escaped: app (and type 3 ref) all ones */
      pi_generate_block (p, d, lba + i, t);
      if (mode & 4)
        put_be (t + l.guard_at, l.guard_len, fuzz_u64 (in));
      put_be (t + l.app_at, 2, 0xffff);
      if (f->type == PI_TYPE_3 || (mode & 8))
        put_be (t + l.ref_at, l.ref_len, UINT64_MAX);
      break;
    case 2:                     /* valid, then one thing changed */
      pi_generate_block (p, d, lba + i, t);
      what = fuzz_u8 (in);
      switch (what & 3) {
      case 0:                   /* a data bit */
        d[fuzz_u16 (in) % p->interval] ^= (uint8_t) (1u << (what >> 5));
        break;
      case 1:                   /* a guard bit */
        t[l.guard_at + (what >> 2) % l.guard_len] ^=
          (uint8_t) (1u << (what >> 5));
        break;
      case 2:                   /* the app tag */
        put_be (t + l.app_at, 2, fuzz_u16 (in));
        break;
      case 3:                   /* the ref tag */
        put_be (t + l.ref_at, l.ref_len, lba + i + 1 + fuzz_u8 (in));
        break;
      }
      break;
    case 3:                     /* raw input bytes */
      for (k = 0; k < ts; k++)
        t[k] = fuzz_u8 (in);
      break;
    }
  }
}

enum pi_check
fuzz_ref_check (const struct pi_params *p, const uint8_t *data,
                const uint8_t *tuple, uint64_t lba,
                bool *escaped, uint64_t *expected, uint64_t *actual)
{
  const struct pi_format *f = p->format;
  struct fuzz_layout l;
  uint64_t guard, ref, ref_all, want;
  uint16_t app;

  *escaped = false;
  *expected = *actual = 0;
  if (f->tuple_size == 0)
    return PI_CHECK_OK;

  fuzz_layout_of (f, &l);
  guard = get_be (tuple + l.guard_at, l.guard_len);
  app = (uint16_t) get_be (tuple + l.app_at, 2);
  ref = get_be (tuple + l.ref_at, l.ref_len);
  ref_all = (l.ref_len == 4) ? UINT32_MAX : (UINT64_C (1) << 48) - 1;

  if (app == 0xffff && (f->type != PI_TYPE_3 || ref == ref_all)) {
    *escaped = true;
    return PI_CHECK_OK;
  }
  want = pi_guard_compute (f, data, p->interval);
  if (guard != want) {
    *expected = want;
    *actual = guard;
    return PI_CHECK_GUARD;
  }
  if (p->check_app && ((app ^ p->app_tag) & p->app_mask) != 0) {
    *expected = p->app_tag;
    *actual = app;
    return PI_CHECK_APP;
  }
  if (f->type == PI_TYPE_1 || f->type == PI_TYPE_2) {
    want = lba & ref_all;
    if (ref != want) {
      *expected = want;
      *actual = ref;
      return PI_CHECK_REF;
    }
  }
  return PI_CHECK_OK;
}
