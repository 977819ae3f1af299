/* SPDX-License-Identifier: BSD-3-Clause */
/* stabledif: a writer and a mutator race over the same buffer, under one
 * stable-page policy, against the real plugin.
 *
 *   test-client-race [--rounds N] [--delay USEC] URI POLICY
 *
 * The buffer holds REGIONS regions of BLOCKS blocks; region r is written
 * to its own place on the device.  Each round the writer submits one
 * asynchronous write per region (all in flight at once), then the
 * mutator changes one 16-bit counter in one block of every region,
 * calling stabledif_wait_stable on those bytes first, as a well-behaved
 * page-cache user would.  A user mutex, held by the writer while it
 * submits and by the mutator around wait + change, plays the page lock:
 * the guard at submit is always computed over a settled buffer.  Copy-out
 * happens DELAY after submit.
 *
 * Expected, from the policy's contract:
 *  - wait, wait-sent, snapshot (and auto on a stable device): no write
 *    fails, the client sees no change between checksum and copy-out;
 *    wait and wait-sent wait, snapshot does not;
 *  - none on a stable device (the unsafe flag is set): writes are
 *    rejected with EIO; each rejection names exactly the block the
 *    mutator changed in that region, with byte ranges inside the 16-bit
 *    counter (a change confined to 16 bits is a burst CRC-16 and CRC-64
 *    always detect);
 *  - auto on a device without PI (stable_writes=0): never waits.
 * Finally every region reads back (PI verified) as the data of its last
 * accepted write: a rejected write stored nothing.  On a device without
 * PI only the absence of waits and errors is checked.
 *
 * The last line printed is "stats: writes=W rejected=R mismatches=M
 * waits=N" for the calling script.
 */
#include <config.h>

#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>

#include "test-client-util.h"

#define REGIONS 4
#define BLOCKS 4

static struct stabledif_handle *h;
static uint32_t iv;
static size_t region_len;             /* BLOCKS * iv */
static uint8_t *buf;                  /* REGIONS regions */
static uint8_t *expected[REGIONS];    /* data of the last accepted write */
static uint8_t *snap[REGIONS];        /* data at the latest submit */
static int rounds = 12;

/* The user's "page lock". */
static pthread_mutex_t page_lock = PTHREAD_MUTEX_INITIALIZER;

/* Round hand-over between writer and mutator. */
static pthread_mutex_t round_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t round_cond = PTHREAD_COND_INITIALIZER;
static int round_started = -1;        /* writer submitted this round */
static int round_mutated = -1;        /* mutator finished this round */

/* Per region, what the callbacks saw this round (read by the writer
 * after stabledif_wait_all, which orders it after the callbacks). */
struct outcome {
  int error;                    /* completion error */
  char msg[1024];               /* error message */
  int reports;                  /* forensics reports */
  bool rejected;                /* report says rejected */
  size_t nblocks;               /* blocks in the report */
  uint64_t lba;                 /* first block in the report */
  bool ranges_ok;               /* every range inside the counter */
  size_t nranges;               /* ranges of the first block */
};
static struct outcome outcome[REGIONS];

/* Device LBA of the first block of region R. */
static uint64_t
region_lba (int r)
{
  return 64 + (uint64_t) r * 2 * BLOCKS;
}

/* The block and byte offset of the counter the mutator changes in
 * region R in round K. */
static int
mutated_block (int k, int r)
{
  return (k + r) % BLOCKS;
}

static uint32_t
counter_offset (int b, int r)
{
  return (uint32_t) ((37 * (b + 1) + 5 * r) % (iv - 2));
}

static int
region_of (const void *p)
{
  return (int) (((const uint8_t *) p - buf) / region_len);
}

static void
on_forensics (void *user_data, const struct stabledif_forensics_report *rep)
{
  int r = region_of (rep->buf);
  int k = *(int *) user_data;
  struct outcome *o = &outcome[r];
  uint32_t off = counter_offset (mutated_block (k, r), r);
  size_t i, j;

  o->reports++;
  o->rejected = rep->rejected;
  o->nblocks = rep->nblocks;
  o->ranges_ok = rep->nblocks > 0;
  if (rep->nblocks > 0) {
    o->lba = rep->blocks[0].lba;
    o->nranges = rep->blocks[0].nranges;
  }
  for (i = 0; i < rep->nblocks; ++i) {
    if (rep->blocks[i].nranges == 0)
      o->ranges_ok = false;
    for (j = 0; j < rep->blocks[i].nranges; ++j) {
      const struct stabledif_byte_range *x = &rep->blocks[i].ranges[j];
      if (x->offset < off || x->offset + x->length > off + 2)
        o->ranges_ok = false;
    }
  }
}

/* Completion callback of a write: records into its struct outcome. */
static void
on_outcome (void *user_data, int error)
{
  struct outcome *o = user_data;
  const char *m = stabledif_get_error ();

  o->error = error;
  snprintf (o->msg, sizeof o->msg, "%s", error && m ? m : "");
}

static void *
mutator (void *arg)
{
  int k, r;

  for (k = 0; k < rounds; ++k) {
    pthread_mutex_lock (&round_lock);
    while (round_started < k)
      pthread_cond_wait (&round_cond, &round_lock);
    pthread_mutex_unlock (&round_lock);

    for (r = 0; r < REGIONS; ++r) {
      int b = mutated_block (k, r);
      uint8_t *c = buf + r * region_len + (size_t) b * iv +
        counter_offset (b, r);
      uint16_t v;

      pthread_mutex_lock (&page_lock);
      OK (stabledif_wait_stable (h, c, 2));
      memcpy (&v, c, 2);
      v++;
      memcpy (c, &v, 2);
      pthread_mutex_unlock (&page_lock);
    }

    pthread_mutex_lock (&round_lock);
    round_mutated = k;
    pthread_cond_broadcast (&round_cond);
    pthread_mutex_unlock (&round_lock);
  }
  return NULL;
}

int
main (int argc, char *argv[])
{
  struct stabledif_stats st;
  pthread_t mt;
  const char *uri, *pname;
  uint32_t delay = 50000;
  int policy, effective, stable, round_no = 0, i, k, r;
  uint64_t rejected = 0;

  progname = "test-client-race";
  for (i = 1; i < argc && strncmp (argv[i], "--", 2) == 0; i += 2) {
    CHECK (i + 1 < argc, "%s needs a value", argv[i]);
    if (strcmp (argv[i], "--rounds") == 0)
      rounds = atoi (argv[i + 1]);
    else if (strcmp (argv[i], "--delay") == 0)
      delay = (uint32_t) atoi (argv[i + 1]);
    else
      CHECK (false, "unknown option %s", argv[i]);
  }
  if (argc - i != 2) {
    fprintf (stderr, "usage: %s [--rounds N] [--delay USEC] URI POLICY\n",
             progname);
    exit (EXIT_FAILURE);
  }
  uri = argv[i];
  pname = argv[i + 1];
  policy = stabledif_policy_from_name (pname);
  CHECK (policy >= 0, "policy %s", pname);

  h = stabledif_create ();
  CHECK (h != NULL, "create");
  OK (stabledif_set_policy (h, policy));
  OK (stabledif_set_unsafe (h, policy == STABLEDIF_POLICY_NONE));
  OK (stabledif_set_forensics (h, true));
  OK (stabledif_set_forensics_callback (h, on_forensics, &round_no));
  OK (stabledif_connect_uri (h, uri));
  stable = stabledif_get_stable_writes (h);
  effective = stabledif_get_effective_policy (h);
  iv = (uint32_t) stabledif_get_interval (h);
  region_len = (size_t) BLOCKS * iv;
  CHECK ((uint64_t) stabledif_get_size (h) >= (region_lba (REGIONS) + 1) * iv,
         "device too small");

  buf = xmalloc (REGIONS * region_len);
  fill_pattern (buf, REGIONS * region_len, 7);
  for (r = 0; r < REGIONS; ++r) {
    expected[r] = xmalloc (region_len);
    snap[r] = xmalloc (region_len);
    /* A safe first write of every region: the known old data. */
    memcpy (expected[r], buf + r * region_len, region_len);
    OK (stabledif_pwrite (h, expected[r], region_len, region_lba (r) * iv,
                          0));
  }
  OK (stabledif_set_race_delay_us (h, delay));
  OK (stabledif_reset_stats (h));

  CHECK (pthread_create (&mt, NULL, mutator, NULL) == 0, "pthread_create");
  for (k = 0; k < rounds; ++k) {
    round_no = k;
    memset (outcome, 0, sizeof outcome);

    pthread_mutex_lock (&page_lock);
    for (r = 0; r < REGIONS; ++r) {
      memcpy (snap[r], buf + r * region_len, region_len);
      CHECK (stabledif_aio_pwrite (h, buf + r * region_len, region_len,
                                   region_lba (r) * iv, 0, on_outcome,
                                   &outcome[r]) > 0, "aio_pwrite");
    }
    pthread_mutex_unlock (&page_lock);

    pthread_mutex_lock (&round_lock);
    round_started = k;
    pthread_cond_broadcast (&round_cond);
    pthread_mutex_unlock (&round_lock);

    OK (stabledif_wait_all (h));
    /* The next round starts after this round's mutations. */
    pthread_mutex_lock (&round_lock);
    while (round_mutated < k)
      pthread_cond_wait (&round_cond, &round_lock);
    pthread_mutex_unlock (&round_lock);

    for (r = 0; r < REGIONS; ++r) {
      struct outcome *o = &outcome[r];

      if (o->error == 0) {
        memcpy (expected[r], snap[r], region_len);
        continue;
      }
      CHECK (stable && effective == STABLEDIF_POLICY_NONE,
             "round %d region %d: write failed under policy %s: %s",
             k, r, pname, o->msg);
      CHECK (o->error == EIO, "round %d region %d: error %d: %s", k, r,
             o->error, o->msg);
      rejected++;
      /* Exactly the block the mutator changed, bytes inside its counter. */
      uint64_t want = region_lba (r) + (uint64_t) mutated_block (k, r);
      char lba[64];
      snprintf (lba, sizeof lba, "at LBA %" PRIu64 ": guard check: ", want);
      CHECK (strstr (o->msg, lba) != NULL, "round %d region %d: message "
             "\"%s\" lacks \"%s\"", k, r, o->msg, lba);
      CHECK (strstr (o->msg, "changed between checksum and transfer"),
             "message: %s", o->msg);
      CHECK (o->reports == 1 && o->rejected, "round %d region %d: "
             "forensics reports %d", k, r, o->reports);
      CHECK (o->nblocks == 1 && o->lba == want, "round %d region %d: "
             "report names %zu blocks, first %" PRIu64 ", want %" PRIu64,
             k, r, o->nblocks, o->lba, want);
      CHECK (o->ranges_ok && o->nranges >= 1, "round %d region %d: byte "
             "ranges outside the counter", k, r);
    }
  }
  pthread_join (mt, NULL);

  /* What the device holds: the last accepted data, PI intact. */
  for (r = 0; r < REGIONS; ++r) {
    uint8_t *rd = xmalloc (region_len);
    OK (stabledif_pread (h, rd, region_len, region_lba (r) * iv, NULL, 0));
    if (stable)
      CHECK (memcmp (rd, expected[r], region_len) == 0, "region %d: stored "
             "data is not that of the last accepted write", r);
    free (rd);
  }

  OK (stabledif_get_stats (h, &st, sizeof st));
  CHECK (st.writes == (uint64_t) rounds * REGIONS, "writes %" PRIu64,
         st.writes);
  CHECK (st.rejected_writes == rejected, "stats rejected %" PRIu64
         ", saw %" PRIu64, st.rejected_writes, rejected);
  CHECK (st.wait_calls == (uint64_t) rounds * REGIONS, "wait calls %" PRIu64,
         st.wait_calls);
  CHECK (st.read_pi_errors == 0, "PI errors on read");
  switch (effective) {
  case STABLEDIF_POLICY_NONE:
    CHECK (st.waits == 0 && st.wait_ns == 0, "none waited %" PRIu64
           " times", st.waits);
    if (stable) {
      CHECK (rejected > 0, "no write was rejected in %d rounds", rounds);
      CHECK (st.mismatches == rejected, "client saw %" PRIu64 " changes, "
             "device rejected %" PRIu64, st.mismatches, rejected);
    }
    break;
  case STABLEDIF_POLICY_SNAPSHOT:
    CHECK (st.waits == 0, "snapshot waited");
    CHECK (st.snapshots == st.writes, "snapshots %" PRIu64, st.snapshots);
    /* fall through */
  default:
    CHECK (st.write_errors == 0 && st.rejected_writes == 0, "errors");
    CHECK (st.mismatches == 0, "client saw %" PRIu64 " changes",
           st.mismatches);
    if (effective != STABLEDIF_POLICY_SNAPSHOT)
      CHECK (st.waits > 0, "policy %s never waited",
             stabledif_policy_name (effective));
    break;
  }
  stabledif_close (h);
  for (r = 0; r < REGIONS; ++r) {
    free (expected[r]);
    free (snap[r]);
  }
  free (buf);
  printf ("%s: policy %s (effective %s) on %s: %d rounds ok\n", progname,
          pname, stabledif_policy_name (effective),
          stable ? "stable_writes=1" : "stable_writes=0", rounds);
  printf ("stats: writes=%" PRIu64 " rejected=%" PRIu64 " mismatches=%" PRIu64
          " waits=%" PRIu64 "\n", st.writes, st.rejected_writes,
          st.mismatches, st.waits);
  return EXIT_SUCCESS;
}
