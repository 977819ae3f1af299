/* SPDX-License-Identifier: BSD-3-Clause */
/* stabledif: unit tests for server/rangelock.c.
 *
 * No timing asserts: a test that needs another thread to have made
 * progress waits for it with a generous bound (a deadlock fails the test
 * instead of hanging it), and exclusion is checked by what a thread saw
 * when it got in, not by how long it took.
 */
#include <config.h>

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include <check.h>

#include "rangelock.h"

/* How long a thread may take to get a lock it must get at once. */
#define BOUND_SECONDS 30

/* A flag one thread raises and another waits for, with a bound. */
struct flag {
  pthread_mutex_t m;
  pthread_cond_t c;
  bool up;
};

static void
flag_init (struct flag *f)
{
  pthread_mutex_init (&f->m, NULL);
  pthread_cond_init (&f->c, NULL);
  f->up = false;
}

static void
flag_raise (struct flag *f)
{
  pthread_mutex_lock (&f->m);
  f->up = true;
  pthread_cond_broadcast (&f->c);
  pthread_mutex_unlock (&f->m);
}

/* Whether the flag went up within BOUND_SECONDS. */
static bool
flag_wait (struct flag *f)
{
  struct timespec until;
  int r = 0;
  bool up;

  clock_gettime (CLOCK_REALTIME, &until);
  until.tv_sec += BOUND_SECONDS;
  pthread_mutex_lock (&f->m);
  while (!f->up && r != ETIMEDOUT)
    r = pthread_cond_timedwait (&f->c, &f->m, &until);
  up = f->up;
  pthread_mutex_unlock (&f->m);
  return up;
}

/* A thread that takes [start, end) and reports what it saw. */
struct taker {
  struct rangelock *rl;
  uint64_t start, end;
  bool exclusive;
  struct flag got;              /* raised once the lock is held */
  struct flag go;               /* release when raised */
  atomic_bool *released;        /* the other holder's "I released" */
  bool saw_released;            /* *released when we got in */
};

static void *
taker_run (void *arg)
{
  struct taker *t = arg;
  struct range_held h;

  rangelock_acquire (t->rl, &h, t->start, t->end, t->exclusive);
  t->saw_released = t->released ? atomic_load (t->released) : false;
  flag_raise (&t->got);
  flag_wait (&t->go);
  rangelock_release (t->rl, &h);
  return NULL;
}

static void
taker_start (pthread_t *th, struct taker *t, struct rangelock *rl,
             uint64_t start, uint64_t end, bool exclusive,
             atomic_bool *released)
{
  t->rl = rl;
  t->start = start;
  t->end = end;
  t->exclusive = exclusive;
  t->released = released;
  t->saw_released = false;
  flag_init (&t->got);
  flag_init (&t->go);
  ck_assert_int_eq (pthread_create (th, NULL, taker_run, t), 0);
}

/* While MAIN holds [ms, me) (main_excl), another thread must get
 * [ts, te) (t_excl) without waiting for main. */
static void
must_not_wait (uint64_t ms, uint64_t me, bool main_excl,
               uint64_t ts, uint64_t te, bool t_excl)
{
  struct rangelock rl;
  struct range_held h;
  struct taker t;
  pthread_t th;

  rangelock_init (&rl);
  rangelock_acquire (&rl, &h, ms, me, main_excl);
  taker_start (&th, &t, &rl, ts, te, t_excl, NULL);
  ck_assert_msg (flag_wait (&t.got),
                 "[%lu,%lu) %s waited for [%lu,%lu) %s",
                 (unsigned long) ts, (unsigned long) te,
                 t_excl ? "exclusive" : "shared",
                 (unsigned long) ms, (unsigned long) me,
                 main_excl ? "exclusive" : "shared");
  flag_raise (&t.go);
  pthread_join (th, NULL);
  rangelock_release (&rl, &h);
  rangelock_destroy (&rl);
}

START_TEST (shared_shared_overlap)
{
  must_not_wait (0, 10, false, 5, 15, false);
  must_not_wait (0, 10, false, 0, 10, false);
}
END_TEST

START_TEST (non_overlapping_do_not_wait)
{
  /* Adjacent ranges: end is exclusive. */
  must_not_wait (0, 10, true, 10, 20, true);
  must_not_wait (10, 20, true, 0, 10, true);
  must_not_wait (0, 10, true, 10, 11, false);
  must_not_wait (5, 6, false, 6, 100, true);
}
END_TEST

/* While main holds [ms, me), a thread asks for [ts, te): it must not get
 * in before main marks itself released and releases. */
static void
must_wait (uint64_t ms, uint64_t me, bool main_excl,
           uint64_t ts, uint64_t te, bool t_excl)
{
  struct rangelock rl;
  struct range_held h;
  struct taker t;
  pthread_t th;
  atomic_bool released = false;
  struct timespec pause = { 0, 20 * 1000 * 1000 };
  int i;

  rangelock_init (&rl);
  rangelock_acquire (&rl, &h, ms, me, main_excl);
  taker_start (&th, &t, &rl, ts, te, t_excl, &released);
  /* Give the taker every chance to get in wrongly.  (If it is slow to
   * start, the test passes without proving much; it cannot fail
   * wrongly.) */
  for (i = 0; i < 5; i++) {
    sched_yield ();
    nanosleep (&pause, NULL);
  }
  atomic_store (&released, true);
  rangelock_release (&rl, &h);
  ck_assert (flag_wait (&t.got));
  ck_assert_msg (t.saw_released,
                 "[%lu,%lu) got in while [%lu,%lu) was held",
                 (unsigned long) ts, (unsigned long) te,
                 (unsigned long) ms, (unsigned long) me);
  flag_raise (&t.go);
  pthread_join (th, NULL);
  rangelock_destroy (&rl);
}

START_TEST (exclusive_excludes)
{
  must_wait (0, 10, true, 9, 10, false);    /* writer holds, reader waits */
  must_wait (0, 10, true, 0, 100, true);    /* writer holds, writer waits */
  must_wait (5, 6, false, 0, 10, true);     /* reader holds, writer waits */
}
END_TEST

/* Several waiters on different parts of one held range all get in once
 * it is released (a release wakes every waiter, not one). */
START_TEST (release_wakes_all)
{
  enum { N = 6 };
  struct rangelock rl;
  struct range_held h;
  struct taker t[N];
  pthread_t th[N];
  atomic_bool released = false;
  int i;

  rangelock_init (&rl);
  rangelock_acquire (&rl, &h, 0, 100, true);
  for (i = 0; i < N; i++)
    taker_start (&th[i], &t[i], &rl, i * 10, i * 10 + 5, i % 2, &released);
  atomic_store (&released, true);
  rangelock_release (&rl, &h);
  for (i = 0; i < N; i++) {
    ck_assert (flag_wait (&t[i].got));
    ck_assert (t[i].saw_released);
  }
  for (i = 0; i < N; i++) {
    flag_raise (&t[i].go);
    pthread_join (th[i], NULL);
  }
  ck_assert (rl.held == NULL);
  rangelock_destroy (&rl);
}
END_TEST

/* Many threads take random ranges of a small space; inside, each unit
 * records who is there.  A writer must be alone on its units, a reader
 * must see no writer. */
#define STRESS_UNITS 64
#define STRESS_THREADS 6
#define STRESS_ITERS 4000

struct stress {
  struct rangelock rl;
  atomic_int writers[STRESS_UNITS];
  atomic_int readers[STRESS_UNITS];
  atomic_ulong violations;
};

struct stress_arg {
  struct stress *s;
  unsigned seed;
};

static void *
stress_run (void *arg)
{
  struct stress_arg *a = arg;
  struct stress *s = a->s;
  unsigned seed = a->seed;
  int i;
  uint64_t u;

  for (i = 0; i < STRESS_ITERS; i++) {
    uint64_t start = rand_r (&seed) % STRESS_UNITS;
    uint64_t len = 1 + rand_r (&seed) % 8;
    uint64_t end = start + len > STRESS_UNITS ? STRESS_UNITS : start + len;
    bool excl = rand_r (&seed) % 3 == 0;
    struct range_held h;

    rangelock_acquire (&s->rl, &h, start, end, excl);
    for (u = start; u < end; u++) {
      if (excl) {
        if (atomic_fetch_add (&s->writers[u], 1) != 0 ||
            atomic_load (&s->readers[u]) != 0)
          atomic_fetch_add (&s->violations, 1);
      }
      else {
        atomic_fetch_add (&s->readers[u], 1);
        if (atomic_load (&s->writers[u]) != 0)
          atomic_fetch_add (&s->violations, 1);
      }
    }
    if (i % 16 == 0)
      sched_yield ();
    for (u = start; u < end; u++)
      atomic_fetch_sub (excl ? &s->writers[u] : &s->readers[u], 1);
    rangelock_release (&s->rl, &h);
  }
  return NULL;
}

START_TEST (stress_exclusion)
{
  static struct stress s;
  struct stress_arg args[STRESS_THREADS];
  pthread_t th[STRESS_THREADS];
  unsigned long violations;
  int i;

  rangelock_init (&s.rl);
  for (i = 0; i < STRESS_THREADS; i++) {
    args[i].s = &s;
    args[i].seed = 1234 + i;
    ck_assert_int_eq (pthread_create (&th[i], NULL, stress_run, &args[i]),
                      0);
  }
  for (i = 0; i < STRESS_THREADS; i++)
    pthread_join (th[i], NULL);
  violations = atomic_load (&s.violations);
  ck_assert_msg (violations == 0, "%lu times a unit was shared wrongly",
                 violations);
  ck_assert (s.rl.held == NULL);
  rangelock_destroy (&s.rl);
}
END_TEST

static Suite *
rangelock_suite (void)
{
  Suite *s = suite_create ("rangelock");
  TCase *tc = tcase_create ("core");

  tcase_add_test (tc, shared_shared_overlap);
  tcase_add_test (tc, non_overlapping_do_not_wait);
  tcase_add_test (tc, exclusive_excludes);
  tcase_add_test (tc, release_wakes_all);
  tcase_add_test (tc, stress_exclusion);
  suite_add_tcase (s, tc);
  return s;
}

int
main (void)
{
  SRunner *sr = srunner_create (rangelock_suite ());
  int failed;

  srunner_run_all (sr, CK_NORMAL);
  failed = srunner_ntests_failed (sr);
  srunner_free (sr);
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
