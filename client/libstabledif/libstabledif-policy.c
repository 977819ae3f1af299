/* SPDX-License-Identifier: BSD-3-Clause */
/* libstabledif: stable-page policies and stabledif_wait_stable.
 *
 * A write pins its source buffer from submit until the point its policy
 * names (wait: the device answered; wait-sent: the data was copied out
 * to the wire).  stabledif_wait_stable blocks while a pin overlaps the
 * region the caller is about to modify -- the library's version of the
 * kernel's wait_for_stable_page().  Snapshot and none never pin.
 */
#include <config.h>

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "libstabledif-internal.h"

/* Names of the policies, indexed by enum stabledif_policy. */
static const char *const policy_names[] = {
  [STABLEDIF_POLICY_AUTO] = "auto",
  [STABLEDIF_POLICY_WAIT] = "wait",
  [STABLEDIF_POLICY_WAIT_SENT] = "wait-sent",
  [STABLEDIF_POLICY_SNAPSHOT] = "snapshot",
  [STABLEDIF_POLICY_NONE] = "none",
};
#define NR_POLICIES (sizeof policy_names / sizeof policy_names[0])

bool
policy_valid (int p)
{
  return p >= 0 && (size_t) p < NR_POLICIES;
}

/* The name of POLICY ("auto", "wait", "wait-sent", "snapshot", "none"),
 * or NULL if it is not a policy. */
const char *
stabledif_policy_name (enum stabledif_policy policy)
{
  if (!policy_valid ((int) policy))
    return NULL;
  return policy_names[policy];
}

/* The policy called NAME ("wait_sent" is accepted for "wait-sent"), or
 * -1 with EINVAL. */
int
stabledif_policy_from_name (const char *name)
{
  size_t i;

  if (name == NULL) {
    error_set (EINVAL, "stabledif_policy_from_name: name is NULL");
    return -1;
  }
  for (i = 0; i < NR_POLICIES; ++i)
    if (strcmp (name, policy_names[i]) == 0)
      return (int) i;
  if (strcmp (name, "wait_sent") == 0)
    return STABLEDIF_POLICY_WAIT_SENT;
  error_set (EINVAL, "stabledif_policy_from_name: unknown policy \"%s\" "
             "(expected auto, wait, wait-sent, snapshot or none)", name);
  return -1;
}

int
policy_resolve (int requested, bool stable_writes, bool unsafe,
                enum stabledif_policy *effective, char *err, size_t errlen)
{
  if (!policy_valid (requested)) {
    snprintf (err, errlen, "invalid policy %d", requested);
    errno = EINVAL;
    return -1;
  }
  if (requested == STABLEDIF_POLICY_AUTO) {
    *effective = stable_writes ? STABLEDIF_POLICY_WAIT : STABLEDIF_POLICY_NONE;
    return 0;
  }
  if (requested == STABLEDIF_POLICY_NONE && stable_writes && !unsafe) {
    snprintf (err, errlen,
              "policy none on a device with stable_writes=1 lets the data "
              "change after its guard was computed, and the device will "
              "reject such writes; it is only allowed after "
              "stabledif_set_unsafe (h, true)");
    errno = EPERM;
    return -1;
  }
  *effective = requested;
  return 0;
}

bool
policy_pins (enum stabledif_policy p)
{
  return p == STABLEDIF_POLICY_WAIT || p == STABLEDIF_POLICY_WAIT_SENT;
}

/* The end of [START, START+LEN), clipped at the top of the address
 * space. */
static uintptr_t
range_end (uintptr_t start, size_t len)
{
  if (len > UINTPTR_MAX - start)
    return UINTPTR_MAX;
  return start + len;
}

bool
policy_ranges_overlap (uintptr_t a, size_t alen, uintptr_t b, size_t blen)
{
  if (alen == 0 || blen == 0)
    return false;
  return a < range_end (b, blen) && b < range_end (a, alen);
}

void
pinset_init (struct pinset *s)
{
  s->head = NULL;
  s->count = 0;
}

void
pinset_add (struct pinset *s, struct pin *pin, const void *addr, size_t len)
{
  pin->start = (uintptr_t) addr;
  pin->len = len;
  pin->active = true;
  pin->prev = NULL;
  pin->next = s->head;
  if (s->head)
    s->head->prev = pin;
  s->head = pin;
  s->count++;
}

void
pinset_remove (struct pinset *s, struct pin *pin)
{
  if (!pin->active)
    return;
  if (pin->prev)
    pin->prev->next = pin->next;
  else
    s->head = pin->next;
  if (pin->next)
    pin->next->prev = pin->prev;
  pin->prev = pin->next = NULL;
  pin->active = false;
  s->count--;
}

bool
pinset_overlaps (const struct pinset *s, const void *addr, size_t len)
{
  const struct pin *p;

  for (p = s->head; p != NULL; p = p->next)
    if (policy_ranges_overlap (p->start, p->len, (uintptr_t) addr, len))
      return true;
  return false;
}

/* Set the requested policy.  Before connect it is resolved at connect;
 * after connect it is resolved now (and refused as at connect), and
 * applies to writes submitted afterwards. */
int
stabledif_set_policy (struct stabledif_handle *h, enum stabledif_policy policy)
{
  char err[256];
  enum stabledif_policy effective;

  if (h == NULL) {
    error_set (EINVAL, "stabledif_set_policy: handle is NULL");
    return -1;
  }
  if (!policy_valid ((int) policy)) {
    error_set (EINVAL, "stabledif_set_policy: invalid policy %d",
               (int) policy);
    return -1;
  }
  pthread_mutex_lock (&h->lock);
  if (h->connecting) {
    pthread_mutex_unlock (&h->lock);
    error_set (EBUSY, "stabledif_set_policy: a connect is in progress "
               "(it resolves the policy): set it before or after");
    return -1;
  }
  if (h->connected) {
    if (policy_resolve (policy, h->profile.stable_writes, h->unsafe,
                        &effective, err, sizeof err) == -1) {
      int e = errno;
      pthread_mutex_unlock (&h->lock);
      error_set (e, "stabledif_set_policy: %s", err);
      return -1;
    }
    h->effective = effective;
  }
  h->policy = policy;
  pthread_mutex_unlock (&h->lock);
  return 0;
}

/* The requested policy. */
int
stabledif_get_policy (struct stabledif_handle *h)
{
  int p;

  if (h == NULL) {
    error_set (EINVAL, "stabledif_get_policy: handle is NULL");
    return -1;
  }
  pthread_mutex_lock (&h->lock);
  p = h->policy;
  pthread_mutex_unlock (&h->lock);
  return p;
}

/* The policy in effect (auto resolved); needs a connection. */
int
stabledif_get_effective_policy (struct stabledif_handle *h)
{
  int p;

  if (handle_check_connected (h, "stabledif_get_effective_policy") == -1)
    return -1;
  pthread_mutex_lock (&h->lock);
  p = h->effective;
  pthread_mutex_unlock (&h->lock);
  return p;
}

/* Allow policy none on a stable_writes=1 device (testing only).  Turning
 * it off while none is in effect on such a device is refused. */
int
stabledif_set_unsafe (struct stabledif_handle *h, bool unsafe)
{
  if (h == NULL) {
    error_set (EINVAL, "stabledif_set_unsafe: handle is NULL");
    return -1;
  }
  pthread_mutex_lock (&h->lock);
  if (h->connecting) {
    pthread_mutex_unlock (&h->lock);
    error_set (EBUSY, "stabledif_set_unsafe: a connect is in progress "
               "(it resolves the policy): set it before or after");
    return -1;
  }
  if (!unsafe && h->connected && h->profile.stable_writes &&
      h->effective == STABLEDIF_POLICY_NONE) {
    pthread_mutex_unlock (&h->lock);
    error_set (EBUSY, "stabledif_set_unsafe: policy none is in effect on a "
               "device with stable_writes=1; set another policy first");
    return -1;
  }
  h->unsafe = unsafe;
  pthread_mutex_unlock (&h->lock);
  return 0;
}

int
stabledif_get_unsafe (struct stabledif_handle *h)
{
  int u;

  if (h == NULL) {
    error_set (EINVAL, "stabledif_get_unsafe: handle is NULL");
    return -1;
  }
  pthread_mutex_lock (&h->lock);
  u = h->unsafe;
  pthread_mutex_unlock (&h->lock);
  return u;
}

/* Block while a write whose source buffer overlaps [ADDR, ADDR+LEN) is
 * pinned (submitted under policy wait or wait-sent); writes under
 * snapshot and none pin nothing.  Counts calls, calls that blocked and
 * the time blocked. */
int
stabledif_wait_stable (struct stabledif_handle *h, const void *addr,
                       size_t len)
{
  static const char fn[] = "stabledif_wait_stable";
  bool pinned = false;
  uint64_t t0;
  unsigned i;

  if (handle_check_connected (h, fn) == -1)
    return -1;
  if (addr == NULL && len > 0) {
    error_set (EINVAL, "%s: addr is NULL", fn);
    return -1;
  }

  pthread_mutex_lock (&h->lock);
  h->stats.wait_calls++;
  pthread_mutex_unlock (&h->lock);

  /* No pin anywhere (always so under snapshot and none alone): no lock
   * to take.  A write the caller submitted before this call has its
   * pin counted already (pinset_add ran before io_submit returned). */
  for (i = 0; i < h->nconns && !pinned; i++)
    pinned = atomic_load (&h->conns[i].pins.count) > 0;
  if (!pinned)
    return 0;
  pinned = false;

  /* Pins live with the connection of their write.  A write of the
   * region on any of them blocks the caller; one submitted after this
   * call began does not matter (the caller has not touched the region
   * since).  Looked up whatever the policy in effect now: a write
   * submitted under wait or wait-sent before the policy changed is
   * still pinned (under snapshot and none alone there are no pins). */
  for (i = 0; i < h->nconns && !pinned; i++) {
    struct io_conn *c = &h->conns[i];
    pthread_mutex_lock (&c->lock);
    pinned = pinset_overlaps (&c->pins, addr, len);
    pthread_mutex_unlock (&c->lock);
  }
  if (!pinned)
    return 0;
  if (io_on_io_thread (h)) {
    error_set (EDEADLK, "%s: called from a callback while a write of this "
               "region is in flight: it would wait for itself", fn);
    return -1;
  }
  t0 = io_now_ns ();
  io_lease_end (h);
  for (i = 0; i < h->nconns; i++) {
    struct io_conn *c = &h->conns[i];
    pthread_mutex_lock (&c->lock);
    while (pinset_overlaps (&c->pins, addr, len))
      pthread_cond_wait (&c->cond, &c->lock);
    pthread_mutex_unlock (&c->lock);
  }
  pthread_mutex_lock (&h->lock);
  h->stats.waits++;
  h->stats.wait_ns += io_now_ns () - t0;
  pthread_mutex_unlock (&h->lock);
  return 0;
}
