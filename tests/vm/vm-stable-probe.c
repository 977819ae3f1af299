/* SPDX-License-Identifier: BSD-3-Clause */
/* vm-stable-probe: what the kernel's stable pages cost a writer, measured
 * in the VM tests' guest (tests/test-vm-stable-pages.sh,
 * bench/kernel-stable-pages.sh).
 *
 *   vm-stable-probe rewrite [-n N] [-a] FILE
 *   vm-stable-probe writers [-t N] [-w PAGES] [-d SECS] [-s BYTES]
 *                           [-u USEC] FILE
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
 * Writers, the workload of stabledif-bench's page-cache model with the
 * kernel's page cache and flusher in place of the model's: creates FILE
 * of PAGES pages of 4 KiB (default 4096), written and fsynced; then -t
 * threads (default 4) each, for -d seconds (default 5), pick a random
 * page, write -s bytes (default 512) at a random offset inside it with
 * pwrite, time that write (the page lock, the wait for a page under
 * writeback, the copy), and sleep -u microseconds (default 20).  When
 * the kernel's flusher writes pages back is up to the vm.dirty_*
 * sysctls.  Prints one line,
 *   writers n=COUNT secs=S bytes=B avg_ns=A p50_ns= p90_ns= p99_ns=
 *     p999_ns= p9999_ns= max_ns=
 *
 * Exit status: 0 on success, 1 on an I/O error (named on stderr), 2 on
 * a usage error.
 */
#include <config.h>

#include <errno.h>
#include <pthread.h>
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

/* At most this many writer threads. */
#define WRITERS_MAX_THREADS 256

/* At most this many pages in the writers' file (1 GiB). */
#define WRITERS_MAX_PAGES 262144

/* At most this many seconds of writing. */
#define WRITERS_MAX_SECS 3600

/* The writers' settings (vm-stable-probe writers). */
struct writers_conf {
  const char *file;             /* the file written */
  int fd;                       /* open on it */
  unsigned long threads;        /* writer threads */
  unsigned long pages;          /* pages in the file */
  unsigned long secs;           /* how long to write */
  unsigned long write_size;     /* bytes per write, at most a page */
  unsigned long think_us;       /* sleep after each write */
  uint64_t end_ns;              /* now_ns () at which writers stop */
};

/* One writer thread: its settings and what it measured. */
struct writer {
  pthread_t tid;                /* the thread */
  const struct writers_conf *conf; /* shared settings */
  unsigned seed;                /* its rand_r state */
  uint64_t *lat;                /* write latencies, ns */
  size_t n, cap;                /* used and allocated entries of lat */
  int err;                      /* errno of a failed write, or 0 */
};

static const char *progname = "vm-stable-probe";

/* Print a usage error and exit 2. */
static void __attribute__ ((noreturn))
usage (const char *why)
{
  fprintf (stderr, "%s: %s\n"
           "usage: %s rewrite [-n N] [-a] FILE\n"
           "       %s writers [-t N] [-w PAGES] [-d SECS] [-s BYTES] [-u USEC] FILE\n",
           progname, why, progname, progname);
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

/* Body of a writer thread (struct writer *): write until the end time;
 * stops early on a write error (recorded in err). */
static void *
writer_run (void *arg)
{
  struct writer *w = arg;
  const struct writers_conf *c = w->conf;
  unsigned char buf[PROBE_PAGE];
  uint64_t t0, t1;
  off_t off;
  ssize_t r;

  memset (buf, (int) (w->seed & 0xff), sizeof buf);
  for (;;) {
    t0 = now_ns ();
    if (t0 >= c->end_ns)
      break;
    off = (off_t) ((unsigned long) rand_r (&w->seed) % c->pages) * PROBE_PAGE;
    if (c->write_size < PROBE_PAGE)
      off += (off_t) ((unsigned long) rand_r (&w->seed) %
                      (PROBE_PAGE - c->write_size + 1));
    buf[0]++;
    t0 = now_ns ();
    r = pwrite (c->fd, buf, c->write_size, off);
    t1 = now_ns ();
    if (r != (ssize_t) c->write_size) {
      w->err = r == -1 ? errno : EIO;
      break;
    }
    if (w->n == w->cap) {
      size_t cap = w->cap ? w->cap * 2 : 65536;
      uint64_t *lat = realloc (w->lat, cap * sizeof *lat);
      if (lat == NULL) {
        w->err = ENOMEM;
        break;
      }
      w->lat = lat;
      w->cap = cap;
    }
    w->lat[w->n++] = t1 - t0;
    if (c->think_us)
      usleep ((useconds_t) c->think_us);
  }
  return NULL;
}

/* The writers workload described at the top. */
static int
probe_writers (struct writers_conf *c)
{
  unsigned char page[PROBE_PAGE];
  struct writer *w;
  uint64_t *all, sum = 0, start, secs_ns;
  size_t total = 0, k;
  unsigned long i;
  int err;

  c->fd = open (c->file, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (c->fd == -1)
    die ("open", c->file);
  memset (page, 0x5a, sizeof page);
  for (i = 0; i < c->pages; i++)
    if (pwrite (c->fd, page, PROBE_PAGE, (off_t) i * PROBE_PAGE) != PROBE_PAGE)
      die ("filling", c->file);
  if (fsync (c->fd) == -1)
    die ("fsync", c->file);

  w = calloc (c->threads, sizeof *w);
  if (w == NULL)
    die ("allocating writers for", c->file);
  start = now_ns ();
  c->end_ns = start + (uint64_t) c->secs * 1000000000;
  for (i = 0; i < c->threads; i++) {
    w[i].conf = c;
    w[i].seed = (unsigned) i + 1;
    err = pthread_create (&w[i].tid, NULL, writer_run, &w[i]);
    if (err) {
      errno = err;
      die ("starting a writer on", c->file);
    }
  }
  for (i = 0; i < c->threads; i++) {
    pthread_join (w[i].tid, NULL);
    total += w[i].n;
  }
  secs_ns = now_ns () - start;
  for (i = 0; i < c->threads; i++)
    if (w[i].err) {
      errno = w[i].err;
      die ("write to", c->file);
    }
  if (total == 0) {
    fprintf (stderr, "%s: no write finished in %lu s\n", progname, c->secs);
    free (w);
    close (c->fd);
    return 1;
  }
  all = malloc (total * sizeof *all);
  if (all == NULL)
    die ("allocating samples for", c->file);
  for (i = 0, k = 0; i < c->threads; i++) {
    memcpy (all + k, w[i].lat, w[i].n * sizeof *all);
    k += w[i].n;
    free (w[i].lat);
  }
  free (w);
  for (k = 0; k < total; k++)
    sum += all[k];
  qsort (all, total, sizeof *all, cmp_u64);
  printf ("writers n=%zu secs=%.3f bytes=%" PRIu64 " avg_ns=%" PRIu64
          " p50_ns=%" PRIu64 " p90_ns=%" PRIu64 " p99_ns=%" PRIu64
          " p999_ns=%" PRIu64 " p9999_ns=%" PRIu64 " max_ns=%" PRIu64 "\n",
          total, (double) secs_ns / 1e9, (uint64_t) total * c->write_size,
          sum / total, quantile (all, total, 0.5), quantile (all, total, 0.9),
          quantile (all, total, 0.99), quantile (all, total, 0.999),
          quantile (all, total, 0.9999), all[total - 1]);
  free (all);
  if (close (c->fd) == -1)
    die ("close", c->file);
  if (fflush (stdout) == EOF || ferror (stdout)) {
    fprintf (stderr, "%s: writing the results failed\n", progname);
    return 1;
  }
  return 0;
}

int
main (int argc, char *argv[])
{
  struct writers_conf wc = {
    .threads = 4, .pages = 4096, .secs = 5, .write_size = 512, .think_us = 20,
  };
  unsigned long n = 20;
  bool all = false, writers;
  int opt;

  if (argc < 2)
    usage ("no mode given");
  if (strcmp (argv[1], "rewrite") == 0)
    writers = false;
  else if (strcmp (argv[1], "writers") == 0)
    writers = true;
  else {
    char msg[128];
    snprintf (msg, sizeof msg, "unknown mode '%s'", argv[1]);
    usage (msg);
  }
  argv++;
  argc--;
  opterr = 0;                   /* usage () names the option */
  while ((opt = getopt (argc, argv, writers ? "t:w:d:s:u:" : "n:a")) != -1) {
    switch (opt) {
    case 'n': n = parse_count (optarg, "-n", PROBE_MAX_N); break;
    case 'a': all = true; break;
    case 't': wc.threads = parse_count (optarg, "-t", WRITERS_MAX_THREADS); break;
    case 'w': wc.pages = parse_count (optarg, "-w", WRITERS_MAX_PAGES); break;
    case 'd': wc.secs = parse_count (optarg, "-d", WRITERS_MAX_SECS); break;
    case 's': wc.write_size = parse_count (optarg, "-s", PROBE_PAGE); break;
    case 'u':
      /* 0 is allowed: writers that never pause. */
      wc.think_us = strcmp (optarg, "0") == 0 ? 0 :
        parse_count (optarg, "-u", 1000000);
      break;
    default: {
        char msg[128];
        snprintf (msg, sizeof msg, "-%c: unknown option or missing argument",
                  optopt);
        usage (msg);
      }
    }
  }
  if (optind != argc - 1)
    usage ("give exactly one FILE");
  if (writers) {
    wc.file = argv[optind];
    return probe_writers (&wc);
  }
  return probe_rewrite (argv[optind], n, all);
}
