/* Owners that CUDA user objects hold for graphs, and the queue their releases wait in.
 *
 * A graph node's Python attachments (the buffers, kernels, events and callbacks it uses) are one Python
 * object that a CUDA user object holds.  The driver hands user-object references on through cuGraphClone,
 * instantiation and child-graph nodes, and drops them when the last graph or executable graph that holds
 * them is destroyed and its launches have finished, so memory a node uses outlives the Python objects as
 * long as the driver can still reach it.
 *
 * The driver calls the destructor from one of its own threads, or inside a cuGraph*Destroy call, without
 * the GIL.  The destructor must not call CUDA nor wait for the GIL, so it only pushes the owner onto a
 * lock-free stack here; the Python side (_core_owners.pxi) empties the stack from the main thread in a
 * pending call (Py_AddPendingCall, one at a time) and at every new attachment, and drops the references.
 */
#ifndef IRONACCEL_CUDA_OWNERS_H
#define IRONACCEL_CUDA_OWNERS_H

typedef struct ia_owner {
    void *obj;             /* a strong reference to a Python object, dropped by the drain */
    struct ia_owner *next; /* the stack's link, used once the driver has released it */
} ia_owner;

/* Push a released owner (any thread, no GIL). */
void ia_owner_push(ia_owner *o);
/* Take every released owner pushed so far (newest first), or NULL; tell `ia_owner_dropped` how many went. */
ia_owner *ia_owner_take_all(void);
void ia_owner_dropped(long n);
/* 1 if the caller is the one to schedule a drain (none is scheduled), else 0. */
int ia_owner_claim_drain(void);
/* A scheduled drain has started (or could not be scheduled): the next release schedules again. */
void ia_owner_drain_started(void);
/* Owners released and not yet dropped. */
long ia_owner_pending(void);

#endif
