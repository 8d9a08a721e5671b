/*
 * ztrain_io.h -- data named by the configuration (public API of libtrain,
 * implemented in io/).  The trainer itself sees data only through the
 * zt_data_source table of ztrain.h; this opens the token files of
 * ztrain.data.train / ztrain.data.val as such sources.
 */
#ifndef ZTRAIN_IO_H
#define ZTRAIN_IO_H

#include "ztrain.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Open ztrain.data.train / ztrain.data.val (token files: llm.c shards,
 * HDF5 token files, SFT window files; docs/data.md) and attach them.
 * Collective: the ranks agree that each opened the same files (paths,
 * token counts); a failure or a difference on any rank is every rank's
 * error, naming that rank. */
int zt_ctx_open_data(zt_ctx *ctx, zt_status *st);

#ifdef __cplusplus
}
#endif
#endif /* ZTRAIN_IO_H */
