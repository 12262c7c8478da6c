/* SPDX-License-Identifier: Apache-2.0 */
/* timers.c - the runtime's timer heap: each idle elector's next wake-up
 * (loop thread; docs/threading.md). */
#include <stdlib.h>

#include "runtime.h"

/* ---- the timer heap (loop thread) ---- */

static void heap_set(rt_runtime *rt, size_t i, s3lect_elector *e)
{
    rt->heap[i] = e;
    e->heap_idx = i;
}

static void heap_up(rt_runtime *rt, size_t i)
{
    s3lect_elector *e = rt->heap[i];
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (rt->heap[parent]->wake_at <= e->wake_at)
            break;
        heap_set(rt, i, rt->heap[parent]);
        i = parent;
    }
    heap_set(rt, i, e);
}

static void heap_down(rt_runtime *rt, size_t i)
{
    s3lect_elector *e = rt->heap[i];
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= rt->nheap)
            break;
        if (c + 1 < rt->nheap && rt->heap[c + 1]->wake_at < rt->heap[c]->wake_at)
            c++;
        if (rt->heap[c]->wake_at >= e->wake_at)
            break;
        heap_set(rt, i, rt->heap[c]);
        i = c;
    }
    heap_set(rt, i, e);
}

void rt_heap_remove(rt_runtime *rt, s3lect_elector *e)
{
    size_t i = e->heap_idx;
    if (i == NOT_IN_HEAP)
        return;
    e->heap_idx = NOT_IN_HEAP;
    s3lect_elector *last = rt->heap[--rt->nheap];
    if (i == rt->nheap)
        return;
    heap_set(rt, i, last);
    heap_up(rt, i);
    heap_down(rt, last->heap_idx);
}

/* Wakes e at boot ms `at`. Returns -1 when out of memory (e then runs again
 * on the loop's next turn: a late step, never a lost one). */
int rt_heap_schedule(rt_runtime *rt, s3lect_elector *e, int64_t at)
{
    e->wake_at = at;
    if (e->heap_idx != NOT_IN_HEAP) {
        heap_up(rt, e->heap_idx);
        heap_down(rt, e->heap_idx);
        return 0;
    }
    if (rt->nheap == rt->capheap) {
        size_t cap = rt->capheap ? 2 * rt->capheap : 256;
        s3lect_elector **h = realloc(rt->heap, cap * sizeof *h);
        if (!h)
            return -1;
        rt->heap = h;
        rt->capheap = cap;
    }
    heap_set(rt, rt->nheap++, e);
    heap_up(rt, e->heap_idx);
    return 0;
}
