// JSON of one result record (docs/BENCH_JSON.md): the fields that
// `boostcomm bench` and `boostcomm simulate` share. Each adds its own
// (speedup_vs_mpi, busbw_memcpy_frac / speedup_vs_native, predicted ...).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "bench.h"

namespace boostcomm::tools {

// "sum", "avg" ... for reducing collectives, "none" for the others.
std::string opName(const BenchOptions& options);

nlohmann::ordered_json recordJson(const BenchRecord& record, const BenchOptions& options, int ranks);

}  // namespace boostcomm::tools
