/* SPDX-License-Identifier: BSD-3-Clause */
/* stabledif: unit tests for common/pi (PI formats, tuples, generate and
 * verify).
 *
 * Expected tuples are built here byte by byte from the layout of
 * stabledif(7) PI FORMATS, not with pi_tuple_encode, so that a wrong
 * layout cannot hide behind a matching encoder and decoder.
 */

#include <config.h>

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <check.h>
#include <isa-l/crc.h>

#include "crc64.h"
#include "pi.h"
#include "test-rng.h"

/* ---- helpers ---- */

static const struct pi_format *
fmt (const char *name)
{
  const struct pi_format *f = pi_format_lookup (name);

  ck_assert_msg (f != NULL, "format %s not found", name);
  return f;
}

static struct pi_params
params (const char *name, uint32_t interval)
{
  struct pi_params p = {
    .format = fmt (name),
    .interval = interval,
    .check_app = false,
    .app_tag = 0,
    .app_mask = 0,
  };
  return p;
}


/* Write V big-endian into BYTES bytes at P, one byte at a time. */
static void
be_bytes (uint8_t *p, uint64_t v, unsigned bytes)
{
  unsigned i;

  for (i = 0; i < bytes; i++)
    p[i] = (uint8_t) (v >> (8 * (bytes - 1 - i)));
}

/* Build a tuple by hand for format F: guard, app, ref at their offsets. */
static void
hand_tuple (const struct pi_format *f, uint8_t *t,
            uint64_t guard, uint16_t app, uint64_t ref)
{
  if (f->tuple_size == 8) {
    be_bytes (t, guard, 2);
    be_bytes (t + 2, app, 2);
    be_bytes (t + 4, ref, 4);
  }
  else {
    ck_assert_uint_eq (f->tuple_size, 16);
    be_bytes (t, guard, 8);
    be_bytes (t + 8, app, 2);
    be_bytes (t + 10, ref, 6);
  }
}

/* The true guard of LEN bytes, straight from the CRC libraries. */
static uint64_t
true_guard (const struct pi_format *f, const void *data, size_t len)
{
  if (f->guard == PI_GUARD_CRC16)
    return crc16_t10dif (0, data, len);
  return crc64_nvme_bitwise (0, data, len);
}

/* Every format F (format none too, counted by I) with every interval IV
 * of 512 and 4096 it allows. */
#define FOR_EACH_FORMAT_INTERVAL(i, f, iv)                              \
  for (i = 0; (f = pi_format_at (i)) != NULL; i++)                      \
    for (uint32_t iv = f->needs_4k ? 4096 : 512; iv <= 4096; iv *= 8)

/* The PI formats that have a tuple. */
static const char *const pi_names[] = {
  "T10-DIF-TYPE1-CRC", "T10-DIF-TYPE2-CRC", "T10-DIF-TYPE3-CRC",
  "EXT-DIF-TYPE1-CRC64", "EXT-DIF-TYPE3-CRC64",
};
#define NR_PI_NAMES (sizeof pi_names / sizeof pi_names[0])

/* A valid interval for format NAME (4096 for CRC64, else 512). */
static uint32_t
interval_for (const char *name)
{
  return fmt (name)->needs_4k ? 4096 : 512;
}

/* ---- check values ---- */

START_TEST (test_check_values)
{
  const unsigned char *s = (const unsigned char *) "123456789";

  /* CRC-16/T10-DIF, through isa-l and through pi. */
  ck_assert_uint_eq (crc16_t10dif (0, s, 9), 0xd0db);
  ck_assert_uint_eq (pi_guard_compute (fmt ("T10-DIF-TYPE1-CRC"), s, 9),
                     0xd0db);
  /* CRC-64/NVME. */
  ck_assert (crc64_nvme (0, s, 9) == UINT64_C (0xae8b14860a799888));
  ck_assert (pi_guard_compute (fmt ("EXT-DIF-TYPE1-CRC64"), s, 9) ==
             UINT64_C (0xae8b14860a799888));
  /* CRC-32C: isa-l's crc32_iscsi applies neither init nor xorout. */
  ck_assert_uint_eq (~crc32_iscsi ((unsigned char *) s, 9, 0xffffffff) &
                     0xffffffffu, 0xe3069283u);
  /* Format none has no guard. */
  ck_assert (pi_guard_compute (pi_format_none (), s, 9) == 0);
}
END_TEST

/* ---- the format table ---- */

START_TEST (test_format_table)
{
  static const struct {
    const char *name;
    enum pi_type type;
    enum pi_guard guard;
    unsigned tuple, ref_bits;
    bool needs_4k;
  } want[] = {
    { "none", PI_TYPE_NONE, PI_GUARD_NONE, 0, 0, false },
    { "T10-DIF-TYPE1-CRC", PI_TYPE_1, PI_GUARD_CRC16, 8, 32, false },
    { "T10-DIF-TYPE2-CRC", PI_TYPE_2, PI_GUARD_CRC16, 8, 32, false },
    { "T10-DIF-TYPE3-CRC", PI_TYPE_3, PI_GUARD_CRC16, 8, 32, false },
    { "EXT-DIF-TYPE1-CRC64", PI_TYPE_1, PI_GUARD_CRC64, 16, 48, true },
    { "EXT-DIF-TYPE3-CRC64", PI_TYPE_3, PI_GUARD_CRC64, 16, 48, true },
  };
  const struct pi_format *f;
  size_t i, n;

  for (i = 0; i < sizeof want / sizeof want[0]; i++) {
    f = pi_format_lookup (want[i].name);
    ck_assert_msg (f != NULL, "%s missing", want[i].name);
    ck_assert_str_eq (f->name, want[i].name);
    ck_assert_int_eq (f->type, want[i].type);
    ck_assert_int_eq (f->guard, want[i].guard);
    ck_assert_uint_eq (f->tuple_size, want[i].tuple);
    ck_assert_uint_eq (f->ref_bits, want[i].ref_bits);
    ck_assert_int_eq (f->needs_4k, want[i].needs_4k);
    ck_assert (f->tuple_size <= PI_TUPLE_MAX);
  }

  /* Iteration sees each format exactly once, "none" included. */
  for (n = 0; pi_format_at (n) != NULL; n++)
    ck_assert_ptr_eq (pi_format_lookup (pi_format_at (n)->name),
                      pi_format_at (n));
  ck_assert_uint_eq (n, sizeof want / sizeof want[0]);
  ck_assert_ptr_null (pi_format_at (n + 100));

  ck_assert_ptr_eq (pi_format_none (), pi_format_lookup ("none"));
  /* Names are case-sensitive, as in Linux. */
  ck_assert_ptr_null (pi_format_lookup ("t10-dif-type1-crc"));
  ck_assert_ptr_null (pi_format_lookup ("T10-DIF-TYPE4-CRC"));
  ck_assert_ptr_null (pi_format_lookup (""));
  ck_assert_ptr_null (pi_format_lookup (NULL));
}
END_TEST

/* The list of names in messages and --dump-plugin: every format once,
 * "none" first, the separator between them; cut short, still a string. */
START_TEST (test_format_names)
{
  char buf[256], small[8];

  pi_format_names (buf, sizeof buf, ",");
  ck_assert_str_eq (buf, "none,T10-DIF-TYPE1-CRC,T10-DIF-TYPE2-CRC,"
                    "T10-DIF-TYPE3-CRC,EXT-DIF-TYPE1-CRC64,"
                    "EXT-DIF-TYPE3-CRC64");
  pi_format_names (buf, sizeof buf, ", ");
  ck_assert (strncmp (buf, "none, T10-DIF-TYPE1-CRC, ", 25) == 0);
  memset (small, 'x', sizeof small);
  pi_format_names (small, sizeof small, ",");
  ck_assert_str_eq (small, "none,T1");
  pi_format_names (small, 0, ",");      /* nothing written */
  ck_assert_str_eq (small, "none,T1");
}
END_TEST

/* The interval of a device when none is given: 512, but 4096 for the
 * CRC-64 formats (NVMe's 64-bit guard comes with 4 KiB blocks). */
START_TEST (test_default_interval)
{
  ck_assert_uint_eq (pi_default_interval (pi_format_none ()), 512);
  ck_assert_uint_eq (pi_default_interval (
                       pi_format_lookup ("T10-DIF-TYPE1-CRC")), 512);
  ck_assert_uint_eq (pi_default_interval (
                       pi_format_lookup ("T10-DIF-TYPE3-CRC")), 512);
  ck_assert_uint_eq (pi_default_interval (
                       pi_format_lookup ("EXT-DIF-TYPE1-CRC64")), 4096);
  ck_assert_uint_eq (pi_default_interval (
                       pi_format_lookup ("EXT-DIF-TYPE3-CRC64")), 4096);
}
END_TEST

START_TEST (test_intervals)
{
  static const uint32_t bad[] = { 0, 1, 256, 511, 513, 520, 1000, 1024,
                                  2048, 4104, 8192, UINT32_MAX };
  const struct pi_format *f;
  const char *why;
  size_t i, j;

  for (i = 0; (f = pi_format_at (i)) != NULL; i++) {
    ck_assert_msg (pi_interval_valid (f, 4096, NULL), "%s 4096", f->name);
    /* Every format's default interval is one it allows. */
    ck_assert (pi_interval_valid (f, pi_default_interval (f), NULL));
    why = NULL;
    ck_assert_int_eq (pi_interval_valid (f, 512, &why), !f->needs_4k);
    if (f->needs_4k) {
      /* The explanation says what to do. */
      ck_assert_ptr_nonnull (why);
      ck_assert_msg (strstr (why, "4096") != NULL, "why: %s", why);
      ck_assert_msg (strstr (why, "CRC-64") != NULL, "why: %s", why);
    }
    for (j = 0; j < sizeof bad / sizeof bad[0]; j++) {
      why = NULL;
      ck_assert_msg (!pi_interval_valid (f, bad[j], &why), "%s %u",
                     f->name, bad[j]);
      ck_assert_ptr_nonnull (why);
      ck_assert_msg (strstr (why, "512 or 4096") != NULL, "why: %s", why);
      ck_assert (!pi_interval_valid (f, bad[j], NULL));
    }
  }
}
END_TEST

/* ---- tuples ---- */

START_TEST (test_tuple_t10_bytes)
{
  static const uint8_t want[8] = {
    0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0
  };
  struct pi_tuple t = { .guard = 0x1234, .app = 0x5678, .ref = 0x9abcdef0 };
  struct pi_tuple d;
  uint8_t buf[PI_TUPLE_MAX + 1];
  size_t i;

  for (i = 0; i < 3; i++) {
    const struct pi_format *f = fmt (pi_names[i]);
    memset (buf, 0xa5, sizeof buf);
    pi_tuple_encode (f, &t, buf);
    ck_assert_mem_eq (buf, want, 8);
    ck_assert_uint_eq (buf[8], 0xa5); /* nothing past the tuple */
    pi_tuple_decode (f, want, &d);
    ck_assert (d.guard == 0x1234);
    ck_assert_uint_eq (d.app, 0x5678);
    ck_assert (d.ref == 0x9abcdef0);
  }

  /* Fields wider than the format are truncated to it. */
  t.guard = UINT64_C (0xffffffffffff1234);
  t.ref = UINT64_C (0x77779abcdef0);
  pi_tuple_encode (fmt ("T10-DIF-TYPE1-CRC"), &t, buf);
  ck_assert_mem_eq (buf, want, 8);
}
END_TEST

START_TEST (test_tuple_crc64_bytes)
{
  static const uint8_t want[16] = {
    0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08,   /* guard64 */
    0x09, 0x0a,                                       /* app16 */
    0x0b, 0x0c, 0x0d, 0x0e, 0x0f, 0x10,               /* ref48 */
  };
  struct pi_tuple t = {
    .guard = UINT64_C (0x0102030405060708),
    .app = 0x090a,
    .ref = UINT64_C (0x0b0c0d0e0f10),
  };
  struct pi_tuple d;
  uint8_t buf[PI_TUPLE_MAX + 1];
  size_t i;

  for (i = 3; i < NR_PI_NAMES; i++) {
    const struct pi_format *f = fmt (pi_names[i]);
    memset (buf, 0xa5, sizeof buf);
    pi_tuple_encode (f, &t, buf);
    ck_assert_mem_eq (buf, want, 16);
    ck_assert_uint_eq (buf[16], 0xa5);
    pi_tuple_decode (f, want, &d);
    ck_assert (d.guard == UINT64_C (0x0102030405060708));
    ck_assert_uint_eq (d.app, 0x090a);
    ck_assert (d.ref == UINT64_C (0x0b0c0d0e0f10));
  }

  /* A ref tag wider than 48 bits is truncated. */
  t.ref = UINT64_C (0xffff0b0c0d0e0f10);
  pi_tuple_encode (fmt ("EXT-DIF-TYPE1-CRC64"), &t, buf);
  ck_assert_mem_eq (buf, want, 16);

  /* Decode never produces more than 48 bits of ref. */
  memset (buf, 0xff, 16);
  pi_tuple_decode (fmt ("EXT-DIF-TYPE1-CRC64"), buf, &d);
  ck_assert (d.ref == UINT64_C (0xffffffffffff));
  ck_assert (d.guard == UINT64_MAX);
  ck_assert_uint_eq (d.app, 0xffff);
}
END_TEST

START_TEST (test_tuple_round_trip)
{
  uint8_t buf[PI_TUPLE_MAX], again[PI_TUPLE_MAX];
  struct pi_tuple t;
  size_t i, n;

  for (i = 0; i < NR_PI_NAMES; i++) {
    const struct pi_format *f = fmt (pi_names[i]);
    for (n = 0; n < 1000; n++) {
      rng_fill (buf, f->tuple_size);
      pi_tuple_decode (f, buf, &t);
      pi_tuple_encode (f, &t, again);
      ck_assert_mem_eq (buf, again, f->tuple_size);
    }
  }
}
END_TEST

START_TEST (test_tuple_none)
{
  struct pi_tuple t = { .guard = 1, .app = 2, .ref = 3 };
  uint8_t buf[4] = { 0xa5, 0xa5, 0xa5, 0xa5 };

  pi_tuple_encode (pi_format_none (), &t, buf);
  pi_tuple_set_escape (pi_format_none (), buf);
  ck_assert_uint_eq (buf[0], 0xa5);
  ck_assert (!pi_tuple_escaped (pi_format_none (), buf));
}
END_TEST

START_TEST (test_set_escape)
{
  uint8_t buf[PI_TUPLE_MAX + 1];
  struct pi_tuple t;
  size_t i, j;

  for (i = 0; i < NR_PI_NAMES; i++) {
    const struct pi_format *f = fmt (pi_names[i]);
    memset (buf, 0, sizeof buf);
    pi_tuple_set_escape (f, buf);
    for (j = 0; j < f->tuple_size; j++)
      ck_assert_uint_eq (buf[j], 0xff);
    ck_assert_uint_eq (buf[f->tuple_size], 0);
    ck_assert (pi_tuple_escaped (f, buf));
    pi_tuple_decode (f, buf, &t);
    ck_assert_uint_eq (t.app, 0xffff);
  }
}
END_TEST

START_TEST (test_tuple_escaped)
{
  const struct pi_format *f;
  uint8_t t[PI_TUPLE_MAX];
  size_t i;

  for (i = 0; i < NR_PI_NAMES; i++) {
    f = fmt (pi_names[i]);
    uint64_t ones = f->ref_bits == 32 ? 0xffffffff : UINT64_C (0xffffffffffff);

    /* App all ones: escapes types 1 and 2 whatever the ref; type 3 only
     * with the ref all ones too. */
    hand_tuple (f, t, 0x1234, 0xffff, 7);
    ck_assert_int_eq (pi_tuple_escaped (f, t), f->type != PI_TYPE_3);
    hand_tuple (f, t, 0x1234, 0xffff, ones);
    ck_assert (pi_tuple_escaped (f, t));
    /* Ref all ones alone never escapes. */
    hand_tuple (f, t, 0x1234, 0xfffe, ones);
    ck_assert (!pi_tuple_escaped (f, t));
    hand_tuple (f, t, 0x1234, 0, 0);
    ck_assert (!pi_tuple_escaped (f, t));
  }

  /* Type 3 CRC64: 32 bits of ones in the 48-bit ref are not enough. */
  f = fmt ("EXT-DIF-TYPE3-CRC64");
  hand_tuple (f, t, 0, 0xffff, 0xffffffff);
  ck_assert (!pi_tuple_escaped (f, t));
  hand_tuple (f, t, 0, 0xffff, UINT64_C (0xfffeffffffff));
  ck_assert (!pi_tuple_escaped (f, t));
}
END_TEST

START_TEST (test_ref_for_lba)
{
  const uint64_t lba = UINT64_C (0x123456789abcdef0);

  ck_assert (pi_ref_for_lba (fmt ("T10-DIF-TYPE1-CRC"), lba) == 0x9abcdef0);
  ck_assert (pi_ref_for_lba (fmt ("T10-DIF-TYPE2-CRC"), lba) == 0x9abcdef0);
  ck_assert (pi_ref_for_lba (fmt ("T10-DIF-TYPE3-CRC"), lba) == 0);
  ck_assert (pi_ref_for_lba (fmt ("EXT-DIF-TYPE1-CRC64"), lba) ==
             UINT64_C (0x56789abcdef0));
  ck_assert (pi_ref_for_lba (fmt ("EXT-DIF-TYPE3-CRC64"), lba) == 0);
  ck_assert (pi_ref_for_lba (pi_format_none (), lba) == 0);
  ck_assert (pi_ref_for_lba (fmt ("T10-DIF-TYPE1-CRC"), 5) == 5);
}
END_TEST

START_TEST (test_guard_copy)
{
  static const size_t lens[] = { 0, 1, 7, 8, 15, 16, 511, 512, 520, 4095,
                                 4096, 4097, 8192 + 13, 65536 + 3 };
  enum { MAX = 65536 + 3 };
  uint8_t *src = malloc (MAX), *dst = malloc (MAX + 1);
  const struct pi_format *f;
  size_t i, j;

  ck_assert_ptr_nonnull (src);
  ck_assert_ptr_nonnull (dst);
  rng_fill (src, MAX);
  for (i = 0; (f = pi_format_at (i)) != NULL; i++) {
    for (j = 0; j < sizeof lens / sizeof lens[0]; j++) {
      memset (dst, 0x5a, MAX + 1);
      uint64_t g = pi_guard_copy (f, dst, src, lens[j]);
      ck_assert_mem_eq (dst, src, lens[j]);
      ck_assert_uint_eq (dst[lens[j]], 0x5a);
      if (f->guard == PI_GUARD_NONE)
        ck_assert (g == 0);
      else
        ck_assert_msg (g == true_guard (f, src, lens[j]), "%s len %zu",
                       f->name, lens[j]);
    }
  }
  free (src);
  free (dst);
}
END_TEST

/* A thread that keeps changing a buffer until told to stop. */
struct scribbler {
  uint8_t *buf;                 /* the buffer it changes */
  size_t len;                   /* its size */
  atomic_bool stop;             /* set to end the thread */
};

static void *
scribble (void *arg)
{
  struct scribbler *s = arg;
  size_t i = 0;

  while (!atomic_load (&s->stop)) {
    /* Atomic byte increments: a data race by design, but a defined one. */
    atomic_fetch_add ((_Atomic uint8_t *) &s->buf[i], 1);
    i = (i + 4099) % s->len;
  }
  return NULL;
}

/* The guard pi_guard_copy returns is the guard of what it wrote to DST,
 * even while SRC changes under it (the snapshot policy relies on this). */
START_TEST (test_guard_copy_unstable_source)
{
  enum { LEN = 65536, ROUNDS = 300 };
  struct scribbler s = { .len = LEN };
  uint8_t *dst = malloc (LEN);
  const struct pi_format *f;
  pthread_t th;
  size_t i;
  int r;

  s.buf = malloc (LEN);
  ck_assert_ptr_nonnull (s.buf);
  ck_assert_ptr_nonnull (dst);
  memset (s.buf, 0, LEN);
  atomic_init (&s.stop, false);
  ck_assert_int_eq (pthread_create (&th, NULL, scribble, &s), 0);
  for (i = 0; (f = pi_format_at (i)) != NULL; i++) {
    if (f->guard == PI_GUARD_NONE)
      continue;
    for (r = 0; r < ROUNDS; r++) {
      uint64_t g = pi_guard_copy (f, dst, s.buf, LEN);
      ck_assert_msg (g == true_guard (f, dst, LEN), "%s round %d", f->name, r);
    }
    /* The batched copies (pi_guards_copy, pi_generate_copy): the guard of
     * each block is that of its copy. */
    for (r = 0; r < ROUNDS / 10; r++) {
      struct pi_params p = { .format = f, .interval = 4096 };
      enum { NB = LEN / 4096 };
      uint64_t guards[NB];
      uint8_t tuples[NB * PI_TUPLE_MAX];
      struct pi_tuple t;
      size_t b;

      pi_guards_copy (f, dst, 4096, s.buf, 4096, 4096, NB, guards);
      for (b = 0; b < NB; b++)
        ck_assert_msg (guards[b] == true_guard (f, dst + b * 4096, 4096),
                       "%s pi_guards_copy round %d block %zu", f->name, r, b);
      pi_generate_copy (&p, s.buf, dst, 4096, tuples, f->tuple_size, NB, 0);
      for (b = 0; b < NB; b++) {
        pi_tuple_decode (f, tuples + b * f->tuple_size, &t);
        ck_assert_msg (t.guard == true_guard (f, dst + b * 4096, 4096),
                       "%s pi_generate_copy round %d block %zu", f->name, r,
                       b);
      }
    }
  }
  atomic_store (&s.stop, true);
  pthread_join (th, NULL);
  free (s.buf);
  free (dst);
}
END_TEST

START_TEST (test_check_names)
{
  ck_assert_str_eq (pi_check_name (PI_CHECK_OK), "ok");
  ck_assert_str_eq (pi_check_name (PI_CHECK_GUARD), "guard");
  ck_assert_str_eq (pi_check_name (PI_CHECK_APP), "app");
  ck_assert_str_eq (pi_check_name (PI_CHECK_REF), "ref");
}
END_TEST

/* ---- generate ---- */

/* Generation of one block gives exactly the hand-built tuple, for each
 * format and valid interval. */
START_TEST (test_generate_block)
{
  static uint8_t data[4096];
  uint8_t tuple[PI_TUPLE_MAX + 1], want[PI_TUPLE_MAX];
  const uint64_t lba = UINT64_C (0x0000abcd12345678);
  struct pi_params p;
  size_t i;
  uint32_t iv;

  rng_fill (data, sizeof data);
  for (i = 0; i < NR_PI_NAMES; i++) {
    for (iv = 512; iv <= 4096; iv *= 8) {
      if (!pi_interval_valid (fmt (pi_names[i]), iv, NULL))
        continue;
      p = params (pi_names[i], iv);
      p.app_tag = 0x4321;
      memset (tuple, 0xa5, sizeof tuple);
      pi_generate_block (&p, data, lba, tuple);

      /* app = app_tag; ref = LBA (types 1, 2) or 0 (type 3, as Linux). */
      hand_tuple (p.format, want, true_guard (p.format, data, iv), 0x4321,
                  p.format->type == PI_TYPE_3 ? 0
                  : p.format->ref_bits == 32 ? 0x12345678
                  : UINT64_C (0xabcd12345678));
      ck_assert_mem_eq (tuple, want, p.format->tuple_size);
      ck_assert_uint_eq (tuple[p.format->tuple_size], 0xa5);

      /* And it verifies. */
      bool esc = true;
      struct pi_error e;
      ck_assert_int_eq (pi_verify_block (&p, data, tuple, lba, &esc, &e),
                        PI_CHECK_OK);
      ck_assert (!esc);
    }
  }
}
END_TEST

/* pi_generate_sep_stream (one CRC call per interval, for callers'
 * buffers) writes exactly the tuples of pi_generate_block, for every
 * format and interval, high LBAs included, and nothing past the last. */
START_TEST (test_generate_stream)
{
  enum { N = 9 };
  static uint8_t data[N * 4096];
  uint8_t got[N * PI_TUPLE_MAX + 1], want[N * PI_TUPLE_MAX];
  const uint64_t lba = UINT64_C (0x0000abcdfffffffb); /* ref wraps inside */
  struct pi_params p;
  size_t i, b;
  uint32_t iv;

  rng_fill (data, sizeof data);
  for (i = 0; i < NR_PI_NAMES; i++) {
    for (iv = 512; iv <= 4096; iv *= 8) {
      size_t ts;

      if (!pi_interval_valid (fmt (pi_names[i]), iv, NULL))
        continue;
      p = params (pi_names[i], iv);
      p.app_tag = 0x4321;
      ts = p.format->tuple_size;
      for (b = 0; b < N; b++)
        pi_generate_block (&p, data + b * iv, lba + b, want + b * ts);
      memset (got, 0xa5, sizeof got);
      pi_generate_sep_stream (&p, data, got, N, lba);
      ck_assert_mem_eq (got, want, N * ts);
      ck_assert_uint_eq (got[N * ts], 0xa5);
      /* The same as the batched generator. */
      memset (got, 0x5a, sizeof got);
      pi_generate_sep (&p, data, got, N, lba);
      ck_assert_mem_eq (got, want, N * ts);
    }
  }
}
END_TEST

START_TEST (test_none_is_noop)
{
  struct pi_params p = {
    .format = pi_format_none (), .interval = 512,
  };
  struct pi_verify_stats st = { 0, 0, 0 };
  uint8_t buf[4 * 512], copy[4 * 512], pi[64];
  bool esc = true;
  struct pi_error e;

  rng_fill (buf, sizeof buf);
  memcpy (copy, buf, sizeof buf);
  memset (pi, 0x77, sizeof pi);
  ck_assert_uint_eq (pi_ext_size (&p), 512);
  pi_generate_ext (&p, buf, 4, 0);
  pi_generate_sep (&p, buf, pi, 4, 0);
  pi_generate_block (&p, buf, 0, pi);
  ck_assert_mem_eq (buf, copy, sizeof buf);
  ck_assert_uint_eq (pi[0], 0x77);
  ck_assert_uint_eq (pi_verify_ext (&p, buf, 4, 0, &st, NULL, NULL), 0);
  ck_assert_uint_eq (pi_verify_sep (&p, buf, pi, 4, 0, &st, NULL, NULL), 0);
  ck_assert_int_eq (pi_verify_block (&p, buf, pi, 0, &esc, &e), PI_CHECK_OK);
  ck_assert (!esc);
  ck_assert_uint_eq (st.verified, 0);
  ck_assert_uint_eq (st.escaped, 0);
  ck_assert_uint_eq (st.failed, 0);
}
END_TEST

/* ---- verify one block: each check failing on its own ---- */

/* A block of data with a correct hand-built tuple. */
struct block {
  struct pi_params p;           /* format etc. */
  uint8_t data[4096];           /* p.interval bytes used */
  uint8_t tuple[PI_TUPLE_MAX];  /* correct tuple */
  uint64_t lba;                 /* where it lives */
  uint64_t guard;               /* its true guard */
  uint64_t ref;                 /* its correct ref */
};

static void
make_block (struct block *b, const char *name, uint64_t lba, uint16_t app)
{
  memset (b, 0, sizeof *b);
  b->p = params (name, interval_for (name));
  b->lba = lba;
  rng_fill (b->data, b->p.interval);
  b->guard = true_guard (b->p.format, b->data, b->p.interval);
  b->ref = b->p.format->type == PI_TYPE_3 ? 0
    : lba & (b->p.format->ref_bits == 32 ? 0xffffffff
             : UINT64_C (0xffffffffffff));
  hand_tuple (b->p.format, b->tuple, b->guard, app, b->ref);
}

static enum pi_check
verify (struct block *b, bool *esc, struct pi_error *e)
{
  memset (e, 0xee, sizeof *e);
  *esc = true;
  return pi_verify_block (&b->p, b->data, b->tuple, b->lba, esc, e);
}

START_TEST (test_verify_guard)
{
  struct block b;
  struct pi_error e;
  bool esc;
  size_t i;

  for (i = 0; i < NR_PI_NAMES; i++) {
    /* Data changed after the guard was computed. */
    make_block (&b, pi_names[i], 1000 + i, 0);
    b.data[b.p.interval - 1] ^= 0x01;
    ck_assert_int_eq (verify (&b, &esc, &e), PI_CHECK_GUARD);
    ck_assert (!esc);
    ck_assert_int_eq (e.check, PI_CHECK_GUARD);
    ck_assert (e.lba == 1000 + i);
    ck_assert (e.index == 0);
    ck_assert (e.actual == b.guard);
    ck_assert (e.expected == true_guard (b.p.format, b.data, b.p.interval));
    ck_assert (e.expected != e.actual);

    /* Guard field damaged, data intact. */
    make_block (&b, pi_names[i], 7, 0);
    b.tuple[0] ^= 0x80;
    ck_assert_int_eq (verify (&b, &esc, &e), PI_CHECK_GUARD);
    ck_assert (e.expected == b.guard);
    ck_assert (e.actual ==
               (b.guard ^ (b.p.format->tuple_size == 8 ? 0x8000
                           : UINT64_C (0x8000000000000000))));
  }
}
END_TEST

/* Configure the app tag check of block B. */
static void
set_app (struct block *b, uint16_t tag, uint16_t mask)
{
  b->p.check_app = true;
  b->p.app_tag = tag;
  b->p.app_mask = mask;
}

START_TEST (test_verify_app)
{
  struct block b;
  struct pi_error e;
  bool esc;
  size_t i;

  for (i = 0; i < NR_PI_NAMES; i++) {
    /* Without check_app any app tag passes. */
    make_block (&b, pi_names[i], 3, 0x9999);
    ck_assert_int_eq (verify (&b, &esc, &e), PI_CHECK_OK);

    /* Full mask: must be equal. */
    make_block (&b, pi_names[i], 3, 0x1234);
    set_app (&b, 0x1234, 0xffff);
    ck_assert_int_eq (verify (&b, &esc, &e), PI_CHECK_OK);
    make_block (&b, pi_names[i], 3, 0x1235);
    set_app (&b, 0x1234, 0xffff);
    ck_assert_int_eq (verify (&b, &esc, &e), PI_CHECK_APP);
    ck_assert_int_eq (e.check, PI_CHECK_APP);
    ck_assert (e.expected == 0x1234);
    ck_assert (e.actual == 0x1235);
    ck_assert (e.lba == 3);
    ck_assert (e.index == 0);

    /* Mask 0xff00: only the high byte counts. */
    make_block (&b, pi_names[i], 4, 0x12ab);
    set_app (&b, 0x1234, 0xff00);
    ck_assert_int_eq (verify (&b, &esc, &e), PI_CHECK_OK);
    make_block (&b, pi_names[i], 4, 0x1334);
    set_app (&b, 0x1234, 0xff00);
    ck_assert_int_eq (verify (&b, &esc, &e), PI_CHECK_APP);
    ck_assert (e.expected == 0x1234);
    ck_assert (e.actual == 0x1334);
    ck_assert (e.lba == 4);

    /* Mask 0: nothing is compared. */
    make_block (&b, pi_names[i], 4, 0xbeef);
    set_app (&b, 0x1234, 0);
    ck_assert_int_eq (verify (&b, &esc, &e), PI_CHECK_OK);
  }
}
END_TEST

START_TEST (test_verify_ref)
{
  struct block b;
  struct pi_error e;
  bool esc;
  size_t i;

  for (i = 0; i < NR_PI_NAMES; i++) {
    const struct pi_format *f = fmt (pi_names[i]);

    /* Correct block, then verified at the wrong LBA (a misdirected write). */
    make_block (&b, pi_names[i], 42, 0);
    ck_assert_int_eq (verify (&b, &esc, &e), PI_CHECK_OK);
    b.lba = 43;
    if (f->type == PI_TYPE_3) {
      /* Type 3: the ref tag is not checked, whatever it holds. */
      ck_assert_int_eq (verify (&b, &esc, &e), PI_CHECK_OK);
      hand_tuple (f, b.tuple, b.guard, 0, 0x5555);
      ck_assert_int_eq (verify (&b, &esc, &e), PI_CHECK_OK);
      ck_assert (!esc);
    }
    else {
      ck_assert_int_eq (verify (&b, &esc, &e), PI_CHECK_REF);
      ck_assert_int_eq (e.check, PI_CHECK_REF);
      ck_assert (e.expected == 43);
      ck_assert (e.actual == 42);
      ck_assert (e.lba == 43);
    }
  }

  /* The ref tag is the LBA truncated to its width. */
  make_block (&b, "T10-DIF-TYPE1-CRC", UINT64_C (0x100000007), 0);
  ck_assert (b.ref == 7);
  ck_assert_int_eq (verify (&b, &esc, &e), PI_CHECK_OK);
  b.lba = 7;                    /* same low 32 bits: indistinguishable */
  ck_assert_int_eq (verify (&b, &esc, &e), PI_CHECK_OK);
  make_block (&b, "EXT-DIF-TYPE1-CRC64", UINT64_C (0x1000000000009), 0);
  ck_assert (b.ref == 9);
  ck_assert_int_eq (verify (&b, &esc, &e), PI_CHECK_OK);
  b.lba = UINT64_C (0x1000000000008);
  ck_assert_int_eq (verify (&b, &esc, &e), PI_CHECK_REF);
  ck_assert (e.expected == 8);
  ck_assert (e.actual == 9);
  ck_assert (e.lba == UINT64_C (0x1000000000008));
}
END_TEST

/* Guard first, then app, then ref. */
START_TEST (test_verify_order)
{
  struct block b;
  struct pi_error e;
  bool esc;
  size_t i;

  for (i = 0; i < NR_PI_NAMES; i++) {
    const struct pi_format *f = fmt (pi_names[i]);

    /* Guard and ref both bad: guard reported. */
    make_block (&b, pi_names[i], 10, 0);
    hand_tuple (f, b.tuple, b.guard ^ 1, 0, b.ref + 1);
    set_app (&b, 0x1111, 0xffff);
    ck_assert_int_eq (verify (&b, &esc, &e), PI_CHECK_GUARD);
    ck_assert (e.expected == b.guard);
    ck_assert (e.actual == (b.guard ^ 1));

    /* App and ref bad: app reported. */
    hand_tuple (f, b.tuple, b.guard, 0, b.ref + 1);
    ck_assert_int_eq (verify (&b, &esc, &e), PI_CHECK_APP);
    ck_assert (e.expected == 0x1111);
    ck_assert (e.actual == 0);

    /* Only ref bad. */
    hand_tuple (f, b.tuple, b.guard, 0x1111, b.ref + 1);
    ck_assert_int_eq (verify (&b, &esc, &e),
                      f->type == PI_TYPE_3 ? PI_CHECK_OK : PI_CHECK_REF);
  }
}
END_TEST

/* Escapes: types 1/2 need app all ones (even with a bad guard and ref);
 * type 3 needs app and ref all ones; half an escape is checked. */
START_TEST (test_verify_escape)
{
  struct block b;
  struct pi_error e;
  bool esc;
  size_t i;

  for (i = 0; i < NR_PI_NAMES; i++) {
    const struct pi_format *f = fmt (pi_names[i]);
    uint64_t ones = f->ref_bits == 32 ? 0xffffffff : UINT64_C (0xffffffffffff);

    make_block (&b, pi_names[i], 5, 0);
    set_app (&b, 0x1234, 0xffff); /* escape wins over the app check too */

    /* App all ones, bad guard, bad ref. */
    hand_tuple (f, b.tuple, b.guard ^ 0xff, 0xffff, b.ref + 9);
    if (f->type == PI_TYPE_3) {
      ck_assert_int_eq (verify (&b, &esc, &e), PI_CHECK_GUARD);
      ck_assert (!esc);
      ck_assert (e.actual == (b.guard ^ 0xff));
    }
    else {
      ck_assert_int_eq (verify (&b, &esc, &e), PI_CHECK_OK);
      ck_assert (esc);
    }

    /* App and ref all ones, bad guard: escapes in every type. */
    hand_tuple (f, b.tuple, b.guard ^ 0xff, 0xffff, ones);
    ck_assert_int_eq (verify (&b, &esc, &e), PI_CHECK_OK);
    ck_assert (esc);

    /* All-ones tuple (never written) over any data. */
    pi_tuple_set_escape (f, b.tuple);
    ck_assert_int_eq (verify (&b, &esc, &e), PI_CHECK_OK);
    ck_assert (esc);

    /* Ref all ones but app not: no escape, guard checked. */
    hand_tuple (f, b.tuple, b.guard ^ 0xff, 0x1234, ones);
    ck_assert_int_eq (verify (&b, &esc, &e), PI_CHECK_GUARD);
    ck_assert (!esc);
  }

  /* Type 3 CRC64 with only 32 of its 48 ref bits set: checked. */
  make_block (&b, "EXT-DIF-TYPE3-CRC64", 5, 0);
  hand_tuple (b.p.format, b.tuple, b.guard ^ 1, 0xffff, 0xffffffff);
  ck_assert_int_eq (verify (&b, &esc, &e), PI_CHECK_GUARD);
  ck_assert (!esc);
}
END_TEST

/* NULL escaped/err pointers are allowed. */
START_TEST (test_verify_null_outputs)
{
  struct block b;

  make_block (&b, "T10-DIF-TYPE1-CRC", 1, 0);
  ck_assert_int_eq (pi_verify_block (&b.p, b.data, b.tuple, 1, NULL, NULL),
                    PI_CHECK_OK);
  ck_assert_int_eq (pi_verify_block (&b.p, b.data, b.tuple, 2, NULL, NULL),
                    PI_CHECK_REF);
}
END_TEST

/* ---- buffers ---- */

/* What the error callback saw. */
struct seen {
  size_t n;                     /* calls */
  struct pi_error err[64];      /* their arguments */
};

static void
record (void *opaque, const struct pi_error *err)
{
  struct seen *s = opaque;

  ck_assert (s->n < 64);
  s->err[s->n++] = *err;
}

/* Generate a 16-block buffer (extended layout if EXT, else separate),
 * check every tuple byte by byte, then damage blocks 2 (guard), 5 (ref,
 * caught by types 1/2 only), 9 (app), 12 (escape over bad data) and 15
 * (guard and ref) and check everything verify reports. */
static void
buffer_case (const char *name, bool ext)
{
  enum { N = 16 };
  const uint64_t lba0 = 0xfffffff8; /* crosses 2^32: ref wraps for T10 */
  struct pi_params p = params (name, interval_for (name));
  const struct pi_format *f = p.format;
  const size_t es = pi_ext_size (&p), ts = f->tuple_size;
  uint8_t *buf = malloc (N * es), *data = malloc (N * p.interval);
  uint8_t *pi = malloc (N * ts);
  struct pi_verify_stats st = { 0, 0, 0 };
  struct seen seen = { 0 };
  struct pi_tuple t;
  uint64_t failed, i;
  bool type3 = f->type == PI_TYPE_3;
  uint8_t *tp, *dp;

  ck_assert_ptr_nonnull (buf);
  ck_assert_ptr_nonnull (data);
  ck_assert_ptr_nonnull (pi);
  p.check_app = true;
  p.app_tag = 0x0a0b;
  p.app_mask = 0xffff;

  rng_fill (data, N * p.interval);
  if (ext) {
    pi_join_ext (&p, data, pi, buf, N); /* tuples garbage, then generate */
    pi_generate_ext (&p, buf, N, lba0);
  }
  else
    pi_generate_sep (&p, data, pi, N, lba0);

  /* Check the generated tuples byte by byte. */
  for (i = 0; i < N; i++) {
    uint8_t want[PI_TUPLE_MAX];
    dp = ext ? buf + i * es : data + i * p.interval;
    tp = ext ? buf + i * es + p.interval : pi + i * ts;
    hand_tuple (f, want, true_guard (f, dp, p.interval), 0x0a0b,
                type3 ? 0 : (lba0 + i) & (ts == 8 ? 0xffffffff
                                          : UINT64_C (0xffffffffffff)));
    ck_assert_mem_eq (tp, want, ts);
  }
  ck_assert_uint_eq (ext ? pi_verify_ext (&p, buf, N, lba0, &st, record, &seen)
                     : pi_verify_sep (&p, data, pi, N, lba0, &st,
                                      record, &seen), 0);
  ck_assert_uint_eq (seen.n, 0);
  ck_assert_uint_eq (st.verified, N);

#define DATA(i) (ext ? buf + (i) * es : data + (i) * p.interval)
#define TUPLE(i) (ext ? buf + (i) * es + p.interval : pi + (i) * ts)
  DATA (2)[100] ^= 0x40;                        /* guard */
  pi_tuple_decode (f, TUPLE (5), &t);           /* ref */
  t.ref ^= 0x10;
  pi_tuple_encode (f, &t, TUPLE (5));
  pi_tuple_decode (f, TUPLE (9), &t);           /* app */
  t.app = 0x0a0c;
  pi_tuple_encode (f, &t, TUPLE (9));
  DATA (12)[0] ^= 1;                            /* escaped, bad data */
  pi_tuple_set_escape (f, TUPLE (12));
  DATA (15)[7] ^= 1;                            /* guard and ref */
  pi_tuple_decode (f, TUPLE (15), &t);
  t.ref ^= 1;
  pi_tuple_encode (f, &t, TUPLE (15));

  memset (&st, 0, sizeof st);
  failed = ext ? pi_verify_ext (&p, buf, N, lba0, &st, record, &seen)
    : pi_verify_sep (&p, data, pi, N, lba0, &st, record, &seen);

  /* Every failing block is reported, in order, with its own details. */
  ck_assert_uint_eq (failed, type3 ? 3 : 4);
  ck_assert_uint_eq (seen.n, failed);
  ck_assert_uint_eq (st.failed, failed);
  ck_assert_uint_eq (st.escaped, 1);
  ck_assert_uint_eq (st.verified, N - 1);
  i = 0;
  ck_assert (seen.err[i].index == 2);
  ck_assert (seen.err[i].lba == lba0 + 2);
  ck_assert_int_eq (seen.err[i].check, PI_CHECK_GUARD);
  ck_assert (seen.err[i].expected == true_guard (f, DATA (2), p.interval));
  pi_tuple_decode (f, TUPLE (2), &t);
  ck_assert (seen.err[i].actual == t.guard);
  i++;
  if (!type3) {
    ck_assert (seen.err[i].index == 5);
    ck_assert (seen.err[i].lba == lba0 + 5);
    ck_assert_int_eq (seen.err[i].check, PI_CHECK_REF);
    ck_assert (seen.err[i].expected == pi_ref_for_lba (f, lba0 + 5));
    ck_assert (seen.err[i].actual == (pi_ref_for_lba (f, lba0 + 5) ^ 0x10));
    i++;
  }
  ck_assert (seen.err[i].index == 9);
  ck_assert (seen.err[i].lba == lba0 + 9);
  ck_assert_int_eq (seen.err[i].check, PI_CHECK_APP);
  ck_assert (seen.err[i].expected == 0x0a0b);
  ck_assert (seen.err[i].actual == 0x0a0c);
  i++;
  ck_assert (seen.err[i].index == 15);
  ck_assert (seen.err[i].lba == lba0 + 15);
  ck_assert_int_eq (seen.err[i].check, PI_CHECK_GUARD);

  /* Stats add up over calls; NULL callback and stats are allowed. */
  failed = ext ? pi_verify_ext (&p, buf, N, lba0, &st, NULL, NULL)
    : pi_verify_sep (&p, data, pi, N, lba0, &st, NULL, NULL);
  ck_assert_uint_eq (st.failed, 2 * failed);
  ck_assert_uint_eq (st.escaped, 2);
  ck_assert_uint_eq (st.verified, 2 * (N - 1));
  ck_assert_uint_eq (ext ? pi_verify_ext (&p, buf, N, lba0, NULL, NULL, NULL)
                     : pi_verify_sep (&p, data, pi, N, lba0, NULL, NULL, NULL),
                     failed);

  /* A sub-range starting at block 3 with the right LBA: blocks 5, 9, 12
   * (escaped) and 15 in it, reported with indexes relative to it. */
  seen.n = 0;
  failed = ext ? pi_verify_ext (&p, buf + 3 * es, N - 3, lba0 + 3, NULL,
                                record, &seen)
    : pi_verify_sep (&p, data + 3 * p.interval, pi + 3 * ts, N - 3, lba0 + 3,
                     NULL, record, &seen);
  ck_assert_uint_eq (failed, type3 ? 2 : 3);
  ck_assert (seen.err[0].index == (type3 ? 6 : 2));
  ck_assert (seen.err[0].lba == lba0 + (type3 ? 9 : 5));

  /* Zero blocks: nothing happens. */
  ck_assert_uint_eq (ext ? pi_verify_ext (&p, buf, 0, lba0, NULL, record, &seen)
                     : pi_verify_sep (&p, data, pi, 0, lba0, NULL, record,
                                      &seen), 0);
#undef DATA
#undef TUPLE
  free (buf);
  free (data);
  free (pi);
}

/* The 48-bit ref tag of the CRC-64 Type 1 format: a ref tag that differs
 * from the LBA's only in bits 32..47 (right low 32 bits) fails the ref
 * check, for one block and in buffers whose LBAs cross 2^32. */
START_TEST (test_verify_ref_48_bits)
{
  static const uint64_t lbas[] = {
    UINT64_C (0x100000005), UINT64_C (0x100000000), UINT64_C (0xabcd00000007),
    UINT64_C (0xfffffffffffe), UINT64_C (0x1000100000005),
  };
  const uint64_t mask48 = UINT64_C (0xffffffffffff), bit32 = UINT64_C (1) << 32;
  const char *name = "EXT-DIF-TYPE1-CRC64";
  struct block b;
  struct pi_error e;
  bool esc;
  size_t i;

  for (i = 0; i < sizeof lbas / sizeof lbas[0]; i++) {
    const uint64_t want = lbas[i] & mask48, wrong = want ^ bit32;

    make_block (&b, name, lbas[i], 0);
    ck_assert (b.ref == want);
    ck_assert_int_eq (verify (&b, &esc, &e), PI_CHECK_OK);
    ck_assert (pi_ref_for_lba (b.p.format, lbas[i]) == want);
    /* The ref of LBA - 2^32 (or + 2^32): same low 32 bits. */
    hand_tuple (b.p.format, b.tuple, b.guard, 0, wrong);
    ck_assert_int_eq (verify (&b, &esc, &e), PI_CHECK_REF);
    ck_assert (!esc);
    ck_assert (e.expected == want);
    ck_assert (e.actual == wrong);
    ck_assert (e.lba == lbas[i]);
  }
  /* LBA 5 with the ref of 2^32 + 5. */
  make_block (&b, name, 5, 0);
  hand_tuple (b.p.format, b.tuple, b.guard, 0, bit32 + 5);
  ck_assert_int_eq (verify (&b, &esc, &e), PI_CHECK_REF);
  ck_assert (e.expected == 5 && e.actual == bit32 + 5);
}
END_TEST

/* Buffers of 20 blocks from LBA 2^32 - 10, generated and verified in
 * both layouts: each generated ref tag is its LBA's 48 bits; a block
 * whose ref is its LBA - 2^32 fails, once, named by its LBA. */
START_TEST (test_verify_ref_48_bits_buffers)
{
  const struct pi_params p = params ("EXT-DIF-TYPE1-CRC64", 4096);
  const uint64_t lba0 = (UINT64_C (1) << 32) - 10, n = 20;
  const size_t es = pi_ext_size (&p), ts = p.format->tuple_size;
  uint8_t *buf = malloc (n * es), *data = malloc (n * p.interval);
  uint8_t *pi = malloc (n * ts);
  struct seen seen = { 0 };
  struct pi_tuple t;
  uint64_t i, bad;

  ck_assert (buf && data && pi);
  rng_fill (data, n * p.interval);
  pi_generate_sep (&p, data, pi, n, lba0);
  pi_join_ext (&p, data, pi, buf, n);
  for (i = 0; i < n; i++) {
    pi_tuple_decode (p.format, pi + i * ts, &t);
    ck_assert (t.ref == lba0 + i);
  }
  ck_assert_uint_eq (pi_verify_ext (&p, buf, n, lba0, NULL, record, &seen),
                     0);
  ck_assert_uint_eq (pi_verify_sep (&p, data, pi, n, lba0, NULL, record,
                                    &seen), 0);
  for (bad = 9; bad < n; bad += 10) {   /* before 2^32, then after */
    uint8_t *tp = pi + bad * ts;

    pi_tuple_decode (p.format, tp, &t);
    t.ref ^= UINT64_C (1) << 32;
    pi_tuple_encode (p.format, &t, tp);
    pi_join_ext (&p, data, pi, buf, n);
    seen.n = 0;
    ck_assert_uint_eq (pi_verify_ext (&p, buf, n, lba0, NULL, record, &seen),
                       1);
    ck_assert_uint_eq (pi_verify_sep (&p, data, pi, n, lba0, NULL, record,
                                      &seen), 1);
    for (i = 0; i < 2; i++) {
      ck_assert_int_eq (seen.err[i].check, PI_CHECK_REF);
      ck_assert (seen.err[i].lba == lba0 + bad);
      ck_assert (seen.err[i].index == bad);
    }
    t.ref ^= UINT64_C (1) << 32;          /* put it back */
    pi_tuple_encode (p.format, &t, tp);
  }
  free (buf);
  free (data);
  free (pi);
}
END_TEST

START_TEST (test_verify_ext_buffer)
{
  size_t i;

  for (i = 0; i < NR_PI_NAMES; i++)
    buffer_case (pi_names[i], true);
}
END_TEST

START_TEST (test_verify_sep_buffer)
{
  size_t i;

  for (i = 0; i < NR_PI_NAMES; i++)
    buffer_case (pi_names[i], false);
}
END_TEST

/* Buffers longer than the batches in which pi.c computes the CRC-16
 * guards (16 blocks): 40 blocks, in which one whole batch and the blocks
 * at the edges of the others escape (some over damaged data) and the
 * blocks just inside those edges have a bad guard.  Generation across the
 * batches gives what pi_generate_block gives, and verify reports exactly
 * the bad blocks, in order, with their own details. */
static void
batches_case (const char *name, bool ext)
{
  enum { N = 40 };
  static const size_t escape[] = { 0, 15, 32, 39 }; /* and 16..31 */
  static const size_t bad[] = { 1, 14, 33, 38 };
  const uint64_t lba0 = 1000;
  struct pi_params p = params (name, interval_for (name));
  const struct pi_format *f = p.format;
  const size_t es = pi_ext_size (&p), ts = f->tuple_size;
  uint8_t *buf = malloc (N * es), *data = malloc (N * p.interval);
  uint8_t *pi = malloc (N * ts), want[PI_TUPLE_MAX];
  struct pi_verify_stats st = { 0, 0, 0 };
  struct seen seen = { 0 };
  struct pi_tuple t;
  uint64_t failed;
  size_t i, k;

  ck_assert_ptr_nonnull (buf);
  ck_assert_ptr_nonnull (data);
  ck_assert_ptr_nonnull (pi);
  rng_fill (data, N * p.interval);
  rng_fill (pi, N * ts);
  if (ext) {
    pi_join_ext (&p, data, pi, buf, N);
    pi_generate_ext (&p, buf, N, lba0);
  }
  else
    pi_generate_sep (&p, data, pi, N, lba0);

#define DATA(i) (ext ? buf + (i) * es : data + (i) * p.interval)
#define TUPLE(i) (ext ? buf + (i) * es + p.interval : pi + (i) * ts)
  for (i = 0; i < N; i++) {
    pi_generate_block (&p, DATA (i), lba0 + i, want);
    ck_assert_msg (memcmp (TUPLE (i), want, ts) == 0,
                   "%s: block %zu: generated tuple differs", name, i);
  }

  for (i = 16; i < 32; i++)
    pi_tuple_set_escape (f, TUPLE (i));
  for (k = 0; k < 4; k++)
    pi_tuple_set_escape (f, TUPLE (escape[k]));
  DATA (0)[3] ^= 1;                             /* escaped: not checked */
  DATA (20)[9] ^= 1;
  DATA (39)[p.interval - 1] ^= 1;
  for (k = 0; k < 4; k++)
    DATA (bad[k])[k * 7] ^= 0x80;

  failed = ext ? pi_verify_ext (&p, buf, N, lba0, &st, record, &seen)
    : pi_verify_sep (&p, data, pi, N, lba0, &st, record, &seen);
  ck_assert_uint_eq (failed, 4);
  ck_assert_uint_eq (seen.n, 4);
  ck_assert_uint_eq (st.failed, 4);
  ck_assert_uint_eq (st.escaped, 20);
  ck_assert_uint_eq (st.verified, N - 20);
  for (k = 0; k < 4; k++) {
    ck_assert (seen.err[k].index == bad[k]);
    ck_assert (seen.err[k].lba == lba0 + bad[k]);
    ck_assert_int_eq (seen.err[k].check, PI_CHECK_GUARD);
    ck_assert (seen.err[k].expected ==
               true_guard (f, DATA (bad[k]), p.interval));
    pi_tuple_decode (f, TUPLE (bad[k]), &t);
    ck_assert (seen.err[k].actual == t.guard);
  }
#undef DATA
#undef TUPLE
  free (buf);
  free (data);
  free (pi);
}

START_TEST (test_verify_batches)
{
  size_t i;

  for (i = 0; i < NR_PI_NAMES; i++) {
    batches_case (pi_names[i], true);
    batches_case (pi_names[i], false);
  }
}
END_TEST
/* The CRC-16 formats at both intervals: generate, verify, then one flipped
 * bit in the last byte of the last block is caught. */
START_TEST (test_intervals_round_trip)
{
  enum { N = 5 };
  static uint8_t buf[N * (4096 + 8)];
  uint32_t iv;
  size_t i;

  for (i = 0; i < 3; i++) {
    for (iv = 512; iv <= 4096; iv *= 8) {
      struct pi_params p = params (pi_names[i], iv);
      rng_fill (buf, sizeof buf);
      pi_generate_ext (&p, buf, N, 77);
      ck_assert_uint_eq (pi_verify_ext (&p, buf, N, 77, NULL, NULL, NULL), 0);
      buf[(N - 1) * pi_ext_size (&p) + iv - 1] ^= 2; /* last data byte */
      ck_assert_uint_eq (pi_verify_ext (&p, buf, N, 77, NULL, NULL, NULL), 1);
    }
  }
}
END_TEST

START_TEST (test_split_join)
{
  enum { N = 7 };
  static uint8_t ext[N * (4096 + 16)], ext2[N * (4096 + 16) + 1];
  static uint8_t data[N * 4096], pi[N * 16];
  const struct pi_format *f;
  size_t i, b;

  FOR_EACH_FORMAT_INTERVAL (i, f, iv) {
    struct pi_params p = { .format = f, .interval = iv };
    const size_t es = pi_ext_size (&p), ts = f->tuple_size;

    rng_fill (ext, sizeof ext);
    memset (data, 0, sizeof data);
    memset (pi, 0, sizeof pi);
    pi_split_ext (&p, ext, data, pi, N);
    for (b = 0; b < N; b++) {
      ck_assert_mem_eq (data + b * p.interval, ext + b * es, p.interval);
      if (ts)
        ck_assert_mem_eq (pi + b * ts, ext + b * es + p.interval, ts);
    }
    memset (ext2, 0, sizeof ext2);
    pi_join_ext (&p, data, pi, ext2, N);
    ck_assert_mem_eq (ext2, ext, N * es);
    ck_assert_uint_eq (ext2[N * es], 0); /* nothing written past the end */

    /* Split with the tuples dropped. */
    memset (data, 0, sizeof data);
    pi_split_ext (&p, ext, data, NULL, N);
    for (b = 0; b < N; b++)
      ck_assert_mem_eq (data + b * p.interval, ext + b * es, p.interval);
  }
}
END_TEST

/* A random buffer of N extended blocks of P, generated at LBA, then damaged
 * at random: some data bytes (guard), some ref and app tags, some tuples
 * escaped (over good or bad data), now and then a whole batch escaped. */
static void
random_damage (const struct pi_params *p, uint8_t *ext, uint64_t n,
               uint64_t lba)
{
  const struct pi_format *f = p->format;
  const size_t es = pi_ext_size (p);
  struct pi_tuple t;
  uint64_t b;

  rng_fill (ext, n * es);
  pi_generate_ext (p, ext, n, lba);
  if (f->tuple_size == 0)
    return;
  for (b = 0; b < n; b++) {
    uint8_t *tp = ext + b * es + p->interval;

    switch (rng_next () % 8) {
    case 0:                     /* bad data */
      ext[b * es + rng_next () % p->interval] ^= 1u << (rng_next () % 8);
      break;
    case 1:                     /* bad ref tag */
      pi_tuple_decode (f, tp, &t);
      t.ref ^= 4;
      pi_tuple_encode (f, &t, tp);
      break;
    case 2:                     /* bad app tag */
      pi_tuple_decode (f, tp, &t);
      t.app ^= 0x100;
      pi_tuple_encode (f, &t, tp);
      break;
    case 3:                     /* escaped over bad data */
      ext[b * es] ^= 0x80;
      pi_tuple_set_escape (f, tp);
      break;
    default:
      break;
    }
  }
  if (n > 20 && rng_next () % 2)        /* one whole batch of 16 escaped */
    for (b = 16; b < 32 && b < n; b++)
      pi_tuple_set_escape (f, ext + b * es + p->interval);
}

/* pi_verify_split_ext gives exactly what pi_verify_ext then pi_split_ext
 * give: failures (count, callbacks with all their details, stats), data
 * and tuples; with the tuples dropped too; and writes nothing past the
 * data or the tuples. */
START_TEST (test_verify_split)
{
  enum { N = 37, ROUNDS = 40, CANARY = 0xc3 };
  static const uint64_t counts[] = { 0, 1, 3, 16, 17, N };
  const struct pi_format *f;
  size_t i, c, r;

  rng_seed (41);
  FOR_EACH_FORMAT_INTERVAL (i, f, iv) {
    struct pi_params p = params (f->name, iv);
    const size_t es = pi_ext_size (&p), ts = f->tuple_size;
    uint8_t *ext = malloc (N * es);
    uint8_t *d1 = malloc (N * iv + 1), *d2 = malloc (N * iv + 1);
    uint8_t *t1 = malloc (N * ts + 1), *t2 = malloc (N * ts + 1);

    ck_assert (ext && d1 && d2 && t1 && t2);
    p.check_app = true;
    p.app_tag = 0x1234;
    p.app_mask = 0xffff;
    for (r = 0; r < ROUNDS; r++)
      for (c = 0; c < sizeof counts / sizeof counts[0]; c++) {
        const uint64_t n = counts[c], lba = rng_next () % 100000;
        struct pi_verify_stats st1 = { 0 }, st2 = { 0 };
        struct seen s1 = { 0 }, s2 = { 0 };
        uint64_t f1, f2;
        size_t k;

        random_damage (&p, ext, n, lba);
        memset (d1, 0, N * iv + 1);
        memset (d2, CANARY, N * iv + 1);
        memset (t1, 0, N * ts + 1);
        memset (t2, CANARY, N * ts + 1);
        f1 = pi_verify_ext (&p, ext, n, lba, &st1, record, &s1);
        pi_split_ext (&p, ext, d1, t1, n);
        f2 = pi_verify_split_ext (&p, ext, d2, r % 2 ? NULL : t2, n, lba,
                                  &st2, record, &s2);
        ck_assert_msg (f1 == f2, "%s/%u: %" PRIu64 " blocks: failed %"
                       PRIu64 " against %" PRIu64, f->name, iv, n, f2, f1);
        ck_assert_mem_eq (&st1, &st2, sizeof st1);
        ck_assert_uint_eq (s1.n, s2.n);
        for (k = 0; k < s1.n; k++) {
          ck_assert_uint_eq (s1.err[k].index, s2.err[k].index);
          ck_assert_uint_eq (s1.err[k].lba, s2.err[k].lba);
          ck_assert_int_eq (s1.err[k].check, s2.err[k].check);
          ck_assert_uint_eq (s1.err[k].expected, s2.err[k].expected);
          ck_assert_uint_eq (s1.err[k].actual, s2.err[k].actual);
        }
        ck_assert_mem_eq (d1, d2, n * iv);
        ck_assert_uint_eq (d2[n * iv], CANARY);
        if (r % 2)
          ck_assert_uint_eq (t2[0], CANARY);   /* tuples dropped */
        else {
          if (n * ts > 0)
            ck_assert_mem_eq (t1, t2, n * ts);
          ck_assert_uint_eq (t2[n * ts], CANARY);
        }
      }
    free (ext);
    free (d1);
    free (d2);
    free (t1);
    free (t2);
  }
}
END_TEST

/* pi_generate_copy gives the copy and the tuples pi_generate_sep gives
 * over the source, packed with separate tuples and in the extended
 * layout (what pi_join_ext builds from them); pi_guards_copy gives the
 * true guard of every block copied, packed or spaced.  Nothing is
 * written past the end. */
START_TEST (test_generate_copy)
{
  enum { N = 37, CANARY = 0x3c };
  static const uint64_t counts[] = { 0, 1, 5, 16, N };
  const struct pi_format *f;
  size_t i, c, b;

  rng_seed (42);
  FOR_EACH_FORMAT_INTERVAL (i, f, iv) {
    struct pi_params p = params (f->name, iv);
    const size_t es = pi_ext_size (&p), ts = f->tuple_size;
    uint8_t *src = malloc (N * iv), *copy = malloc (N * es + 1);
    uint8_t *want = malloc (N * es + 1), *tuples = malloc (N * ts + 1);
    uint8_t *ref = malloc (N * ts + 1);
    uint64_t guards[N];

    ck_assert (src && copy && want && tuples && ref);
    p.app_tag = 0xbeef;
    for (c = 0; c < sizeof counts / sizeof counts[0]; c++) {
      const uint64_t n = counts[c], lba = 0xfffffff0 + c;

      rng_fill (src, N * iv);
      pi_generate_sep (&p, src, ref, n, lba);

      /* Packed copy, tuples apart. */
      memset (copy, CANARY, N * es + 1);
      memset (tuples, CANARY, N * ts + 1);
      pi_generate_copy (&p, src, copy, iv, tuples, ts, n, lba);
      if (n > 0)
        ck_assert_mem_eq (copy, src, n * iv);
      ck_assert_uint_eq (copy[n * iv], CANARY);
      if (n * ts > 0)
        ck_assert_mem_eq (tuples, ref, n * ts);
      ck_assert_uint_eq (tuples[n * ts], CANARY);

      /* Extended layout. */
      memset (copy, CANARY, N * es + 1);
      memset (want, CANARY, N * es + 1);
      pi_join_ext (&p, src, ref, want, n);
      pi_generate_copy (&p, src, copy, es, copy + iv, es, n, lba);
      ck_assert_mem_eq (copy, want, n * es + 1);

      /* Guards of copies, packed to extended and back. */
      if (f->guard == PI_GUARD_NONE)
        continue;
      memset (copy, CANARY, N * es + 1);
      pi_guards_copy (f, copy, es, src, iv, iv, n, guards);
      for (b = 0; b < n; b++) {
        ck_assert_mem_eq (copy + b * es, src + b * iv, iv);
        ck_assert (guards[b] == true_guard (f, src + b * iv, iv));
        ck_assert_uint_eq (copy[b * es + iv], CANARY);
      }
      pi_guards_copy (f, src, iv, copy, es, iv, n, guards);
      for (b = 0; b < n; b++)
        ck_assert (guards[b] == true_guard (f, src + b * iv, iv));
    }
    free (src);
    free (copy);
    free (want);
    free (tuples);
    free (ref);
  }
}
END_TEST

static Suite *
pi_suite (void)
{
  Suite *s = suite_create ("pi");
  TCase *tc;

  tc = tcase_create ("formats");
  tcase_add_test (tc, test_check_values);
  tcase_add_test (tc, test_format_table);
  tcase_add_test (tc, test_format_names);
  tcase_add_test (tc, test_intervals);
  tcase_add_test (tc, test_default_interval);
  tcase_add_test (tc, test_check_names);
  suite_add_tcase (s, tc);

  tc = tcase_create ("tuples");
  tcase_add_test (tc, test_tuple_t10_bytes);
  tcase_add_test (tc, test_tuple_crc64_bytes);
  tcase_add_test (tc, test_tuple_round_trip);
  tcase_add_test (tc, test_tuple_none);
  tcase_add_test (tc, test_set_escape);
  tcase_add_test (tc, test_tuple_escaped);
  tcase_add_test (tc, test_ref_for_lba);
  tcase_add_test (tc, test_guard_copy);
  tcase_add_test (tc, test_guard_copy_unstable_source);
  suite_add_tcase (s, tc);

  tc = tcase_create ("block");
  tcase_add_test (tc, test_generate_block);
  tcase_add_test (tc, test_none_is_noop);
  tcase_add_test (tc, test_verify_guard);
  tcase_add_test (tc, test_verify_app);
  tcase_add_test (tc, test_verify_ref);
  tcase_add_test (tc, test_verify_order);
  tcase_add_test (tc, test_verify_escape);
  tcase_add_test (tc, test_verify_null_outputs);
  suite_add_tcase (s, tc);

  tc = tcase_create ("buffers");
  tcase_add_test (tc, test_verify_ext_buffer);
  tcase_add_test (tc, test_verify_sep_buffer);
  tcase_add_test (tc, test_verify_ref_48_bits);
  tcase_add_test (tc, test_verify_ref_48_bits_buffers);
  tcase_add_test (tc, test_intervals_round_trip);
  tcase_add_test (tc, test_verify_batches);
  tcase_add_test (tc, test_split_join);
  tcase_add_test (tc, test_verify_split);
  tcase_add_test (tc, test_generate_copy);
  tcase_add_test (tc, test_generate_stream);
  suite_add_tcase (s, tc);
  return s;
}

int
main (void)
{
  SRunner *sr = srunner_create (pi_suite ());
  int failed;

  srunner_run_all (sr, CK_ENV);
  failed = srunner_ntests_failed (sr);
  srunner_free (sr);
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
