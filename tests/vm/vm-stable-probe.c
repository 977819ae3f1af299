/* SPDX-License-Identifier: BSD-3-Clause */
/* vm-stable-probe: what the kernel's stable pages cost a writer, measured
 * in the VM tests' guest (tests/test-vm-stable-pages.sh,
 * bench/kernel-stable-pages.sh).
 *
 *   vm-stable-probe rewrite [-n N] [-a] FILE
 *
 * Rewrite under writeback: creates FILE (one 4 KiB page, written and
 * fsynced so that its block is allocated), then N times (default 20):
 * writes the page, starts its writeback with
 * sync_file_range(SYNC_FILE_RANGE_WRITE), writes the same page again
 * and times that second write, then waits for all writeback of the
 * page.  When the filesystem was mounted on a device with
 * stable_writes=1, the second write waits for the first one's
 * writeback to finish (about one device write latency); with 0 it does
 * not wait.  Prints one line,
 *   rewrite n=N min_us=A median_us=B p99_us=C max_us=D
 * (microseconds; quantiles by nearest rank) and with -a every sample
 * after it, one "sample_us=X" line each, in the order measured.
 *
 * Exit status: 0 on success, 1 on an I/O error (named on stderr), 2 on
 * a usage error.
 */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* The page the probe rewrites. */
#define PROBE_PAGE 4096

/* At most this many iterations. */
#define PROBE_MAX_N 100000

static const char *progname = "vm-stable-probe";

/* Print a usage error and exit 2. */
static void __attribute__ ((noreturn))
usage (const char *why)
{
  fprintf (stderr, "%s: %s\n"
           "usage: %s rewrite [-n N] [-a] FILE\n", progname, why, progname);
  exit (2);
}

/* Report a failed system call on FILE and exit 1. */
static void __attribute__ ((noreturn))
die (const char *what, const char *file)
{
  fprintf (stderr, "%s: %s %s: %s\n", progname, what, file, strerror (errno));
  exit (1);
}

/* Monotonic time in nanoseconds. */
static uint64_t
now_ns (void)
{
  struct timespec ts;

  clock_gettime (CLOCK_MONOTONIC, &ts);
  return (uint64_t) ts.tv_sec * 1000000000 + (uint64_t) ts.tv_nsec;
}

/* Write the whole page BUF at offset 0 of FD (FILE names it in errors). */
static void
write_page (int fd, const unsigned char *buf, const char *file)
{
  ssize_t r = pwrite (fd, buf, PROBE_PAGE, 0);

  if (r == -1)
    die ("write", file);
  if (r != PROBE_PAGE) {
    errno = EIO;
    die ("short write to", file);
  }
}

/* qsort order of uint64_t. */
static int
cmp_u64 (const void *a, const void *b)
{
  uint64_t x = *(const uint64_t *) a, y = *(const uint64_t *) b;

  return x < y ? -1 : x > y;
}

/* The nearest-rank Q quantile (0 < Q <= 1) of the N sorted values V. */
static uint64_t
quantile (const uint64_t *v, size_t n, double q)
{
  size_t rank = (size_t) (q * (double) n + 0.999999);

  if (rank < 1)
    rank = 1;
  if (rank > n)
    rank = n;
  return v[rank - 1];
}

/* Parse a decimal count in 1..MAX for option OPT, or exit 2. */
static unsigned long
parse_count (const char *s, const char *opt, unsigned long max)
{
  char *end;
  unsigned long v;

  errno = 0;
  v = strtoul (s, &end, 10);
  if (errno || end == s || *end || v < 1 || v > max || s[0] == '-') {
    char msg[128];
    snprintf (msg, sizeof msg, "%s: '%s' is not a count from 1 to %lu",
              opt, s, max);
    usage (msg);
  }
  return v;
}

/* The rewrite probe described at the top: N iterations on FILE. */
static int
probe_rewrite (const char *file, size_t n, bool all)
{
  unsigned char buf[PROBE_PAGE];
  uint64_t *lat, *sorted, t0, t1;
  size_t i;
  int fd;

  lat = calloc (n, sizeof *lat);
  if (lat == NULL)
    die ("allocating samples for", file);
  fd = open (file, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd == -1)
    die ("open", file);
  memset (buf, 0xa5, sizeof buf);
  write_page (fd, buf, file);
  if (fsync (fd) == -1)
    die ("fsync", file);

  for (i = 0; i < n; i++) {
    memset (buf, (int) (i & 0xff), sizeof buf);
    write_page (fd, buf, file);
    if (sync_file_range (fd, 0, PROBE_PAGE, SYNC_FILE_RANGE_WRITE) == -1)
      die ("sync_file_range (start writeback) of", file);
    buf[0] ^= 0xff;
    t0 = now_ns ();
    write_page (fd, buf, file);
    t1 = now_ns ();
    lat[i] = t1 - t0;
    /* Start clean: the second write's writeback, and any still running. */
    if (sync_file_range (fd, 0, PROBE_PAGE,
                         SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE |
                         SYNC_FILE_RANGE_WAIT_AFTER) == -1)
      die ("sync_file_range (wait) of", file);
  }
  if (fsync (fd) == -1)
    die ("fsync", file);
  if (close (fd) == -1)
    die ("close", file);

  /* Keep the measured order for the samples; sort a copy. */
  sorted = malloc (n * sizeof *sorted);
  if (sorted == NULL)
    die ("allocating samples for", file);
  memcpy (sorted, lat, n * sizeof *sorted);
  qsort (sorted, n, sizeof *sorted, cmp_u64);
  printf ("rewrite n=%zu min_us=%" PRIu64 " median_us=%" PRIu64
          " p99_us=%" PRIu64 " max_us=%" PRIu64 "\n", n,
          sorted[0] / 1000, quantile (sorted, n, 0.5) / 1000,
          quantile (sorted, n, 0.99) / 1000, sorted[n - 1] / 1000);
  for (i = 0; all && i < n; i++)
    printf ("sample_us=%" PRIu64 "\n", lat[i] / 1000);
  free (sorted);
  free (lat);
  if (fflush (stdout) == EOF || ferror (stdout)) {
    fprintf (stderr, "%s: writing the results failed\n", progname);
    return 1;
  }
  return 0;
}

int
main (int argc, char *argv[])
{
  unsigned long n = 20;
  bool all = false;
  int opt;

  if (argc < 2)
    usage ("no mode given");
  if (strcmp (argv[1], "rewrite") != 0) {
    char msg[128];
    snprintf (msg, sizeof msg, "unknown mode '%s'", argv[1]);
    usage (msg);
  }
  argv++;
  argc--;
  while ((opt = getopt (argc, argv, "n:a")) != -1) {
    switch (opt) {
    case 'n': n = parse_count (optarg, "-n", PROBE_MAX_N); break;
    case 'a': all = true; break;
    default: usage ("unknown option");
    }
  }
  if (optind != argc - 1)
    usage ("give exactly one FILE");
  return probe_rewrite (argv[optind], n, all);
}
