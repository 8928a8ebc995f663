// GlooTransport's native collectives: Gloo's own algorithms (gloo/allreduce.h
// ring/bcube, allgatherv, broadcast, barrier) on the `native` context, run
// one at a time on the worker thread in posting order (every rank posts
// natives in the same order: the communicator's matching rule).
//
// Gloo types a buffer by its element size only; the reduction is
// boostcomm's own kernel (core/reduce.h) for every dtype, fp16 and bf16
// included. Reduce-scatter is Gloo's allreduce into a temporary and a copy
// of this rank's block (the libgloo release Debian ships has no
// unbound-buffer reduce-scatter).
#include <gloo/allgatherv.h>
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>

#include <cstring>

#include "core/check.h"
#include "core/reduce.h"
#include "transport/gloo/gloo_link.h"
#include "transport/gloo/gloo_transport.h"

namespace boostcomm::transport {

namespace {

// Calls f(T{}) with an unsigned integer type as wide as one element.
template <class F>
void byElementSize(DataType dtype, F&& f) {
  switch (dataTypeSize(dtype)) {
    case 1: return f(std::uint8_t{});
    case 2: return f(std::uint16_t{});
    case 4: return f(std::uint32_t{});
    case 8: return f(std::uint64_t{});
    default: BC_INTERNAL(false, "element size " << dataTypeSize(dtype) << " of " << toString(dtype));
  }
}

void glooAllreduce(const std::shared_ptr<gloo::rendezvous::Context>& ctx, void* buf, std::size_t count, DataType dtype,
                   ReduceOp op) {
  if (count == 0 || ctx->size == 1) return;
  gloo::AllreduceOptions opts(ctx);
  byElementSize(dtype, [&](auto t) {
    using T = decltype(t);
    opts.setOutput<T>(static_cast<T*>(buf), count);
  });
  opts.setReduceFunction([dtype, op](void* c, const void* a, const void* b, std::size_t n) {
    core::reduce(c, a, b, n, dtype, op);
  });
  gloo::allreduce(opts);
}

}  // namespace

void GlooTransport::workerLoop() {
  for (;;) {
    std::shared_ptr<GlooNativeJob> job;
    {
      std::unique_lock<std::mutex> lock(queueMutex_);
      queueCv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;
      job = std::move(queue_.front());
      queue_.pop_front();
    }
    try {
      job->run();
    } catch (const Error&) {
      job->error = std::current_exception();
    } catch (const std::exception& e) {
      try {
        raiseGlooError(e, job->what, rank_);
      } catch (...) {
        job->error = std::current_exception();
      }
    }
    {
      std::lock_guard<std::mutex> lock(job->mutex);
      job->done.store(true, std::memory_order_release);
    }
    job->cv.notify_all();
    (*signal_)();
  }
}

void GlooTransport::runNative(std::function<void()> fn, Request* req, const char* what) {
  auto job = std::make_shared<GlooNativeJob>();
  job->run = std::move(fn);
  job->what = what;
  {
    std::lock_guard<std::mutex> lock(queueMutex_);
    queue_.push_back(job);
  }
  queueCv_.notify_one();
  if (req != nullptr) {
    auto* p = new Pending;
    p->job = std::move(job);
    req->slot[0] = reinterpret_cast<std::uintptr_t>(p);
    req->slot[1] = 0;
    return;
  }
  std::unique_lock<std::mutex> lock(job->mutex);
  job->cv.wait(lock, [&] { return job->done.load(std::memory_order_acquire); });
  if (job->error) std::rethrow_exception(job->error);
}

void GlooTransport::nativeAllreduce(const void* send, void* recv, std::size_t count, DataType dtype, ReduceOp op,
                                    Request* req) {
  BC_INVALID(op != ReduceOp::kAvg, rank_, "native allreduce: kAvg is reduced as kSum and divided by the caller");
  if (send != recv && count > 0) std::memcpy(recv, send, count * dataTypeSize(dtype));
  auto ctx = native_;
  runNative([ctx, recv, count, dtype, op] { glooAllreduce(ctx, recv, count, dtype, op); }, req, "allreduce");
}

void GlooTransport::nativeReduceScatter(const void* send, void* recv, std::size_t recvCount, DataType dtype,
                                        ReduceOp op, Request* req) {
  BC_INVALID(op != ReduceOp::kAvg, rank_, "native reduce_scatter: kAvg is reduced as kSum and divided by the caller");
  auto ctx = native_;
  const int rank = rank_;
  const int size = size_;
  runNative(
      [ctx, send, recv, recvCount, dtype, op, rank, size] {
        const std::size_t elem = dataTypeSize(dtype);
        std::vector<char> all(static_cast<std::size_t>(size) * recvCount * elem);
        if (!all.empty()) std::memcpy(all.data(), send, all.size());
        glooAllreduce(ctx, all.data(), static_cast<std::size_t>(size) * recvCount, dtype, op);
        if (recvCount > 0) {
          std::memcpy(recv, all.data() + static_cast<std::size_t>(rank) * recvCount * elem, recvCount * elem);
        }
      },
      req, "reduce_scatter");
}

void GlooTransport::nativeAllgatherv(const void* send, std::size_t sendCount, void* recv, const int* recvCounts,
                                     const int* displs, DataType dtype, Request* req) {
  const std::size_t elem = dataTypeSize(dtype);
  std::vector<std::size_t> counts(recvCounts, recvCounts + size_);
  std::vector<int> where(displs, displs + size_);
  bool packed = true;
  std::size_t total = 0;
  for (int r = 0; r < size_; ++r) {
    packed = packed && where[static_cast<std::size_t>(r)] == static_cast<int>(total);
    total += counts[static_cast<std::size_t>(r)];
  }
  BC_INVALID(counts[static_cast<std::size_t>(rank_)] == sendCount, rank_,
             "native allgatherv: send count " << sendCount << " != recvCounts[rank] "
                                              << counts[static_cast<std::size_t>(rank_)]);
  auto ctx = native_;
  const int rank = rank_;
  runNative(
      [ctx, send, sendCount, recv, counts, where, packed, total, elem, dtype, rank] {
        const int size = ctx->size;
        char* out = static_cast<char*>(recv);
        std::vector<char> temp;
        if (!packed) {
          temp.resize(total * elem);
          out = temp.data();
        }
        std::size_t mineAt = 0;
        for (int r = 0; r < rank; ++r) mineAt += counts[static_cast<std::size_t>(r)];
        if (sendCount > 0 && send != out + mineAt * elem) std::memcpy(out + mineAt * elem, send, sendCount * elem);
        if (size > 1 && total > 0) {
          gloo::AllgathervOptions opts(ctx);
          byElementSize(dtype, [&](auto t) {
            using T = decltype(t);
            opts.setOutput<T>(reinterpret_cast<T*>(out), counts);
          });
          gloo::allgatherv(opts);
        }
        if (!packed) {
          std::size_t at = 0;
          for (int r = 0; r < size; ++r) {
            const std::size_t bytes = counts[static_cast<std::size_t>(r)] * elem;
            if (bytes) std::memcpy(static_cast<char*>(recv) + where[static_cast<std::size_t>(r)] * elem, temp.data() + at, bytes);
            at += bytes;
          }
        }
      },
      req, "allgatherv");
}

void GlooTransport::nativeBroadcast(void* buf, std::size_t count, DataType dtype, int root, Request* req) {
  BC_INVALID(root >= 0 && root < size_, rank_, "native broadcast: root " << root << " out of range for " << size_);
  auto ctx = native_;
  runNative(
      [ctx, buf, count, dtype, root] {
        if (count == 0 || ctx->size == 1) return;
        gloo::BroadcastOptions opts(ctx);
        byElementSize(dtype, [&](auto t) {
          using T = decltype(t);
          opts.setOutput<T>(static_cast<T*>(buf), count);
        });
        opts.setRoot(root);
        gloo::broadcast(opts);
      },
      req, "broadcast");
}

void GlooTransport::nativeBarrier(Request* req) {
  auto ctx = native_;
  runNative(
      [ctx] {
        if (ctx->size == 1) return;
        gloo::BarrierOptions opts(ctx);
        gloo::barrier(opts);
      },
      req, "barrier");
}

}  // namespace boostcomm::transport
