/* SPDX-License-Identifier: BSD-3-Clause */
/* stabledif-bench: one connection and one model run per policy, with the
 * device's counters read over the control socket before and after. */
#include <config.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "ctl-conn.h"
#include "stabledif-bench.h"

/* An unsigned member PATH (a.b.c) of the JSON object J, or -1 if it is
 * missing or not a non-negative integer. */
static int
json_u64 (json_t *j, const char *path, uint64_t *out)
{
  char buf[128], *save = NULL, *tok;

  snprintf (buf, sizeof buf, "%s", path);
  for (tok = strtok_r (buf, ".", &save); tok != NULL;
       tok = strtok_r (NULL, ".", &save))
    if ((j = json_object_get (j, tok)) == NULL)
      return -1;
  if (!json_is_integer (j) || json_integer_value (j) < 0)
    return -1;
  *out = (uint64_t) json_integer_value (j);
  return 0;
}

int
device_counters_read (const char *ctl, struct device_counters *dc,
                      char *err, size_t errlen)
{
  static const struct {
    const char *path;           /* in the reply */
    size_t off;                 /* in struct device_counters */
  } fields[] = {
    { "counters.writes_rejected",
      offsetof (struct device_counters, writes_rejected) },
    { "counters.write_errors.guard", offsetof (struct device_counters, guard) },
    { "counters.write_errors.app", offsetof (struct device_counters, app) },
    { "counters.write_errors.ref", offsetof (struct device_counters, ref) },
    { "counters.requests.dif.write",
      offsetof (struct device_counters, dif_writes) },
    { "counters.bytes.dif.write",
      offsetof (struct device_counters, dif_write_bytes) },
  };
  struct ctl_conn c;
  json_t *reply = NULL;
  char why[512];
  size_t i;
  int ret = -1;

  if (ctl_conn_open (&c, ctl, why, sizeof why) == -1) {
    snprintf (err, errlen, "control socket %s", why);
    return -1;
  }
  if (ctl_conn_request (&c, "counters", &reply, NULL, why, sizeof why) == -1) {
    snprintf (err, errlen, "control socket %s: counters: %s", ctl, why);
    goto out;
  }
  if (!json_is_true (json_object_get (reply, "ok"))) {
    const char *msg = json_string_value (json_object_get (reply, "error"));
    snprintf (err, errlen, "control socket %s: counters: the device "
              "answered: %s", ctl, msg ? msg : "(no message)");
    goto out;
  }
  for (i = 0; i < sizeof fields / sizeof fields[0]; i++)
    if (json_u64 (reply, fields[i].path,
                  (uint64_t *) ((char *) dc + fields[i].off)) == -1) {
      snprintf (err, errlen, "control socket %s: counters: the reply has no "
                "%s", ctl, fields[i].path);
      goto out;
    }
  ret = 0;
 out:
  json_decref (reply);
  ctl_conn_close (&c);
  return ret;
}

/* AFTER - BEFORE, member by member (counters only grow unless someone
 * reset the device during the run; then the difference is clipped). */
static void
device_counters_diff (struct device_counters *out,
                      const struct device_counters *after,
                      const struct device_counters *before)
{
#define D(f) out->f = after->f >= before->f ? after->f - before->f : after->f
  D (writes_rejected);
  D (guard);
  D (app);
  D (ref);
  D (dif_writes);
  D (dif_write_bytes);
#undef D
}

/* The progress line. */
struct progress_state {
  const char *policy;           /* running now */
  size_t run, nruns;            /* which of how many */
};

static void
show_progress (void *opaque, double elapsed, double duration,
               uint64_t writes, uint64_t writebacks)
{
  const struct progress_state *ps = opaque;

  fprintf (stderr, "\r\033[K" PROG ": [%zu/%zu] %-9s %5.1f/%.1f s  %" PRIu64
           " writes  %" PRIu64 " writebacks", ps->run + 1, ps->nruns,
           ps->policy, elapsed, duration, writes, writebacks);
  fflush (stderr);
}

/* Fill R->dev from the first connection and check the options against
 * the device. */
static int
learn_device (struct stabledif_handle *h, const struct bench_options *o,
              struct bench_results *r)
{
  struct device_info *d = &r->dev;
  const char *s;

  s = stabledif_get_profile (h);
  snprintf (d->profile, sizeof d->profile, "%s", s ? s : "");
  s = stabledif_get_format (h);
  snprintf (d->format, sizeof d->format, "%s", s ? s : "?");
  d->interval = (uint32_t) stabledif_get_interval (h);
  d->stable_writes = stabledif_get_stable_writes (h) == 1;
  d->size = (uint64_t) stabledif_get_size (h);

  if (d->interval == 0 || o->page_size % d->interval != 0) {
    fprintf (stderr, PROG ": --page-size %" PRIu32 " is not a multiple of "
             "the device's protection interval %" PRIu32 "\n",
             o->page_size, d->interval);
    return -1;
  }
  if (o->working_set > d->size) {
    fprintf (stderr, PROG ": --working-set %" PRIu64 " is larger than the "
             "device (%" PRIu64 " bytes)\n", o->working_set, d->size);
    return -1;
  }
  return 0;
}

/* Connect a handle for POLICY.  NULL after printing why. */
static struct stabledif_handle *
connect_policy (const struct bench_options *o, const char *uri, int policy)
{
  struct stabledif_handle *h = stabledif_create ();

  if (h == NULL) {
    fprintf (stderr, PROG ": %s\n", stabledif_get_error ());
    return NULL;
  }
  if (stabledif_set_policy (h, (enum stabledif_policy) policy) == -1 ||
      (policy == STABLEDIF_POLICY_NONE && stabledif_set_unsafe (h, true) == -1)
      || stabledif_set_race_delay_us (h, o->race_delay_us) == -1 ||
      stabledif_set_connections (h, o->connections) == -1 ||
      stabledif_connect_uri (h, uri) == -1) {
    fprintf (stderr, PROG ": policy %s: %s\n",
             stabledif_policy_name ((enum stabledif_policy) policy),
             stabledif_get_error ());
    stabledif_close (h);
    return NULL;
  }
  return h;
}

/* Fill MC's PI parameters and page size in memory from the device of H
 * (MC->layout and page_size set).  -1 after printing why. */
static int
layout_params (struct stabledif_handle *h, struct model_config *mc)
{
  const char *name = stabledif_get_format (h);
  uint16_t tag = 0, mask = 0;
  int has = stabledif_get_app_tag (h, &tag, &mask);

  mc->pi.format = name ? pi_format_lookup (name) : NULL;
  if (mc->pi.format == NULL || has == -1) {
    fprintf (stderr, PROG ": the device's format %s: %s\n",
             name ? name : "?", name ? "unknown" : stabledif_get_error ());
    return -1;
  }
  mc->pi.interval = (uint32_t) stabledif_get_interval (h);
  mc->pi.check_app = has == 1;
  mc->pi.app_tag = tag;
  mc->pi.app_mask = mask;
  mc->page_bytes = mc->page_size;
  if (mc->layout != BENCH_LAYOUT_SEPARATE)
    mc->page_bytes = mc->page_size / mc->pi.interval * pi_ext_size (&mc->pi);
  return 0;
}

/* One policy: connect, run the model, collect the counters. */
static int
run_one (const struct bench_options *o, const char *uri, const char *ctl,
         volatile sig_atomic_t *stop, struct bench_results *r, size_t idx)
{
  struct policy_result *p = &r->runs[idx];
  struct stabledif_handle *h;
  struct device_counters before, after;
  struct model_config mc;
  struct progress_state ps;
  char err[1024];
  int n, ret = -1;

  p->policy = o->policies[idx];
  h = connect_policy (o, uri, p->policy);
  if (h == NULL)
    return -1;
  if (idx == 0 && learn_device (h, o, r) == -1)
    goto out;
  p->effective = stabledif_get_effective_policy (h);
  n = stabledif_get_connections (h);
  if (n < 1) {
    fprintf (stderr, PROG ": policy %s: %s\n",
             stabledif_policy_name ((enum stabledif_policy) p->policy),
             stabledif_get_error ());
    goto out;
  }
  p->connections = (unsigned) n;
  p->unsafe = p->policy == STABLEDIF_POLICY_NONE && r->dev.stable_writes;

  if (ctl) {
    if (device_counters_read (ctl, &before, err, sizeof err) == -1) {
      fprintf (stderr, PROG ": %s\n", err);
      goto out;
    }
  }

  memset (&mc, 0, sizeof mc);
  mc.threads = o->threads;
  mc.npages = o->working_set / o->page_size;
  mc.page_size = o->page_size;
  mc.write_size = o->write_size;
  mc.think_us = o->think_us;
  mc.base = 0;
  mc.flush_interval_ms = o->flush_interval_ms;
  mc.duration = o->duration;
  mc.seed = o->seed;
  mc.layout = o->layout;
  if (layout_params (h, &mc) == -1)
    goto out;
  ps.policy = stabledif_policy_name ((enum stabledif_policy) p->policy);
  ps.run = idx;
  ps.nruns = o->npolicies;

  if (model_run (h, &mc, stop, o->progress ? show_progress : NULL, &ps,
                 &p->model, err, sizeof err) == -1) {
    if (o->progress)
      fprintf (stderr, "\r\033[K");
    fprintf (stderr, PROG ": policy %s: %s\n", ps.policy, err);
    goto out;
  }
  if (o->progress)
    fprintf (stderr, "\r\033[K");
  if (stabledif_wait_all (h) == -1) {
    /* Only callback-less requests report here; ours all have one. */
    fprintf (stderr, PROG ": policy %s: %s\n", ps.policy,
             stabledif_get_error ());
    goto out;
  }
  if (stabledif_get_stats (h, &p->stats, sizeof p->stats) == -1) {
    fprintf (stderr, PROG ": policy %s: %s\n", ps.policy,
             stabledif_get_error ());
    goto out;
  }
  if (ctl) {
    if (device_counters_read (ctl, &after, err, sizeof err) == -1) {
      fprintf (stderr, PROG ": %s\n", err);
      goto out;
    }
    device_counters_diff (&p->device, &after, &before);
    p->have_device = true;
  }
  p->ok = true;
  ret = 0;
 out:
  stabledif_close (h);
  return ret;
}

int
run_policies (const struct bench_options *o, const char *uri,
              const char *ctl, volatile sig_atomic_t *stop,
              struct bench_results *r)
{
  size_t i;

  r->opts = o;
  r->uri = uri;
  r->ctl = ctl;
  for (i = 0; i < o->npolicies; i++) {
    if (*stop) {
      r->interrupted = true;
      break;
    }
    if (run_one (o, uri, ctl, stop, r, i) == -1)
      return -1;                /* nruns: the runs that completed */
    r->nruns = i + 1;
    if (r->runs[i].model.interrupted) {
      r->interrupted = true;
      break;
    }
  }
  return 0;
}
