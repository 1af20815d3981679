/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* Intel PT as an on-CPU source (sources/source.h); its config is a struct ht_intelpt_config. */
#ifndef HT_INTELPT_SOURCE_H
#define HT_INTELPT_SOURCE_H

#include "sources/source.h"
#include "sources/intelpt/rawcap.h"

extern const struct ht_source_ops ht_intelpt_source;

/* `hybtrace decode`: SLOT made an Intel PT capture with no live source; its raw capture. */
struct ht_rawcap *ht_intelpt_frozen_offline(struct ht_source_frozen *slot);

#endif /* HT_INTELPT_SOURCE_H */
