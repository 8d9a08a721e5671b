/* h5util.h -- HDF5 helpers shared by the rooms above the engine (io/'s
 * token files, ckpt/'s checkpoints): a floor below both, so neither
 * includes the other's headers. */
#ifndef ZT_H5UTIL_H
#define ZT_H5UTIL_H
#include <stddef.h>
#include <stdint.h>

/* The text of the open string attribute `attr` (an hid_t) as h5py and the
 * HDF5 C API write it: variable length (ASCII or UTF-8) or fixed length
 * (NULLTERM, NULLPAD, SPACEPAD; the pad removed).  0, or -1 when it is not a
 * string or cannot be read. */
int zt_h5_attr_text(int64_t attr, char *buf, size_t n);

#endif
