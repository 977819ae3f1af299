/* SPDX-License-Identifier: BSD-3-Clause */
/* stabledif-bench: what stable pages cost, per policy
 * (stabledif-bench(1)).  See stabledif-bench.h for the parts. */
#include <config.h>

#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stabledif-bench.h"

/* Set by SIGINT/SIGTERM: the run in progress stops, the rest are
 * skipped, what was measured is reported. */
static volatile sig_atomic_t stop_requested;

static void
on_signal (int sig)
{
  stop_requested = 1;
}

static void
setup_signals (void)
{
  struct sigaction sa;

  memset (&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigemptyset (&sa.sa_mask);
  sigaction (SIGINT, &sa, NULL);
  sigaction (SIGTERM, &sa, NULL);
  sa.sa_handler = SIG_IGN;
  sigaction (SIGPIPE, &sa, NULL);   /* a dead server: an error, not death */
}

/* Size of our own device: --size, else the working set rounded up to a
 * MiB (at least one). */
static uint64_t
own_size (const struct bench_options *o)
{
  const uint64_t mib = 1024 * 1024;

  if (o->size)
    return o->size;
  return (o->working_set + mib - 1) / mib * mib;
}

int
main (int argc, char **argv)
{
  struct bench_options o;
  struct bench_results *r;
  struct serve s;
  struct svg_out svg;
  const char *uri, *ctl;
  char plugin[4096];
  int status = BENCH_EXIT_OK;

  switch (options_parse (argc, argv, &o)) {
  case 1: return BENCH_EXIT_OK;
  case -1: return BENCH_EXIT_USAGE;
  default: break;
  }
  /* Usage errors the options alone do not show: what our own nbdkit
   * would refuse, an --svg file that cannot be written. */
  if (o.uri == NULL &&
      serve_check_config (o.format, o.interval, own_size (&o),
                          o.page_size) == -1)
    return BENCH_EXIT_USAGE;
  if (svg_open (&svg, o.svg) == -1)
    return BENCH_EXIT_USAGE;
  setup_signals ();

  r = calloc (1, sizeof *r);
  if (r == NULL) {
    perror (PROG ": calloc");
    svg_abandon (&svg);
    return BENCH_EXIT_FAIL;
  }
  memset (&s, 0, sizeof s);
  if (o.uri == NULL) {
    serve_find_plugin (o.plugin, plugin, sizeof plugin);
    if (serve_start (&s, plugin, o.format, own_size (&o), o.interval) == -1) {
      svg_abandon (&svg);
      free (r);
      return BENCH_EXIT_FAIL;
    }
    uri = s.uri;
    ctl = s.ctl;
    r->self_served = true;
    r->plugin = s.plugin;
  }
  else {
    uri = o.uri;
    ctl = o.ctl;
  }

  if (run_policies (&o, uri, ctl, &stop_requested, r) == -1)
    status = BENCH_EXIT_FAIL;
  serve_stop (&s);

  if (r->nruns > 0) {
    if (o.json) {
      if (report_json (stdout, r) == -1)
        status = BENCH_EXIT_FAIL;
    }
    else
      report_text (stdout, r);
    if (svg_finish (&svg, r) == -1)
      status = BENCH_EXIT_FAIL;
  }
  else
    svg_abandon (&svg);         /* no run: no plot, no empty file */
  if (fflush (stdout) == EOF || ferror (stdout)) {
    perror (PROG ": writing the report");
    status = BENCH_EXIT_FAIL;
  }
  if (status == BENCH_EXIT_OK && r->interrupted)
    status = BENCH_EXIT_INTERRUPTED;
  free (r);
  return status;
}
