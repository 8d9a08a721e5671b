/* h5util.c -- HDF5 helpers shared by io/ and ckpt/ (h5util.h). */
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "h5util.h"

/* The text of a string attribute as h5py and the HDF5 C API write it:
 * variable length (ASCII or UTF-8) or fixed length (NULLTERM, NULLPAD or
 * SPACEPAD, trailing pad removed).  The memory type is the file's own, so
 * no conversion drops a character or fails on the character set. */
int zt_h5_attr_text(int64_t a, char *buf, size_t n) {
    int rc = -1;
    hid_t ft = H5Aget_type(a);
    if (n == 0 || ft < 0) goto out;
    buf[0] = '\0';
    if (H5Tget_class(ft) != H5T_STRING) goto out;
    hid_t mt = H5Tcopy(ft);
    if (mt < 0) goto out;
    if (H5Tis_variable_str(ft) > 0) {
        char *s = NULL;
        if (H5Aread(a, mt, &s) >= 0) {
            snprintf(buf, n, "%s", s ? s : "");
            rc = 0;
        }
        if (s) H5free_memory(s);
    } else {
        size_t sz = H5Tget_size(ft);
        char *tmp = calloc(1, sz + 1);   /* NUL after the last character */
        if (tmp && H5Aread(a, mt, tmp) >= 0) {
            if (H5Tget_strpad(ft) == H5T_STR_SPACEPAD)
                for (size_t k = strlen(tmp); k > 0 && tmp[k - 1] == ' '; --k) tmp[k - 1] = '\0';
            snprintf(buf, n, "%s", tmp);
            rc = 0;
        }
        free(tmp);
    }
    H5Tclose(mt);
out:
    if (ft >= 0) H5Tclose(ft);
    return rc;
}
