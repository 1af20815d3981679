/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* Sampling as an on-CPU source (sources/source.h); its config is a struct ht_sampler_config. */
#ifndef HT_SAMPLE_SOURCE_H
#define HT_SAMPLE_SOURCE_H

#include "sources/source.h"

extern const struct ht_source_ops ht_sample_source;

#endif /* HT_SAMPLE_SOURCE_H */
