#ifndef OSPREY_CURRENT_CPU_H
#define OSPREY_CURRENT_CPU_H

/// The processor the calling thread runs on now (`sched_getcpu`, a vDSO read on Linux), or -1 where unknown.
int osprey_current_cpu(void);

#endif
