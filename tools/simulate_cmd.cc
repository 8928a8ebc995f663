// `boostcomm simulate`: not built yet (placeholder so main.cc links).
#include "extra_commands.h"

boostcomm::tools::ExtraCommand boostcomm::tools::addSimulateCommand(CLI::App&) { return {}; }
