/*
 * ckpt_flip.c -- test helper for tests/ckpt_faults.sh: corrupt one piece of
 * a checkpoint's metadata in place, as a bad disk block would.
 *
 *   ckpt_flip FILE --list      the keys of FILE's /meta_checksums, one a line
 *   ckpt_flip FILE KEY         flip one bit of the stored bytes of KEY:
 *                              "/model@n_embd" (attribute n_embd of /model),
 *                              "/@step" (a root attribute) or "/config" (the
 *                              configuration JSON); the bytes are read and
 *                              written in the file's own type (no conversion)
 *   ckpt_flip FILE --set DATASET INDEX VALUE
 *                              write VALUE ("nan", "inf", "-1", ...) into flat
 *                              element INDEX of the float dataset DATASET
 *                              ("/params/wte"), leaving its checksum stale
 * Exit 0 when done, 1 on any failure (with a message).
 */
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fail(const char *what, const char *arg) {
    fprintf(stderr, "ckpt_flip: %s: %s\n", what, arg);
    return 1;
}

/* Flip bit 3 of the middle byte of buf[n] (strings: a character, not the
 * terminating NUL). */
static void flip(unsigned char *b, size_t n, int is_str) {
    size_t len = n;
    if (is_str) len = strnlen((const char *)b, n);
    if (len == 0) len = 1;
    b[len / 2] ^= 0x08;
}

/* --set: one float element, by flat index, through a point selection */
static int set_elem(const char *file, const char *dset, const char *idx, const char *val) {
    hid_t f = H5Fopen(file, H5F_ACC_RDWR, H5P_DEFAULT);
    if (f < 0) return fail("cannot open", file);
    hid_t d = H5Dopen2(f, dset, H5P_DEFAULT);
    if (d < 0) { H5Fclose(f); return fail("no such dataset", dset); }
    hid_t fs = H5Dget_space(d);
    hsize_t dims[8], coord[8];
    int nd = H5Sget_simple_extent_dims(fs, dims, NULL), rc = 0;
    unsigned long long k = strtoull(idx, NULL, 10);
    for (int i = nd - 1; i >= 0; --i) { coord[i] = k % dims[i]; k /= dims[i]; }
    float v = strtof(val, NULL);
    hsize_t one = 1;
    hid_t ms = H5Screate_simple(1, &one, NULL);
    if (nd < 1 || nd > 8 || k || H5Sselect_elements(fs, H5S_SELECT_SET, 1, coord) < 0 ||
        H5Dwrite(d, H5T_NATIVE_FLOAT, ms, fs, H5P_DEFAULT, &v) < 0)
        rc = fail("cannot write element of", dset);
    H5Sclose(ms);
    H5Sclose(fs);
    H5Dclose(d);
    if (H5Fclose(f) < 0 && !rc) rc = fail("cannot close", file);
    return rc;
}

int main(int argc, char **argv) {
    if (argc == 6 && !strcmp(argv[2], "--set")) {
        H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
        return set_elem(argv[1], argv[3], argv[4], argv[5]);
    }
    if (argc != 3) return fail("usage", "ckpt_flip FILE --list | FILE KEY | FILE --set DATASET INDEX VALUE");
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    const char *file = argv[1], *key = argv[2];
    int list = !strcmp(key, "--list");
    hid_t f = H5Fopen(file, list ? H5F_ACC_RDONLY : H5F_ACC_RDWR, H5P_DEFAULT);
    if (f < 0) return fail("cannot open", file);
    int rc = 0;
    if (list) {
        hid_t d = H5Dopen2(f, "meta_checksums", H5P_DEFAULT);
        if (d < 0) { H5Fclose(f); return fail("no /meta_checksums in", file); }
        hid_t t = H5Dget_type(d);
        size_t n = H5Tget_size(t);
        char *s = calloc(1, n + 1);
        if (!s || H5Dread(d, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, s) < 0) rc = fail("cannot read", "/meta_checksums");
        for (char *p = s; !rc && p && *p;) {
            char *e = strchr(p, '\n');
            if (e) *e = '\0';
            if (strlen(p) > 17) printf("%s\n", p + 17);
            p = e ? e + 1 : NULL;
        }
        free(s);
        H5Tclose(t);
        H5Dclose(d);
        H5Fclose(f);
        return rc;
    }
    char obj[512];
    snprintf(obj, sizeof obj, "%s", key);
    char *at = strchr(obj, '@');
    if (at) *at++ = '\0';
    hid_t o = H5Oopen(f, obj[0] ? obj : "/", H5P_DEFAULT);
    if (o < 0) { H5Fclose(f); return fail("no such object", obj); }
    hid_t id = at ? H5Aopen(o, at, H5P_DEFAULT) : o;
    if (id < 0) { H5Oclose(o); H5Fclose(f); return fail("no such attribute", key); }
    hid_t t = at ? H5Aget_type(id) : H5Dget_type(id);
    hid_t sp = at ? H5Aget_space(id) : H5Dget_space(id);
    size_t n = H5Tget_size(t) * (size_t)H5Sget_simple_extent_npoints(sp);
    unsigned char *b = calloc(1, n ? n : 1);
    if (!b || (at ? H5Aread(id, t, b) : H5Dread(id, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, b)) < 0)
        rc = fail("cannot read", key);
    if (!rc) {
        flip(b, n, H5Tget_class(t) == H5T_STRING);
        if ((at ? H5Awrite(id, t, b) : H5Dwrite(id, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, b)) < 0)
            rc = fail("cannot write", key);
    }
    free(b);
    H5Sclose(sp);
    H5Tclose(t);
    if (at) H5Aclose(id);
    H5Oclose(o);
    if (H5Fclose(f) < 0 && !rc) rc = fail("cannot close", file);
    return rc;
}
