/* h5tokens.c -- HDF5 token files: a 1-D uint16/uint32 dataset "/tokens"
 * with attributes format = "ztrain-tokens", version = 1, vocab_size.
 * Serial HDF5 API (default property lists; fine in a parallel build). */
#include <errno.h>
#include <fcntl.h>
#include <hdf5.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "h5tokens.h"
#include "h5util.h"
#include "internal.h"

static pthread_mutex_t g_h5 = PTHREAD_MUTEX_INITIALIZER;

typedef struct h5guard { H5E_auto2_t fn; void *data; } h5guard;

static void h5_enter(h5guard *g) {
    pthread_mutex_lock(&g_h5);
    H5Eget_auto2(H5E_DEFAULT, &g->fn, &g->data);
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
}
static void h5_leave(h5guard *g) {
    H5Eclear2(H5E_DEFAULT);
    H5Eset_auto2(H5E_DEFAULT, g->fn, g->data);
    pthread_mutex_unlock(&g_h5);
}

/* The innermost HDF5 error description on the default stack. */
static herr_t walk_cb(unsigned n, const H5E_error2_t *e, void *data) {
    char *buf = data;
    if (n == 0 && e->desc && *e->desc) snprintf(buf, 256, "%s", e->desc);
    return 0;
}
static const char *h5_error(char *buf) {
    buf[0] = '\0';
    H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, walk_cb, buf);
    if (!buf[0]) snprintf(buf, 256, "HDF5 error");
    return buf;
}

static void describe_type(hid_t t, char *buf, size_t n) {
    H5T_class_t cl = H5Tget_class(t);
    size_t sz = H5Tget_size(t);
    if (cl == H5T_INTEGER)
        snprintf(buf, n, "%sint%zu", H5Tget_sign(t) == H5T_SGN_NONE ? "u" : "", sz * 8);
    else if (cl == H5T_FLOAT) snprintf(buf, n, "float%zu", sz * 8);
    else if (cl == H5T_STRING) snprintf(buf, n, "string");
    else snprintf(buf, n, "HDF5 type class %d, %zu bytes", (int)cl, sz);
}

/* Attribute `name` on the dataset, else on the root group; -1 if absent. */
static hid_t attr_open(hid_t dset, hid_t file, const char *name) {
    if (H5Aexists(dset, name) > 0) return H5Aopen(dset, name, H5P_DEFAULT);
    if (H5Aexists(file, name) > 0) return H5Aopen(file, name, H5P_DEFAULT);
    return -1;
}

static int attr_int(hid_t dset, hid_t file, const char *name, long long *v, int *present) {
    *present = 0;
    hid_t a = attr_open(dset, file, name);
    if (a < 0) return 0;
    *present = 1;
    hid_t t = H5Aget_type(a);
    int ok = H5Tget_class(t) == H5T_INTEGER && H5Aread(a, H5T_NATIVE_LLONG, v) >= 0;
    H5Tclose(t);
    H5Aclose(a);
    return ok ? 0 : -1;
}

static int attr_str(hid_t dset, hid_t file, const char *name, char *buf, size_t n, int *present) {
    *present = 0;
    buf[0] = '\0';
    hid_t a = attr_open(dset, file, name);
    if (a < 0) return 0;
    *present = 1;
    int rc = zt_h5_attr_text(a, buf, n);
    H5Aclose(a);
    return rc;
}

int zt_h5_open(const char *path, zt_token_file *f, zt_status *st) {
    struct stat sb;
    if (stat(path, &sb) != 0)
        return zt_fail(st, ZT_EIO, "%s: cannot open token file: %s", path, strerror(errno));
    if (!S_ISREG(sb.st_mode)) {   /* (HDF5 would block opening a FIFO) */
        int fd = zt_open_regular(path, "token file", st);
        if (fd >= 0) close(fd);
        return fd >= 0 ? zt_fail(st, ZT_EIO, "%s: not a regular file", path) : st->code;
    }
    f->fsize = (uint64_t)sb.st_size;
    if (sb.st_size == 0) return zt_fail(st, ZT_EDATA, "%s: empty file (expected an HDF5 token file)", path);
    h5guard g;
    h5_enter(&g);
    char eb[256], tb[64], sv[64];
    int rc = ZT_OK;
    hid_t file = -1, obj = -1, type = -1, space = -1, dcpl = -1;
    file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (file < 0) {
        rc = zt_fail(st, ZT_EDATA, "%s: not a readable HDF5 file (%s)", path, h5_error(eb));
        goto out;
    }
    if (H5Lexists(file, ZT_H5_DATASET, H5P_DEFAULT) <= 0) {
        rc = zt_fail(st, ZT_EDATA, "%s: no dataset /tokens (an HDF5 token file needs a 1-D uint16 or "
                     "uint32 dataset named \"/tokens\")", path);
        goto out;
    }
    obj = H5Oopen(file, ZT_H5_DATASET, H5P_DEFAULT);
    if (obj < 0 || H5Iget_type(obj) != H5I_DATASET) {
        rc = zt_fail(st, ZT_EDATA, "%s: /tokens is not a dataset", path);
        goto out;
    }
    type = H5Dget_type(obj);
    describe_type(type, tb, sizeof tb);
    size_t elsize = H5Tget_size(type);
    if (H5Tget_class(type) != H5T_INTEGER || H5Tget_sign(type) != H5T_SGN_NONE ||
        (elsize != 2 && elsize != 4)) {
        rc = zt_fail(st, ZT_EDATA, "%s: /tokens has the wrong dtype %s (expected uint16 or uint32)", path, tb);
        goto out;
    }
    space = H5Dget_space(obj);
    int nd = H5Sget_simple_extent_ndims(space);
    if (nd != 1) {
        rc = zt_fail(st, ZT_EDATA, "%s: /tokens must be 1-D, it has %d dimensions", path, nd);
        goto out;
    }
    hsize_t dims[1];
    H5Sget_simple_extent_dims(space, dims, NULL);
    if (dims[0] == 0) {
        rc = zt_fail(st, ZT_EDATA, "%s: /tokens holds no tokens", path);
        goto out;
    }
    int present;
    if (attr_str(obj, file, "format", sv, sizeof sv, &present) < 0 ||
        (present && strcmp(sv, ZT_H5_FORMAT) != 0)) {
        rc = zt_fail(st, ZT_EDATA, "%s: attribute format = '%s' (expected '%s')", path, sv, ZT_H5_FORMAT);
        goto out;
    }
    long long ver = ZT_H5_VERSION, voc = 0;
    if (attr_int(obj, file, "version", &ver, &present) < 0 || ver != ZT_H5_VERSION) {
        rc = zt_fail(st, ZT_EDATA, "%s: unsupported version %lld in attribute 'version' (expected %d)",
                     path, ver, ZT_H5_VERSION);
        goto out;
    }
    if (attr_int(obj, file, "vocab_size", &voc, &present) < 0 || voc < 0 || voc > 0x7fffffffLL) {
        rc = zt_fail(st, ZT_EDATA, "%s: bad attribute vocab_size", path);
        goto out;
    }
    f->format = ZT_FMT_H5;
    f->elsize = (int)elsize;
    f->ntok = (size_t)dims[0];
    f->vocab_attr = (int)voc;
    dcpl = H5Dget_create_plist(obj);
    haddr_t off = H5Dget_offset(obj);
    int direct = H5Pget_layout(dcpl) == H5D_CONTIGUOUS && H5Pget_nfilters(dcpl) == 0 &&
                 off != HADDR_UNDEF && H5Tget_order(type) == H5T_ORDER_LE;
    if (direct) {
        uint64_t end = (uint64_t)off + (uint64_t)f->ntok * elsize;
        if (end > (uint64_t)sb.st_size) {
            rc = zt_fail(st, ZT_EDATA, "%s: truncated: /tokens (%zu tokens at byte offset %llu) ends at byte "
                         "%llu but the file has %llu bytes", path, f->ntok, (unsigned long long)off,
                         (unsigned long long)end, (unsigned long long)sb.st_size);
            goto out;
        }
        f->fd = zt_open_regular(path, "token file", st);
        if (f->fd < 0) {
            rc = st->code;
            goto out;
        }
        f->direct = 1;
        f->data_off = (uint64_t)off;
    } else {
        /* chunked / filtered / big-endian: read through the library */
        f->h5file = file;
        f->h5dset = obj;
        file = obj = -1;
    }
out:
    if (dcpl >= 0) H5Pclose(dcpl);
    if (space >= 0) H5Sclose(space);
    if (type >= 0) H5Tclose(type);
    if (obj >= 0) H5Oclose(obj);
    if (file >= 0) H5Fclose(file);
    h5_leave(&g);
    return rc;
}

void zt_h5_close(zt_token_file *f) {
    if (f->h5file < 0 && f->h5dset < 0) return;
    h5guard g;
    h5_enter(&g);
    if (f->h5dset >= 0) H5Dclose(f->h5dset);
    if (f->h5file >= 0) H5Fclose(f->h5file);
    f->h5dset = f->h5file = -1;
    h5_leave(&g);
}

int zt_h5_read(const zt_token_file *f, uint64_t start, size_t n, uint32_t *out, zt_status *st) {
    h5guard g;
    h5_enter(&g);
    char eb[256];
    int rc = ZT_OK;
    hsize_t s0[1] = {start}, cnt[1] = {n};
    hid_t fs = H5Dget_space(f->h5dset);
    hid_t ms = H5Screate_simple(1, cnt, NULL);
    if (fs < 0 || ms < 0 || H5Sselect_hyperslab(fs, H5S_SELECT_SET, s0, NULL, cnt, NULL) < 0 ||
        H5Dread(f->h5dset, H5T_NATIVE_UINT32, ms, fs, H5P_DEFAULT, out) < 0)
        rc = zt_fail(st, ZT_EIO, "%s: cannot read /tokens elements [%llu, +%zu): %s", f->path,
                     (unsigned long long)start, n, h5_error(eb));
    if (ms >= 0) H5Sclose(ms);
    if (fs >= 0) H5Sclose(fs);
    h5_leave(&g);
    return rc;
}

static int write_attr_int(hid_t obj, const char *name, long long v) {
    hid_t sp = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(obj, name, H5T_STD_I32LE, sp, H5P_DEFAULT, H5P_DEFAULT);
    int ok = a >= 0 && H5Awrite(a, H5T_NATIVE_LLONG, &v) >= 0;
    if (a >= 0) H5Aclose(a);
    H5Sclose(sp);
    return ok ? 0 : -1;
}

static int write_attr_str(hid_t obj, const char *name, const char *v) {
    hid_t sp = H5Screate(H5S_SCALAR);
    hid_t t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, strlen(v));
    H5Tset_strpad(t, H5T_STR_NULLPAD);
    hid_t a = H5Acreate2(obj, name, t, sp, H5P_DEFAULT, H5P_DEFAULT);
    int ok = a >= 0 && H5Awrite(a, t, v) >= 0;
    if (a >= 0) H5Aclose(a);
    H5Tclose(t);
    H5Sclose(sp);
    return ok ? 0 : -1;
}

int zt_h5_create(const char *path, int elsize, size_t ntok, int vocab, int64_t *file_out,
                 int64_t *dset_out, zt_status *st) {
    *file_out = *dset_out = -1;
    h5guard g;
    h5_enter(&g);
    char eb[256];
    int rc = ZT_OK;
    hid_t file = -1, dset = -1, space = -1, dcpl = -1;
    file = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    if (file < 0) { rc = zt_fail(st, ZT_EIO, "%s: cannot create HDF5 file (%s)", path, h5_error(eb)); goto out; }
    hsize_t dims[1] = {ntok};
    space = H5Screate_simple(1, dims, NULL);
    dcpl = H5Pcreate(H5P_DATASET_CREATE);
    /* contiguous, allocated up front (so it has a file offset), no fill */
    if (space < 0 || dcpl < 0 || H5Pset_layout(dcpl, H5D_CONTIGUOUS) < 0 ||
        H5Pset_alloc_time(dcpl, H5D_ALLOC_TIME_EARLY) < 0 ||
        H5Pset_fill_time(dcpl, H5D_FILL_TIME_NEVER) < 0) {
        rc = zt_fail(st, ZT_EIO, "%s: HDF5 setup failed (%s)", path, h5_error(eb));
        goto out;
    }
    dset = H5Dcreate2(file, ZT_H5_DATASET, elsize == 4 ? H5T_STD_U32LE : H5T_STD_U16LE, space,
                      H5P_DEFAULT, dcpl, H5P_DEFAULT);
    if (dset < 0) { rc = zt_fail(st, ZT_EIO, "%s: cannot create /tokens (%s)", path, h5_error(eb)); goto out; }
    if (write_attr_str(dset, "format", ZT_H5_FORMAT) < 0 || write_attr_int(dset, "version", ZT_H5_VERSION) < 0 ||
        (vocab > 0 && write_attr_int(dset, "vocab_size", vocab) < 0)) {
        rc = zt_fail(st, ZT_EIO, "%s: cannot write attributes (%s)", path, h5_error(eb));
        goto out;
    }
    *file_out = file;
    *dset_out = dset;
    file = dset = -1;
out:
    if (dcpl >= 0) H5Pclose(dcpl);
    if (space >= 0) H5Sclose(space);
    if (dset >= 0) H5Dclose(dset);
    if (file >= 0) H5Fclose(file);
    h5_leave(&g);
    return rc;
}

int zt_h5_write(int64_t dset, size_t at, const uint32_t *tok, size_t n, const char *path,
                zt_status *st) {
    if (n == 0) return ZT_OK;
    h5guard g;
    h5_enter(&g);
    char eb[256];
    int rc = ZT_OK;
    hsize_t s0[1] = {at}, cnt[1] = {n};
    hid_t fs = H5Dget_space(dset);
    hid_t ms = H5Screate_simple(1, cnt, NULL);
    if (fs < 0 || ms < 0 || H5Sselect_hyperslab(fs, H5S_SELECT_SET, s0, NULL, cnt, NULL) < 0 ||
        H5Dwrite(dset, H5T_NATIVE_UINT32, ms, fs, H5P_DEFAULT, tok) < 0)
        rc = zt_fail(st, ZT_EIO, "%s: cannot write /tokens (%s)", path, h5_error(eb));
    if (ms >= 0) H5Sclose(ms);
    if (fs >= 0) H5Sclose(fs);
    h5_leave(&g);
    return rc;
}

int zt_h5_finish(int64_t *file, int64_t *dset, const char *path, zt_status *st) {
    h5guard g;
    h5_enter(&g);
    char eb[256];
    int ok = 1;
    if (*dset >= 0 && H5Dclose(*dset) < 0) ok = 0;
    if (*file >= 0 && H5Fclose(*file) < 0) ok = 0;
    *dset = *file = -1;
    int rc = ok ? ZT_OK : zt_fail(st, ZT_EIO, "%s: cannot close HDF5 file (%s)", path, h5_error(eb));
    h5_leave(&g);
    return rc;
}
