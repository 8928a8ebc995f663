// The watchdog: one process-wide thread that looks at every live
// communicator's StallInspector a few times per warning threshold (between
// 10 ms and 500 ms apart) and lets it warn, poison or end the job
// (watch/stall_inspector.h). It sleeps otherwise: no cost on the call path.
// Started by the first registration; never joined (a thread joined from a
// static destructor would race the process's exit), but it stops ticking at
// exit (an atexit handler), so it never reads what the exit tears down.
#pragma once

namespace boostcomm::detail {

class StallInspector;

// Registration lasts until unwatch(); unwatch() returns only after any tick
// of that inspector has finished, so the inspector (and the call status it
// reads) may be destroyed then.
void watch(StallInspector* inspector);
void unwatch(StallInspector* inspector);

}  // namespace boostcomm::detail
