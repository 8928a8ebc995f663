// `boostcomm tune`: not built yet (placeholder so main.cc links).
#include "extra_commands.h"

boostcomm::tools::ExtraCommand boostcomm::tools::addTuneCommand(CLI::App&) { return {}; }
