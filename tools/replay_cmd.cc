// `boostcomm replay`: not built yet (placeholder so main.cc links).
#include "extra_commands.h"

boostcomm::tools::ExtraCommand boostcomm::tools::addReplayCommand(CLI::App&) { return {}; }
