#include "watch/flight_signals.h"

#include <signal.h>

#include <atomic>
#include <mutex>

#include "watch/stall_inspector.h"
#include "core/tunables.h"

namespace boostcomm::detail {

namespace {

constexpr int kSlots = 32;
std::atomic<StallInspector*> gSlots[kSlots];
std::atomic<bool> gDumpRequested{false};
std::atomic<bool> gInFatal{false};

constexpr int kFatal[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
constexpr int kMaxSignal = 65;
struct sigaction gPrevious[kMaxSignal];

// One static buffer: a fatal handler must not allocate. BSS, so untouched
// (no memory) unless a fatal signal uses it.
char gBuffer[1 << 20];

void onDumpRequest(int) { gDumpRequested.store(true, std::memory_order_release); }

void onFatal(int sig) {
  if (!gInFatal.exchange(true)) {
    for (auto& slot : gSlots) {
      if (StallInspector* i = slot.load(std::memory_order_acquire)) i->dumpFlightFromSignal("fatal signal", gBuffer, sizeof gBuffer);
    }
  }
  sigaction(sig, &gPrevious[sig], nullptr);
  raise(sig);
}

}  // namespace

void installFlightSignals() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (core::tunableString(core::kTunableTraceDir).empty()) return;
    struct sigaction fatal {};
    fatal.sa_handler = &onFatal;
    sigemptyset(&fatal.sa_mask);
    fatal.sa_flags = SA_NODEFER;  // the re-raise inside the handler must be delivered
    for (int sig : kFatal) sigaction(sig, &fatal, &gPrevious[sig]);
    struct sigaction current {};
    sigaction(SIGUSR1, nullptr, &current);
    if (current.sa_handler == SIG_DFL && (current.sa_flags & SA_SIGINFO) == 0) {
      struct sigaction request {};
      request.sa_handler = &onDumpRequest;
      sigemptyset(&request.sa_mask);
      request.sa_flags = SA_RESTART;
      sigaction(SIGUSR1, &request, nullptr);
    }
  });
}

void registerForSignals(StallInspector* inspector) {
  for (auto& slot : gSlots) {
    StallInspector* expected = nullptr;
    if (slot.compare_exchange_strong(expected, inspector)) return;
  }
  // More than kSlots live communicators: the rest dump on SIGUSR1, stalls
  // and deadlines only.
}

void unregisterForSignals(StallInspector* inspector) {
  for (auto& slot : gSlots) {
    StallInspector* expected = inspector;
    if (slot.compare_exchange_strong(expected, nullptr)) return;
  }
}

bool takeDumpRequest() { return gDumpRequested.exchange(false, std::memory_order_acq_rel); }

}  // namespace boostcomm::detail
