/* SPDX-License-Identifier: BSD-3-Clause */
/* stabledif-bench: the page-cache model.
 *
 * Pages live in one buffer; each has a lock (the page lock), a dirty bit
 * and a writeback bit.  A writer picks a random page, takes its lock,
 * calls stabledif_wait_stable on it (the library's wait_for_stable_page:
 * it blocks while a write of the page is pinned under wait or wait-sent),
 * changes some bytes, marks it dirty and unlocks.  The flusher, every
 * flush interval, takes each dirty page that is not under writeback, and
 * under its lock clears the dirty bit, sets writeback and submits an
 * asynchronous write of the page (so the library checksums -- and under
 * snapshot copies -- a page no writer is changing); it then waits for the
 * pass's writes and sends a FLUSH, which together are the pass's "flush"
 * latency (fsync).  The completion callback (the library's I/O thread)
 * clears writeback, records the write's latency, and dirties the page
 * again if the write failed, as the kernel keeps data it could not write.
 *
 * Nothing keeps a writer from changing a page whose write was submitted
 * under policies snapshot and none: the first copied it, the second lets
 * the device see data that no longer matches its guard.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>

#include "stabledif-bench.h"

/* How often the main thread looks at the clock, the stop flag and the
 * progress line, in milliseconds. */
#define TICK_MS 100

/* One page of the working set. */
struct page {
  pthread_mutex_t lock;         /* the page lock */
  atomic_bool dirty;            /* changed since its last writeback began */
  atomic_bool writeback;        /* a write of it is in flight */
  uint64_t submit_ns;           /* when that write was submitted
                                   (flusher writes it, the completion
                                   reads it; the library orders them) */
  struct model *m;              /* back pointer for the callback */
  uint64_t index;               /* page number */
};

/* One writer thread. */
struct writer {
  pthread_t thread;             /* the thread */
  struct model *m;              /* the model */
  unsigned id;                  /* 0.. */
  uint64_t rng;                 /* xorshift64* state */
  struct hist lat;              /* its write latencies */
  uint64_t bytes;               /* bytes it changed */
  atomic_uint_fast64_t ops;     /* writes done (read for progress) */
};

/* The state of one run. */
struct model {
  const struct model_config *c; /* what to do */
  struct stabledif_handle *h;   /* the connection */
  uint8_t *mem;                 /* the pages' bytes */
  struct page *pages;           /* npages */
  struct writer *writers;       /* c->threads */
  atomic_bool go;               /* writers may start */
  atomic_bool stop_writers;     /* writers stop */
  atomic_bool failed;           /* a writer or the flusher failed */

  pthread_mutex_t lock;         /* protects the fields below */
  pthread_cond_t cond;          /* pending reached 0, or stop_flusher */
  bool stop_flusher;            /* flusher: finish the pass and exit */
  uint64_t pending;             /* writes of the current pass in flight */
  struct hist wb_lat;           /* writeback latencies */
  struct hist flush_lat;        /* pass (fsync) latencies (flusher) */
  uint64_t wb_bytes;            /* bytes written back */
  uint64_t wb_errors;           /* failed page writes */
  uint64_t wb_rejected;         /* ... with EIO */
  uint64_t flush_errors;        /* failed FLUSHes */
  atomic_uint_fast64_t wb_done; /* completed page writes (progress) */
  char first_error[512];        /* first failure message */
};

static uint64_t
now_ns (void)
{
  struct timespec ts;

  clock_gettime (CLOCK_MONOTONIC, &ts);
  return (uint64_t) ts.tv_sec * 1000000000u + (uint64_t) ts.tv_nsec;
}

/* xorshift64*: fast, good enough to pick pages. */
static uint64_t
rng_next (uint64_t *s)
{
  uint64_t x = *s;

  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  *s = x;
  return x * UINT64_C (0x2545F4914F6CDD1D);
}

/* Keep the first failure message, WHO: DETAIL (lock held). */
static void
note_error_locked (struct model *m, const char *who, const char *detail)
{
  if (m->first_error[0] == '\0')
    snprintf (m->first_error, sizeof m->first_error, "%s: %s", who,
              detail ? detail : "unknown error");
}

static void
note_error (struct model *m, const char *who, const char *detail)
{
  pthread_mutex_lock (&m->lock);
  note_error_locked (m, who, detail);
  pthread_mutex_unlock (&m->lock);
}

/* Completion of one page write (the library's I/O thread). */
static void
writeback_done (void *user_data, int error)
{
  struct page *pg = user_data;
  struct model *m = pg->m;
  uint64_t lat = now_ns () - pg->submit_ns;

  if (error)
    atomic_store (&pg->dirty, true);    /* keep the data: write it again */
  atomic_store (&pg->writeback, false);

  pthread_mutex_lock (&m->lock);
  hist_add (&m->wb_lat, lat);
  m->wb_bytes += m->c->page_size;
  if (error) {
    m->wb_errors++;
    if (error == EIO)
      m->wb_rejected++;
    note_error_locked (m, "page write", stabledif_get_error ());
  }
  if (--m->pending == 0)
    pthread_cond_broadcast (&m->cond);
  pthread_mutex_unlock (&m->lock);
  atomic_fetch_add_explicit (&m->wb_done, 1, memory_order_relaxed);
}

/* Fill LEN bytes at P (LEN a multiple of 8 or not) with a pattern that
 * differs from every earlier write of any writer: the 64-bit tag. */
static void
fill (uint8_t *p, uint32_t len, uint64_t tag)
{
  uint32_t i;

  for (i = 0; i + 8 <= len; i += 8)
    memcpy (p + i, &tag, 8);
  if (i < len)
    memcpy (p + i, &tag, len - i);
}

/* Write the WRITE_SIZE bytes at data offset OFF of page IDX at ADDR
 * with the pattern TAG: in place, or, for the layouts with extended
 * blocks, into the data of each block they touch; layout caller then
 * makes the PI of those blocks, as an application that protects its
 * data where it makes it. */
static void
page_write (const struct model_config *c, uint8_t *addr, uint64_t idx,
            uint32_t off, uint64_t tag)
{
  const uint32_t iv = c->pi.interval;
  const uint32_t es = pi_ext_size (&c->pi);
  uint32_t done = 0;

  if (c->layout == BENCH_LAYOUT_SEPARATE || es == iv) {
    fill (addr + off, c->write_size, tag);
    return;
  }
  while (done < c->write_size) {
    uint32_t o = off + done, in = iv - o % iv;

    if (in > c->write_size - done)
      in = c->write_size - done;
    fill (addr + o / iv * es + o % iv, in, tag ^ done);
    done += in;
  }
  if (c->layout == BENCH_LAYOUT_CALLER && c->write_size > 0) {
    uint32_t first = off / iv, last = (off + c->write_size - 1) / iv;
    uint64_t lba = (c->base + idx * c->page_size) / iv + first;

    pi_generate_ext (&c->pi, addr + first * es, last - first + 1, lba);
  }
}

static void *
writer_thread (void *arg)
{
  struct writer *w = arg;
  struct model *m = w->m;
  const struct model_config *c = m->c;
  const uint32_t span = c->page_size - c->write_size;
  const struct timespec think = {
    .tv_sec = 0, .tv_nsec = (long) c->think_us * 1000,
  };
  uint64_t seq = 0;

  /* Sleep as long as asked, not the default 50 us of timer slack more. */
  if (c->think_us)
    prctl (PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
  while (!atomic_load (&m->go))
    sched_yield ();

  while (!atomic_load_explicit (&m->stop_writers, memory_order_relaxed)) {
    uint64_t r = rng_next (&w->rng);
    uint64_t idx = r % c->npages;
    uint32_t off = span ? (uint32_t) ((r >> 32) % (span + 1)) & ~7u : 0;
    struct page *pg = &m->pages[idx];
    uint8_t *addr = m->mem + idx * c->page_bytes;
    uint64_t t0, t1;

    t0 = now_ns ();
    pthread_mutex_lock (&pg->lock);
    if (stabledif_wait_stable (m->h, addr, c->page_bytes) == -1) {
      pthread_mutex_unlock (&pg->lock);
      note_error (m, "writer", stabledif_get_error ());
      atomic_store (&m->failed, true);
      break;
    }
    page_write (c, addr, idx, off, ((uint64_t) w->id << 48) ^ ++seq ^
                (idx << 20));
    atomic_store_explicit (&pg->dirty, true, memory_order_relaxed);
    pthread_mutex_unlock (&pg->lock);
    t1 = now_ns ();

    hist_add (&w->lat, t1 - t0);
    w->bytes += c->write_size;
    atomic_fetch_add_explicit (&w->ops, 1, memory_order_relaxed);
    if (think.tv_nsec)
      nanosleep (&think, NULL);
  }
  return NULL;
}

/* Submit the write of page PG as its layout says: the cookie or -1. */
static int64_t
submit_layout (struct model *m, struct page *pg)
{
  const struct model_config *c = m->c;
  uint8_t *addr = m->mem + pg->index * c->page_bytes;
  const uint64_t off = c->base + pg->index * c->page_size;
  struct stabledif_pi pi = {
    .flags = STABLEDIF_PI_INTERLEAVED, .app_tag = c->pi.app_tag,
    .app_mask = c->pi.app_mask, .tuples = NULL,
  };

  if (c->layout == BENCH_LAYOUT_SEPARATE)
    return stabledif_aio_pwrite (m->h, addr, c->page_size, off, 0,
                                 writeback_done, pg);
  if (c->layout == BENCH_LAYOUT_CALLER)
    pi.flags |= STABLEDIF_PI_CALLER;
  return stabledif_aio_pwrite_pi (m->h, addr, c->page_size, off, &pi, 0,
                                  writeback_done, pg);
}

/* Submit the write of page PG (its lock held).  Returns -1 on failure
 * (message noted). */
static int
submit_page (struct model *m, struct page *pg)
{
  atomic_store (&pg->dirty, false);
  atomic_store (&pg->writeback, true);
  pthread_mutex_lock (&m->lock);
  m->pending++;
  pthread_mutex_unlock (&m->lock);
  pg->submit_ns = now_ns ();
  if (submit_layout (m, pg) == -1) {
    pthread_mutex_lock (&m->lock);
    note_error_locked (m, "flusher", stabledif_get_error ());
    m->pending--;
    pthread_mutex_unlock (&m->lock);
    atomic_store (&pg->writeback, false);
    atomic_store (&pg->dirty, true);
    return -1;
  }
  return 0;
}

/* One pass: write back every dirty page, wait for the writes, FLUSH.
 * Returns -1 if the library refused a request. */
static int
flush_pass (struct model *m)
{
  uint64_t t0 = now_ns (), i;
  int ret = 0;

  for (i = 0; i < m->c->npages; i++) {
    struct page *pg = &m->pages[i];

    if (!atomic_load_explicit (&pg->dirty, memory_order_relaxed) ||
        atomic_load (&pg->writeback))
      continue;
    pthread_mutex_lock (&pg->lock);
    if (atomic_load (&pg->dirty) && !atomic_load (&pg->writeback))
      ret = submit_page (m, pg);
    pthread_mutex_unlock (&pg->lock);
    if (ret == -1)
      break;
  }

  pthread_mutex_lock (&m->lock);
  while (m->pending > 0)
    pthread_cond_wait (&m->cond, &m->lock);
  pthread_mutex_unlock (&m->lock);
  if (ret == -1)
    return -1;

  if (stabledif_flush (m->h, 0) == -1) {
    pthread_mutex_lock (&m->lock);
    m->flush_errors++;
    note_error_locked (m, "flush", stabledif_get_error ());
    pthread_mutex_unlock (&m->lock);
  }
  pthread_mutex_lock (&m->lock);
  hist_add (&m->flush_lat, now_ns () - t0);
  pthread_mutex_unlock (&m->lock);
  return 0;
}

static void *
flusher_thread (void *arg)
{
  struct model *m = arg;
  const uint64_t period = (uint64_t) m->c->flush_interval_ms * 1000000u;
  uint64_t next = now_ns () + period;

  for (;;) {
    struct timespec ts;
    bool stop;

    pthread_mutex_lock (&m->lock);
    ts.tv_sec = (time_t) (next / 1000000000u);
    ts.tv_nsec = (long) (next % 1000000000u);
    while (!m->stop_flusher &&
           pthread_cond_timedwait (&m->cond, &m->lock, &ts) != ETIMEDOUT)
      ;
    stop = m->stop_flusher;
    pthread_mutex_unlock (&m->lock);
    if (stop)
      break;

    next += period;
    if (flush_pass (m) == -1) {
      atomic_store (&m->failed, true);
      break;
    }
    /* A pass longer than the period: start the next one now rather than
     * catching up with a burst. */
    if (next < now_ns ())
      next = now_ns ();
  }
  return NULL;
}

/* Free what setup made (threads already joined). */
static void
model_free (struct model *m)
{
  uint64_t i;

  if (m->pages)
    for (i = 0; i < m->c->npages; i++)
      pthread_mutex_destroy (&m->pages[i].lock);
  free (m->pages);
  free (m->writers);
  free (m->mem);
  pthread_cond_destroy (&m->cond);
  pthread_mutex_destroy (&m->lock);
}

/* Allocate pages and writers, set up the lock and condition. */
static int
model_setup (struct model *m, char *err, size_t errlen)
{
  const struct model_config *c = m->c;
  pthread_condattr_t ca;
  uint64_t i;
  void *mem;

  pthread_mutex_init (&m->lock, NULL);
  pthread_condattr_init (&ca);
  pthread_condattr_setclock (&ca, CLOCK_MONOTONIC);
  pthread_cond_init (&m->cond, &ca);
  pthread_condattr_destroy (&ca);
  hist_init (&m->wb_lat);
  hist_init (&m->flush_lat);

  if (posix_memalign (&mem, c->page_size, c->npages * c->page_bytes) != 0) {
    snprintf (err, errlen, "allocating a working set of %" PRIu64 " bytes: "
              "%s", c->npages * c->page_bytes, strerror (ENOMEM));
    return -1;
  }
  m->mem = mem;
  memset (m->mem, 0, c->npages * c->page_bytes);
  /* The writers' own PI starts right for every block. */
  if (c->layout == BENCH_LAYOUT_CALLER)
    pi_generate_ext (&c->pi, m->mem, c->npages * c->page_size /
                     c->pi.interval, c->base / c->pi.interval);
  m->pages = calloc (c->npages, sizeof *m->pages);
  m->writers = calloc (c->threads, sizeof *m->writers);
  if (m->pages == NULL || m->writers == NULL) {
    snprintf (err, errlen, "allocating %" PRIu64 " pages: %s", c->npages,
              strerror (ENOMEM));
    free (m->pages);
    m->pages = NULL;
    return -1;
  }
  for (i = 0; i < c->npages; i++) {
    struct page *pg = &m->pages[i];
    pthread_mutex_init (&pg->lock, NULL);
    atomic_init (&pg->dirty, true);     /* fresh pages: written at first */
    atomic_init (&pg->writeback, false);
    pg->m = m;
    pg->index = i;
  }
  for (i = 0; i < c->threads; i++) {
    struct writer *w = &m->writers[i];
    w->m = m;
    w->id = (unsigned) i;
    /* Distinct non-zero states. */
    w->rng = (UINT64_C (0x9E3779B97F4A7C15) * (i + 1)) ^
      ((uint64_t) c->seed << 17) ^ 1;
    hist_init (&w->lat);
    atomic_init (&w->ops, 0);
  }
  return 0;
}

int
model_run (struct stabledif_handle *h, const struct model_config *c,
           volatile sig_atomic_t *stop, model_progress_fn progress,
           void *opaque, struct model_result *res, char *err, size_t errlen)
{
  struct model m = { .c = c, .h = h };
  pthread_t flusher;
  unsigned started = 0, i;
  uint64_t t0 = now_ns (), t_end, deadline;
  bool flusher_started = false;
  int r, ret = -1;

  memset (res, 0, sizeof *res);
  hist_init (&res->write);
  hist_init (&res->writeback);
  hist_init (&res->flush);
  if (model_setup (&m, err, errlen) == -1) {
    model_free (&m);
    return -1;
  }

  for (i = 0; i < c->threads; i++) {
    r = pthread_create (&m.writers[i].thread, NULL, writer_thread,
                        &m.writers[i]);
    if (r != 0) {
      snprintf (err, errlen, "starting writer thread %u: %s", i,
                strerror (r));
      goto stop_threads;
    }
    started++;
  }
  r = pthread_create (&flusher, NULL, flusher_thread, &m);
  if (r != 0) {
    snprintf (err, errlen, "starting the flusher thread: %s", strerror (r));
    goto stop_threads;
  }
  flusher_started = true;

  t0 = now_ns ();
  deadline = t0 + (uint64_t) (c->duration * 1e9);
  atomic_store (&m.go, true);
  for (;;) {
    uint64_t now = now_ns (), left;
    struct timespec ts;

    if (now >= deadline || (stop && *stop) || atomic_load (&m.failed))
      break;
    if (progress) {
      uint64_t ops = 0;
      for (i = 0; i < started; i++)
        ops += atomic_load_explicit (&m.writers[i].ops, memory_order_relaxed);
      progress (opaque, (double) (now - t0) / 1e9, c->duration, ops,
                atomic_load_explicit (&m.wb_done, memory_order_relaxed));
    }
    left = deadline - now;
    if (left > (uint64_t) TICK_MS * 1000000u)
      left = (uint64_t) TICK_MS * 1000000u;
    ts.tv_sec = (time_t) (left / 1000000000u);
    ts.tv_nsec = (long) (left % 1000000000u);
    nanosleep (&ts, NULL);
  }
  ret = 0;

 stop_threads:
  atomic_store (&m.go, true);           /* release writers that wait */
  atomic_store (&m.stop_writers, true);
  for (i = 0; i < started; i++)
    pthread_join (m.writers[i].thread, NULL);
  t_end = now_ns ();
  if (flusher_started) {
    pthread_mutex_lock (&m.lock);
    m.stop_flusher = true;
    pthread_cond_broadcast (&m.cond);
    pthread_mutex_unlock (&m.lock);
    pthread_join (flusher, NULL);
  }
  /* Writes of a pass the flusher left early (a failed submit) are all
   * answered before flush_pass returned; nothing of ours is in flight. */

  if (ret == 0) {
    for (i = 0; i < started; i++) {
      hist_merge (&res->write, &m.writers[i].lat);
      res->write_bytes += m.writers[i].bytes;
    }
    pthread_mutex_lock (&m.lock);
    hist_merge (&res->writeback, &m.wb_lat);
    hist_merge (&res->flush, &m.flush_lat);
    res->writeback_bytes = m.wb_bytes;
    res->writeback_errors = m.wb_errors;
    res->rejected = m.wb_rejected;
    res->flush_errors = m.flush_errors;
    memcpy (res->first_error, m.first_error, sizeof res->first_error);
    pthread_mutex_unlock (&m.lock);
    res->elapsed_ns = t_end - t0;
    res->interrupted = stop && *stop;
    if (atomic_load (&m.failed)) {
      snprintf (err, errlen, "%s", m.first_error[0] ? m.first_error
                : "the model failed");
      ret = -1;
    }
  }
  model_free (&m);
  return ret;
}
