// The calling thread's processor, for the compute pool's waits (Swift's Glibc module does not declare sched_getcpu).
#define _GNU_SOURCE
#include <sched.h>
#include "include/current_cpu.h"

int osprey_current_cpu(void) {
#if defined(__linux__)
    return sched_getcpu();
#else
    return -1;
#endif
}
