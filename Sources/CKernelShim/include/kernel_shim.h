#ifndef OSPREY_KERNEL_SHIM_H
#define OSPREY_KERNEL_SHIM_H

/// Hints the cache to fetch the line holding `address` for reading (Swift has no prefetch of its own).
static inline void osprey_prefetch(const void *address) {
    __builtin_prefetch(address, 0, 3);
}

#endif
