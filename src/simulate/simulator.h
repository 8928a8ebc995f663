// The simulator: runs the library's Schedules for every rank of a described
// cluster on the simulated network (simulate/sim_network.h), in virtual time, in one
// thread.
//
// A *job* is one collective call made by every rank (the same request, as on
// a real communicator). Jobs may overlap in time (a training step's buckets)
// or run one after another (afterPrevious: a blocking loop of calls).
//
// Event loop. Each rank's ops wait for their predecessors; an op whose last
// predecessor finishes at virtual time t starts at t:
//   - send / recv: posted; when both ends of a (source, destination, channel)
//     pair are posted the message moves (Network::transfer) and both finish
//     when it arrives (rendezvous: MPI's protocol for every message above a
//     few KiB; for smaller ones the difference is one latency at most);
//   - reduce / copy / divide: run on the rank's compute engine at memory
//     bandwidth (Network::localWork), one at a time per rank.
// Events are processed in (time, issue order), so runs are deterministic.
//
// Two modes. Timing only (the default): no payload memory exists, so 1024
// ranks x 256 MiB costs only the ops. Data mode (bind() a job's buffers on
// every rank): messages copy bytes and reduce steps run the real kernels, so
// tests check algorithm results on 64-1024 ranks in one process.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "algorithms/spec.h"
#include "simulate/sim_cluster.h"
#include "simulate/sim_network.h"

namespace boostcomm::simulate {

struct JobSpec {
  // collective, dtype, op, count / counts, root, chunkBytes, maxChunks,
  // interAlgorithm; rank, size and layout are filled in per rank.
  algorithms::CollectiveSpec request;
  std::string algorithm = "native";  // registry name
  double releaseSeconds = 0;         // no rank starts the job earlier
  bool afterPrevious = false;        // each rank starts it after finishing the previous job
};

struct SimResult {
  double seconds = 0;                  // when the last op of any job finished
  std::vector<double> jobStartSeconds;  // per job: earliest release over ranks
  std::vector<double> jobEndSeconds;    // per job: latest finish over ranks
  std::uint64_t ops = 0;
  simulate::NetworkStats network;
  std::vector<simulate::NodeLinkLog> links;  // per node, with Simulation::setRecordLinks
};

class Simulation {
 public:
  explicit Simulation(const simulate::ClusterSpec& cluster);
  ~Simulation();

  int ranks() const { return cluster_.ranks(); }
  // Adds a job; throws Error{kInvalidArgument} when its algorithm cannot run
  // it on this cluster (the registry's reason). Returns its index.
  int add(const JobSpec& job);
  // Data mode for `job`: rank's buffers, laid out as for the real call.
  // A job must be bound on every rank or on none.
  void bind(int job, int rank, const void* send, void* recv);
  // Keep per-node link logs in SimResult::links (simulate/sim_network.h).
  void setRecordLinks(bool on) { recordLinks_ = on; }
  // Runs every job once; may be called again (starts from time 0).
  SimResult run();

  // What `algorithm` runs as on this cluster: itself, or for "native" the
  // modelled algorithm, e.g. "native(rhd)".
  std::string ranAlgorithm(const JobSpec& job) const;

 private:
  struct Engine;
  algorithms::CollectiveSpec specFor(const JobSpec& job, int rank) const;

  simulate::ClusterSpec cluster_;
  bool recordLinks_ = false;
  std::unique_ptr<struct algorithms::NodeLayout> layout_;
  std::vector<JobSpec> jobs_;
  struct Bound {
    const void* send = nullptr;
    void* recv = nullptr;
  };
  std::vector<std::vector<Bound>> buffers_;  // [job][rank]; empty: timing only
};

// One collective, timing only: the predicted seconds of one call.
double simulateOnce(const simulate::ClusterSpec& cluster, const JobSpec& job);

}  // namespace boostcomm::simulate
