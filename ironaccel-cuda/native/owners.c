/* The release queue of graph attachment owners (see owners.h): a Treiber stack that the driver's threads
 * push onto and the drain takes whole, so there is no ABA problem and no lock a destructor could wait on. */
#include <stdatomic.h>
#include <stddef.h>

#include "owners.h"

static _Atomic(ia_owner *) released = NULL;
static atomic_int drain_claimed = 0;
static atomic_long pending = 0;

void ia_owner_push(ia_owner *o) {
    atomic_fetch_add(&pending, 1);
    ia_owner *head = atomic_load(&released);
    do {
        o->next = head;
    } while (!atomic_compare_exchange_weak(&released, &head, o));
}

ia_owner *ia_owner_take_all(void) { return atomic_exchange(&released, NULL); }

void ia_owner_dropped(long n) { atomic_fetch_sub(&pending, n); }

int ia_owner_claim_drain(void) { return atomic_exchange(&drain_claimed, 1) == 0; }

void ia_owner_drain_started(void) { atomic_store(&drain_claimed, 0); }

long ia_owner_pending(void) { return atomic_load(&pending); }
