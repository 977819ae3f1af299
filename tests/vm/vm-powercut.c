/* SPDX-License-Identifier: BSD-3-Clause */
/* vm-powercut: the guest end of the power-cut test (tests/test-vm-powercut.sh,
 * bench/power-cut.sh).
 *
 *   vm-powercut [-n] [-k N] [-c BASE:FLUSHED] [-w BASE] PATH
 *
 * Opens a file= disk at PATH (8 MiB, T10-DIF-TYPE1-CRC, 512-byte
 * blocks) with the server library, as nbdkit would, and then:
 *
 * -c BASE:FLUSHED  checks what a writing phase that began with
 *     generation BASE left after a power cut, FLUSHED being the last
 *     generation it reported flushed.  Opening the disk has run the
 *     recovery of the dirty-region log.  Every block is read through the
 *     data view and must read without a PI error and hold the contents
 *     one of its writes gave it: the last one of a generation up to
 *     FLUSHED, or one of a later generation (in flight at the cut).
 *     Prints one line,
 *       CHECK PASS|FAIL recovered=R pi_errors=E lost=L bad=B newest=G
 *     (E: blocks that failed a PI check; L: blocks holding contents
 *     older than a flushed write; B: blocks holding something no write
 *     gave them; G: the newest generation found).
 *
 * -w BASE  then writes: the whole disk with generation BASE, a flush,
 *     then generations BASE+1, BASE+2, ... of WRITES_PER_GEN writes each,
 *     of 1 to 16 blocks in a hot area, through the data view and the dif
 *     view (with PI computed here) in turn, each generation ended by a
 *     flush.  After each completed flush it prints "FLUSHED gen=N".  It
 *     runs until the host kills the machine (at most MAX_WRITE_SECONDS).
 *     Every N writes (-k, default 4; 0: never) it fdatasyncs PATH or
 *     PATH.pi, in turn, through a descriptor of its own: the kernel may
 *     write either file back at any time, and this makes it happen
 *     between flushes, so a cut usually finds blocks whose data and PI
 *     reached the disk from different writes.
 *
 * -n  opens the disk without the dirty-region log (dirty-log=off), to
 *     show what the log prevents.
 *
 * A block's contents are a function of (generation, LBA): a header
 * naming both, then bytes drawn from them; which blocks a generation
 * writes is a function of the generation.  So the checker knows every
 * block's legal contents from BASE and FLUSHED alone.
 *
 * Exit status: 0 after a check that passed (or none) and a writing
 * phase that ran out of time (or none), 1 after a check that failed,
 * 2 on an error.
 */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "disk.h"
#include "pi.h"
#include "profile.h"

/* The disk. */
#define DISK_BLOCKS 16384       /* 8 MiB of 512-byte blocks */
#define BLOCK 512               /* protection interval */
#define FORMAT "T10-DIF-TYPE1-CRC"

/* The writing phase. */
#define WRITES_PER_GEN 32       /* writes between two flushes */
#define MAX_BLOCKS_PER_WRITE 16 /* 1..16 blocks per write */
#define HOT_BLOCKS 2048         /* writes after the base fill land here,
                                   so blocks are overwritten often */
#define FILL_BLOCKS 256         /* blocks per write of the base fill */
#define MAX_WRITE_SECONDS 600   /* a writing phase never cut ends here */

/* Generations after FLUSHED the checker accepts: the flushes whose
 * "FLUSHED" line had not reached the host yet, plus the one in flight. */
#define SLACK_GENS 32

/* First 8 bytes of every block written. */
#define MAGIC UINT64_C (0x7063757443757421) /* "pcutCut!" */

static const struct disk_io io_data = { .conn = 1, .view = PROFILE_VIEW_DATA };
static const struct disk_io io_dif = { .conn = 2, .view = PROFILE_VIEW_DIF };

/* Errors of the server library: one line on stderr. */
static void
report (const char *fmt, ...)
{
  va_list ap;

  fputs ("vm-powercut: ", stderr);
  va_start (ap, fmt);
  vfprintf (stderr, fmt, ap);
  va_end (ap);
  fputc ('\n', stderr);
}

/* splitmix64: the next value of the sequence whose state is *S. */
static uint64_t
next_rand (uint64_t *s)
{
  uint64_t z = (*s += UINT64_C (0x9e3779b97f4a7c15));

  z = (z ^ (z >> 30)) * UINT64_C (0xbf58476d1ce4e5b9);
  z = (z ^ (z >> 27)) * UINT64_C (0x94d049bb133111eb);
  return z ^ (z >> 31);
}

/* Fill BUF (BLOCK bytes) with the contents generation GEN gives LBA. */
static void
make_block (uint8_t *buf, uint64_t gen, uint64_t lba)
{
  uint64_t words[BLOCK / 8];
  uint64_t s = gen * UINT64_C (0x100000001b3) ^ (lba << 1);
  size_t i;

  words[0] = MAGIC;
  words[1] = lba;
  words[2] = gen;
  for (i = 3; i < BLOCK / 8; i++)
    words[i] = next_rand (&s);
  memcpy (buf, words, BLOCK);
}

/* The generation whose contents BUF holds for LBA, or UINT64_MAX if it
 * holds no generation's contents for LBA. */
static uint64_t
block_gen (const uint8_t *buf, uint64_t lba)
{
  uint8_t want[BLOCK];
  uint64_t hdr[3];

  memcpy (hdr, buf, sizeof hdr);
  if (hdr[0] != MAGIC || hdr[1] != lba)
    return UINT64_MAX;
  make_block (want, hdr[2], lba);
  return memcmp (want, buf, BLOCK) == 0 ? hdr[2] : UINT64_MAX;
}

/* One write of a generation. */
struct plan_write {
  uint64_t lba;                 /* first block */
  uint32_t nblocks;             /* 1..MAX_BLOCKS_PER_WRITE */
  bool dif;                     /* through the dif view (else data) */
};

/* Write number I of generation GEN (GEN above a phase's base). */
static struct plan_write
plan (uint64_t gen, unsigned i)
{
  uint64_t s = gen * UINT64_C (0xd1342543de82ef95) + i;
  uint64_t r = next_rand (&s);
  struct plan_write w;

  w.nblocks = 1 + r % MAX_BLOCKS_PER_WRITE;
  w.lba = (r >> 8) % (HOT_BLOCKS - w.nblocks + 1);
  w.dif = (r >> 40) & 1;
  return w;
}

/* Write NBLOCKS blocks of generation GEN at LBA through the data view or
 * (DIF) the dif view.  -1 after reporting the error. */
static int
write_blocks (struct disk *d, uint64_t gen, uint64_t lba, uint32_t nblocks,
              bool dif)
{
  static uint8_t buf[FILL_BLOCKS * (BLOCK + PI_TUPLE_MAX)];
  uint32_t ext = pi_ext_size (&d->pi);
  uint32_t stride = dif ? ext : BLOCK;
  uint32_t i;
  int r;

  for (i = 0; i < nblocks; i++)
    make_block (buf + (size_t) i * stride, gen, lba + i);
  if (dif) {
    pi_generate_ext (&d->pi, buf, nblocks, lba);
    r = disk_pwrite (d, &io_dif, buf, (uint64_t) nblocks * ext, lba * ext,
                     false);
  }
  else
    r = disk_pwrite (d, &io_data, buf, (uint64_t) nblocks * BLOCK,
                     lba * BLOCK, false);
  if (r == -1)
    report ("writing %" PRIu32 " blocks at LBA %" PRIu64 " (gen %" PRIu64
            "): %m", nblocks, lba, gen);
  return r;
}

/* Flush D and tell the host that generation GEN is durable.  -1 after
 * reporting the error. */
static int
flush_gen (struct disk *d, uint64_t gen)
{
  if (disk_flush (d, &io_data) == -1) {
    report ("flush after gen %" PRIu64 ": %m", gen);
    return -1;
  }
  printf ("FLUSHED gen=%" PRIu64 "\n", gen);
  fflush (stdout);
  return 0;
}

/* Descriptors of PATH and PATH.pi for the forced write-backs. */
struct writeback {
  int fd[2];                    /* PATH, PATH.pi (read-only) */
  unsigned every;               /* writes between two of them; 0: none */
  unsigned count;               /* write-backs done so far */
};

/* Open the descriptors of W for PATH.  -1 after reporting the error. */
static int
writeback_open (struct writeback *w, const char *path)
{
  char pi[4096];

  snprintf (pi, sizeof pi, "%s.pi", path);
  w->fd[0] = open (path, O_RDONLY | O_CLOEXEC);
  w->fd[1] = open (pi, O_RDONLY | O_CLOEXEC);
  if (w->fd[0] == -1 || w->fd[1] == -1) {
    report ("opening %s or %s: %m", path, pi);
    return -1;
  }
  return 0;
}

/* After write number I of a generation: every W->every writes, write
 * PATH or PATH.pi (in turn) back to the disk.  -1 after reporting. */
static int
writeback_maybe (struct writeback *w, unsigned i)
{
  int fd;

  if (w->every == 0 || (i + 1) % w->every != 0)
    return 0;
  fd = w->fd[w->count++ % 2];
  if (fdatasync (fd) == -1) {
    report ("fdatasync (forced write-back): %m");
    return -1;
  }
  return 0;
}

/* The writing phase from generation BASE (see the top of the file).
 * Returns 0 when MAX_WRITE_SECONDS have passed, -1 after reporting an
 * error. */
static int
write_phase (struct disk *d, const char *path, uint64_t base,
             unsigned every)
{
  struct writeback w = { .fd = { -1, -1 }, .every = every };
  time_t end = time (NULL) + MAX_WRITE_SECONDS;
  uint64_t lba, gen;
  unsigned i;
  int r = -1;

  for (lba = 0; lba < DISK_BLOCKS; lba += FILL_BLOCKS)
    if (write_blocks (d, base, lba, FILL_BLOCKS, false) == -1)
      return -1;
  if (flush_gen (d, base) == -1 || writeback_open (&w, path) == -1)
    goto out;
  for (gen = base + 1; time (NULL) < end; gen++) {
    for (i = 0; i < WRITES_PER_GEN; i++) {
      struct plan_write pw = plan (gen, i);
      if (write_blocks (d, gen, pw.lba, pw.nblocks, pw.dif) == -1 ||
          writeback_maybe (&w, i) == -1)
        goto out;
    }
    if (flush_gen (d, gen) == -1)
      goto out;
  }
  r = 0;
 out:
  for (i = 0; i < 2; i++)
    if (w.fd[i] >= 0)
      close (w.fd[i]);
  return r;
}

/* What the checker knows of every block. */
struct expect {
  uint64_t floor[DISK_BLOCKS];  /* the generation of the last write up to
                                   FLUSHED: the oldest legal contents */
  uint32_t later[DISK_BLOCKS];  /* bit K: generation FLUSHED+1+K wrote it */
};

/* Fill E for a phase that began with BASE and flushed up to FLUSHED. */
static void
expect_build (struct expect *e, uint64_t base, uint64_t flushed)
{
  uint64_t gen, lba;
  unsigned i;

  for (lba = 0; lba < DISK_BLOCKS; lba++) {
    e->floor[lba] = base;
    e->later[lba] = 0;
  }
  for (gen = base + 1; gen <= flushed + SLACK_GENS; gen++)
    for (i = 0; i < WRITES_PER_GEN; i++) {
      struct plan_write pw = plan (gen, i);
      for (lba = pw.lba; lba < pw.lba + pw.nblocks; lba++) {
        if (gen <= flushed)
          e->floor[lba] = gen;
        else
          e->later[lba] |= UINT32_C (1) << (gen - flushed - 1);
      }
    }
}

/* The findings of a check. */
struct tally {
  uint64_t pi_errors;           /* blocks whose read failed a PI check */
  uint64_t lost;                /* blocks older than a flushed write */
  uint64_t bad;                 /* blocks no write gave their contents */
  uint64_t newest;              /* the newest generation found */
};

/* Judge block LBA, read as BUF, against E (FLUSHED as in expect_build)
 * into T. */
static void
judge (const struct expect *e, uint64_t flushed, uint64_t lba,
       const uint8_t *buf, struct tally *t)
{
  uint64_t gen = block_gen (buf, lba);

  if (gen == UINT64_MAX) {
    t->bad++;
    return;
  }
  if (gen > t->newest)
    t->newest = gen;
  if (gen < e->floor[lba])
    t->lost++;
  else if (gen > e->floor[lba] &&
           (gen <= flushed || gen > flushed + SLACK_GENS ||
            !(e->later[lba] & (UINT32_C (1) << (gen - flushed - 1)))))
    t->bad++;
}

/* Read NBLOCKS blocks at LBA into BUF through the data view; if that
 * fails a PI check, read them one by one, counting the blocks that fail
 * in T and marking them in FAILED.  -1 after reporting another error. */
static int
read_blocks (struct disk *d, uint64_t lba, uint32_t nblocks, uint8_t *buf,
             bool *failed, struct tally *t)
{
  uint32_t i;

  memset (failed, 0, nblocks * sizeof *failed);
  if (disk_pread (d, &io_data, buf, (uint64_t) nblocks * BLOCK,
                  lba * BLOCK) == 0)
    return 0;
  for (i = 0; i < nblocks; i++) {
    if (disk_pread (d, &io_data, buf + (size_t) i * BLOCK, BLOCK,
                    (lba + i) * BLOCK) == 0)
      continue;
    if (errno != EIO) {
      report ("reading LBA %" PRIu64 ": %m", lba + i);
      return -1;
    }
    failed[i] = true;
    t->pi_errors++;
  }
  return 0;
}

/* Check the disk as the phase from BASE left it, FLUSHED the last
 * generation reported durable.  Prints the CHECK line.  Returns 0 if it
 * passed, 1 if not, -1 after reporting an error. */
static int
check_phase (struct disk *d, uint64_t base, uint64_t flushed)
{
  static struct expect e;
  static uint8_t buf[FILL_BLOCKS * BLOCK];
  bool failed[FILL_BLOCKS];
  struct tally t = { 0 };
  uint64_t lba;
  uint32_t i;
  bool pass;

  expect_build (&e, base, flushed);
  for (lba = 0; lba < DISK_BLOCKS; lba += FILL_BLOCKS) {
    if (read_blocks (d, lba, FILL_BLOCKS, buf, failed, &t) == -1)
      return -1;
    for (i = 0; i < FILL_BLOCKS; i++)
      if (!failed[i])
        judge (&e, flushed, lba + i, buf + (size_t) i * BLOCK, &t);
  }
  pass = t.pi_errors == 0 && t.lost == 0 && t.bad == 0;
  printf ("CHECK %s recovered=%" PRIu64 " pi_errors=%" PRIu64 " lost=%"
          PRIu64 " bad=%" PRIu64 " newest=%" PRIu64 "\n",
          pass ? "PASS" : "FAIL", d->store->recovered_blocks,
          t.pi_errors, t.lost, t.bad, t.newest);
  fflush (stdout);
  return pass ? 0 : 1;
}

/* Open the disk at PATH, with the dirty-region log unless NO_LOG. */
static struct disk *
open_disk (const char *path, bool no_log)
{
  struct disk_config cfg = {
    .size = (uint64_t) DISK_BLOCKS * BLOCK,
    .format = pi_format_lookup (FORMAT),
    .interval = BLOCK,
    .file = path,
    .no_dirty_log = no_log,
    .log_burst = 1,             /* PI failures are counted, not listed */
    .log_interval = 3600,
    .error = report,
  };

  return disk_open (&cfg);
}

/* Parse a generation number (decimal, nonzero) from S into *GEN, up to
 * END (a character that must follow it).  false if S is not one. */
static bool
parse_gen (const char *s, char end, uint64_t *gen)
{
  char *e;

  errno = 0;
  *gen = strtoull (s, &e, 10);
  return errno == 0 && e != s && *e == end && *gen > 0 &&
    *gen < UINT64_MAX / 2;
}

/* Print the usage on stderr and exit 2. */
static void
usage (void)
{
  fprintf (stderr, "usage: vm-powercut [-n] [-k N] [-c BASE:FLUSHED] "
           "[-w BASE] PATH\n");
  exit (2);
}

int
main (int argc, char *argv[])
{
  uint64_t cbase = 0, flushed = 0, wbase = 0;
  unsigned every = 4;
  bool no_log = false;
  struct disk *d;
  int opt, r = 0;

  while ((opt = getopt (argc, argv, "nk:c:w:")) != -1) {
    switch (opt) {
    case 'n': no_log = true; break;
    case 'k':
      if (sscanf (optarg, "%u", &every) != 1)
        usage ();
      break;
    case 'c':
      if (!parse_gen (optarg, ':', &cbase) ||
          !parse_gen (strchr (optarg, ':') + 1, '\0', &flushed) ||
          flushed < cbase)
        usage ();
      break;
    case 'w':
      if (!parse_gen (optarg, '\0', &wbase))
        usage ();
      break;
    default: usage ();
    }
  }
  if (optind != argc - 1 || (cbase == 0 && wbase == 0))
    usage ();

  d = open_disk (argv[optind], no_log);
  if (d == NULL)
    return 2;
  if (cbase)
    r = check_phase (d, cbase, flushed);
  /* A failed check does not stop the next phase: it rewrites every
   * block first. */
  if (r != -1 && wbase && write_phase (d, argv[optind], wbase, every) == -1)
    r = -1;
  disk_close (d);
  return r == -1 ? 2 : r;
}
