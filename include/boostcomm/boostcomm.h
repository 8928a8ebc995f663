// Umbrella header of the boostcomm C++ API.
#pragma once

#include "boostcomm/autotune.h"
#include "boostcomm/buffer.h"
#include "boostcomm/collective_fusion.h"
#include "boostcomm/communicator.h"
#include "boostcomm/error.h"
#include "boostcomm/gradient_group.h"
#include "boostcomm/link_stats.h"
#include "boostcomm/overlap.h"
#include "boostcomm/topology.h"
#include "boostcomm/tuning_cache.h"
#include "boostcomm/types.h"
#include "boostcomm/version.h"
#include "boostcomm/work.h"
