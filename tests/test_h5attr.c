/* test_h5attr.c -- string attributes as h5py writes them (issue 16, item 9):
 * variable-length UTF-8 (h5py's default for str), variable-length ASCII,
 * fixed-length NULLPAD (numpy bytes, np.bytes_), NULLTERM and SPACEPAD are
 * read back exactly by the checkpoint reader (ck_attr_get_str) and by the
 * token-file reader (the "format" attribute of /tokens).  The files are
 * written with the HDF5 C API, as h5py would, since h5py is not in CI. */
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "ckpt_internal.h"
#include "tap.h"
#include "tokens.h"

/* a string attribute: len 0 = variable length; pad/cset as given */
static void put(hid_t o, const char *name, const char *v, size_t len, H5T_str_t pad, H5T_cset_t cset) {
    hid_t t = H5Tcopy(H5T_C_S1), sp = H5Screate(H5S_SCALAR);
    H5Tset_cset(t, cset);
    if (len == 0) {
        H5Tset_size(t, H5T_VARIABLE);
        H5Tset_strpad(t, H5T_STR_NULLTERM);
        hid_t a = H5Acreate2(o, name, t, sp, H5P_DEFAULT, H5P_DEFAULT);
        H5Awrite(a, t, &v);
        H5Aclose(a);
    } else {
        H5Tset_size(t, len);
        H5Tset_strpad(t, pad);
        char *b = calloc(1, len + 1);
        memset(b, pad == H5T_STR_SPACEPAD ? ' ' : 0, len);
        memcpy(b, v, strlen(v) < len ? strlen(v) : len);
        hid_t a = H5Acreate2(o, name, t, sp, H5P_DEFAULT, H5P_DEFAULT);
        H5Awrite(a, t, b);
        H5Aclose(a);
        free(b);
    }
    H5Tclose(t);
    H5Sclose(sp);
}

int main(void) {
    char dir[] = "/tmp/zt_h5a_XXXXXX", p[128], buf[64];
    if (!mkdtemp(dir)) tap_skip_all("mkdtemp failed");
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    snprintf(p, sizeof p, "%s/attrs.h5", dir);
    hid_t f = H5Fcreate(p, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    put(f, "vlen_utf8", "ztrain-ckpt \xc3\xa9t\xc3\xa9", 0, H5T_STR_NULLTERM, H5T_CSET_UTF8);
    put(f, "vlen_ascii", "ascii text", 0, H5T_STR_NULLTERM, H5T_CSET_ASCII);
    put(f, "fixed_nullpad", "abcde", 5, H5T_STR_NULLPAD, H5T_CSET_ASCII);
    put(f, "fixed_nullpad_utf8", "abcde", 5, H5T_STR_NULLPAD, H5T_CSET_UTF8);
    put(f, "fixed_nullpad_short", "abc", 8, H5T_STR_NULLPAD, H5T_CSET_ASCII);
    put(f, "fixed_nullterm", "abcde", 6, H5T_STR_NULLTERM, H5T_CSET_ASCII);
    put(f, "fixed_spacepad", "abc", 6, H5T_STR_SPACEPAD, H5T_CSET_ASCII);
    static const struct { const char *name, *want; } cases[] = {
        {"vlen_utf8", "ztrain-ckpt \xc3\xa9t\xc3\xa9"}, {"vlen_ascii", "ascii text"},
        {"fixed_nullpad", "abcde"}, {"fixed_nullpad_utf8", "abcde"}, {"fixed_nullpad_short", "abc"},
        {"fixed_nullterm", "abcde"}, {"fixed_spacepad", "abc"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
        memset(buf, 'x', sizeof buf);
        int rc = ck_attr_get_str(f, cases[i].name, buf, sizeof buf);
        tap_ok(rc == 0 && strcmp(buf, cases[i].want) == 0, "checkpoint reader: %s reads '%s' (got rc %d, '%s')",
               cases[i].name, cases[i].want, rc, rc == 0 ? buf : "");
    }
    H5Fclose(f);

    /* a token file whose "format" is a variable-length UTF-8 string and
     * "version" an integer, as h5py writes them */
    for (int k = 0; k < 2; ++k) {
        snprintf(p, sizeof p, "%s/tok%d.h5", dir, k);
        f = H5Fcreate(p, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
        hsize_t n = 100;
        uint16_t tok[100];
        for (int i = 0; i < 100; ++i) tok[i] = (uint16_t)(i % 50);
        hid_t sp = H5Screate_simple(1, &n, NULL);
        hid_t d = H5Dcreate2(f, "tokens", H5T_STD_U16LE, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
        H5Dwrite(d, H5T_NATIVE_UINT16, H5S_ALL, H5S_ALL, H5P_DEFAULT, tok);
        if (k == 0) put(d, "format", ZT_H5_FORMAT, 0, H5T_STR_NULLTERM, H5T_CSET_UTF8);
        else put(d, "format", ZT_H5_FORMAT, strlen(ZT_H5_FORMAT), H5T_STR_NULLPAD, H5T_CSET_ASCII);
        long long ver = ZT_H5_VERSION;
        hid_t ss = H5Screate(H5S_SCALAR);
        hid_t a = H5Acreate2(d, "version", H5T_STD_I64LE, ss, H5P_DEFAULT, H5P_DEFAULT);
        H5Awrite(a, H5T_NATIVE_LLONG, &ver);
        H5Aclose(a);
        H5Sclose(ss);
        H5Dclose(d);
        H5Sclose(sp);
        H5Fclose(f);
        zt_token_file *tf = NULL;
        zt_status st;
        int rc = zt_tokens_open(p, 256, &tf, &st);
        tap_ok(rc == ZT_OK && tf && tf->ntok == 100, "token reader: format attribute as %s is accepted%s%s",
               k == 0 ? "variable-length UTF-8" : "fixed-length NULLPAD", rc ? ": " : "", rc ? st.msg : "");
        if (tf) zt_tokens_close(tf);
    }
    char cmd[160];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) tap_diag("could not remove %s", dir);
    return tap_done();
}
