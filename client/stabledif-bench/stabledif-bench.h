/* SPDX-License-Identifier: BSD-3-Clause */
/* stabledif-bench: a page-cache model on libstabledif
 * (stabledif-bench(1)).
 *
 * Writer threads dirty the pages of a hot working set; before changing a
 * page they call stabledif_wait_stable on it, which is where a stable-page
 * policy costs time.  A flusher thread writes dirty pages back with
 * asynchronous writes and, every flush interval, waits for them and sends
 * a FLUSH (like fsync).  One run per policy on the same device; the report
 * is a table per policy in the shape of the dbench latency table of the
 * stable-pages work, plus the corruption the device and the client saw.
 *
 * Files: -options (command line), -hist (latency histograms), -model (the
 * page cache: writers and flusher), -run (one connection per policy,
 * counters before and after), -report (table and JSON), -svg (latency
 * plot), -serve (our own nbdkit when no URI is given), and main.
 */
#ifndef STABLEDIF_BENCH_H
#define STABLEDIF_BENCH_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "stabledif.h"
#include "pi.h"

#define PROG "stabledif-bench"

/* Exit statuses. */
#define BENCH_EXIT_OK 0          /* every run finished */
#define BENCH_EXIT_FAIL 1        /* a run or the device failed */
#define BENCH_EXIT_USAGE 2       /* bad command line */
#define BENCH_EXIT_INTERRUPTED 130 /* SIGINT/SIGTERM: partial report */

/* Most policies one invocation runs ("all" is five). */
#define BENCH_MAX_POLICIES 8

/* Bounds of the options (checked by options_parse). */
#define BENCH_MAX_THREADS 256
#define BENCH_MAX_DURATION 3600.0        /* seconds */
#define BENCH_MIN_DURATION 0.1           /* seconds */
#define BENCH_MAX_FLUSH_INTERVAL 60000   /* milliseconds */
#define BENCH_MAX_RACE_DELAY 1000000     /* microseconds */
#define BENCH_MAX_THINK 999999           /* microseconds (< 1 s) */
#define BENCH_MAX_PAGE_SIZE (1u << 20)   /* bytes */
#define BENCH_MAX_WORKING_SET (UINT64_C (1) << 34) /* bytes (16 GiB) */

/* ---- options (stabledif-bench-options.c) --------------------------- */

/* Everything the command line says. */
struct bench_options {
  unsigned threads;             /* writer threads */
  uint64_t working_set;         /* bytes of hot pages */
  double duration;              /* seconds per policy */
  unsigned flush_interval_ms;   /* period of the flusher's passes */
  uint32_t page_size;           /* bytes per page (multiple of interval) */
  uint32_t write_size;          /* bytes a writer changes per write (0:
                                   the whole page) */
  uint32_t think_us;            /* writer's sleep between writes (the
                                   application's own work) */
  uint32_t race_delay_us;       /* library delay checksum -> copy-out */
  unsigned connections;         /* connections per handle, 1 to
                                   STABLEDIF_MAX_CONNECTIONS
                                   (stabledif_set_connections) */
  int policies[BENCH_MAX_POLICIES]; /* enum stabledif_policy, in order */
  size_t npolicies;             /* entries in policies */
  bool json;                    /* --json: one JSON document on stdout */
  const char *svg;              /* --svg FILE, or NULL */
  const char *ctl;              /* -s/--ctl SOCKET, or NULL */
  const char *uri;              /* the device, or NULL: serve our own */
  const char *plugin;           /* --plugin PATH, or NULL: look for it */
  const char *format;           /* --format of our own device */
  uint64_t size;                /* --size of our own device (0: fit the
                                   working set) */
  uint32_t interval;            /* --interval of our own device (0: the
                                   plugin's default) */
  bool progress;                /* progress line on stderr */
  unsigned seed;                /* random seed of the writers */
  int layout;                   /* --layout: enum bench_layout */
};

/* Parse ARGV into O.  Returns 0, or 1 after printing help or the version
 * (exit 0), or -1 after printing an error naming the option (exit 2). */
int options_parse (int argc, char **argv, struct bench_options *o);

/* Parse a size with an optional K/M/G/T suffix (powers of 1024, an
 * optional "iB" or "B" after it).  Returns -1 if S is not one. */
int options_parse_size (const char *s, uint64_t *out);

/* ---- latency histograms (stabledif-bench-hist.c) ------------------- */

/* Sub-buckets per power of two: 2^HIST_SUB_BITS (about 3% wide). */
#define HIST_SUB_BITS 5
#define HIST_SUB (1u << HIST_SUB_BITS)
/* Values below HIST_SUB have a bucket each; then HIST_SUB per octave up
 * to 2^64. */
#define HIST_BUCKETS ((64 - HIST_SUB_BITS + 1) * HIST_SUB)

/* Latencies of one kind of operation, in nanoseconds. */
struct hist {
  uint64_t count;               /* operations recorded */
  uint64_t sum;                 /* sum of their latencies */
  uint64_t min;                 /* smallest (UINT64_MAX when empty) */
  uint64_t max;                 /* largest (0 when empty) */
  uint64_t bucket[HIST_BUCKETS]; /* counts per log-linear bucket */
};

void hist_init (struct hist *h);

/* Record one latency of NS nanoseconds. */
void hist_add (struct hist *h, uint64_t ns);

/* Add everything recorded in SRC to DST. */
void hist_merge (struct hist *dst, const struct hist *src);

/* The bucket of NS, and the smallest and largest value of bucket I. */
unsigned hist_bucket_of (uint64_t ns);
uint64_t hist_bucket_low (unsigned i);
uint64_t hist_bucket_high (unsigned i);

/* The latency at or below which a fraction Q (0..1) of the operations
 * fall: the top of the bucket holding that rank, never above max.  0
 * for an empty histogram. */
uint64_t hist_quantile (const struct hist *h, double q);

/* Mean latency (0 when empty). */
double hist_mean (const struct hist *h);

/* ---- the page-cache model (stabledif-bench-model.c) ---------------- */

/* What one run of the model does. */
/* How the pages hold their data and PI (--layout). */
enum bench_layout {
  BENCH_LAYOUT_SEPARATE = 0,    /* data only; the library makes the PI
                                   (stabledif_aio_pwrite) */
  BENCH_LAYOUT_INTERLEAVED,     /* extended blocks; the library fills the
                                   tuples in place at writeback */
  BENCH_LAYOUT_CALLER,          /* extended blocks; the writers make the
                                   PI with the data, sent unchecked */
};

/* The name of layout L ("separate", "interleaved", "caller"). */
const char *layout_name (int l);

struct model_config {
  unsigned threads;             /* writer threads */
  uint64_t npages;              /* pages in the working set */
  uint32_t page_size;           /* bytes per page */
  uint32_t write_size;          /* bytes changed per write (<= page) */
  uint32_t think_us;            /* a writer's sleep after each write */
  uint64_t base;                /* device offset of page 0 */
  unsigned flush_interval_ms;   /* period of the flusher's passes */
  double duration;              /* seconds the writers run */
  unsigned seed;                /* random seed of the writers */
  int layout;                   /* enum bench_layout */
  uint32_t page_bytes;          /* bytes of a page in memory: PAGE_SIZE,
                                   or its extended blocks */
  struct pi_params pi;          /* the device's PI (its format none:
                                   layouts other than separate act like
                                   it) */
};

/* What one run measured. */
struct model_result {
  struct hist write;            /* writer: lock, wait_stable, modify */
  struct hist writeback;        /* one page write: submit -> answer */
  struct hist flush;            /* one pass: writeback + FLUSH (fsync) */
  uint64_t write_bytes;         /* bytes the writers changed */
  uint64_t writeback_bytes;     /* bytes the flusher wrote back */
  uint64_t writeback_errors;    /* page writes that failed */
  uint64_t rejected;            /* ... of them with EIO (device refused) */
  uint64_t flush_errors;        /* FLUSH commands that failed */
  uint64_t elapsed_ns;          /* how long the writers ran */
  bool interrupted;             /* stopped early by a signal */
  char first_error[512];        /* first failure (a rejected page write
                                   under none names its blocks) */
};

/* Called about every 100 ms from the main thread while the model runs:
 * ELAPSED seconds of DURATION, WRITES so far. */
typedef void (*model_progress_fn) (void *opaque, double elapsed,
                                   double duration, uint64_t writes,
                                   uint64_t writebacks);

/* Run the model on the connected handle H.  STOP (may be NULL) ends the
 * run early when it becomes non-zero.  Returns 0 with *RES filled, or -1
 * with a message in ERR (setup failed: threads, memory, a submit or a
 * FLUSH refused by the library). */
int model_run (struct stabledif_handle *h, const struct model_config *c,
               volatile sig_atomic_t *stop, model_progress_fn progress,
               void *opaque, struct model_result *res,
               char *err, size_t errlen);

/* ---- device counters over the control socket (stabledif-bench-run.c) */

/* The corruption counters of the device (ctl "counters"). */
struct device_counters {
  uint64_t writes_rejected;     /* write requests refused for bad PI */
  uint64_t guard, app, ref;     /* write-side check failures, per check */
  uint64_t dif_writes;          /* write requests on the dif view */
  uint64_t dif_write_bytes;     /* bytes of them (wire) */
};

/* ---- one run per policy (stabledif-bench-run.c) -------------------- */

/* What the device is (from the first connection). */
struct device_info {
  char profile[256];            /* the profile line */
  char format[32];              /* PI format name */
  uint32_t interval;            /* protection interval */
  bool stable_writes;           /* the device checks host PI */
  uint64_t size;                /* data bytes */
};

/* The result of one policy. */
struct policy_result {
  int policy;                   /* requested (enum stabledif_policy) */
  int effective;                /* in effect after connect */
  unsigned connections;         /* connections in use after connect */
  bool unsafe;                  /* the unsafe flag was set (none) */
  bool ok;                      /* the run completed */
  struct model_result model;    /* what the writers and flusher saw */
  struct stabledif_stats stats; /* the library's counters */
  bool have_device;             /* DEVICE is valid (control socket) */
  struct device_counters device; /* device counters, diffed over the run */
};

/* Everything measured by one invocation. */
struct bench_results {
  const struct bench_options *opts; /* the options */
  const char *uri;              /* the device */
  const char *ctl;              /* its control socket, or NULL */
  bool self_served;             /* we started nbdkit (now stopped) */
  const char *plugin;           /* ... with this plugin */
  struct device_info dev;       /* the device */
  struct policy_result runs[BENCH_MAX_POLICIES]; /* in order */
  size_t nruns;                 /* runs that completed */
  bool interrupted;             /* a signal cut the runs short */
};

/* Run every policy of O against URI (control socket CTL, may be NULL),
 * filling *R.  Returns 0 if every run completed, -1 after printing the
 * first failure (the runs before it stay in *R). */
int run_policies (const struct bench_options *o, const char *uri,
                  const char *ctl, volatile sig_atomic_t *stop,
                  struct bench_results *r);

/* Read the device's corruption counters.  Returns -1 with a message in
 * ERR. */
int device_counters_read (const char *ctl, struct device_counters *dc,
                          char *err, size_t errlen);

/* ---- report (stabledif-bench-report.c) ----------------------------- */

/* The dbench-shaped tables and the summary, as text. */
void report_text (FILE *fp, const struct bench_results *r);

/* One JSON document.  Returns -1 (message printed) if it cannot be
 * built. */
int report_json (FILE *fp, const struct bench_results *r);

/* Corruption of a run as the device saw it: writes it rejected. */
uint64_t report_device_corruption (const struct policy_result *p);

/* Corruption of a run as the client saw it: writes whose data changed
 * between checksum and copy-out (the library's own check at copy-out;
 * the device's rejections are counted apart, in stats.rejected_writes). */
uint64_t report_client_corruption (const struct policy_result *p);

/* ---- SVG plot (stabledif-bench-svg.c) ------------------------------ */

/* The --svg file, open from before the first run to the end. */
struct svg_out {
  const char *path;             /* --svg FILE, or NULL: no plot */
  FILE *fp;                     /* open for writing, or NULL */
  bool created;                 /* svg_open created it: removed again if
                                   no plot is written to it */
};

/* Open PATH (may be NULL: no plot) for the plot, creating it if need
 * be, so that a path that cannot be written is a usage error before
 * any run.  A file already there is not truncated yet.  Returns -1
 * after printing one line naming --svg and PATH. */
int svg_open (struct svg_out *so, const char *path);

/* Replace the file's contents with the latency plot of R and close it.
 * Returns -1 after printing why (a file svg_open created is then
 * removed, not left half-written).  Nothing to do without a file. */
int svg_finish (struct svg_out *so, const struct bench_results *r);

/* Close the file without a plot: removed if svg_open created it, left
 * as it was otherwise.  Safe to call twice. */
void svg_abandon (struct svg_out *so);

/* Write it to FP. */
void svg_write (FILE *fp, const struct bench_results *r);

/* ---- our own nbdkit (stabledif-bench-serve.c) ---------------------- */

/* A private nbdkit serving the plugin. */
struct serve {
  pid_t pid;                    /* nbdkit, or 0 when not running */
  char dir[256];                /* private temporary directory */
  char sock[300];               /* NBD Unix socket in DIR */
  char ctl[300];                /* control socket in DIR */
  char pidfile[300];            /* nbdkit -P file in DIR */
  char log[300];                /* nbdkit's stderr in DIR */
  char uri[400];                /* nbd+unix:///dif?socket=SOCK */
  char plugin[4096];            /* the plugin nbdkit loads */
};

/* Find the plugin: EXPLICIT (--plugin), else $STABLEDIF_PLUGIN, else the
 * build tree's stabledif.so two levels above the directory this program
 * runs from (client/stabledif-bench/, or its .libs/ under libtool), else
 * "stabledif" (nbdkit's plugin directory).  Writes into BUF. */
void serve_find_plugin (const char *explicit_path, char *buf, size_t len);

/* Check what our own nbdkit would be given -- FORMAT, INTERVAL (0: the
 * plugin's default for FORMAT) and SIZE bytes -- as the plugin does
 * (common/pi.h), and that PAGE_SIZE is a whole number of its intervals
 * (what the model needs of any device), so that a bad --format,
 * --interval, --size or --page-size is a usage error before anything
 * runs.  Returns -1 after printing one line naming the option. */
int serve_check_config (const char *format, uint32_t interval,
                        uint64_t size, uint32_t page_size);

/* Start nbdkit with the plugin (format FORMAT, SIZE bytes, INTERVAL or
 * 0) on a private socket with ctl= next to it; wait (bounded) until it
 * is ready.  Returns -1 after printing why (nbdkit's own messages
 * included); S is then stopped and cleaned up. */
int serve_start (struct serve *s, const char *plugin, const char *format,
                 uint64_t size, uint32_t interval);

/* Stop nbdkit (SIGTERM, bounded wait, then SIGKILL) and remove the
 * private directory.  Safe to call twice. */
void serve_stop (struct serve *s);

#endif /* STABLEDIF_BENCH_H */
