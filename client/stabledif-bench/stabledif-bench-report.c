/* SPDX-License-Identifier: BSD-3-Clause */
/* stabledif-bench: the report, as dbench-shaped text tables or as one
 * JSON document.
 *
 * The table per policy follows the latency table of the stable-pages
 * work (dbench: Operation, Count, AvgLat, MaxLat, then a Throughput
 * line), with a P99 column; latencies are milliseconds, MB are 10^6
 * bytes.  Write is a writer's page change including its wait for a
 * stable page; Writeback one page write from submit to the device's
 * answer; Flush one flusher pass (write back, then FLUSH), like fsync.
 */
#include <config.h>

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "stabledif-bench.h"

static double
ms (uint64_t ns)
{
  return (double) ns / 1e6;
}

static double
seconds (const struct model_result *m)
{
  return (double) m->elapsed_ns / 1e9;
}

/* Application throughput: bytes the writers changed, MB/s. */
static double
write_mbs (const struct model_result *m)
{
  double s = seconds (m);
  return s > 0 ? (double) m->write_bytes / 1e6 / s : 0;
}

/* Bytes written back, MB/s. */
static double
writeback_mbs (const struct model_result *m)
{
  double s = seconds (m);
  return s > 0 ? (double) m->writeback_bytes / 1e6 / s : 0;
}

static const char *
policy_name (int p)
{
  const char *n = stabledif_policy_name ((enum stabledif_policy) p);
  return n ? n : "?";
}

uint64_t
report_device_corruption (const struct policy_result *p)
{
  return p->device.writes_rejected;
}

uint64_t
report_client_corruption (const struct policy_result *p)
{
  return p->stats.mismatches;
}

/* A size for people. */
static void
human_size (char *buf, size_t len, uint64_t v)
{
  if (v >= (UINT64_C (1) << 30) && v % (UINT64_C (1) << 20) == 0)
    snprintf (buf, len, "%.1f GiB", (double) v / (1 << 30));
  else if (v >= (1u << 20))
    snprintf (buf, len, "%.1f MiB", (double) v / (1 << 20));
  else if (v >= 1024)
    snprintf (buf, len, "%.1f KiB", (double) v / 1024);
  else
    snprintf (buf, len, "%" PRIu64 " bytes", v);
}

static void
op_row (FILE *fp, const char *name, const struct hist *h)
{
  fprintf (fp, " %-10s %10" PRIu64 " %9.3f %9.3f %9.3f\n", name, h->count,
           ms ((uint64_t) hist_mean (h)), ms (hist_quantile (h, 0.99)),
           ms (h->max));
}

static void
policy_table (FILE *fp, const struct bench_results *r,
              const struct policy_result *p)
{
  const struct model_result *m = &p->model;
  const struct stabledif_stats *st = &p->stats;
  uint64_t max = m->write.max;

  if (m->writeback.max > max)
    max = m->writeback.max;
  if (m->flush.max > max)
    max = m->flush.max;

  fprintf (fp, "\npolicy %s", policy_name (p->policy));
  if (p->effective != p->policy)
    fprintf (fp, " (in effect: %s)", policy_name (p->effective));
  if (p->unsafe)
    fprintf (fp, " (unsafe flag set: the device checks PI)");
  fprintf (fp, "%s\n", m->interrupted ? "  [interrupted]" : "");
  fprintf (fp, " Operation       Count    AvgLat    P99Lat    MaxLat\n");
  fprintf (fp, " ---------------------------------------------------\n");
  op_row (fp, "Write", &m->write);
  op_row (fp, "Writeback", &m->writeback);
  op_row (fp, "Flush", &m->flush);
  fprintf (fp, "\nThroughput %.3f MB/sec  %u writers  max_latency=%.3f ms  "
           "(writeback %.3f MB/sec)\n", write_mbs (m), r->opts->threads,
           ms (max), writeback_mbs (m));
  fprintf (fp, "Stable pages: %" PRIu64 " of %" PRIu64 " writes waited, "
           "%.3f ms in all; %" PRIu64 " pages snapshotted\n",
           st->waits, st->wait_calls, ms (st->wait_ns), st->snapshots);
  if (p->have_device)
    fprintf (fp, "Corruption seen by the device: %" PRIu64 " writes "
             "rejected (guard %" PRIu64 ", app %" PRIu64 ", ref %" PRIu64
             " errors)\n", p->device.writes_rejected, p->device.guard,
             p->device.app, p->device.ref);
  else
    fprintf (fp, "Corruption seen by the device: not known (no control "
             "socket; give --ctl)\n");
  fprintf (fp, "Corruption seen by the client: %" PRIu64 " writes changed "
           "between checksum and copy-out (%" PRIu64 " blocks), %" PRIu64
           " writes rejected\n", st->mismatches, st->mismatched_blocks,
           st->rejected_writes);
  if (m->first_error[0])
    fprintf (fp, "  first failure: %s\n", m->first_error);
}

/* Whether a run's average write is slower than its 99th percentile:
 * a few writes (under 1%) took far longer than the rest. */
static bool
heavy_tail (const struct model_result *m)
{
  return m->write.count > 0 &&
    hist_mean (&m->write) > (double) hist_quantile (&m->write, 0.99);
}

static void
summary (FILE *fp, const struct bench_results *r)
{
  bool tail = false;
  size_t i;

  fprintf (fp, "\nSummary (latencies in ms)\n");
  fprintf (fp, " %-10s %-10s %10s %10s %11s %10s %10s %9s %8s %8s\n",
           "policy", "in effect", "write avg", "write p99", "write p99.9",
           "write max", "MB/sec", "waited", "dev rej", "changed");
  for (i = 0; i < r->nruns; i++) {
    const struct policy_result *p = &r->runs[i];
    const struct model_result *m = &p->model;
    char dev[32];

    if (p->have_device)
      snprintf (dev, sizeof dev, "%" PRIu64, report_device_corruption (p));
    else
      snprintf (dev, sizeof dev, "-");
    fprintf (fp, " %-10s %-10s %10.3f %10.3f %11.3f %10.3f %10.3f %9"
             PRIu64 " %8s %8" PRIu64 "\n", policy_name (p->policy),
             policy_name (p->effective), ms ((uint64_t) hist_mean (&m->write)),
             ms (hist_quantile (&m->write, 0.99)),
             ms (hist_quantile (&m->write, 0.999)), ms (m->write.max),
             write_mbs (m), p->stats.waits, dev,
             report_client_corruption (p));
    tail = tail || heavy_tail (m);
  }
  fprintf (fp, " (waited: writes that blocked for a stable page; dev rej: "
           "writes the device rejected;\n  changed: writes whose data "
           "changed after the checksum, seen by the client)\n");
  if (tail)
    fprintf (fp, " (write avg above write p99: under 1%% of the writes took "
             "far longer than the rest,\n  under wait a whole writeback; "
             "see write p99.9 and write max)\n");
}

void
report_text (FILE *fp, const struct bench_results *r)
{
  const struct bench_options *o = r->opts;
  char ws[32], conns[80];
  size_t i;

  human_size (ws, sizeof ws, o->working_set);
  /* The connections asked for, and those in use if fewer (the server
   * does not advertise multi-conn). */
  if (r->nruns > 0 && r->runs[0].connections != o->connections)
    snprintf (conns, sizeof conns, " (in use: %u; the server does not "
              "advertise multi-conn)", r->runs[0].connections);
  else
    conns[0] = '\0';
  if (r->self_served)
    fprintf (fp, PROG ": our own nbdkit with plugin %s\n", r->plugin);
  else
    fprintf (fp, PROG ": %s\n", r->uri);
  fprintf (fp, "device: %s\n", r->dev.profile);
  fprintf (fp, "model: %u writers, working set %s (%" PRIu64 " pages of %"
           PRIu32 " bytes), %" PRIu32 "-byte writes %" PRIu32 " us apart, "
           "flush every %u ms,\n       %.1f s per policy, race delay %" PRIu32
           " us, %u connection%s per handle%s, layout %s\n", o->threads, ws,
           o->working_set / o->page_size, o->page_size, o->write_size,
           o->think_us, o->flush_interval_ms, o->duration, o->race_delay_us,
           o->connections, o->connections == 1 ? "" : "s", conns,
           layout_name (o->layout));
  for (i = 0; i < r->nruns; i++)
    policy_table (fp, r, &r->runs[i]);
  if (r->nruns > 1)
    summary (fp, r);
  if (r->interrupted)
    fprintf (fp, "\n(interrupted: %zu of %zu policies ran)\n", r->nruns,
             o->npolicies);
}

/* ---- JSON ---- */

static json_t *
u64 (uint64_t v)
{
  return json_integer (v > (uint64_t) INT64_MAX ? INT64_MAX : (json_int_t) v);
}

static json_t *
op_json (const struct hist *h)
{
  json_t *buckets = json_array ();
  unsigned i;

  /* Non-empty buckets: [top of bucket in ns, count]. */
  for (i = 0; buckets && i < HIST_BUCKETS; i++)
    if (h->bucket[i])
      json_array_append_new (buckets, json_pack ("[o, o]",
                                                 u64 (hist_bucket_high (i)),
                                                 u64 (h->bucket[i])));
  return json_pack ("{s:o, s:f, s:f, s:f, s:f, s:f, s:f, s:o}",
                    "count", u64 (h->count),
                    "avg_ms", ms ((uint64_t) hist_mean (h)),
                    "p50_ms", ms (hist_quantile (h, 0.50)),
                    "p99_ms", ms (hist_quantile (h, 0.99)),
                    "p999_ms", ms (hist_quantile (h, 0.999)),
                    "min_ms", ms (h->count ? h->min : 0),
                    "max_ms", ms (h->max),
                    "histogram_ns", buckets ? buckets : json_null ());
}

static json_t *
client_json (const struct stabledif_stats *s)
{
  return json_pack ("{s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:f, s:o, s:o, "
                    "s:o, s:o}",
                    "writes", u64 (s->writes),
                    "write_errors", u64 (s->write_errors),
                    "rejected_writes", u64 (s->rejected_writes),
                    "mismatches", u64 (s->mismatches),
                    "mismatched_blocks", u64 (s->mismatched_blocks),
                    "wait_calls", u64 (s->wait_calls),
                    "waits", u64 (s->waits),
                    "wait_ms", ms (s->wait_ns),
                    "snapshots", u64 (s->snapshots),
                    "snapshot_bytes", u64 (s->snapshot_bytes),
                    "dma_bytes", u64 (s->dma_bytes),
                    "flushes", u64 (s->flushes));
}

static json_t *
device_json (const struct policy_result *p)
{
  if (!p->have_device)
    return json_null ();
  return json_pack ("{s:o, s:o, s:o, s:o, s:o, s:o}",
                    "writes_rejected", u64 (p->device.writes_rejected),
                    "guard_errors", u64 (p->device.guard),
                    "app_errors", u64 (p->device.app),
                    "ref_errors", u64 (p->device.ref),
                    "writes", u64 (p->device.dif_writes),
                    "write_bytes", u64 (p->device.dif_write_bytes));
}

/* S as a JSON string (null for NULL).  JSON strings are UTF-8: in a
 * string that is not (a path with a Latin-1 byte, say), every byte
 * outside ASCII becomes '?' rather than fail the whole report. */
static json_t *
text (const char *s)
{
  json_t *j;
  char *copy, *c;

  if (s == NULL)
    return json_null ();
  if ((j = json_string (s)) != NULL)
    return j;
  if ((copy = strdup (s)) == NULL)
    return NULL;
  for (c = copy; *c; c++)
    if ((unsigned char) *c >= 0x80)
      *c = '?';
  j = json_string (copy);
  free (copy);
  return j;
}

static json_t *
run_json (const struct policy_result *p)
{
  const struct model_result *m = &p->model;

  return json_pack ("{s:s, s:s, s:I, s:b, s:b, s:f, s:{s:o, s:o, s:o}, s:f,"
                    " s:f, s:o, s:o, s:o, s:o, s:{s:o, s:o}, s:o}",
                    "policy", policy_name (p->policy),
                    "effective", policy_name (p->effective),
                    "connections", (json_int_t) p->connections,
                    "unsafe", p->unsafe,
                    "interrupted", m->interrupted,
                    "elapsed_s", seconds (m),
                    "operations",
                      "write", op_json (&m->write),
                      "writeback", op_json (&m->writeback),
                      "flush", op_json (&m->flush),
                    "throughput_mb_s", write_mbs (m),
                    "writeback_mb_s", writeback_mbs (m),
                    "write_bytes", u64 (m->write_bytes),
                    "writeback_bytes", u64 (m->writeback_bytes),
                    "client", client_json (&p->stats),
                    "device", device_json (p),
                    "corruption",
                      "device", p->have_device
                                  ? u64 (report_device_corruption (p))
                                  : json_null (),
                      "client", u64 (report_client_corruption (p)),
                    "first_error", m->first_error[0]
                                     ? text (m->first_error)
                                     : json_null ());
}

int
report_json (FILE *fp, const struct bench_results *r)
{
  const struct bench_options *o = r->opts;
  json_t *runs = json_array (), *doc;
  size_t i;
  int ret = 0;

  for (i = 0; runs && i < r->nruns; i++) {
    json_t *j = run_json (&r->runs[i]);
    if (j == NULL || json_array_append_new (runs, j) == -1) {
      json_decref (runs);
      runs = NULL;
    }
  }
  doc = json_pack ("{s:s, s:s, s:o, s:o, s:b, s:o, s:{s:o, s:s, s:I, s:b, s:o},"
                   " s:{s:I, s:o, s:I, s:I, s:I, s:I, s:f, s:I, s:I, s:I, s:s},"
                   " s:b, s:o}",
                   "program", PROG,
                   "version", PACKAGE_VERSION,
                   "uri", text (r->uri),
                   "ctl", text (r->ctl),
                   "self_served", r->self_served,
                   "plugin", text (r->plugin),
                   "device",
                     "profile", text (r->dev.profile),
                     "format", r->dev.format,
                     "interval", (json_int_t) r->dev.interval,
                     "stable_writes", r->dev.stable_writes,
                     "size", u64 (r->dev.size),
                   "config",
                     "threads", (json_int_t) o->threads,
                     "working_set", u64 (o->working_set),
                     "page_size", (json_int_t) o->page_size,
                     "write_size", (json_int_t) o->write_size,
                     "think_us", (json_int_t) o->think_us,
                     "flush_interval_ms", (json_int_t) o->flush_interval_ms,
                     "duration_s", o->duration,
                     "race_delay_us", (json_int_t) o->race_delay_us,
                     "seed", (json_int_t) o->seed,
                     "connections", (json_int_t) o->connections,
                     "layout", layout_name (o->layout),
                   "interrupted", r->interrupted,
                   "runs", runs);
  if (doc == NULL) {
    fprintf (stderr, PROG ": building the JSON report failed: out of "
             "memory\n");
    return -1;
  }
  if (json_dumpf (doc, fp, JSON_INDENT (2) | JSON_PRESERVE_ORDER) == -1) {
    fprintf (stderr, PROG ": writing the JSON report failed\n");
    ret = -1;
  }
  else
    fputc ('\n', fp);
  json_decref (doc);
  return ret;
}
