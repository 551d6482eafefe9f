/* Waiting for a stream on a fence word: what Stream.synchronize does once a query says the stream is busy.
 *
 * cuStreamSynchronize learns that a stream's work is done measurably later than the GPU has done it: a
 * cuStreamWriteValue32 queued behind the work reaches a page-locked word in host memory sooner
 * (bench/experiments/probe_wait.py: a 64 KiB copy's wait and a no-op launch's both end sooner on the word,
 * under every context scheduling flag).  So a wait queues that write and spins on the
 * word for up to `spin_ns`; past it, or where the write fails, it is cuStreamSynchronize, which also reports
 * any error of the work (a faulted kernel never lets the write run).  The write's default flags put a memory
 * barrier before it: the work's bytes are visible before the word changes.
 *
 * Each thread has its own word (a thread waits for one stream at a time), 64 bytes apart so that threads do
 * not share a cache line.  Its values only grow, so a word handed on from a thread that has exited keeps
 * working.  The words live in pages of the process's own memory that the caller (_core_driver.pxi) registers
 * with cuMemHostRegister (portable, device-mapped, in a primary context, kept for the life of the process)
 * and hands here with ia_fence_add_page; the memory is never freed, so reading a word is always safe.
 */
#ifndef IRONACCEL_CUDA_FENCE_H
#define IRONACCEL_CUDA_FENCE_H

#include <stddef.h>

#include "driver.h"

/* A pause between reads of a word another agent will write (a spin's body). */
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define IA_RELAX() _mm_pause()
#elif defined(__aarch64__)
#define IA_RELAX() __asm__ __volatile__("yield")
#else
#include <sched.h>
#define IA_RELAX() sched_yield()
#endif

#define IA_FENCE_PAGE 4096
#define IA_FENCE_STRIDE 64

/* Spin until *word has reached `want` (wrapping compare) or spin_ns have passed: 1 reached, 0 not. */
int ia_fence_spin(volatile unsigned int *word, unsigned int want, long spin_ns);

/* 1 if this thread has its word (taking a free one if it can), 0 if the caller must add a page first. */
int ia_fence_ready(void);
/* A page of IA_FENCE_PAGE bytes, registered and device-mapped at the same address (unified addressing). */
void ia_fence_add_page(char *page);
/* Pages handed in so far, and how many waits the word ended / did not end (then cuStreamSynchronize did). */
int ia_fence_pages(void);
void ia_fence_counts(unsigned long long *fenced, unsigned long long *missed);

/* After ia_fence_ready: queue the write on `stream` and spin.  0: the stream's work so far is done; 1: not
   seen in time (the caller synchronizes); otherwise the write's CUresult (the caller synchronizes too). */
int ia_fence_stream(CUstream stream, long spin_ns);

#endif
