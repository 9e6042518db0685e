/* SPDX-License-Identifier: MIT */
/*
 * txl-alloc.h - the aligned buffers of sessions (txl-alloc.c); not
 * installed.
 */
#ifndef TXL_ALLOC_H
#define TXL_ALLOC_H

#include <stddef.h>
#include <stdint.h>

/* 64-byte aligned floats, not cleared (pages are touched only when used;
 * from 2 MiB on, 2 MiB aligned and advised as huge pages);
 * n may be 0.  Freed with free().  The first call pins glibc's mmap
 * threshold at its start (128 KiB): large buffers, of this and of
 * malloc(), are mapped and unmapped as such, given back when freed. */
float *txl_alloc_floats(size_t n);
/* The same for n bytes. */
uint8_t *txl_alloc_bytes(size_t n);

#endif /* TXL_ALLOC_H */
