// `boostcomm fusion`: not built yet (placeholder so main.cc links).
#include "extra_commands.h"

boostcomm::tools::ExtraCommand boostcomm::tools::addFusionCommand(CLI::App&) { return {}; }
