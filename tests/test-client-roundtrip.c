/* SPDX-License-Identifier: BSD-3-Clause */
/* stabledif: libstabledif round trips against the real plugin.
 *
 *   test-client-roundtrip URI FORMAT INTERVAL SIZE [APP-TAG]
 *
 * Connects (the URI names no export: the library must pick "dif"),
 * checks the profile getters against what the server was started with,
 * then writes and reads back under every policy the device allows,
 * synchronously and from several threads asynchronously, including a
 * request larger than one NBD command, and checks the data and every
 * tuple (guard of the data, the device's app tag, ref from the LBA), the
 * escape PI of never-written blocks, argument errors and the counters.
 */
#include <config.h>

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "pi.h"
#include "test-client-util.h"

static struct stabledif_handle *h;
static const struct pi_format *fmt;   /* expected format */
static uint32_t iv;                   /* interval */
static unsigned ts;                   /* tuple size */
static uint64_t writes_done;          /* writes this program completed */
static uint16_t app_tag;              /* app tag the device was given */

/* Check NB blocks at LBA read back as DATA with TUPLES. */
static void
check_pi (const uint8_t *data, const uint8_t *tuples, uint64_t nb,
          uint64_t lba, const char *what)
{
  uint64_t i;

  for (i = 0; i < nb; ++i) {
    struct pi_tuple t;

    if (ts == 0)
      break;
    pi_tuple_decode (fmt, tuples + i * ts, &t);
    CHECK (t.guard == pi_guard_compute (fmt, data + i * iv, iv),
           "%s: LBA %" PRIu64 ": guard 0x%" PRIx64 " is not the guard of "
           "the data", what, lba + i, t.guard);
    CHECK (t.app == app_tag, "%s: LBA %" PRIu64 ": app 0x%x, want 0x%x",
           what, lba + i, t.app, app_tag);
    CHECK (t.ref == pi_ref_for_lba (fmt, lba + i),
           "%s: LBA %" PRIu64 ": ref 0x%" PRIx64, what, lba + i, t.ref);
  }
}

/* Write NB blocks at LBA from SEED, read them back, compare. */
static void
roundtrip (uint64_t lba, uint64_t nb, uint64_t seed, uint32_t flags,
           const char *what)
{
  size_t len = nb * iv;
  uint8_t *w = xmalloc (len), *r = xmalloc (len);
  uint8_t *pi = xmalloc (nb * ts + 1);

  fill_pattern (w, len, seed);
  OK (stabledif_pwrite (h, w, len, lba * iv, flags));
  writes_done++;
  memset (r, 0, len);
  pi[nb * ts] = 0x77;
  OK (stabledif_pread (h, r, len, lba * iv, pi, 0));
  CHECK (memcmp (w, r, len) == 0, "%s: data read back differs", what);
  CHECK (pi[nb * ts] == 0x77, "%s: tuple buffer overrun", what);
  check_pi (r, pi, nb, lba, what);
  /* And without asking for the tuples. */
  memset (r, 0, len);
  OK (stabledif_pread (h, r, len, lba * iv, NULL, 0));
  CHECK (memcmp (w, r, len) == 0, "%s: data read back (no pi) differs", what);
  free (w); free (r); free (pi);
}

static void
test_profile (const char *format, uint64_t size)
{
  const char *prof = stabledif_get_profile (h);
  bool stable = fmt->guard != PI_GUARD_NONE;

  CHECK (prof && strncmp (prof, "stabledif/1 view=dif ", 21) == 0,
         "profile \"%s\"", prof ? prof : "(null)");
  CHECK (strcmp (stabledif_get_format (h), format) == 0, "format %s",
         stabledif_get_format (h));
  CHECK (stabledif_get_interval (h) == iv, "interval %" PRIi64,
         stabledif_get_interval (h));
  CHECK (stabledif_get_tuple_size (h) == (int) fmt->tuple_size, "tuple %d",
         stabledif_get_tuple_size (h));
  CHECK (stabledif_get_type (h) == (int) fmt->type, "type %d",
         stabledif_get_type (h));
  CHECK (stabledif_get_guard_bits (h) ==
         (fmt->guard == PI_GUARD_CRC16 ? 16 :
          fmt->guard == PI_GUARD_CRC64 ? 64 : 0),
         "guard bits %d", stabledif_get_guard_bits (h));
  CHECK (stabledif_get_stable_writes (h) == (stable ? 1 : 0),
         "stable_writes %d", stabledif_get_stable_writes (h));
  CHECK ((uint64_t) stabledif_get_size (h) == size, "size %" PRIi64,
         stabledif_get_size (h));
  CHECK (stabledif_get_policy (h) == STABLEDIF_POLICY_AUTO, "policy");
  CHECK (stabledif_get_effective_policy (h) ==
         (stable ? STABLEDIF_POLICY_WAIT : STABLEDIF_POLICY_NONE),
         "auto resolved to %d", stabledif_get_effective_policy (h));
}

static void
test_arg_errors (uint64_t size)
{
  uint8_t *b = xmalloc (2 * iv);

  memset (b, 1, 2 * iv);
  FAILS (stabledif_pwrite (h, b, iv, 1, 0), EINVAL, "offset 1 is not a "
         "multiple of the protection interval");
  FAILS (stabledif_pwrite (h, b, iv + 1, 0, 0), EINVAL, "not a multiple");
  FAILS (stabledif_pwrite (h, b, 0, 0, 0), EINVAL, "count is 0");
  FAILS (stabledif_pwrite (h, b, 2 * iv, size - iv, 0), EINVAL,
         "beyond the end of the device");
  FAILS (stabledif_pwrite (h, b, iv, size, 0), EINVAL, "beyond the end");
  FAILS (stabledif_pwrite (h, NULL, iv, 0, 0), EINVAL, "buf is NULL");
  FAILS (stabledif_pwrite (h, b, iv, 0, 0x80), EINVAL, "unknown flags");
  FAILS (stabledif_aio_pwrite (h, b, iv, iv / 2, 0, NULL, NULL), EINVAL,
         "stabledif_aio_pwrite: offset");
  FAILS (stabledif_pread (h, b, iv, 3, NULL, 0), EINVAL,
         "stabledif_pread: offset 3");
  FAILS (stabledif_pread (h, b, iv, 0, NULL, STABLEDIF_CMD_FLAG_FUA), EINVAL,
         "unknown flags");
  FAILS (stabledif_aio_pread (h, b, 2 * iv, size - iv, NULL, 0, NULL, NULL),
         EINVAL, "beyond the end");
  FAILS (stabledif_flush (h, 1), EINVAL, "stabledif_flush: unknown flags");
  FAILS (stabledif_wait_stable (h, NULL, 10), EINVAL, "addr is NULL");
  /* The last block is usable. */
  OK (stabledif_pwrite (h, b, iv, size - iv, 0));
  writes_done++;
  free (b);
}

static void
test_unwritten (void)
{
  const uint64_t lba = 1000, nb = 4;
  uint8_t *d = xmalloc (nb * iv), *pi = xmalloc (nb * ts + 1);
  uint64_t i;

  memset (d, 0xaa, nb * iv);
  memset (pi, 0, nb * ts + 1);
  OK (stabledif_pread (h, d, nb * iv, lba * iv, pi, 0));
  for (i = 0; i < nb * iv; ++i)
    CHECK (d[i] == 0, "never-written byte %" PRIu64 " is 0x%02x", i, d[i]);
  for (i = 0; i < nb * ts; ++i)
    CHECK (pi[i] == 0xff, "never-written tuple byte %" PRIu64 " is 0x%02x",
           i, pi[i]);
  free (d); free (pi);
}

static void
test_policies (void)
{
  static const int ps[] = {
    STABLEDIF_POLICY_WAIT, STABLEDIF_POLICY_WAIT_SENT,
    STABLEDIF_POLICY_SNAPSHOT, STABLEDIF_POLICY_NONE, STABLEDIF_POLICY_AUTO,
  };
  struct stabledif_stats st0, st1;
  size_t i;

  if (stabledif_get_stable_writes (h)) {
    /* none needs the unsafe flag on this device. */
    FAILS (stabledif_set_policy (h, STABLEDIF_POLICY_NONE), EPERM,
           "stabledif_set_unsafe");
    CHECK (stabledif_get_effective_policy (h) == STABLEDIF_POLICY_WAIT,
           "a refused policy changed the effective one");
  }
  OK (stabledif_set_unsafe (h, true));
  for (i = 0; i < sizeof ps / sizeof ps[0]; ++i) {
    char what[64];
    OK (stabledif_set_policy (h, ps[i]));
    OK (stabledif_set_forensics (h, i % 2 == 0));
    OK (stabledif_get_stats (h, &st0, sizeof st0));
    snprintf (what, sizeof what, "policy %s", stabledif_policy_name (ps[i]));
    roundtrip (100 + i * 20, 1, 10 + i, 0, what);
    roundtrip (200 + i * 20, 17, 20 + i, 0, what);
    OK (stabledif_get_stats (h, &st1, sizeof st1));
    if (ps[i] == STABLEDIF_POLICY_SNAPSHOT) {
      CHECK (st1.snapshots - st0.snapshots == 2, "%s: %" PRIu64 " snapshots",
             what, st1.snapshots - st0.snapshots);
      CHECK (st1.snapshot_bytes - st0.snapshot_bytes == 18 * iv,
             "%s: snapshot bytes", what);
    }
    else
      CHECK (st1.snapshots == st0.snapshots, "%s: snapshotted", what);
  }
  if (stabledif_get_stable_writes (h)) {
    OK (stabledif_set_policy (h, STABLEDIF_POLICY_NONE));
    FAILS (stabledif_set_unsafe (h, false), EBUSY, "set another policy");
  }
  OK (stabledif_set_policy (h, STABLEDIF_POLICY_AUTO));
  OK (stabledif_set_unsafe (h, false));
  OK (stabledif_set_forensics (h, false));
}

/* ---- asynchronous, from several threads ---- */

#define THREADS 4
#define PER_THREAD 16
#define BLOCKS_PER_REQ 8

static atomic_uint completions;
static atomic_uint completion_errors;

static void
on_complete (void *user_data, int error)
{
  atomic_uint *mine = user_data;

  atomic_fetch_add (&completions, 1);
  atomic_fetch_add (mine, 1);
  if (error)
    atomic_fetch_add (&completion_errors, 1);
}

static void *
async_thread (void *arg)
{
  const uintptr_t t = (uintptr_t) arg;
  const size_t len = BLOCKS_PER_REQ * iv;
  uint8_t *w = xmalloc (PER_THREAD * len), *r = xmalloc (PER_THREAD * len);
  uint8_t *pi = xmalloc (PER_THREAD * BLOCKS_PER_REQ * ts + 1);
  atomic_uint mine = 0;
  const uint64_t base = 2000 + t * PER_THREAD * BLOCKS_PER_REQ;
  int i;

  fill_pattern (w, PER_THREAD * len, 1000 + t);
  for (i = 0; i < PER_THREAD; ++i) {
    int64_t c = stabledif_aio_pwrite (h, w + i * len, len,
                                      (base + i * BLOCKS_PER_REQ) * iv, 0,
                                      on_complete, &mine);
    CHECK (c > 0, "aio_pwrite returned %" PRIi64, c);
  }
  /* wait_all waits for every thread's requests: ours are among them. */
  OK (stabledif_wait_all (h));
  CHECK (atomic_load (&mine) == PER_THREAD, "thread %u: %u writes completed",
         (unsigned) t, atomic_load (&mine));
  for (i = 0; i < PER_THREAD; ++i)
    OK (stabledif_aio_pread (h, r + i * len, len,
                             (base + i * BLOCKS_PER_REQ) * iv,
                             pi + i * BLOCKS_PER_REQ * ts, 0,
                             on_complete, &mine));
  OK (stabledif_wait_all (h));
  CHECK (atomic_load (&mine) == 2 * PER_THREAD, "thread %u: reads",
         (unsigned) t);
  CHECK (memcmp (w, r, PER_THREAD * len) == 0, "thread %u: data differs",
         (unsigned) t);
  check_pi (r, pi, PER_THREAD * BLOCKS_PER_REQ, base, "async");
  free (w); free (r); free (pi);
  return NULL;
}

static void
test_async (void)
{
  pthread_t th[THREADS];
  uintptr_t t;

  for (t = 0; t < THREADS; ++t)
    CHECK (pthread_create (&th[t], NULL, async_thread, (void *) t) == 0,
           "pthread_create");
  for (t = 0; t < THREADS; ++t)
    pthread_join (th[t], NULL);
  writes_done += THREADS * PER_THREAD;
  CHECK (atomic_load (&completion_errors) == 0, "%u requests failed",
         atomic_load (&completion_errors));
  CHECK (stabledif_get_in_flight (h) == 0, "requests still in flight");

  /* Errors of requests without a callback come out of wait_all; here
   * there are none.  Flush with and without a callback. */
  atomic_store (&completions, 0);
  OK (stabledif_aio_flush (h, 0, NULL, NULL));
  OK (stabledif_aio_flush (h, 0, on_complete, &completions));
  OK (stabledif_wait_all (h));
  CHECK (atomic_load (&completions) == 2, "flush callback ran %u times",
         atomic_load (&completions));
  OK (stabledif_flush (h, 0));
}

/* A request larger than one NBD command (32 MiB of extended blocks). */
static void
test_large (uint64_t size)
{
  const size_t len = 40 * 1024 * 1024;
  const uint64_t off = 4 * 1024 * 1024;
  uint8_t *w, *r;
  uint8_t *pi;
  uint64_t nb = len / iv;

  if (size < off + len)
    return;
  w = xmalloc (len);
  r = xmalloc (len);
  pi = xmalloc (nb * ts + 1);
  fill_pattern (w, len, 4242);
  OK (stabledif_pwrite (h, w, len, off, STABLEDIF_CMD_FLAG_FUA));
  writes_done++;
  OK (stabledif_pread (h, r, len, off, pi, 0));
  CHECK (memcmp (w, r, len) == 0, "large request: data differs");
  check_pi (r, pi, nb, off / iv, "large");
  free (w); free (r); free (pi);
}

/* A caller compiled against an older header, whose struct has only the
 * first two counters, gets their values (ST, read a moment ago, with no
 * I/O since) and not one byte past its struct.
 */
static void
test_stats_prefix (const struct stabledif_stats *st)
{
  struct old_stats {
    uint64_t writes;            /* the first two counters of today */
    uint64_t write_bytes;
  };
  union {
    struct old_stats old;       /* the older caller's struct */
    unsigned char b[sizeof (struct old_stats) + 32]; /* and what follows */
  } u;
  size_t i;

  memset (u.b, 0xa5, sizeof u.b);
  OK (stabledif_get_stats (h, (struct stabledif_stats *) &u.old,
                           sizeof u.old));
  CHECK (u.old.writes == st->writes && u.old.write_bytes == st->write_bytes,
         "older struct: %" PRIu64 " writes, %" PRIu64 " bytes",
         u.old.writes, u.old.write_bytes);
  CHECK (st->writes > 0 && st->write_bytes > 0, "no writes counted");
  for (i = sizeof u.old; i < sizeof u.b; i++)
    CHECK (u.b[i] == 0xa5, "byte %zu past an older struct written", i);
}

int
main (int argc, char *argv[])
{
  struct stabledif_stats st;
  uint64_t size;

  progname = "test-client-roundtrip";
  if (argc != 5 && argc != 6) {
    fprintf (stderr, "usage: %s URI FORMAT INTERVAL SIZE [APP-TAG]\n",
             progname);
    exit (EXIT_FAILURE);
  }
  fmt = pi_format_lookup (argv[2]);
  CHECK (fmt != NULL, "unknown format %s", argv[2]);
  iv = (uint32_t) atoi (argv[3]);
  size = strtoull (argv[4], NULL, 0);
  app_tag = argc == 6 ? (uint16_t) strtoul (argv[5], NULL, 0) : 0;
  ts = fmt->tuple_size;

  h = stabledif_create ();
  CHECK (h != NULL, "create");
  OK (stabledif_connect_uri (h, argv[1]));

  test_profile (argv[2], size);
  test_arg_errors (size);
  test_unwritten ();
  roundtrip (0, 1, 1, 0, "first block");
  roundtrip (3, 5, 2, STABLEDIF_CMD_FLAG_FUA, "FUA");
  test_policies ();
  test_async ();
  test_large (size);

  OK (stabledif_get_stats (h, &st, sizeof st));
  CHECK (st.writes == writes_done, "stats: %" PRIu64 " writes, did %" PRIu64,
         st.writes, writes_done);
  CHECK (st.write_errors == 0 && st.rejected_writes == 0, "write errors");
  CHECK (st.read_errors == 0 && st.read_pi_errors == 0, "read errors");
  CHECK (st.mismatches == 0, "client saw %" PRIu64 " mismatches",
         st.mismatches);
  CHECK (st.flushes == 3, "flushes %" PRIu64, st.flushes);
  CHECK (ts == 0 || st.dma_bytes > 0, "no bytes copied out");
  test_stats_prefix (&st);
  stabledif_close (h);
  printf ("%s: %s interval %u: ok (%" PRIu64 " writes, %" PRIu64 " reads)\n",
          progname, argv[2], iv, st.writes, st.reads);
  return EXIT_SUCCESS;
}
